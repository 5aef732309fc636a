"""Judging and rewards: rubric judge, format, citation, search and composite rewards (DeepRubric); RACE,
Report-RL and Search-RL rewards (MindDR); the agent-output parser; TRL adapters; judge audits.

Entry points: :class:`~rubricforge.rewards.scorer.RewardScorer` (every reward for one rollout),
:func:`~rubricforge.rewards.trl_rewards.reward_functions` (TRL), and the ``rubricforge reward`` CLI.

Where each formula lives (:mod:`.registry` declares every paper formula, generators included, and
docs/formulas.md is generated from it):

==========================  =======================================================
DeepRubric Eq. 4 / 6        :func:`.rubric_reward.rubric_reward` (judge of Fig. 5)
DeepRubric Eq. 5            :func:`.composite.composite`
DeepRubric Eq. 7            :func:`.format_reward.format_reward`
DeepRubric Eq. 8            :func:`.search_reward.search_reward`
DeepRubric Eqs. 9–12, 14    :func:`.citation_reward.citation_reward` (judges of Figs. 6–8)
DeepRubric Eq. 13           :func:`.citation_format.citation_format_reward`
MindDR Eqs. 6, 7            :func:`.search_rl.tool_step_rewards`, :func:`.search_rl.format_step_rewards`
MindDR Eq. 8                :func:`.search_rl.prm_reward`
MindDR §5.2 ORM             :func:`.orm.orm_reward`
MindDR Eq. 9, Fig. 5        :func:`.search_rl.search_rl_reward`, :class:`.search_rl.CoefficientScheduler`
MindDR App. 8.3 (RACE)      :func:`.race.score_judgement`; without a reference :func:`.race.score_pointwise`
MindDR Eqs. 10, 11, 12      :func:`.report_rules.report_citation_reward`, :func:`.report_rules.report_format_reward`,
                            :func:`.report_rules.report_reward`
MindDR App. 8.4             :func:`.tense.find_tense_candidates`, :func:`.tense_check.detect_tense_errors`,
                            :func:`.tense_check.tense_penalty`
Prefs Eq. 1, App. C.3       :func:`.generator_reward.hybrid_reward`, :func:`.generator_reward.llm_rubric_reward`
Prefs Eq. 2, 3              :func:`.pref_score.weighted_score`, :func:`.pref_score.report_score`,
                            :func:`.pref_score.preference_reward`
Prefs Eqs. 6, 7             :func:`.pref_metrics.preference_accuracy`, :func:`.pref_metrics.paired_cohens_d`
HOTE Eq. 2                  :func:`.hote.hote_reward` (binary judge per rubric)
HOTE Eq. 5                  :func:`.hote.proposer_reward`
SCORE §3.5, Alg. 1 l.23     :func:`.score.score_report_reward`, :func:`.score.verified`
SCORE Alg. 2, App. E        :func:`.score.pairwise_consistency`, :class:`.score.EmaBaseline`
SCORE Listings 1, 4         :func:`.score.check_citations`, :func:`.score.valid_citation_ratio`, :func:`.score.assess`
==========================  =======================================================
"""

"""Judging and rewards, one subpackage per paper so a formula's paper is its path: :mod:`.deeprubric` (rubric
judge, format, citation, search, composite), :mod:`.minddr` (Search-RL, Report-RL: RACE, rule rewards, tense
check), :mod:`.prefs` (preference-trained rubric generators), :mod:`.hote` and :mod:`.score` (SCORE). Shared at
the top: the formula registry, the judge, the agent-output and cite parsers (:mod:`.trajectory`, :mod:`.claims`),
the scorer, TRL adapters, reading inputs, judge audits and learnability.

Entry points: :class:`~rubricforge.rewards.scorer.RewardScorer` (every reward for one rollout),
:func:`~rubricforge.rewards.trl_rewards.reward_functions` (TRL), and the ``rubricforge reward`` CLI.

Where each formula lives (:mod:`.registry` declares every paper formula, generators included, and
docs/formulas.md is generated from it):

==========================  =======================================================
DeepRubric Eq. 4 / 6        :func:`.deeprubric.rubric_reward.rubric_reward` (judge of Fig. 5)
DeepRubric Eq. 5            :func:`.deeprubric.composite.composite`
DeepRubric Eq. 7            :func:`.deeprubric.format_reward.format_reward`
DeepRubric Eq. 8            :func:`.deeprubric.search_reward.search_reward`
DeepRubric Eqs. 9–12, 14    :func:`.deeprubric.citation_reward.citation_reward` (judges of Figs. 6–8)
DeepRubric Eq. 13           :func:`.deeprubric.citation_format.citation_format_reward`
MindDR Eqs. 6, 7            :func:`.minddr.search_rl.tool_step_rewards`, :func:`.minddr.search_rl.format_step_rewards`
MindDR Eq. 8                :func:`.minddr.search_rl.prm_reward`
MindDR §5.2 ORM             :func:`.minddr.orm.orm_reward`
MindDR Eq. 9, Fig. 5        :func:`.minddr.search_rl.search_rl_reward`, :class:`.minddr.search_rl.CoefficientScheduler`
MindDR App. 8.3 (RACE)      :func:`.minddr.race.score_judgement`; without a reference :func:`.minddr.race.score_pointwise`
MindDR Eqs. 10, 11, 12      :func:`.minddr.report_rules.report_citation_reward`, :func:`.minddr.report_rules.report_format_reward`,
                            :func:`.minddr.report_rules.report_reward`
MindDR App. 8.4             :func:`.minddr.tense_rules.find_tense_candidates`, :func:`.minddr.tense_check.detect_tense_errors`,
                            :func:`.minddr.tense_check.tense_penalty`
MindDR §5.4 pair score      :func:`.minddr.alignment.alignment_score`
Prefs Eq. 1, App. C.3       :func:`.prefs.hybrid_reward.hybrid_reward`, :func:`.prefs.hybrid_reward.llm_rubric_reward`
Prefs Eq. 2, 3              :func:`.prefs.pref_score.pref_score_from_ratings`, :func:`.prefs.pref_score.pref_score`,
                            :func:`.prefs.pref_score.preference_reward`
Prefs Eqs. 6, 7             :func:`.prefs.metrics.preference_accuracy`, :func:`.prefs.metrics.paired_cohens_d`
HOTE Eq. 2                  :func:`.hote.rubric_reward.hote_reward` (binary judge per rubric)
HOTE Eq. 5                  :func:`.hote.rubric_reward.proposer_reward`
SCORE §3.5, Alg. 1 l.23     :func:`.score.evaluator.score_report_reward`, :func:`.score.evaluator.verified`
SCORE Alg. 2, App. E        :func:`.score.evaluator.pairwise_consistency`, :class:`.score.evaluator.EmaBaseline`
SCORE Listings 1, 4         :func:`.score.evaluator.check_citations`, :func:`.score.evaluator.valid_citation_ratio`,
                            :func:`.score.evaluator.assess`
==========================  =======================================================
"""

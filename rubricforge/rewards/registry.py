"""Every paper formula rubricforge implements, and every reward its scorer computes, declared once.

:data:`FORMULAS` maps (paper, equation, what) to the functions that compute it (``module:attribute`` under
``rubricforge.``); ``docs/formulas.md`` is generated from it (``python tools/formulas.py``), and a test fails
when a docstring cites an equation of a paper that is not registered here. :data:`REWARDS` declares each
reward of :class:`~rubricforge.rewards.scorer.RewardScorer`: its ``--rewards`` group, the dataset columns it
reads besides the completion, and its formula. :data:`ALL`, :data:`GROUPS` and :data:`COLUMNS` derive from it.

The registry also holds each reward's implementation, ``fn(scorer, rollout) -> {"value": ..., details}``, and the
scorer dispatches from it (:func:`spec`): a built-in binds its method with :func:`implements`, a plugin's
:class:`RewardSpec` (entry-point group ``rubricforge.rewards``, :mod:`rubricforge.plugins`) carries its own.
:func:`names`, :func:`groups` and :func:`columns` are the built-ins and the installed plugins together.

Papers: DeepRubric (evidence trees), MindDR (technical report), Prefs (query-specific rubrics from human
preferences), HOTE (tri-evolution), SCORE (self-evolving evaluator).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from rubricforge.errors import UserError
from rubricforge.plugins import added

PAPERS = ("DeepRubric", "MindDR", "Prefs", "HOTE", "SCORE")
CITED = re.compile(r"Eqs?\.\s*(\d+(?:\s*(?:[–-]|,|and)\s*\d+)*)")  # "Eq. 4", "Eqs. 9–12, 14", "Eqs. 6 and 7"
RANGE = re.compile(r"(\d+)(?:\s*[–-]\s*(\d+))?")


@dataclass(frozen=True)
class Formula:
    paper: str
    equation: str  # "Eq. 4 (= Eq. 6), Fig. 5", "§3.5", "Eqs. 9–10"
    what: str
    functions: tuple[str, ...]  # "module:attribute" under rubricforge.

    def equations(self) -> set[int]:
        """The equation numbers this row cites ("Eqs. 9–10" → {9, 10}; figures and sections are not equations)."""
        return equation_numbers(self.equation)


def equation_numbers(text: str) -> set[int]:
    """Equation numbers cited in ``text``: "Eq. 4 (= Eq. 6)" → {4, 6}, "Eqs. 9–12, 14" → {9, 10, 11, 12, 14}."""
    found: set[int] = set()
    for cite in CITED.finditer(text):
        for lo, hi in RANGE.findall(cite.group(1)):
            found.update(range(int(lo), int(hi or lo) + 1))
    return found


FORMULAS: tuple[Formula, ...] = (
    Formula("DeepRubric", "Eq. 1, Fig. 9", "child sub-query proposal Q̃_v = M(q_v, P_v, Anc(v))",
            ("pipelines.tree.evidence_tree:TreeBuilder._propose",)),
    Formula("DeepRubric", "Fig. 10", "evidence statements per passage",
            ("pipelines.tree.evidence_tree:TreeBuilder._write_statements",)),
    Formula("DeepRubric", "Eq. 2", "criterion r = (c_r, P_r, τ_r, w_r)", ("schema:Criterion",)),
    Formula("DeepRubric", "Fig. 11", "bottom-up merge: question + rubrics", ("pipelines.tree.synthesis:synthesize",)),
    Formula("DeepRubric", "Eq. 3, Fig. 12", "verification (d, x′, R′) = M_verify(x, T, R)",
            ("pipelines.tree.verification:verify",)),
    Formula("DeepRubric", "§4.4", "closed-book / search-based rubric baselines",
            ("rubric_gen.baselines:baseline_candidate",)),
    Formula("DeepRubric", "Eq. 4 (= Eq. 6), Fig. 5", "rubric reward Σ w_r s_r / Σ w_r, judge 0–4",
            ("rewards.deeprubric.rubric_reward:rubric_reward",)),
    Formula("DeepRubric", "Eq. 5", "composite 0.5 R_rubric + 0.2 R_format + 0.2 R_cite + 0.1 R_search",
            ("rewards.deeprubric.composite:composite",)),
    Formula("DeepRubric", "Eq. 7", "format 0.5 I_answer + 0.2 I_cite + 0.1 I_tool + 0.2 I_think",
            ("rewards.deeprubric.format_reward:format_reward",)),
    Formula("DeepRubric", "Eq. 8", "search min(N_search / U, 1)", ("rewards.deeprubric.search_reward:search_reward",)),
    Formula("DeepRubric", "Eqs. 9–10, Figs. 6–8", "claim recall / precision from the judges",
            ("rewards.deeprubric.citation_reward:citation_reward",)),
    Formula("DeepRubric", "Eq. 11", "per-claim F1", ("rewards.deeprubric.citation_reward:ClaimScore.f1",)),
    Formula("DeepRubric", "Eqs. 12, 14", "mean F̄1; R_cite = 0.6 F̄1 + 0.4 R_fmt",
            ("rewards.deeprubric.citation_reward:citation_reward",)),
    Formula("DeepRubric", "Eq. 13", "citation format R_fmt = Q (0.7 + 0.1 d + 0.2 n)",
            ("rewards.deeprubric.citation_format:citation_format_reward",)),
    Formula("DeepRubric", "App. D.1, Figs. 13–14", "agent system prompt", ("agent.prompt:agent_system_prompt",)),
    Formula("MindDR", "Eq. 1", "SFT loss on thought + action tokens (TRL, `assistant_only_loss`)",
            ("training.sft:build_sft",)),
    Formula("MindDR", "Eqs. 2–3", "GRPO (TRL; Eq. 2's mean-only advantage, `scale_rewards=none`, set for `train.reward=search_rl`)",
            ("training.grpo:build_grpo",)),
    Formula("MindDR", "Eqs. 4–5, Eq. 13", "GSPO sequence ratio, DAPO clip-higher (TRL settings)",
            ("training.presets:LOSSES",)),
    Formula("MindDR", "Eq. 6", "step tool reward +0.1 / −0.1 / −0.2", ("rewards.minddr.search_rl:tool_step_rewards",)),
    Formula("MindDR", "Eq. 7", "step format reward +0.1 / −0.2", ("rewards.minddr.search_rl:format_step_rewards",)),
    Formula("MindDR", "Eq. 8", "PRM: share of key entities found", ("rewards.minddr.search_rl:prm_reward",)),
    Formula("MindDR", "§5.2", "ORM: majority of binary judge votes", ("rewards.minddr.orm:orm_reward",)),
    Formula("MindDR", "Eq. 9", "Search-RL trajectory reward", ("rewards.minddr.search_rl:search_rl_reward",)),
    Formula("MindDR", "§5.2, Fig. 5", "threshold-triggered λ schedule", ("rewards.minddr.search_rl:CoefficientScheduler",)),
    Formula("MindDR", "§4.6, App. 8.1", "RACE rubric (answer model, normalisation, generation)",
            ("rubric_gen.race:to_race", "rubric_gen.race:generate_race_rubrics")),
    Formula("MindDR", "§5.3, App. 8.3", "RACE score S(target) / (S(target) + S(reference))",
            ("rewards.minddr.race:score_judgement",)),
    Formula("MindDR / DeepResearch Bench", "App. 8.3 (no reference report)",
            "pointwise RACE: Σ_d w_d Σ_c w_c s_c / 10 per dimension and overall",
            ("rewards.minddr.race:score_pointwise",)),
    Formula("MindDR", "Eq. 10", "R_cite +0.1 / −0.1 / −1", ("rewards.minddr.report_rules:report_citation_reward",)),
    Formula("MindDR", "Eq. 11", "R_format = −(v_tag + v_md + v_ref)", ("rewards.minddr.report_rules:report_format_reward",)),
    Formula("MindDR", "Eq. 12", "R_Report = R_RACE + λc R_cite + λf R_format",
            ("rewards.minddr.report_rules:report_reward",)),
    Formula("MindDR", "App. 8.4", "temporal-tense check, regex stage and judge stage",
            ("rewards.minddr.tense_rules:find_tense_candidates", "rewards.minddr.tense_check:detect_tense_errors")),
    Formula("MindDR", "App. 8.4, §5.4", "tense penalty: −1 with a tense error, else 0 (the `tense` reward)",
            ("rewards.minddr.tense_check:tense_penalty",)),
    Formula("MindDR", "§5.4", "pair quality score s(x, y): judged dimensions and tense accuracy − rule penalties",
            ("rewards.minddr.alignment:alignment_score",)),
    Formula("MindDR", "§5.4, Eq. 14", "DPO on chosen / rejected report pairs (TRL, sigmoid loss)",
            ("training.preference:build_dpo",)),
    Formula("MindDR", "§5.4, Eq. 15", "Self-SFT on the chosen reports", ("training.preference:build_self_sft",)),
    Formula("Prefs", "Eq. 1", "rubric generator's hybrid reward λ_pref R_pref + λ_llm R_llm + R_fmt",
            ("rewards.prefs.hybrid_reward:hybrid_reward",)),
    Formula("Prefs", "§3.3, App. C.1", "rubric format reward R_fmt (0 or −1)",
            ("rubric_gen.pref_rubrics:pref_format_reward",)),
    Formula("Prefs", "App. C.3", "LLM-judge reward R_llm (0–4)", ("rewards.prefs.hybrid_reward:llm_rubric_reward",)),
    Formula("Prefs", "Eq. 2, App. C.2", "S(r|y) = Σ w_k (v_k − 1)/9 / Σ w_k",
            ("rewards.prefs.pref_score:pref_score_from_ratings", "rewards.prefs.pref_score:pref_score")),
    Formula("Prefs", "Eq. 3", "preference-consistency reward R_pref = ±1", ("rewards.prefs.pref_score:preference_reward",)),
    Formula("Prefs", "Eq. 6", "preference accuracy", ("rewards.prefs.metrics:preference_accuracy",)),
    Formula("Prefs", "Eq. 7", "paired Cohen's d", ("rewards.prefs.metrics:paired_cohens_d",)),
    Formula("Prefs", "Eqs. 4–5, App. B Alg. 1, C.4–C.9", "the MaMs workflow (search, state and report agents)",
            ("agent.mams:run_mams",)),
    Formula("HOTE", "Eq. 2", "rubric reward Σ w·J / Σ abs(w), binary judge", ("rewards.hote.rubric_reward:hote_reward",)),
    Formula("HOTE", "Eq. 3", "active-rubric update, pruning",
            ("rubric_gen.bank:update_active", "rubric_gen.bank:prune")),
    Formula("HOTE", "Eq. 4", "meta rubrics from a combination's assessments",
            ("rubric_gen.meta_rubrics:weaknesses", "rubric_gen.meta_rubrics:meta_rubrics")),
    Formula("HOTE", "Eq. 5", "proposer reward (1/M) Σ 𝕀[∃j passes R] (1 − E_j J)", ("rewards.hote.rubric_reward:proposer_reward",)),
    Formula("HOTE", "§2.3, Alg. 1", "hybrid data, diverse proposing, hybrid modes, the driver",
            ("training.hote:HoteRun",)),
    Formula("SCORE", "Alg. 1 l.3, 8, 34", "dimension pool, DimensionScheduler (GetConstraints, UpdateStats)",
            ("rubric_gen.score_dims:DimensionScheduler",)),
    Formula("SCORE", "§3.3, Alg. 1 l.35–39, Listing 3", "meta-harness ℳ_t every M = 5 steps",
            ("rubric_gen.score_dims:refresh_harness",)),
    Formula("SCORE", "§3.4, Alg. 1 l.12–13, Listing 4", "evaluator rubric selection (H_q, w_q)",
            ("rubric_gen.score_dims:parse_selection",)),
    Formula("SCORE", "§3.4, Alg. 1 l.20–22, Listing 4", "search-assisted assessment s_j", ("rewards.score.evaluator:assess",)),
    Formula("SCORE", "§3.5", "report reward R_s = a(r)(1 + Σ w_j s_j)", ("rewards.score.evaluator:score_report_reward",)),
    Formula("SCORE", "Alg. 1 l.23", "reward verifier (depth < τ_s ⇒ 0)", ("rewards.score.evaluator:verified",)),
    Formula("SCORE", "§3.5, Alg. 2 l.4–8, App. E", "consistency C_i: mean pairwise TF-IDF cosine of conclusions",
            ("rewards.score.evaluator:pairwise_consistency",)),
    Formula("SCORE", "§3.5, Alg. 2 l.10–11", "EMA baseline Â_e = R_eval − b_{t−1}, β = 0.7",
            ("rewards.score.evaluator:EmaBaseline",)),
    Formula("SCORE", "§3.6, Alg. 2 l.14", "shared-actor writer GRPO + evaluator REINFORCE, KL 0.05",
            ("training.trl_seams:score_trainer",)),
    Formula("SCORE", "App. H Listing 1", "citation check, valid-citation ratio",
            ("rewards.score.evaluator:check_citations", "rewards.score.evaluator:valid_citation_ratio")),
)


RewardFn = Callable[[Any, Any], Coroutine[Any, Any, dict[str, Any]]]  # (RewardScorer, Rollout) -> {"value": float | None, ...}


@dataclass(frozen=True)
class RewardSpec:
    name: str  # the reward's name in ``--rewards``, ``train.reward`` and TRL's reward functions
    group: str  # its ``--rewards`` group
    columns: tuple[str, ...]  # the dataset columns it reads besides the completion
    paper: str
    equation: str  # where the formula is in the paper
    fn: RewardFn | None = None  # its implementation (a built-in's is bound by @implements)


REWARDS: tuple[RewardSpec, ...] = (
    RewardSpec("rubric", "deeprubric", ("question", "rubrics"), "DeepRubric", "Eq. 4"),
    RewardSpec("format", "deeprubric", (), "DeepRubric", "Eq. 7"),
    RewardSpec("citation", "deeprubric", ("question",), "DeepRubric", "Eqs. 9–14"),
    RewardSpec("search", "deeprubric", (), "DeepRubric", "Eq. 8"),
    RewardSpec("composite", "deeprubric", ("question", "rubrics"), "DeepRubric", "Eq. 5"),
    RewardSpec("hote", "hote", ("question", "rubrics"), "HOTE", "Eq. 2"),
    RewardSpec("race", "report", ("race_rubrics", "reference_report"), "MindDR", "§5.3, App. 8.3"),
    RewardSpec("report_citation", "report", ("reference_report",), "MindDR", "Eq. 10"),
    RewardSpec("report_format", "report", (), "MindDR", "Eq. 11"),
    RewardSpec("report", "report", ("race_rubrics", "reference_report"), "MindDR", "Eq. 12"),
    RewardSpec("tense", "report", (), "MindDR", "App. 8.4"),
    RewardSpec("alignment", "report", ("question", "reference_report"), "MindDR", "§5.4"),
    RewardSpec("prm", "search_rl", ("key_entities",), "MindDR", "Eq. 8"),
    RewardSpec("orm", "search_rl", ("question", "answer"), "MindDR", "§5.2"),
    RewardSpec("search_rl", "search_rl", ("question", "answer", "key_entities"), "MindDR", "Eq. 9"),
    RewardSpec("pref_rubric", "prefs", ("question", "rubrics"), "Prefs", "Eq. 2"),
    # no paper's RL reward: the SQuAD token F1 that MindDR and BrowseComp report, as a judge-free content reward
    RewardSpec("answer_f1", "exact", ("answer",), "SQuAD", "token F1 against `answer` / `answer_aliases`"),
    RewardSpec("answer_em", "exact", ("answer",), "SQuAD", "normalised exact match against `answer` / `answer_aliases`"),
)
ALL: tuple[str, ...] = tuple(r.name for r in REWARDS)
GROUPS: dict[str, tuple[str, ...]] = {
    **{g: tuple(r.name for r in REWARDS if r.group == g) for g in dict.fromkeys(r.group for r in REWARDS)},
    "all": ALL}
COLUMNS: dict[str, tuple[str, ...]] = {r.name: r.columns for r in REWARDS}


_BOUND: dict[str, RewardFn] = {}  # the built-ins' implementations, bound by @implements


def implements(name: str) -> Callable[[RewardFn], RewardFn]:
    """Bind ``fn`` as the implementation of the built-in reward ``name`` (a method of the scorer)."""
    if name not in COLUMNS:
        raise ValueError(f"{name} is not declared in REWARDS")

    def bind(fn: RewardFn) -> RewardFn:
        _BOUND[name] = fn
        return fn

    return bind


def specs() -> dict[str, RewardSpec]:
    """Every reward by name, with its implementation: the built-ins, then the installed plugins."""
    return _specs(len(_BOUND))


@functools.lru_cache(maxsize=None)
def _specs(bound: int) -> dict[str, RewardSpec]:  # made again when a built-in is bound
    plugins = added("rewards", ALL)
    for name, plugin in plugins.items():
        if not isinstance(plugin, RewardSpec) or plugin.fn is None or plugin.name != name:
            raise UserError(f"the reward plugin '{name}' is not a RewardSpec named '{name}' with its fn",
                            "point the entry point at RewardSpec(name, group, columns, paper, equation, fn)")
    return {**{r.name: replace(r, fn=_BOUND.get(r.name)) for r in REWARDS}, **plugins}


def spec(name: str) -> RewardSpec:
    """The reward ``name`` with its implementation; a UserError lists the names there are."""
    found = specs()
    if name not in found:
        raise UserError(f"unknown reward '{name}'", f"use one of: {', '.join(found)}")
    return found[name]


def names() -> tuple[str, ...]:
    return tuple(specs())


def groups() -> dict[str, tuple[str, ...]]:
    """:data:`GROUPS` with the plugins' groups (a plugin may also join a built-in group)."""
    found = specs()
    out: dict[str, tuple[str, ...]] = {}
    for r in found.values():
        out[r.group] = (*out.get(r.group, ()), r.name)
    return {**out, "all": tuple(found)}


def columns(name: str) -> tuple[str, ...]:
    """The dataset columns the reward ``name`` reads (none for an unknown name)."""
    found = specs().get(name)
    return found.columns if found is not None else ()


def registered(paper: str) -> set[int]:
    """Every equation number of ``paper`` (a name of :data:`PAPERS`) that :data:`FORMULAS` holds."""
    return {n for f in FORMULAS if f.paper.split(" / ")[0] == paper for n in f.equations()}

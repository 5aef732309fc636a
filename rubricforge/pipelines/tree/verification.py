"""Stage 3: verification and revision by a separate verifier role (DeepRubric §3.2, Fig. 12).

The verifier gets the verbatim Fig. 12 system prompt and one JSON sample: the question, the
selected leaves with their statements, the merge trace and the rubrics. It answers KEEP / REVISE /
DROP. A REVISE may replace the question and/or the rubrics (5–8 of them); the revised pair goes
through the same rule checks as the original, against the selected leaves only, and its failures are
recorded in ``Verification.rule_failures``.

Policy (ours): a REVISE is a repair or nothing. A revision's rubrics go through the deterministic repairs of
:mod:`.repairs` (recorded in ``Verification.repairs``) and then the rule checks. A REVISE whose revision fails the
rule checks is shown the failures, and a REVISE with neither a revised question nor revised rubrics is shown the
issues it named and the repairs already made (``verify_norevision``); either is asked again, up to
:data:`REVISION_RECHECKS` times (the earlier answers are kept in ``rejected_revisions``): a small verifier often
"revises" a sound pair into duplicates, or revises nothing. Its last answer stands; if that is still a REVISE that
fails the rule checks, the candidate is not retained (:func:`final_example` returns None), and if it is still a
REVISE without a revision, the candidate is retained only if it passes every deterministic repair as it is
(:func:`~rubricforge.pipelines.tree.repairs.pending_repairs`; what it fails goes to ``rule_failures``) — every
retained example passes the deterministic checks. An unreadable verifier answer is
recorded as ``UNPARSEABLE`` with the raw text, never guessed, and is not retained.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricforge.config import Config
from rubricforge.llm.structured import Str60, max_length
from rubricforge.pipelines.prompting import render
from rubricforge.pipelines.tree.repairs import pending_repairs, repair_rubrics
from rubricforge.pipelines.tree.rules import Embed, check_rules, evidence_pool
from rubricforge.pipelines.tree.synthesis import FreeForm, QuestionText
from rubricforge.rubric_gen.baselines import retrieved_items
from rubricforge.rubric_gen.criteria import MAX_RUBRICS, TEXT_CHARS, RubricOut, Text, to_criteria
from rubricforge.schema import Candidate, EvidenceTree, Example, Provenance, Verification
from rubricforge.text import uncut

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

MAX_LIST = 10  # schema-only maxItems for the free lists (tags, issues): steers decoding, never rejects
REVISED_MAX_RUBRICS = 8  # Fig. 12: "Output 5–8 rubric objects" (the minimum is build.min_rubrics)
REVISION_RECHECKS = 1  # a REVISE whose revision fails the rule checks, or that has none, is asked again this many times
JUSTIFICATION_CHARS = 600  # schema-only bound on the justification; a justification cut there ends at a whole word

# prompt files behind a candidate of each rubric source (for provenance hashes)
_GENERATION_PROMPTS = {"tree": ["merge"], "closed-book": ["baseline_closed_book"], "search": ["baseline_search"]}
_STEPWISE_PROMPTS = ["merge_select", "merge_question", "merge_criterion", "merge_logical"]


def prompt_names(candidate: Candidate) -> list[str]:
    """The prompt files behind a candidate and its verification (for provenance hashes)."""
    trace = candidate.selection_trace
    stepwise = isinstance(trace, dict) and trace.get("mode") == "stepwise"
    return [*(_STEPWISE_PROMPTS if stepwise else _GENERATION_PROMPTS[candidate.rubric_source]),
            "verify", "verify_recheck", "verify_norevision"]


class VerifyOutput(BaseModel):
    """The Fig. 12 answer."""

    model_config = ConfigDict(coerce_numbers_to_str=True)

    decision: Literal["KEEP", "REVISE", "DROP"]
    error_tags: list[Str60] = Field(default_factory=list, json_schema_extra={"maxItems": MAX_LIST})
    major_issues: list[Text] = Field(default_factory=list, json_schema_extra={"maxItems": MAX_LIST})
    justification: Annotated[str, max_length(JUSTIFICATION_CHARS)] = ""
    fix_plan: FreeForm = None
    revised_question: QuestionText | None = None
    revised_rubrics: list[RubricOut] = Field(default_factory=list, json_schema_extra={"maxItems": MAX_RUBRICS})  # [] = unchanged
    implementation_guidance: FreeForm = None

    @field_validator("decision", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("error_tags", "major_issues", "revised_rubrics", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, (str, dict)) else v


def audit_sample(candidate: Candidate, tree: EvidenceTree, cfg: Config) -> dict[str, Any]:
    """The JSON sample the verifier audits (selected leaves with the statements the generator saw)."""
    pool, _ = evidence_pool(candidate, tree)
    if candidate.rubric_source == "tree":
        labels = {sid: tree.nodes[sid].query for sid in pool or {}}
    else:  # search: the retrieved passages' titles
        labels = {str(i["id"]): str(i.get("title", "")) for i in retrieved_items(candidate.selection_trace)}
    n = cfg.build.statements_per_leaf
    leaves = [{"id": sid, "query": labels.get(sid, ""), "evidence": [s.text for s in statements[:n]]}
              for sid, statements in (pool or {}).items()]
    rubrics = [r.model_dump(include={"id", "type", "description", "weight", "source_leaf_ids", "evidence"})
               for r in candidate.rubrics]
    return {"question": candidate.question, "selected_leaf_ids": candidate.selected_leaf_ids,
            "selected_leaves": leaves, "merge_trace": candidate.merge_trace, "rubrics": rubrics}


def verify_messages(sample: dict[str, Any]) -> list[dict[str, str]]:
    return [{"role": "system", "content": render("verify")},
            {"role": "user", "content": json.dumps(sample, ensure_ascii=False, separators=(",", ":"))}]


async def verify(candidate: Candidate, tree: EvidenceTree, client: LLMClient, cfg: Config,
                 embed: Embed | None = None) -> Verification:
    """Audit one rule-checked candidate; a REVISE's revision is repaired and rule-checked (``embed``: the embedding
    of the repairs and, with ``build.check_coverage``, of the coverage test), and asked again while it fails or
    is missing (see the module docstring)."""
    messages = verify_messages(audit_sample(candidate, tree, cfg))
    rejected: list[dict[str, Any]] = []
    for attempt in range(REVISION_RECHECKS + 1):
        res = await client.generate("verifier", messages, output=VerifyOutput, stage="verify")
        if not res.ok or res.value is None:
            return Verification(candidate_id=candidate.id, decision="UNPARSEABLE", raw=res.text or "",
                                justification=f"verifier output unreadable: {res.error or 'no output'}",
                                rejected_revisions=rejected)
        verification = _verification(res.value, candidate, tree, cfg, embed)
        empty = verification.decision == "REVISE" and not _revised(res.value)
        if not (verification.decision == "REVISE" and (verification.rule_failures or empty)):
            break
        if attempt == REVISION_RECHECKS:
            if empty:  # retained only as it is, if it passes every deterministic repair
                verification.rule_failures = [f"REVISE without a revision, and the candidate fails a repair: {p}"
                                              for p in pending_repairs(candidate, tree, embed)]
            break
        rejected.append(verification.model_dump(include={"revised_question", "revised_rubrics", "rule_failures"}))
        if empty:
            issues = "; ".join([*verification.error_tags, *verification.major_issues]) or "none"
            made = "; ".join(f"{r.target} {r.action}: {r.reason}" for r in candidate.repairs) or "none"
            follow_up = render("verify_norevision", issues=issues, repairs=made)
        else:
            follow_up = render("verify_recheck", failures="; ".join(verification.rule_failures))
        messages = [*messages, {"role": "assistant", "content": res.text}, {"role": "user", "content": follow_up}]
    verification.rejected_revisions = rejected
    return verification


def _revised(out: VerifyOutput) -> bool:
    """Whether a verifier answer holds a revised question or revised rubrics."""
    return bool((out.revised_question and out.revised_question.strip()) or out.revised_rubrics)


def _verification(out: VerifyOutput, candidate: Candidate, tree: EvidenceTree, cfg: Config,
                  embed: Embed | None) -> Verification:
    """The record of one verifier answer; a REVISE's revision is rule-checked."""
    verification = Verification(candidate_id=candidate.id, decision=out.decision, error_tags=out.error_tags,
                                major_issues=[uncut(m, TEXT_CHARS) for m in out.major_issues],
                                justification=uncut(out.justification, JUSTIFICATION_CHARS),
                                fix_plan=out.fix_plan, implementation_guidance=out.implementation_guidance)
    if out.decision == "REVISE":
        revised = candidate.model_copy(deep=True)
        if out.revised_question and out.revised_question.strip():
            revised.question = verification.revised_question = out.revised_question.strip()
        if out.revised_rubrics and candidate.rubric_source == "tree":
            pool, _ = evidence_pool(revised, tree)
            revised.rubrics, verification.repairs = repair_rubrics(
                revised.question, tree.nodes[tree.root_id].query, to_criteria(out.revised_rubrics), pool, embed)
        elif out.revised_rubrics:
            revised.rubrics = to_criteria(out.revised_rubrics)
        verification.rule_failures = check_rules(
            revised, tree, cfg, max_rubrics=REVISED_MAX_RUBRICS if out.revised_rubrics else None,
            embed=embed if cfg.build.check_coverage else None)
        if out.revised_rubrics:
            verification.revised_rubrics = revised.rubrics  # with passage ids resolved
    return verification


def is_retained(candidate: Candidate, verification: Verification, cfg: Config) -> bool:
    """The retention rule: the candidate passed the rule checks, the decision is in ``build.keep_decisions``
    and, for REVISE, the revision passed them too."""
    return not (candidate.rule_failures or candidate.generation_error
                or verification.decision not in cfg.build.keep_decisions
                or (verification.decision == "REVISE" and verification.rule_failures))


def final_example(candidate: Candidate, verification: Verification, tree: EvidenceTree, cfg: Config,
                  provenance_bits: Mapping[str, Any]) -> Example | None:
    """The dataset row for a verified candidate, or None when it is not :func:`is_retained`.

    ``provenance_bits`` holds ``models`` (role -> model name), ``prompt_hashes`` (prompt name -> hash) and
    optionally ``corpus_hash`` (default: the tree's).
    """
    if not is_retained(candidate, verification, cfg):
        return None
    decision = verification.decision
    question, rubrics = candidate.question, candidate.rubrics
    if decision == "REVISE":
        question = verification.revised_question or question
        rubrics = verification.revised_rubrics if verification.revised_rubrics is not None else rubrics
    pool, _ = evidence_pool(candidate, tree)
    passage_ids = [p for r in rubrics for p in r.passage_ids]
    passage_ids += [s.passage_id for statements in (pool or {}).values() for s in statements]
    if candidate.rubric_source == "tree":
        passage_ids += [p for sid in pool or {} for p in tree.nodes[sid].passage_ids]
    provenance = Provenance(tree_id=tree.id, leaf_ids=list(candidate.selected_leaf_ids),
                            passage_ids=list(dict.fromkeys(p for p in passage_ids if p)),
                            corpus_hash=provenance_bits.get("corpus_hash") or tree.corpus_hash,
                            models=dict(provenance_bits["models"]), prompt_hashes=dict(provenance_bits["prompt_hashes"]))
    return Example(id=candidate.id, question=question, rubrics=[r.model_copy(deep=True) for r in rubrics],
                   decision=decision, rubric_source=candidate.rubric_source, topic=tree.topic, provenance=provenance)

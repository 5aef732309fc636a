"""The citation reward (DeepRubric App. A.4, Eq. 14): R_cite = 0.6·F̄1 + 0.4·R_fmt.

Claims come from the final answer only (:func:`~rubricforge.rewards.trajectory.extract_claims`): each
``<cite id="a,b">span</cite>`` is a cited claim with every id it names; the text between cites is split
into uncited claims. Cited ids resolve against the rollout's snippets (the tool responses in the
transcript, plus an optional :class:`~rubricforge.corpora.snippets.SnippetStore`).

Per claim (all judge calls concurrently):

* cited, recall (Eq. 9, Fig. 6, the resolved snippets concatenated): Fully 1.0 / Partially 0.5 / No support 0.0;
  precision (Eq. 10, Fig. 8): Relevant 1.0 / Irrelevant 0.0. A cited claim whose ids all fail to resolve cites
  nothing real: recall 0 and precision 0, without a judge call.
* uncited, the needs-citation judge (Fig. 7): Yes → recall 0, No → recall 1; precision 1.
* F1 = 2·r·p / (r + p) (Eq. 11), and 0 when r + p = 0; F̄1 is the mean over claims (Eq. 12).

R_fmt is :func:`~rubricforge.rewards.deeprubric.citation_format.citation_format_reward`. Every part lies in
[0, 1], so R_cite does too. An answer with no claims (or no answer) scores 0. If any judge call fails,
the reward is None (unscored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from rubricforge.llm.judge import LabelAnswer
from rubricforge.rewards.deeprubric.citation_format import citation_format_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.trajectory import Claim, extract_claims

F1_WEIGHT, FMT_WEIGHT = 0.6, 0.4


class Support(LabelAnswer):
    PREFIX: ClassVar[str] = "Rating"
    LABELS: ClassVar[tuple[str, ...]] = ("Fully supported", "Partially supported", "No support")


class NeedsCitation(LabelAnswer):
    PREFIX: ClassVar[str] = "Need Citation"
    LABELS: ClassVar[tuple[str, ...]] = ("Yes", "No")


class Relevance(LabelAnswer):
    PREFIX: ClassVar[str] = "Rating"
    LABELS: ClassVar[tuple[str, ...]] = ("Relevant", "Irrelevant")


RECALL = {"Fully supported": 1.0, "Partially supported": 0.5, "No support": 0.0}
PRECISION = {"Relevant": 1.0, "Irrelevant": 0.0}


@dataclass
class ClaimScore:
    text: str
    ids: tuple[str, ...]
    recall: float | None
    precision: float | None

    @property
    def f1(self) -> float | None:
        """Eq. 11: 2·recall·precision / (recall + precision); 0 when both are 0, None when unscored."""
        if self.recall is None or self.precision is None:
            return None
        total = self.recall + self.precision
        return 2 * self.recall * self.precision / total if total else 0.0


@dataclass
class CitationScore:
    value: float | None  # R_cite in [0, 1]; None = unscored
    f1: float | None  # mean per-claim F1
    r_fmt: float  # the citation format reward
    claims: list[ClaimScore] = field(default_factory=list)
    format_detail: dict[str, float] = field(default_factory=dict)


async def citation_reward(judge: Judge, question: str, answer: str | None, snippets: Mapping[str, str]) -> CitationScore:
    """``snippets``: every snippet id the rollout's tools returned -> its text."""
    if answer is None or not answer.strip():
        return CitationScore(0.0, 0.0, 0.0)
    fmt = citation_format_reward(answer, snippets.keys())
    claims = extract_claims(answer)
    if not claims:
        return CitationScore(0.0, 0.0, fmt.r_fmt, [], _detail(fmt))
    scored = await asyncio.gather(*(_claim(judge, question, answer, c, snippets) for c in claims))
    f1s = [c.f1 for c in scored]
    if any(f is None for f in f1s):
        return CitationScore(None, None, fmt.r_fmt, scored, _detail(fmt))
    mean_f1 = sum(f1s) / len(f1s)  # type: ignore[arg-type]
    return CitationScore(F1_WEIGHT * mean_f1 + FMT_WEIGHT * fmt.r_fmt, mean_f1, fmt.r_fmt, scored, _detail(fmt))


async def _claim(judge: Judge, question: str, answer: str, claim: Claim, snippets: Mapping[str, str]) -> ClaimScore:
    if not claim.cited:
        need = await judge.ask("citation_recall_uncited", NeedsCitation, stage="citation_needs", question=question,
                               full_response=answer, statement=claim.text)
        recall = None if need is None else (0.0 if need.label == "Yes" else 1.0)
        return ClaimScore(claim.text, (), recall, 1.0)
    texts = [f"[{i}] {snippets[i]}" for i in claim.ids if i in snippets]
    if not texts:
        return ClaimScore(claim.text, claim.ids, 0.0, 0.0)
    joined = "\n\n".join(texts)
    support, relevance = await asyncio.gather(
        judge.ask("citation_recall_cited", Support, stage="citation_recall", question=question,
                  statement=claim.text, cited_snippets=joined),
        judge.ask("citation_precision", Relevance, stage="citation_precision", question=question,
                  statement=claim.text, cited_snippets=joined))
    return ClaimScore(claim.text, claim.ids, None if support is None else RECALL[support.label],
                      None if relevance is None else PRECISION[relevance.label])


def _detail(fmt: object) -> dict[str, float]:
    return {k: float(v) for k, v in vars(fmt).items() if isinstance(v, (int, float))}

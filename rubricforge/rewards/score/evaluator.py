"""SCORE's rewards (docs/methods.md S-3–S-5, S-7):

* :func:`assess` — the evaluator's search-assisted assessment of one query's K reports (§3.4, Listing 4, Alg. 1
  l.20–22): ``<search>`` → ``<observation>`` turns over the corpus, then per-report, per-dimension scores 0–10.
* :func:`score_report_reward` — R_s(r) = a(r)·(1 + Σ_j w_j s_j) (§3.5), with the reward verifier of Alg. 1 l.23.
* :func:`pairwise_consistency` — C_i, the mean pairwise TF-IDF cosine of the rollouts' conclusions (§3.5, Alg. 2
  l.4–6, App. E), and :class:`EmaBaseline` — Â_e = R_eval − b_{t−1}, b_t = β b_{t−1} + (1 − β) R_eval (Alg. 2 l.10–11).
* :func:`check_citations` — App. H Listing 1 (supported / unsupported / unknown) and the valid-citation ratio.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from rubricforge.extras import needs
from rubricforge.llm.structured import TextAnswer
from rubricforge.rewards.judging import PROMPTS, Judge

if TYPE_CHECKING:
    from rubricforge.corpora.tools import ToolBox

EMA_BETA = 0.7  # β of Alg. 2 (App. G Table 2)
CONCLUSION_WORDS = 200


# ---------------------------------------------------------------- S-4 report reward and verifier

def score_report_reward(valid: float, weights: Sequence[float], scores: Sequence[float]) -> float:
    """SCORE §3.5: R_s(r) = a(r) · (1 + Σ_{j=1}^{m} w_j s_j(r; q, D_q^e)), s_j ∈ [0, 1]."""
    return valid * (1.0 + sum(w * s for w, s in zip(weights, scores, strict=True)))


def verified(reward: float | None, depth: int, tau: int, mode: Literal["zero", "drop"] = "zero") -> float | None:
    """SCORE Alg. 1 l.23 (reward verifier): an evaluator whose verification/search depth is below τ_s gives no
    reward: 0 (``zero``, the paper) or None (``drop``: left out of the GRPO group)."""
    if reward is None or depth >= tau:
        return reward
    return 0.0 if mode == "zero" else None


# ---------------------------------------------------------------- S-5 consistency and EMA baseline

_CONCLUSION_HEADING = re.compile(r"conclu|summary|bottom line|结论|总结", re.I)
_HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.M)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def extract_conclusion(answer: str, words: int = CONCLUSION_WORDS) -> str:
    """The rollout's conclusion (Alg. 2 l.5; method not given, docs/methods.md S-5): the last Markdown section whose heading
    matches conclusion / summary / bottom line, else the last paragraph; cut to ``words`` words."""
    heads = [m for m in _HEADING.finditer(answer) if _CONCLUSION_HEADING.search(m.group(1))]
    if heads:
        body = answer[heads[-1].end():]
        nxt = _HEADING.search(body)
        text = body[:nxt.start()] if nxt else body
    else:
        paragraphs = [p for p in re.split(r"\n\s*\n", answer) if p.strip()]
        text = paragraphs[-1] if paragraphs else ""
    return " ".join(text.split()[:words])


def pairwise_consistency(conclusions: Sequence[str]) -> float | None:
    """SCORE §3.5 / Alg. 2 l.6 / App. E–F: C_i = (2 / (K(K−1))) Σ_{a<b} cos(tfidf(c_a), tfidf(c_b)) over all K(K−1)/2
    pairs of the query's K conclusions, TF-IDF fitted on its non-empty conclusions (scikit-learn defaults;
    character 2–3-grams for CJK text). An empty conclusion (an unanswered rollout) agrees with none: its pairs
    count 0. None for fewer than two rollouts."""
    with needs("train"):
        from sklearn.feature_extraction.text import TfidfVectorizer

    if len(conclusions) < 2:
        return None
    pairs = len(conclusions) * (len(conclusions) - 1) / 2
    texts = [c for c in conclusions if c.strip()]
    if len(texts) < 2:
        return 0.0
    cjk = any(_CJK.search(t) for t in texts)
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)) if cjk else TfidfVectorizer()
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # no token at all (punctuation only): nothing to agree on
        return 0.0
    sims = (matrix @ matrix.T).toarray()  # rows are L2-normalised: the dot product is the cosine
    return sum(float(sims[a, b]) for a, b in combinations(range(len(texts)), 2)) / pairs


@dataclass
class EmaBaseline:
    """SCORE Alg. 2 l.10–11: Â_e = R_eval − b_{t−1}; b_t = β b_{t−1} + (1 − β) R_eval; β = 0.7, b_0 = 0."""

    beta: float = EMA_BETA
    value: float = 0.0

    def advantage(self, r_eval: float) -> float:
        """Â_e against b_{t−1}, then b_t (the order of Alg. 2)."""
        centred = r_eval - self.value
        self.value = self.beta * self.value + (1 - self.beta) * r_eval
        return centred


# ---------------------------------------------------------------- S-3 assessment

_SEARCH = re.compile(r"<search>(.*?)</search>", re.S)
_REPORT = re.compile(r'<report\s+id\s*=\s*"?([^">\s]+)"?\s*>(.*?)</report>', re.S)
_SCORE = re.compile(r"<score\s+([^>]*?)/?>", re.S)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


class AssessmentTurn(TextAnswer):
    """One evaluator turn (Listing 4's tool protocol): a ``<search>`` request, or the final
    ``<report_evaluations>`` block with at least one ``<score dim value>``."""

    FORMAT = ('either <search>one query</search>, or the final <report_evaluations><report id="1"><scores>'
              '<score dim="..." value="0-10" reason="..."/></scores></report>...</report_evaluations>')
    search: str | None = None
    scores: dict[str, dict[str, float]] = {}  # report id -> dimension -> value/10

    @classmethod
    def from_text(cls, text: str) -> AssessmentTurn:
        if "<report_evaluations" in text:
            out: dict[str, dict[str, float]] = {}
            for rid, body in _REPORT.findall(text):
                for m in _SCORE.finditer(body):
                    attrs = dict(_ATTR.findall(m.group(1)))
                    try:
                        value = float(attrs["value"])
                    except (KeyError, ValueError):
                        continue
                    out.setdefault(rid, {})[attrs.get("dim", "")] = min(max(value, 0.0), 10.0) / 10
            if not out:
                raise ValueError("<report_evaluations> holds no readable <score dim=... value=...> element")
            return cls(scores=out)
        found = _SEARCH.search(text)
        if found is None or not found.group(1).strip():
            raise ValueError("neither a <search> query nor <report_evaluations>")
        return cls(search=found.group(1).strip())


@dataclass
class Assessment:
    """One evaluator trajectory over the K reports of a query: per report (by position), the score of each
    selected dimension in [0, 1], or None when the report was left unscored; ``depth`` = its ``<search>`` calls."""

    scores: list[dict[str, float] | None]
    depth: int
    calls: int
    transcript: list[dict[str, str]] = field(default_factory=list)


def _process_lines(process: Mapping[str, Any]) -> str:
    on = {"require_verification": "Verify key claims and citations in each report using the search tool.",
          "citation_cross_check": "Cross-check each report's citations against the evidence you retrieve.",
          "require_gap_analysis": "Perform independent research from the original query to identify important "
                                  "gaps not covered by each report."}
    lines = [text for key, text in on.items() if process.get(key)]
    lines.append(f"Issue at least {process.get('min_number_of_tool_call', 0)} search queries before scoring.")
    return "\n".join(f"- {line}" for line in lines)


class Assessor(Protocol):
    """What :func:`assess` asks: a :class:`~rubricforge.rewards.judging.Judge`, or the policy itself (SCORE's
    shared actor, ``training.score.PolicyAssessor``)."""

    async def ask_messages(self, messages: list[dict[str, str]], output: type[Any], *, stage: str,
                           seed: int | None = None) -> Any: ...


async def assess(judge: Assessor, toolbox: ToolBox | None, query: str, reports: Sequence[str],
                 weights: Mapping[str, float], primary: Sequence[str], process: Mapping[str, Any], notes: str = "",
                 max_turns: int = 6, report_words: int = 900) -> Assessment | None:
    """SCORE §3.4 / Listing 4 (stages 2–4, dimensions fixed by the selection): the evaluator searches the corpus
    with ``<search>`` (at most ``max_turns`` − 1 times), then scores every report on every selected dimension.
    A report missing a dimension's score is unscored (None); a failed or endless trajectory returns None."""
    shown = "\n".join(f'<report id="{n}">\n{" ".join(r.split()[:report_words])}\n</report>'
                      for n, r in enumerate(reports, 1))
    dims = "\n".join(f"- {d} (primary)" if d in primary else f"- {d} (weight {w:g})" for d, w in weights.items())
    messages = PROMPTS.messages("score_assess", query=query, reports=shown, dimensions=dims,
                                process=_process_lines(process), notes=notes or "none")
    depth = calls = 0
    for _ in range(max_turns):
        turn = await judge.ask_messages(messages, AssessmentTurn, stage="score_assess")
        calls += 1
        if turn is None:
            return None
        if turn.search is None:
            scores = [turn.scores.get(str(n)) for n in range(1, len(reports) + 1)]
            return Assessment([s if s is not None and all(d in s for d in weights) else None for s in scores],
                              depth, calls, messages)
        depth += 1
        found = await toolbox.asearch(turn.search) if toolbox is not None else "(no search tool available)"
        messages = [*messages, {"role": "assistant", "content": f"<search>{turn.search}</search>"},
                    {"role": "user", "content": f"<observation>\n{found}\n</observation>"}]
    return None


# ---------------------------------------------------------------- S-7 citation check (Listing 1)

class CitationVerdict(BaseModel):
    idx: int
    result: Literal["supported", "unsupported", "unknown"]


class CitationVerdicts(TextAnswer):
    """Listing 1's answer: a JSON list of {"idx", "result"}."""

    FORMAT = '[{"idx": 1, "result": "supported"}, {"idx": 2, "result": "unsupported"}]'
    items: list[CitationVerdict]

    @classmethod
    def from_text(cls, text: str) -> CitationVerdicts:
        start, end = text.find("["), text.rfind("]")
        if start < 0 or end < start:
            raise ValueError("no JSON list in the answer")
        try:
            return cls(items=[CitationVerdict.model_validate(x) for x in json.loads(text[start:end + 1])])
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"unreadable verdict list: {exc}") from None


async def check_citations(judge: Judge, reference: str, statements: Sequence[str]) -> list[str | None]:
    """SCORE App. H Listing 1: each statement supported / unsupported / unknown against ``reference`` (None for
    a statement the judge gave no verdict, or all None when the call failed)."""
    numbered = "\n".join(f"{n}. {s}" for n, s in enumerate(statements, 1))
    got = await judge.ask("score_citation", CitationVerdicts, stage="score_citation", reference=reference,
                          statements=numbered)
    if got is None:
        return [None] * len(statements)
    by_idx = {v.idx: v.result for v in got.items}
    return [by_idx.get(n) for n in range(1, len(statements) + 1)]


def valid_citation_ratio(verdicts: Sequence[str | None]) -> float | None:
    """VC = supported / (supported + unsupported) (SCORE Table 1 "valid ratio of citation", our reading, spec
    S-7); None when no statement was decided."""
    sup, uns = verdicts.count("supported"), verdicts.count("unsupported")
    return sup / (sup + uns) if sup + uns else None


def writing_quality_prompt(task: str) -> str:
    """SCORE App. H Listing 2, the four-dimension writing-quality rubric of the DRB-style evaluation."""
    return PROMPTS.render("score_writing.user", task=task)


__all__ = ["EMA_BETA", "Assessment", "EmaBaseline", "assess", "check_citations", "extract_conclusion",
           "pairwise_consistency", "score_report_reward", "valid_citation_ratio", "verified", "writing_quality_prompt"]

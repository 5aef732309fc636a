"""Citation support against the local corpus, as DeepResearch Bench's FACT reports it, and format compliance.

**FACT** (DeepResearch Bench, Du et al. 2025, §3.2): a report's citations are statement–source pairs; each pair
whose source can be retrieved is judged *supported* or *unsupported* by the source's text; pairs whose source
cannot be retrieved are left out. Citation accuracy = supported / judged pairs of the report; effective citations
= the number of supported pairs. Here a pair is one id of a ``<cite id="a,b">statement</cite>``
(:func:`~rubricforge.rewards.claims.extract_claims`; identical pairs once), the source is the corpus passage the
id names (:class:`CorpusCitations`), and the judge is the rewards' snippet-support prompt (DeepRubric Fig. 6):
"Fully supported" is supported, "Partially supported" and "No support" are not (FACT's verdict is yes / no).

With ``prompt="drb"`` (``eval.fact_prompt=drb``, the drb preset) the judging is DeepResearch Bench's own
(``utils/validate.py``): one call per cited source with every statement citing it, DRB's prompt (Chinese for a
Chinese task), each statement ``supported`` (its facts found in the source, "entirely or partially", rounding
accepted), ``unsupported`` or ``unknown`` (the source holds no valid content); an ``unknown`` pair is left out of
the counts, as ``utils/stat.py`` leaves it out, and an answer without one verdict per statement is resampled.

Metrics per report: ``citation.precision`` (left out for a report with no judged pair: FACT has no accuracy for
it), ``citation.supported``, ``citation.unresolved`` (pairs whose id names no passage). A failed judge call makes
the report's precision and count unscored (None).

A run's numbers are DeepResearch Bench's (``utils/stat.py``), :func:`summarise_citations`: citation accuracy pools the
pairs, Σ supported / Σ judged over all reports (not the mean of per-report precisions), and effective
citations is Σ supported / the number of reports with at least one citation (resolved or not), not over all
reports. Reports whose judging failed are left out of both and counted as unscored.

**Format compliance** (MindDR Eq. 11 on the report body, :mod:`~rubricforge.rewards.minddr.report_rules`): ``format`` =
the share of the two checks a report passes (``format.markdown``: no markdown problem; ``format.cite``: no
malformed cite markup; an empty report passes neither); the answer-tag check of Eq. 11 is not made, since a
report is read out of its tag.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from rubricforge.corpora.snippets import stable_id
from rubricforge.evaluation import stats
from rubricforge.llm.structured import TextAnswer
from rubricforge.rewards.deeprubric.citation_reward import Support
from rubricforge.rewards.claims import cite_problems, extract_claims
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.report_rules import markdown_problems

if TYPE_CHECKING:
    from rubricforge.corpora.index_store import CorpusIndex

Resolve = Callable[[str], "str | None"]
SUPPORTED = "Fully supported"
COUNTS = ("citation.supported", "citation.unresolved")  # the metrics that are counts, not on [0, 1]


class CorpusCitations:
    """A cited id -> the corpus text it names: a passage id as it is, the id the search or scholar tool gave a
    passage, or the id the browse tool gave a document (snippet ids hash these, so the first lookup of a
    snippet id reads every passage id once)."""

    def __init__(self, index: CorpusIndex):
        self.index = index
        self._snippets: dict[str, tuple[str, str]] | None = None  # snippet id -> (kind, passage or document id)

    def __call__(self, cid: str) -> str | None:
        if (passage := self.index.get(cid)) is not None:
            return passage.text
        if self._snippets is None:
            self._snippets = {}
            for p in self.index.iter_passages():
                for kind in ("search", "scholar"):
                    self._snippets[stable_id(kind, p.id)] = (kind, p.id)
                self._snippets.setdefault(stable_id("browse", p.doc_id), ("browse", p.doc_id))
        kind, key = self._snippets.get(cid, ("", ""))
        if kind == "browse":
            return self.index.document_text(key)
        found = self.index.get(key) if kind else None
        return found.text if found is not None else None


class DrbVerdicts(TextAnswer):
    """DeepResearch Bench's validation answer: a JSON list of ``{"idx": n, "result": supported | unsupported |
    unknown}`` (a fenced block is read as DRB reads it, its fences removed)."""

    FORMAT: ClassVar[str] = '[{"idx": 1, "result": "supported"}, {"idx": 2, "result": "unsupported"}, ...]'
    results: dict[int, str]

    @classmethod
    def from_text(cls, text: str) -> DrbVerdicts:
        data = json.loads(text.replace("```json", "").replace("```", ""))
        if not isinstance(data, list) or not all(isinstance(v, dict) and isinstance(v.get("idx"), int)
                                                 and v.get("result") in DRB_LABELS for v in data):
            raise ValueError('the answer is not a JSON list of {"idx": <number>, "result": supported | unsupported '
                             '| unknown}')
        return cls(results={v["idx"]: v["result"] for v in data})


DRB_LABELS = ("supported", "unsupported", "unknown")


def _all_numbered(answer: DrbVerdicts, n: int) -> str | None:
    missing = [i for i in range(1, n + 1) if i not in answer.results]
    return None if not missing and len(answer.results) == n else (
        f"the answer judges {len(answer.results)} of the {n} statements (missing: {missing[:3]}); give one result "
        "per statement, numbered as given")


async def _drb_labels(judge: Judge, judged: list[tuple[tuple[str, str], str]], language: str) -> list[str | None]:
    """DRB's verdict per judged pair: one call per source, its statements numbered (see the module docstring)."""
    by_source: dict[str, list[int]] = {}
    for k, ((_, cid), _) in enumerate(judged):
        by_source.setdefault(cid, []).append(k)
    texts = {cid: text for (_, cid), text in judged}
    answers = await asyncio.gather(*(judge.ask(
        f"drb_fact_{language}", DrbVerdicts, stage="fact_support", reference=texts[cid],
        statements="\n".join(f"{n}. {judged[k][0][0]}" for n, k in enumerate(ks, 1)),
        check=functools.partial(_all_numbered, n=len(ks))) for cid, ks in by_source.items()))
    labels: list[str | None] = [None] * len(judged)
    for ks, answer in zip(by_source.values(), answers, strict=True):
        for n, k in enumerate(ks, 1):
            labels[k] = None if answer is None else answer.results[n]
    return labels


async def fact(judge: Judge, question: str, report: str, resolve: Resolve, prompt: str = "rubricforge",
               language: str = "en") -> dict[str, Any]:
    """FACT's citation accuracy and supported count of ``report`` (see the module docstring); ``prompt``:
    ``rubricforge`` (the snippet-support prompt, a call per pair) or ``drb`` (DRB's, in ``language``)."""
    pairs = list(dict.fromkeys((c.text, i) for c in extract_claims(report) if c.cited for i in c.ids))
    sources = {pair: resolve(pair[1]) for pair in pairs}
    judged = [(pair, text) for pair, text in sources.items() if text is not None]
    if prompt == "drb":
        labels = await _drb_labels(judge, judged, language)
        yes, counted = "supported", [label for label in labels if label != "unknown"]
    else:
        verdicts = await asyncio.gather(*(
            judge.ask("citation_recall_cited", Support, stage="fact_support", question=question, statement=statement,
                      cited_snippets=f"[{cid}] {text}") for (statement, cid), text in judged))
        labels = [v.label if v is not None else None for v in verdicts]
        yes, counted = SUPPORTED, labels
    unscored = any(label is None for label in labels)
    supported = None if unscored else float(sum(label == yes for label in labels))
    metrics: dict[str, float | None] = {}
    if counted:
        metrics["citation.precision"] = None if supported is None else supported / len(counted)
    metrics |= {"citation.supported": supported, "citation.unresolved": float(len(pairs) - len(judged))}
    return {"metrics": metrics, "judged": len(counted),
            "pairs": [{"statement": s, "id": i, "verdict": label}
                      for ((s, i), _), label in zip(judged, labels, strict=True)]}


def summarise_citations(records: Iterable[Mapping[str, Any]], resamples: int = stats.RESAMPLES,
                        seed: int = 0) -> dict[str, dict[str, Any]]:
    """The run's ``citation.precision`` (pooled accuracy) and ``citation.supported`` (effective citations) as
    DeepResearch Bench aggregates them (see the module docstring), in :func:`~.stats.describe`'s layout; {} when no
    record has the citation scorer."""
    scored = [r["scores"]["citation"] for r in records if "citation" in r.get("scores", {})]
    if not scored:
        return {}
    cited = [s for s in scored if len(s["pairs"]) + (s["metrics"]["citation.unresolved"] or 0) > 0]
    done = [s for s in cited if s["metrics"]["citation.supported"] is not None]
    support = [s["metrics"]["citation.supported"] for s in done]
    judged = [s for s in done if s.get("judged", len(s["pairs"]))]  # records before "judged": every pair was judged
    ratio = stats.pooled([s["metrics"]["citation.supported"] for s in judged],
                         [s.get("judged", len(s["pairs"])) for s in judged], resamples, seed)
    precisions = [s["metrics"]["citation.precision"] for s in judged]
    accuracy = {"n": ratio["n"], "unscored": len(cited) - len(done), "mean": ratio["mean"], "std": None,
                "min": min(precisions, default=None), "max": max(precisions, default=None),
                "ci_low": ratio["ci_low"], "ci_high": ratio["ci_high"], "pooled": [ratio["numerator"],
                                                                                   ratio["denominator"]]}
    return {"citation.precision": accuracy,
            "citation.supported": stats.describe([*support, *([None] * (len(cited) - len(done)))], resamples, seed)}


def format_compliance(report: str) -> dict[str, Any]:
    """The share of MindDR Eq. 11's body checks ``report`` passes, and which problems it has."""
    markdown, cites = markdown_problems(report), cite_problems(report)
    checks = {"format.markdown": float(bool(report) and not markdown), "format.cite": float(bool(report) and not cites)}
    return {"metrics": {"format": sum(checks.values()) / len(checks), **checks},
            "problems": [f"markdown: {p}" for p in markdown] + [f"cite: {p}" for p in cites]}

"""Preference data (Prefs §3.2, §4.1; docs/methods.md Q-1, Q-10): read (query, chosen, rejected) pairs, split them
topic-balanced 8:1:1, and build pairs with a known direction from good reports by controlled degradation.

* :func:`read_pairs` — JSONL or parquet rows in the :class:`~rubricforge.schema.PreferencePair` layout;
  a bad row (empty query or report, chosen = rejected, unknown split, repeated id) goes to the rejects
  file with its reason, never into the data.
* :func:`assign_splits` — per topic, shuffled with the seed: n_test = round(0.1 n), n_val = round(0.1 n),
  the rest train; a topic with n ≥ 3 gets at least one validation and one test row (Q-1).
* :func:`degrade_reports` — the paper's pairs are human-labelled and not public; where no labels exist
  the rejected report is the chosen one after one controlled degradation (:data:`DEGRADATIONS`), so the
  preferred side is known by construction and each pair says how it was made. A degradation that does
  not apply to a report (no citations to remove) makes no pair and is counted.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError, require_file
from rubricforge.extras import needs
from rubricforge.io.files import atomic_write_text
from rubricforge.schema import PreferencePair

SPLITS = ("train", "validation", "test")


# ---------------------------------------------------------------- reading and writing


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line or row number, raw record) of a JSONL (1-based lines) or parquet file (0-based rows)."""
    require_file(path, "preference file", "pass an existing .jsonl or .parquet file")
    if path.suffix == ".parquet":
        with needs("data"):
            import pyarrow.parquet as pq

        for n, row in enumerate(pq.read_table(path).to_pylist()):
            yield n, row
        return
    if path.suffix not in (".jsonl", ".json"):
        raise UserError(f"preference file {path} is neither JSONL nor parquet", "give a .jsonl or .parquet file")
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError:
                    yield n, line


def read_pairs(path: str | Path, rejects: Rejects, seed: int = 0) -> list[PreferencePair]:
    """The valid pairs of ``path``; rows without a ``split`` are split with :func:`assign_splits`."""
    path = Path(path)
    pairs, unsplit, seen = [], set(), set()
    for n, raw in _rows(path):
        if not isinstance(raw, dict):
            rejects.add(path, n, "not a JSON object", raw)
            continue
        try:
            pair = PreferencePair.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors(include_url=False, include_input=False)[0]
            rejects.add(path, n, f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}", raw)
            continue
        if pair.report_chosen.strip() == pair.report_rejected.strip():
            rejects.add(path, n, "report_chosen equals report_rejected", raw)
        elif not pair.query.strip() or not pair.report_chosen.strip() or not pair.report_rejected.strip():
            rejects.add(path, n, "empty query or report", raw)
        elif pair.id in seen:
            rejects.add(path, n, f"repeated id {pair.id!r}", raw)
        else:
            seen.add(pair.id)
            pairs.append(pair)
            if raw.get("split") is None:
                unsplit.add(pair.id)
    if unsplit:
        splits = assign_splits([(p.id, p.topic) for p in pairs if p.id in unsplit], seed)
        pairs = [p.model_copy(update={"split": splits[p.id]}) if p.id in splits else p for p in pairs]
    return pairs


def load_pairs(path: str | Path, split: str | None = None) -> list[PreferencePair]:
    """Pairs written by ``rubricforge prefs import`` / ``degrade`` (``split``: only that split); any bad row
    is an error here, since these files are rubricforge's own."""
    rejects = Rejects()
    pairs = read_pairs(path, rejects)
    if rejects.total:
        reason = next(iter(rejects.by_reason))
        raise UserError(f"pairs file {path}: {rejects.total} bad row(s), e.g. {reason}",
                        "import it with `rubricforge prefs import`, which writes the bad rows to a rejects file")
    if split is not None:
        if split not in SPLITS:
            raise UserError(f"unknown split '{split}'", f"use one of: {', '.join(SPLITS)}")
        pairs = [p for p in pairs if p.split == split]
    if not pairs:
        raise UserError(f"pairs file {path} has no pairs" + (f" in split '{split}'" if split else ""),
                        "check the file, or choose another --split")
    return pairs


def write_pairs(pairs: Iterable[PreferencePair], out: str | Path) -> None:
    atomic_write_text(out, "".join(p.model_dump_json() + "\n" for p in pairs))


def assign_splits(items: list[tuple[str, str]], seed: int = 0) -> dict[str, str]:
    """Topic-balanced 8:1:1 split of ``(id, topic)`` items (Prefs §4.1; docs/methods.md Q-1): id -> split."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for item_id, topic in items:
        by_topic[topic].append(item_id)
    out = {}
    for topic in sorted(by_topic):
        ids = sorted(by_topic[topic])
        random.Random(f"{seed}:{topic}").shuffle(ids)
        n = len(ids)
        n_test = n_val = round(0.1 * n)
        if n >= 3:
            n_test, n_val = max(n_test, 1), max(n_val, 1)
        for i, item_id in enumerate(ids):
            out[item_id] = "test" if i < n_test else "validation" if i < n_test + n_val else "train"
    return out


def split_counts(pairs: Iterable[PreferencePair]) -> dict[str, int]:
    counts: Counter[str] = Counter(p.split for p in pairs)
    return {s: counts.get(s, 0) for s in SPLITS}


# ---------------------------------------------------------------- good reports


_HEADING = re.compile(r"^#{1,6}\s+\S", re.M)
_REF_HEADER = re.compile(r"^\s*(?:#{1,6}\s*)?(?:参考文献|references|sources|bibliography|citations)\s*[:：]?\s*$",
                         re.I | re.M)
_REF_LINE = re.compile(r"^\s*\[(\d+)\]\s*\S")
_CITE = re.compile(r"\[(\d+)\]")


@dataclass
class Report:
    """A report split into its body and its numbered reference list (``[n] ...`` lines)."""

    body: str
    references: dict[int, str] = field(default_factory=dict)
    ref_header: str = "References:"

    @classmethod
    def parse(cls, text: str) -> Report:
        header = _REF_HEADER.search(text)
        if header is None:
            return cls(text.strip())
        refs = {}
        for line in text[header.end():].splitlines():
            if m := _REF_LINE.match(line):
                refs[int(m.group(1))] = line.strip()
        return cls(text[:header.start()].strip(), refs, header.group(0).strip())

    def text(self) -> str:
        if not self.references:
            return self.body
        return f"{self.body}\n\n{self.ref_header}\n" + "\n".join(self.references[k] for k in sorted(self.references))


def sections(body: str) -> list[str]:
    """The body cut before every Markdown heading (the text before the first heading is its own part)."""
    starts = [m.start() for m in _HEADING.finditer(body)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    return [body[a:b].strip() for a, b in zip(starts, [*starts[1:], len(body)], strict=True) if body[a:b].strip()]


def good_report(text: str, max_chars: int | None = None) -> str:
    """The report an agent delivered: from its first heading on (agent chatter before it is dropped), cut
    to whole sections within ``max_chars`` (at least one), keeping the references its text still cites."""
    report = Report.parse(text)
    first = _HEADING.search(report.body)
    body = report.body[first.start():] if first else report.body
    parts = sections(body)
    if max_chars is not None:
        kept: list[str] = []
        size = 0
        for part in parts:
            if kept and size + len(part) > max_chars:
                break
            kept.append(part)
            size += len(part) + 2
        parts = kept
    body = "\n\n".join(parts)
    cited = {int(n) for n in _CITE.findall(body)}
    return Report(body, {k: v for k, v in report.references.items() if k in cited}, report.ref_header).text()


# ---------------------------------------------------------------- degradations

_NUMBER = re.compile(r"(?<![\w.\[])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w\]])")
_FLIPS = {"increase": "decrease", "increased": "decreased", "increases": "decreases", "higher": "lower",
          "more": "less", "larger": "smaller", "rise": "fall", "rose": "fell", "growth": "decline",
          "positive": "negative", "significant": "negligible", "before": "after", "largest": "smallest"}
_FLIPS.update({v: k for k, v in list(_FLIPS.items())})
_FLIP = re.compile(r"\b(" + "|".join(sorted(_FLIPS, key=len, reverse=True)) + r")\b", re.I)
_PADDING = (
    "It is important to note that this topic is complex and has many different aspects to consider.",
    "As mentioned above, there are various factors that play a role here, and they all matter in some way.",
    "In today's rapidly changing world, this question is more relevant than ever before.",
    "Many experts have different opinions on this matter, and the discussion is ongoing.",
    "This section has provided an overview of the key points, which are worth keeping in mind.",
    "Overall, it can be said that the situation depends on a wide range of circumstances.",
    "It goes without saying that further research could shed more light on these issues.",
    "Needless to say, this is a multifaceted subject that deserves careful attention.",
)
_FAKE_SOURCES = ("Global Insights Quarterly", "The Journal of Advanced Studies", "World Data Review Blog",
                 "International Trends Digest", "Open Knowledge Forum", "Future Research Letters")


def _corrupt_number(m: re.Match[str], rng: random.Random) -> str:
    whole, frac = m.group(1), m.group(2) or ""
    value = int(whole.replace(",", ""))
    if 1900 <= value <= 2100 and not frac:  # a year
        return str(value + rng.choice([-1, 1]) * rng.randint(3, 12))
    new = max(1, round(value * rng.choice([0.4, 0.6, 1.7, 2.5, 3.0]))) if value > 1 else value + rng.randint(2, 9)
    text = f"{new:,}" if "," in whole else str(new)
    return text + frac


def degrade_facts(report: Report, rng: random.Random) -> Report | None:
    """Facts corrupted: every number in the body changed (years shifted by 3–12, other numbers scaled) and
    directional words flipped (increase/decrease, higher/lower, ...); citations and headings untouched."""
    out, changed = [], 0
    for line in report.body.splitlines():
        if _HEADING.match(line):
            out.append(line)
            continue
        line, n_num = _NUMBER.subn(lambda m: _corrupt_number(m, rng), line)
        line, n_flip = _FLIP.subn(lambda m: _match_case(m.group(0), _FLIPS[m.group(0).lower()]), line)
        changed += n_num + n_flip
        out.append(line)
    return Report("\n".join(out), report.references, report.ref_header) if changed >= 3 else None


def _match_case(old: str, new: str) -> str:
    return new.capitalize() if old[:1].isupper() else new


def degrade_sections(report: Report, rng: random.Random) -> Report | None:
    """Sections dropped: half of the sections between the first and the last (rounded up) are removed."""
    parts = sections(report.body)
    middle = list(range(1, len(parts) - 1))
    if len(middle) < 2:
        return None
    drop = set(rng.sample(middle, (len(middle) + 1) // 2))
    body = "\n\n".join(p for i, p in enumerate(parts) if i not in drop)
    cited = {int(n) for n in _CITE.findall(body)}
    return Report(body, {k: v for k, v in report.references.items() if k in cited}, report.ref_header)


def degrade_citations_removed(report: Report, rng: random.Random) -> Report | None:
    """Citations removed: every ``[n]`` marker and the reference list are deleted."""
    if not report.references and not _CITE.search(report.body):
        return None
    return Report(re.sub(r"\s*\[\d+\](?:\s*\[\d+\])*", "", report.body))


def degrade_citations_fabricated(report: Report, rng: random.Random) -> Report | None:
    """Citations fabricated: every reference entry replaced by an invented source (an unrelated title at a
    made-up URL); the markers in the text stay, now pointing at sources that do not exist."""
    if not report.references:
        return None
    fake = {}
    for k in report.references:
        venue = rng.choice(_FAKE_SOURCES)
        slug = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(10))
        fake[k] = f"[{k}] https://www.{venue.lower().replace(' ', '-')}.example/{slug} - {venue}, article {slug[:4]}"
    return Report(report.body, fake, report.ref_header)


def degrade_padding(report: Report, rng: random.Random) -> Report | None:
    """Padding: a vacuous filler sentence appended to every other paragraph (same content, longer, emptier)."""
    out, text_paragraphs = [], 0
    for p in report.body.split("\n\n"):
        if not _HEADING.match(p) and p.strip():
            text_paragraphs += 1
            if text_paragraphs % 2:
                p = f"{p} {rng.choice(_PADDING)}"
        out.append(p)
    return Report("\n\n".join(out), report.references, report.ref_header)


DEGRADATIONS: dict[str, Callable[[Report, random.Random], Report | None]] = {
    "facts": degrade_facts, "sections": degrade_sections, "citations_removed": degrade_citations_removed,
    "citations_fabricated": degrade_citations_fabricated, "padding": degrade_padding,
}


def check_kinds(kinds: Iterable[str]) -> list[str]:
    kinds = list(kinds)
    for kind in kinds:
        if kind not in DEGRADATIONS:
            raise UserError(f"unknown degradation '{kind}'", f"use any of: {', '.join(DEGRADATIONS)}")
    return kinds


@dataclass
class DegradeSummary:
    reports: int
    pairs: int
    not_applicable: dict[str, int]
    splits: dict[str, int]
    rejects: dict[str, Any]


def _language(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def degrade_reports(reports: str | Path, out: str | Path, kinds: Iterable[str], rejects: Rejects,
                    queries: str | Path | None = None, ids: set[str] | None = None, max_chars: int | None = None,
                    seed: int = 0, system: str | None = None) -> DegradeSummary:
    """Pairs (good report, degraded report) for every report of ``reports`` (JSONL rows with ``id``,
    ``query`` or ``prompt``, ``report`` or ``article``; ``topic`` and ``language`` from the row or from
    ``queries``, a JSONL of ``{id, topic, language}`` such as DeepResearch Bench's query.jsonl). Every pair
    of one report lands in the same split (split by report, topic-balanced)."""
    kinds = check_kinds(kinds)
    reports = Path(reports)
    meta = {str(r["id"]): r for _, r in _rows(Path(queries)) if isinstance(r, dict) and "id" in r} if queries else {}
    system = system or reports.stem
    rows = []
    for n, raw in _rows(reports):
        if not isinstance(raw, dict):
            rejects.add(reports, n, "not a JSON object", raw)
            continue
        rid = str(raw.get("id", n))
        if ids is not None and rid not in ids:
            continue
        query, text = raw.get("query") or raw.get("prompt"), raw.get("report") or raw.get("article")
        if not isinstance(query, str) or not query.strip() or not isinstance(text, str) or not text.strip():
            rejects.add(reports, n, "needs a non-empty query (or prompt) and report (or article)", raw)
            continue
        info = {**meta.get(rid, {}), **{k: raw[k] for k in ("topic", "language") if raw.get(k)}}
        rows.append((rid, query.strip(), text, str(info.get("topic", "")), info.get("language") or _language(query)))
    splits = assign_splits([(rid, topic) for rid, _, _, topic, _ in rows], seed)
    pairs: list[PreferencePair] = []
    skipped: Counter[str] = Counter()
    for rid, query, text, topic, language in rows:
        chosen = good_report(text, max_chars)
        for kind in kinds:
            degraded = DEGRADATIONS[kind](Report.parse(chosen), random.Random(f"{seed}:{rid}:{kind}"))
            if degraded is None or degraded.text().strip() == chosen.strip():
                skipped[kind] += 1
                continue
            pairs.append(PreferencePair(id=f"{rid}--{kind}", query=query, topic=topic, language=language,
                                        report_chosen=chosen, report_rejected=degraded.text(), split=splits[rid],
                                        sources={"chosen": system, "rejected": f"{system}+{kind}"},
                                        degradation=kind))
    if not pairs:
        raise UserError(f"no pair could be built from {reports}", "check --ids and --kinds against the reports")
    write_pairs(pairs, out)
    return DegradeSummary(len(rows), len(pairs), dict(skipped), split_counts(pairs), rejects.summary())

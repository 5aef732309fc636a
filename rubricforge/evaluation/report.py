"""The HTML reports of an evaluation run and of a comparison: static pages, plots as inline SVG, no script.

:func:`run_page` (``report.html`` in the run directory): per-metric means with their bootstrap 95 % CIs, the
distribution of each headline metric over the tasks, and the per-task table. :func:`compare_page`: per
metric the paired difference B − A with its CI, win / tie / loss and the sign test, and per headline metric
every task's difference. Every text from the data is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from rubricforge.evaluation.citations import COUNTS
from rubricforge.evaluation.presets import NOT_COMPARABLE
from rubricforge.text import one_line

WIDTH, ROW, LABEL, VALUE = 640, 22, 210, 70  # svg width, bar row height, label column, value column
BINS = 10

STYLE = """body{font:14px system-ui,sans-serif;margin:2em;max-width:1000px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
svg{display:block;margin:.5em 0 1.5em}
.bar{fill:#7aa6d6}.ci{stroke:#234;stroke-width:2}.axis{stroke:#888}.zero{stroke:#c33}
text{font-size:12px;fill:#222}"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n")


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _x(value: float, lo: float, hi: float) -> float:
    return LABEL + (WIDTH - LABEL - VALUE) * (min(max(value, lo), hi) - lo) / ((hi - lo) or 1.0)


def interval_chart(rows: Sequence[tuple[str, float | None, float | None, float | None]], lo: float, hi: float,
                   name: str, zero: bool = False) -> str:
    """Horizontal bars (from ``lo``, or from 0 when ``zero``) of (label, value, ci_low, ci_high) with CI whiskers."""
    parts = [f'<svg class="chart" data-chart="{escape(name)}" width="{WIDTH}" height="{ROW * len(rows) + 30}" '
             f'role="img" aria-label="{escape(name)}">']
    base = _x(0.0 if zero else lo, lo, hi)
    for i, (label, value, c_lo, c_hi) in enumerate(rows):
        y = 5 + i * ROW
        parts.append(f'<text x="0" y="{y + 14}">{escape(one_line(label, 32))}</text>')
        if value is None:
            parts.append(f'<text x="{LABEL}" y="{y + 14}">unscored</text>')
            continue
        x = _x(value, lo, hi)
        parts.append(f'<rect class="bar" data-value="{value:.6g}" x="{min(x, base):.1f}" y="{y + 3}" '
                     f'width="{abs(x - base):.1f}" height="{ROW - 8}"><title>{escape(label)}: {value:.4f}'
                     f'</title></rect>')
        if c_lo is not None and c_hi is not None:
            cy = y + ROW / 2 - 1
            parts.append(f'<line class="ci" x1="{_x(c_lo, lo, hi):.1f}" x2="{_x(c_hi, lo, hi):.1f}" y1="{cy}" '
                         f'y2="{cy}"/>')
        parts.append(f'<text x="{WIDTH - 5}" y="{y + 14}" text-anchor="end">{value:.3f}</text>')
    bottom = 10 + ROW * len(rows)
    parts.append(f'<line class="axis" x1="{LABEL}" x2="{WIDTH - VALUE}" y1="{bottom}" y2="{bottom}"/>'
                 f'<text x="{LABEL}" y="{bottom + 14}">{lo:.3g}</text>'
                 f'<text x="{WIDTH - VALUE}" y="{bottom + 14}" text-anchor="end">{hi:.3g}</text>')
    if zero:
        parts.append(f'<line class="zero" x1="{base:.1f}" x2="{base:.1f}" y1="0" y2="{bottom}"/>')
    return "".join(parts) + "</svg>"


def histogram(values: Sequence[float], name: str, lo: float = 0.0, hi: float = 1.0) -> str:
    """Counts of ``values`` in :data:`BINS` equal bins over [lo, hi] (the last bin closed)."""
    counts = [0] * BINS
    for v in values:
        counts[min(BINS - 1, max(0, int((v - lo) / ((hi - lo) or 1.0) * BINS)))] += 1
    height, top = 120, max(counts) or 1
    bar_w = (WIDTH - 40) / BINS
    parts = [f'<svg class="chart" data-chart="{escape(name)}" width="{WIDTH}" height="{height + 30}" role="img" '
             f'aria-label="{escape(name)}">']
    for i, c in enumerate(counts):
        h = height * c / top
        parts.append(f'<rect class="bar" data-count="{c}" x="{20 + i * bar_w:.1f}" y="{height - h + 5:.1f}" '
                     f'width="{bar_w - 2:.1f}" height="{h:.1f}"><title>{lo + i * (hi - lo) / BINS:.2f}–'
                     f'{lo + (i + 1) * (hi - lo) / BINS:.2f}: {c}</title></rect>')
    parts.append(f'<line class="axis" x1="20" x2="{WIDTH - 20}" y1="{height + 5}" y2="{height + 5}"/>'
                 f'<text x="20" y="{height + 20}">{lo:g}</text>'
                 f'<text x="{WIDTH - 20}" y="{height + 20}" text-anchor="end">{hi:g}</text>')
    return "".join(parts) + "</svg>"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], name: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table data-table="{escape(name)}"><tr>{head}</tr>{body}</table>'


def headline(metrics: Sequence[str]) -> list[str]:
    """The scorers' headline metrics (no dimension: ``race``, ``rubric``, ``exact.em``, ``exact.f1``,
    ``citation.precision``, ``format``)."""
    return [m for m in metrics if "." not in m or m.startswith("exact.") or m == "citation.precision"]


def leaderboard(label: Mapping[str, Any]) -> str:
    """A run's leaderboard label (:func:`~rubricforge.evaluation.presets.label`) in words."""
    if not label:
        return "–"
    if label.get("comparable"):
        return f"comparable with {label['leaderboard']} (preset {label['preset']})"
    return f"{NOT_COMPARABLE}: " + "; ".join(label.get("why", []))


def run_page(summary: Mapping[str, Any], per_task: Mapping[str, Mapping[str, float | None]],
             questions: Mapping[str, str]) -> str:
    """``report.html`` of a run from its summary and its per-task metrics."""
    stats = summary["metrics"]
    info = _table(["run", "tasks", "reports", "without report", "judge", "status", "leaderboard"], [[
        str(summary["run_dir"]), str(summary["tasks"]), str(summary["reports"]), str(summary["missing"]),
        str(summary["judge_model"]), str(summary["status"]), leaderboard(summary.get("leaderboard") or {})]], "run")
    rows = [(m, s["mean"], s["ci_low"], s["ci_high"]) for m, s in stats.items() if m not in COUNTS]  # on [0, 1]
    table = _table(["metric", "n", "unscored", "mean", "95% CI", "std"],
                   [[m, str(s["n"]), str(s["unscored"]), _num(s["mean"]), f"[{_num(s['ci_low'])}, {_num(s['ci_high'])}]",
                     _num(s["std"])] for m, s in stats.items()], "metrics")
    heads = headline(list(stats))
    scored = {m: [x for v in per_task.values() if (x := v.get(m)) is not None] for m in heads}
    hists = "".join(f"<h3>{escape(m)}</h3>{histogram(scored[m], f'hist:{m}')}" for m in heads)
    tasks = _table(["task", "question", *heads],
                   [[tid, one_line(questions.get(tid, ""), 90), *(_num(v.get(m)) for m in heads)]
                    for tid, v in per_task.items()], "tasks")
    body = (f"{info}<h2>Means with bootstrap 95% confidence intervals</h2>"
            f"{interval_chart(rows, 0.0, 1.0, 'means')}{table}<h2>Score distributions</h2>{hists}"
            f"<h2>Per task</h2>{tasks}")
    return _page(f"rubricforge eval · {summary['run_dir']}", body)


def compare_page(result: Mapping[str, Any]) -> str:
    """The comparison page of :func:`rubricforge.jobs.evaluate.compare`'s result."""
    metrics = result["metrics"]
    span = max([abs(x) for p in metrics.values() for x in (p["ci_low"], p["ci_high"]) if x] or [1.0])
    rows = [(m, p["diff"], p["ci_low"], p["ci_high"]) for m, p in metrics.items()]
    table = _table(["metric", "tasks", "mean A", "mean B", "B − A", "95% CI", "win", "tie", "loss", "sign p"],
                   [[m, str(p["n"]), _num(p["mean_a"]), _num(p["mean_b"]), _num(p["diff"]),
                     f"[{_num(p['ci_low'])}, {_num(p['ci_high'])}]", str(p["wins"]), str(p["ties"]),
                     str(p["losses"]), _num(p["sign_p"], 4)] for m, p in metrics.items()], "compare")
    strips = []
    for m in headline(list(metrics)):
        diffs = sorted(metrics[m]["diffs"].items(), key=lambda kv: kv[1])
        reach = max([abs(d) for _, d in diffs if d] or [1.0])
        strips.append(f"<h3>{escape(m)}: B − A per task</h3>" + interval_chart(
            [(f"task {t}", d, None, None) for t, d in diffs], -reach, reach, f"diffs:{m}", zero=True))
    labels = result.get("leaderboard", {})
    body = (f"<p>A: {escape(str(result['run_a']))} ({escape(leaderboard(labels.get('A') or {}))})<br>"
            f"B: {escape(str(result['run_b']))} ({escape(leaderboard(labels.get('B') or {}))})</p>"
            f"<h2>Paired difference B − A with bootstrap 95% CI</h2>"
            f"{interval_chart(rows, -span, span, 'paired', zero=True)}{table}{''.join(strips)}")
    return _page("rubricforge eval compare", body)

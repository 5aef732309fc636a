"""`rubricforge prefs`: import preference pairs, or build them by degrading good reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import console
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError

app = typer.Typer(no_args_is_help=True, help="Preference pairs (query, chosen report, rejected report).")
PairsOut = Annotated[Path, typer.Option("--out", help="Pairs JSONL to write.")]


def _rejects_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}.rejects.jsonl")


@app.command("import")
def prefs_import(
    path: Annotated[Path, typer.Argument(help="JSONL or parquet rows: id, query, report_chosen, report_rejected, "
                                              "topic, language, split (optional), sources, annotator.")],
    out: PairsOut,
    seed: Annotated[int, typer.Option(help="Seed of the topic-balanced 8:1:1 split of rows without a split.")] = 0,
) -> None:
    """Check and import preference pairs; bad rows go to <out>.rejects.jsonl with their reason."""
    from rubricforge.pipelines.preferences import read_pairs, split_counts, write_pairs

    with Rejects(_rejects_path(out)) as rejects:
        pairs = read_pairs(path, rejects, seed)
    if not pairs:
        raise UserError(f"no valid pair in {path}", f"see {rejects.path} for why each row was rejected")
    write_pairs(pairs, out)
    splits = ", ".join(f"{k} {v}" for k, v in split_counts(pairs).items())
    console().print(f"{len(pairs)} pairs ({splits}) -> {out}")
    _print_rejects(rejects)


@app.command("degrade")
def prefs_degrade(
    reports: Annotated[Path, typer.Argument(help="JSONL of good reports: id, query (or prompt), report (or article); "
                                                 "e.g. DeepResearch Bench's test_data/raw_data/<system>.jsonl.")],
    out: PairsOut,
    kinds: Annotated[str, typer.Option(help="Comma-separated degradations: facts, sections, citations_removed, "
                                            "citations_fabricated, padding.")] =
    "facts,sections,citations_removed,citations_fabricated,padding",
    queries: Annotated[Optional[Path], typer.Option(help="JSONL with id, topic, language per report id "
                                                         "(e.g. DRB's prompt_data/query.jsonl).")] = None,
    ids: Annotated[Optional[str], typer.Option(help="Only these report ids (comma-separated).")] = None,
    max_chars: Annotated[Optional[int], typer.Option(help="Cut each good report to whole sections within this "
                                                          "many characters before degrading it.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the degradations and the split.")] = 0,
) -> None:
    """Build labelled pairs from good reports: chosen = the report, rejected = it after one controlled degradation."""
    from rubricforge.pipelines.preferences import degrade_reports

    with Rejects(_rejects_path(out)) as rejects:
        s = degrade_reports(reports, out, [k.strip() for k in kinds.split(",") if k.strip()], rejects, queries,
                            {i.strip() for i in ids.split(",")} if ids else None, max_chars, seed)
    splits = ", ".join(f"{k} {v}" for k, v in s.splits.items())
    na = ", ".join(f"{k} {v}" for k, v in s.not_applicable.items()) or "none"
    console().print(f"{s.pairs} pairs from {s.reports} reports ({splits}; not applicable: {na}) -> {out}")
    _print_rejects(rejects)


def _print_rejects(rejects: Rejects) -> None:
    if rejects.total:
        console().print(f"[yellow]skipped {rejects.total} bad rows[/yellow]: {rejects.path}")

"""`rubricforge corpus`: build, list, describe, search and serve a corpus index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, SetOpt, VerboseOpt, console, cli_config, table
from rubricforge.errors import UserError

app = typer.Typer(no_args_is_help=True, help="Load, index, search and serve a corpus.")
IndexOpt = Annotated[Optional[str], typer.Option("--index", help="A named index (see `rubricforge corpus list`).")]


@app.command("build")
def corpus_build(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    source: Annotated[Optional[str], typer.Option(help="default | jsonl | parquet | hf | wiki18 | openscholar")] = None,
    path: Annotated[Optional[str], typer.Option(help="Corpus file, folder or glob.")] = None,
    index_kind: Annotated[Optional[str], typer.Option("--index", help="exact | hnsw | ivfpq")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Index folder (default: the cache).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name the index (<cache>/index/NAME): search it "
                                                               "later with --index NAME.")] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Load, chunk, embed and index a corpus (resumable): the ``index_corpus`` Prefect flow."""
    from rubricforge.config import INDEX_ROOT
    from rubricforge.flows import local

    cfg = cli_config(config, set_, **{"corpus.source": source, "corpus.path": path, "index.kind": index_kind,
                                      "tools.index_dir": out, "tools.index_name": name})
    info = local.run_index_corpus(cfg, verbose=verbose)
    console().print(f"[green]index ready[/green] {info.path}  passages={info.n_passages}  "
                    f"kind={info.kind}  snapshot={info.corpus_hash[:12]}")
    if Path(info.path).parent == INDEX_ROOT:
        console().print(f"search it with: rubricforge corpus search --index {Path(info.path).name} \"<query>\"",
                        markup=False, highlight=False)


@app.command("list")
def corpus_list() -> None:
    """List the named indexes in the cache: passages, source, kind, embedding model, snapshot."""
    from rubricforge.config import INDEX_ROOT
    from rubricforge.corpora.catalog import list_indexes

    entries = list_indexes()
    if not entries:
        console().print(f"no indexes in {INDEX_ROOT} (build one with `rubricforge corpus build --name NAME`)")
        return
    rows = table("name", "passages", "source", "kind", "model", "snapshot", "built")
    for e in entries:
        rows.add_row(e["name"], str(e.get("passages", "?")), str(e.get("source") or e.get("error", "?")),
                     str(e.get("kind", "")), str(e.get("model", "")), str(e.get("corpus_hash", ""))[:12],
                     str(e.get("built_at", "")))
    console().print(rows)


@app.command("info")
def corpus_info(config: ConfigOpt = None, set_: SetOpt = None,
                index_dir: Annotated[Optional[Path], typer.Option("--index-dir")] = None,
                index: IndexOpt = None) -> None:
    """Describe a built index: passages, embedding model, index kind, snapshot hash."""
    import json

    from rubricforge.corpora.index_store import CorpusIndex

    cfg = cli_config(config, set_, **{"tools.index_dir": index_dir, "tools.index_name": index})
    typer.echo(json.dumps(CorpusIndex.open(cfg.index_dir()).info(), indent=2))


@app.command("search")
def corpus_search(
    queries: Annotated[list[str], typer.Argument(help="One or more queries.")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    k: Annotated[Optional[int], typer.Option("-k", help="Results per query.")] = None,
    scholar: Annotated[bool, typer.Option(help="Use the scholar index.")] = False,
    index: IndexOpt = None,
) -> None:
    """Search the index and print the tool output the agent would see (App. D format)."""
    from rubricforge.corpora.tools import ERROR_PREFIX, ToolBox

    blank = next((n for n, q in enumerate(queries, 1) if not q.strip()), None)
    if blank is not None:
        raise UserError(f"query {blank} is empty", "pass non-empty queries: rubricforge corpus search \"<query>\"")
    cfg = cli_config(config, set_, **{"tools.top_k": k, "tools.index_name": index})
    with ToolBox.from_config(cfg, require_scholar=scholar) as tools:
        output = tools.scholar(queries) if scholar else tools.search(queries)
    if output.startswith(ERROR_PREFIX):  # e.g. -k 0, too many queries, a retrieval server that stopped answering
        raise UserError(output.removeprefix(ERROR_PREFIX).strip())
    typer.echo(output)


@app.command("serve")
def corpus_serve(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    index: IndexOpt = None,
    save_address_to: Annotated[Optional[Path], typer.Option(
        "--save-address-to", help="Write ip:port here for ASearcher/AReaL clients: a .txt file, or a folder "
                                  "(Host<ip>_IP<port>.txt, ASearcher's layout).")] = None,
) -> None:
    """Serve /retrieve, /access, /scholar (ASearcher-compatible) and /search (OpenScholar's API) over HTTP."""
    from rubricforge.corpora.server import serve

    serve(cli_config(config, set_, **{"tools.index_name": index}), host=host, port=port,
          save_address_to=save_address_to)

"""Measure the evidence tree's passage gate (``build.passage_gate``): the cosines of retrieved passages with their
node's sub-query and with the tree's root query, for a reader to label.

    python tools/passage_gate_scores.py trees OUT.jsonl SEED... [--set key=value ...]
    python tools/passage_gate_scores.py score OUT.jsonl TREES.jsonl... [--depth K] [--set key=value ...]

``trees`` builds the first tree of each ``build.seed`` with the passage gate off (``build.passage_gate=-1``), as the
default build would, and appends each to OUT.jsonl. ``score`` reads trees (that file, or a run directory's
``trees.jsonl``) and writes one line per passage retrieved (top ``--depth``, default 3) for each node and each
dropped proposal: the tree, the query, whether the tree holds the passage, both cosines (computed as the gate
computes them), the title and the start of the text. Labels (keep / strike) are added by reading. The scores and
labels behind the default threshold are in docs/methods.md ("The passage gate").
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np


def _config(overrides: list[str]):  # type: ignore[no-untyped-def]
    from rubricforge.config import load_config

    return load_config(None, overrides)


def _args(argv: list[str]) -> tuple[list[str], list[str], dict[str, str]]:
    positional, overrides, options = [], [], {}
    it = iter(argv)
    for a in it:
        if a == "--set":
            overrides.append(next(it))
        elif a.startswith("--"):
            options[a[2:]] = next(it)
        else:
            positional.append(a)
    return positional, overrides, options


async def _trees(out: Path, seeds: list[int], overrides: list[str]) -> None:
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient
    from rubricforge.pipelines.tree.evidence_tree import TreeBuilder
    from rubricforge.pipelines.tree.seeds import sample_seeds

    base = [*overrides, "build.passage_gate=-1"]
    cfg = _config(base)
    index = CorpusIndex.from_config(cfg)
    client = LLMClient(cfg.llm)
    with ToolBox.from_config(cfg, index=index) as tools:
        builder = TreeBuilder(cfg, client, tools, index.aembed_queries, index.corpus_hash)
        for n in seeds:
            seed = sample_seeds(index.iter_passages(), 1, seed=n)[0]
            tree = await builder.build(f"seed{n}", seed)
            with out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"seed": n, "tree": tree.model_dump(mode="json")}, ensure_ascii=False) + "\n")
            print(f"seed {n}: {seed.query!r}, {len(tree.nodes)} nodes", flush=True)
    await client.aclose()
    index.close()


def _score(out: Path, paths: list[str], depth: int, overrides: list[str]) -> None:
    from rubricforge.corpora.embedding import passage_input
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.tools import ToolBox

    cfg = _config(overrides)
    index = CorpusIndex.from_config(cfg)
    rows = []
    with ToolBox.from_config(cfg, index=index) as tools:
        for path in paths:
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                tree = json.loads(line)["tree"]
                root = tree["nodes"][tree["root_id"]]["query"]
                held = {p for node in tree["nodes"].values() for p in node["passage_ids"]}
                queries = [n["query"] for n in tree["nodes"].values()] + [d["query"] for d in tree["dropped"]]
                for query in dict.fromkeys(queries):
                    snippets = tools.search_snippets([query], depth)
                    q, r = index.embed_queries([query, root])
                    vectors = index.embedder.embed_passages([passage_input(s.title, s.text) for s in snippets])
                    for rank, (s, v) in enumerate(zip(snippets, vectors, strict=True), 1):
                        rows.append({"tree": tree["id"], "root": root, "query": query, "rank": rank,
                                     "in_tree": s.passage_id in held, "passage_id": s.passage_id,
                                     "query_cosine": round(float(np.dot(v, q)), 4),
                                     "root_cosine": round(float(np.dot(v, r)), 4),
                                     "title": s.title, "text": " ".join(s.text.split())[:160]})
    index.close()
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} passages scored -> {out}")


def main(argv: list[str]) -> int:
    positional, overrides, options = _args(argv)
    if len(positional) < 3 or positional[0] not in {"trees", "score"}:
        print(__doc__)
        return 2
    command, out, rest = positional[0], Path(positional[1]), positional[2:]
    if command == "trees":
        asyncio.run(_trees(out, [int(s) for s in rest], overrides))
    else:
        _score(out, rest, int(options.get("depth", 3)), overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

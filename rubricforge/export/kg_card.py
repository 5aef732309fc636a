"""The dataset card of a KG run: the card header and tables of :mod:`rubricforge.export.card`, with the KG
statistics — graph size and degree distribution, sampling rejections per constraint, filter drop rates,
hop, shape and difficulty distributions — and the calls, tokens and cost per stage."""

from __future__ import annotations

from typing import Any, Literal

from rubricforge.export.card import _cost, _header, _num, _pct, _table, quality_section
from rubricforge.export.kg import KG_COLUMNS

KG_CONFIGS = ("drtulu", "drtulu_rubric", "default", "trl")


def _graph(s: dict[str, Any]) -> str:
    g, c = s["graph"], s["counts"]
    rows = [["Passages scanned for title links", _num(c["passages"])],
            ["Passages read by the relation extractor", f"{_num(c['extracted'])} ({_num(c['extraction_failures'])} failed calls)"],
            ["LLM triples kept (one sentence writes both names and the relation) / dropped",
             f"{_num(c['triples'])} / {_num(c['ungrounded_triples'])}"],
            ["Relations read off sentences without the LLM (two names, a verb phrase between)",
             _num(c.get("stated_edges", 0))],
            ["Nodes (by kind)", f"{_num(g['nodes'])} ({', '.join(f'{k} {v}' for k, v in g['nodes_by_kind'].items())})"],
            ["Edges (by source)", f"{_num(g['edges'])} ({', '.join(f'{k} {v}' for k, v in g['edges_by_source'].items())})"],
            ["Weakly connected components (largest)", f"{_num(g['components'])} ({_num(g['largest_component'])})"],
            ["Isolated nodes", _num(g["isolated_nodes"])],
            ["Degree mean / max", f"{_num(g['degree']['mean'], 2)} / {_num(g['degree']['max'])}"]]
    hist = _table(["Degree", "Nodes"], [[k, _num(v)] for k, v in g["degree"]["histogram"].items()])
    rels = ", ".join(f"`{k}` ({v})" for k, v in g["top_relations"].items()) or "none"
    return _table(["Graph", "Value"], rows) + f"\n\nMost frequent relations: {rels}\n\n" + hist


def _sampling(s: dict[str, Any]) -> str:
    rej = s["sampling"]["rejected"]
    rows = [[k, _num(v)] for k, v in sorted(rej.items())]
    return (f"{_num(s['counts']['paths'])} subgraph(s) kept after {_num(s['sampling']['attempts'])} candidate(s).\n\n"
            + _table(["Rejected by", "Candidates"], rows or [["(none)", "0"]]))


def _drops(s: dict[str, Any]) -> str:
    rows = [[reason, _num(d["count"]), _pct(d["rate"])] for reason, d in s["drops"].items()]
    rows.append(["**retained**", _num(s["counts"]["retained"]), _pct(s["retained_rate"])])
    verdicts = ", ".join(f"{k} {_num(v)}" for k, v in (s.get("judge_verdicts") or {}).items()) or "none"
    return (_table(["Outcome", "Questions", "Share of generated questions"], rows)
            + f"\n\nThe derivation judge's verdicts (can the answer, and only it, be derived from the hop facts?): "
            f"{verdicts}.")


def _distributions(s: dict[str, Any]) -> str:
    hops = _table(["Hops", "Examples"], [[str(k), _num(v)] for k, v in s["hops"].items()] or [["-", "0"]])
    diff = _table(["Difficulty", "Examples"], [[k, _num(v)] for k, v in s["difficulty"].items()])
    shapes = ", ".join(f"{k} {v}" for k, v in s["shapes"].items()) or "none"
    return f"{hops}\n\n{diff}\n\nShapes: {shapes}. Long-form variants with RACE rubrics: {_num(s['counts']['longform'])}."


def render_kg_card(stats: dict[str, Any], layout: Literal["local", "hub"] = "local", repo_id: str | None = None) -> str:
    c = stats["counts"]
    name = repo_id or f"path/to/{stats['run']}/dataset"
    load = "load_from_disk" if layout == "local" else "load_dataset"
    empty = f"\n> **This dataset is empty.** {stats['empty_reason']}.\n" if stats["empty_reason"] else ""
    return f"""{_header(stats, layout, kind="knowledge-graph", configs=KG_CONFIGS)}
# rubricforge KG dataset: {stats['run']}

Multi-hop questions synthesised from a knowledge graph over the corpus (MindDR §4.1, §4.5, §4.6):
graph construction (typed relations that a sentence states, read off the text or extracted by the LLM and
checked against their sentence; the corpus's title links guide sampling but are never a hop) → subgraph
sampling under reachability, necessity and independence checks → question generation, condition
obfuscation and rewriting → deterministic checks (no mask left, a whole-entity answer of the asked type,
no leak, every hop's condition) → direct-answer, single-retrieval and derivation filters. Each row has the
answer with aliases, the key entity set, the hop count, a difficulty label and the subgraph with its
passage ids; retained rows also get a long-form research query with RACE rubrics when the model wrote
valid ones.
{empty}
- **Rows:** {_num(c['retained'])} retained of {_num(c['questions'])} generated questions, from {_num(c['paths'])} subgraph(s)
- **Corpus snapshot:** `{stats['corpus_hash'] or 'unknown'}` (source `{stats['corpus_source']}`)
- **Models:** generator `{stats['models']['generator']}`, judge `{stats['models']['judge']}`

## Graph

{_graph(stats)}

## Subgraph sampling

Every candidate is checked in this order: structure, path necessity (no shortcut edge or passage),
structural independence (branches), reasoning reachability (each hop's passage retrieved by the
search tool); dead ends and duplicates are walks that could not be used.

{_sampling(stats)}

## Filters: drop rates

Each generated question is dropped by the first step that fires (the deterministic checks first, then the
judge's filters); rates are over generated questions.

{_drops(stats)}

## Hops, shapes and difficulty (retained)

{_distributions(stats)}

## Quality gates

{quality_section(stats.get('quality') or {})}

## LLM calls, tokens and cost

{_cost(stats)}

## Configs and schema

```python
from datasets import {load}
ds = {load}("{name if layout == 'hub' else name + '/hf'}"{', "rubricforge"' if layout == 'hub' else ''})
```

| Config (Hub) | Local | Contents |
|---|---|---|
| `default` | `drtulu/` | DR Tulu exact-answer rows: `dataset` = `rl_rag_exact_answer` (DR Tulu's exact-answer verifier), `ground_truth` = JSON list of the answer and its aliases; what `--dataset_mixer_list <repo> 1.0` loads |
| `drtulu_rubric` | `drtulu_rubric/` | the RACE variant in DR Tulu's rubric layout (`dataset` = `general_rubric`); separate because DR Tulu's rubric buffer (`--use_rubric_buffer`) needs `rubrics` in every row |
| `rubricforge` | `hf/` | the columns below |
| `trl` | `trl/` | the rubricforge columns plus the agent `prompt` |

{_table(["Column", "Type", "Meaning"], [[f"`{k}`", t, m] for k, (t, m) in KG_COLUMNS.items()])}

## License

Rows quote and paraphrase the corpus (for Wikipedia-derived corpora CC BY-SA 4.0).
"""  # noqa: E501  (markdown table rows of the card cannot wrap)

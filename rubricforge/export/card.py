"""The dataset card (``dataset/README.md``): a Hugging Face card with a YAML header, the statistics of
DeepRubric Tables 6–7 beside the paper's, the cost ledger, the schema and how to load each view.

``render_card(stats, layout="local")`` points the header's configs at the files in the dataset
folder; ``layout="hub"`` at the folders ``DatasetDict.push_to_hub`` writes (``data/``, ``drtulu/``,
``trl/``).
"""

from __future__ import annotations

from typing import Any, Literal

import yaml

from rubricforge.export import views
from rubricforge.export.layout import config_path, hub_config
from rubricforge.export.stats import OTHER, PAPER_TABLE6, PAPER_TABLE7, REVISION_RULES

LICENSES = {"default": "cc-by-sa-4.0", "wiki18": "cc-by-sa-4.0", "openscholar": "odc-by"}
TREE_CONFIGS = ("drtulu", "default", "trl")  # export configs, the Hub's default (DR Tulu's rows) first


def _header(stats: dict[str, Any], layout: str, kind: str = "evidence-tree",
            configs: tuple[str, ...] = TREE_CONFIGS) -> str:
    n = stats["counts"]["retained"]
    size = "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "n>100K"
    meta = {
        "license": LICENSES.get(stats["corpus_source"], "other"),
        "language": ["en"],
        "task_categories": ["question-answering", "text-generation"],
        "tags": ["rubrics", "deep-research", "reinforcement-learning", kind, "rubricforge"],
        "pretty_name": f"rubricforge {stats['run']}",
        "size_categories": [size],
        "configs": [{"config_name": hub_config(name), "data_files": [{"split": "train", "path": config_path(name, layout)}]}
                    for name in configs],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def quality_section(q: dict[str, Any]) -> str:
    """The quality gates' counts (decontamination, dedup) and every dropped question."""
    if not set(q) - {"exported"}:
        return "No quality gates ran."
    lines = []
    if d := q.get("decontamination"):
        bench = ", ".join(f"{k} ({v} prompts)" for k, v in d["benchmarks"].items()) or "none"
        emb = f"embedding cosine ≥ {d['embedding_threshold']}" if d["embedding_threshold"] is not None else "no embedding test"
        by = "; ".join(f"{k}: {v}" for k, v in {**d["by_benchmark"], **d["by_method"]}.items())
        lines.append(f"- **Decontamination** against {bench}: a shared {d['ngram']}-gram or {emb}. "
                     f"{_num(d['dropped'])} of {_num(d['checked'])} questions dropped" + (f" ({by})" if by else "") + ".")
    else:
        lines.append("- **Decontamination**: off (`quality.decontaminate`).")
    if u := q.get("dedup"):
        lines.append(f"- **Semantic dedup** (cosine ≥ {u['threshold']}): {_num(u['within'])} duplicates within the "
                     f"dataset, {_num(u['previous'])} of {_num(u['previous_questions'])} questions of "
                     f"{_num(u['previous_datasets'])} previous dataset(s).")
    else:
        lines.append("- **Semantic dedup**: off (`quality.dedup_threshold`).")
    if lr := q.get("learnability"):
        hist = ", ".join(f"{k}: {v}" for k, v in lr["histogram"].items())
        lines.append(f"- **Learnability** (the generator's closed-book answer scored with the example's own rubric): "
                     f"mean {_num(lr['mean'], 3)} over {_num(lr['scored'])} scored ({_num(lr['unscored'])} unscored); "
                     f"{_num(lr['too_easy'])} too easy (score ≥ {lr['threshold']}), "
                     f"{'dropped' if lr['drop'] else 'kept and flagged'}. Distribution: {hist}.")
    else:
        lines.append("- **Learnability**: not measured (`quality.learnability`).")
    lines.append(f"- **Exported rows:** {_num(q.get('exported'))}")
    if q.get("dropped"):
        rows = [[f"`{x['id']}`", x["gate"], x["method"], _num(x["score"], 3),
                 f"{x['benchmark']} #{x['item_id']}: {x['matched']}" if x["gate"] == "decontamination"
                 else str(x.get("duplicate_of", "closed-book score"))] for x in q["dropped"]]
        lines.append("\n" + _table(["Dropped", "Gate", "Method", "Score", "Matches"], rows))
    return "\n".join(lines)


def _table6(s: dict[str, Any]) -> str:
    c, r, t, p = s["counts"], s["rates"], s["trees"], PAPER_TABLE6
    ex, cand = s["retained_examples"], s["generated_candidates"]

    def split(e: dict[str, Any]) -> str:
        return f"{_pct(e['factual_share'])} / {_pct(e['logical_share'])}"

    rows = [
        ["Generated examples", _num(c["generated"]), "", _num(p["generated"])],
        ["Final retained (" + " + ".join(s["keep_decisions"]) + ")", f"{_num(c['retained'])} ({_pct(r['retained'])})",
         "", f"{_num(p['retained'])} ({_pct(p['retained_rate'])})"],
        ["Trees", _num(c["trees"]), "", ""],
        ["Trees cut by invalid model answers (invalid answers)", f"{_num(c['cut_trees'])} ({_num(c['invalid_answers'])})",
         "", ""],
        ["Tree depth (configured / reached)", f"{t['depth_configured']} / {_num(t['depth_max'])}", "", _num(p["tree_depth"])],
        ["Nodes per tree", _num(t["nodes_per_tree"]), "", _num(p["nodes_per_tree"])],
        ["Leaves per tree", _num(t["leaves_per_tree"]), "", _num(p["leaves_per_tree"])],
        ["Selected leaves per example", _num(ex["selected_leaves_per_example"]),
         _num(cand["selected_leaves_per_example"]), _num(p["selected_leaves_per_example"])],
        ["Evidence passages per selected leaf", _num(ex["passages_per_selected_leaf"]),
         _num(cand["passages_per_selected_leaf"]), _num(p["passages_per_selected_leaf"])],
        ["Rubric criteria per example", _num(ex["criteria_per_example"]), _num(cand["criteria_per_example"]),
         _num(p["criteria_per_example"])],
        ["Factual / Logical", split(ex), split(cand), f"{_pct(p['factual_share'])} / {_pct(p['logical_share'])}"],
        ["Factual criteria whose evidence is an exact passage span", _pct(ex["exact_span_evidence_share"]),
         _pct(cand["exact_span_evidence_share"]), ""],
        ["Revision rate (REVISE / verified)", _pct(r["revision"]), "", _pct(p["revision_rate"])],
        ["Drop rate (DROP / verified)", _pct(r["drop"]), "", _pct(p["drop_rate"])],
        ["Keep rate (KEEP / verified)", _pct(r["keep"]), "", ""],
        ["Unparseable verifier output (/ verified)", _pct(r["unparseable"]), "", ""],
        ["Rule-check failures (/ generated, not verified)", _pct(r["rule_failure"]), "", ""],
        ["Tree generation model", f"`{s['models']['tree_generation']}`", "", p["tree_generation_model"]],
        ["Quality audit model", f"`{s['models']['quality_audit']}`", "", p["quality_audit_model"]],
    ]
    return _table(["Statistic", "This run (retained)", "This run (all candidates)", "Paper (Table 6)"], rows)


def _decisions(s: dict[str, Any]) -> str:
    c = s["counts"]
    rows = [[d, _num(n), _pct(n / c["verified"] if c["verified"] else None)] for d, n in c["decisions"].items()]
    rows += [["(rule-check failure, not verified)", _num(c["rule_failed"]), ""],
             ["(not verified yet)", _num(c["not_verified"]), ""],
             ["(REVISE whose revision failed the rule checks)", _num(c["revise_rule_failed"]), ""]]
    return _table(["Decision", "Count", "Share of verified"], rows)


def _table7(s: dict[str, Any]) -> str:
    rr = s["revision_reasons"]
    rows = [[cat, _num(rr["counts"][cat]), _pct(rr["rates"][cat]), _pct(PAPER_TABLE7[cat])] for cat in rr["counts"]]
    rules = "\n".join(f"- **{name}**: `{pattern}`" for name, pattern in REVISION_RULES)
    tags = ", ".join(f"`{t}` ({n})" for t, n in rr["top_error_tags"].items()) or "none"
    return (f"{rr['n_revised']} REVISE verdicts, one primary reason each.\n\n"
            + _table(["Primary revision reason", "Count", "Rate", "Paper (Table 7)"], rows)
            + "\n\nEach REVISE gets the category of its first error tag (then its first major issue) that matches "
              "one of these regular expressions, tried in this order on the lower-cased text with `_`/`-` read as "
              f"spaces; nothing matching is \"{OTHER}\":\n\n{rules}\n\nMost frequent error tags: {tags}")


def _repairs(s: dict[str, Any]) -> str:
    repairs = s.get("repairs") or {}
    rows = [[category, _num(n["rewritten"]), _num(n["removed"]), _pct(PAPER_TABLE7[category])]
            for category, n in repairs.items()]
    return ("Made without a model before the rule checks (and in verifier revisions), each in the Table 7 category it "
            "repairs; the paper's column is its verifier's share of revisions, for comparison of the mix.\n\n"
            + _table(["Category (Table 7)", "Rewritten", "Removed", "Paper (Table 7 rate)"], rows))


def _cost(s: dict[str, Any]) -> str:
    cost = s["cost"]
    per_ex = cost["by_stage_per_retained_example"]

    def row(name: str, e: dict[str, float], per: dict[str, float] | None) -> list[str]:
        return [name, _num(int(e["calls"])), _num(int(e["prompt_tokens"])), _num(int(e["completion_tokens"])),
                f"${e['cost_usd']:.4f}", _num(int(e["cache_hits"])), _num(int(e["failures"])),
                _num(per["calls"], 2) if per else "n/a", _num(per["tokens"], 0) if per else "n/a",
                f"${per['cost_usd']:.4f}" if per else "n/a"]

    head = ["Stage", "Calls", "Prompt tokens", "Completion tokens", "Cost", "Cache hits", "Failures",
            "Calls / retained ex.", "Tokens / retained ex.", "Cost / retained ex."]
    rows = [row(k, v, per_ex.get(k)) for k, v in cost["by_stage"].items()]
    rows.append(row("**total**", cost["total"], cost["per_retained_example"]))
    roles = _table(["Role", "Calls", "Prompt tokens", "Completion tokens", "Cost"],
                   [[k, _num(int(v["calls"])), _num(int(v["prompt_tokens"])), _num(int(v["completion_tokens"])),
                     f"${v['cost_usd']:.4f}"] for k, v in cost["by_role"].items()])
    per_tree = cost["per_tree"]
    tree_line = (f"Per tree: {_num(per_tree['calls'], 1)} calls, {_num(per_tree['tokens'], 0)} tokens, "
                 f"${per_tree['cost_usd']:.4f}." if per_tree else "")
    return _table(head, rows) + "\n\n" + roles + ("\n\n" + tree_line if tree_line else "")


def render_card(stats: dict[str, Any], layout: Literal["local", "hub"] = "local", repo_id: str | None = None) -> str:
    """The card's Markdown text."""
    c = stats["counts"]
    name = repo_id or f"path/to/{stats['run']}/dataset"
    empty = (f"\n> **This dataset is empty.** {stats['empty_reason']}. Open the viewer (`rubricforge view "
             f"<run dir>`, the folder above this one) to see every tree, candidate and verdict.\n"
             if stats["empty_reason"] else "")
    partial = (f"\n> **Partial export.** The run did not finish (`{stats['partial']}`): these rows are what it "
               f"finished. Run the same command again to finish it; its export replaces this one.\n"
               if stats.get("partial") else "")
    rejects = (f"\n{len(stats['unreadable_records'])} logged record(s) could not be read and were skipped: "
               + "; ".join(stats["unreadable_records"][:10]) + "\n" if stats["unreadable_records"] else "")
    load = "load_from_disk" if layout == "local" else "load_dataset"
    return f"""{_header(stats, layout)}
# rubricforge dataset: {stats['run']}

Research questions paired with evidence-grounded rubrics, built by `rubricforge build` with the
evidence-tree pipeline of DeepRubric (top-down evidence trees → bottom-up query and rubric
co-generation → deterministic rule checks → KEEP / REVISE / DROP verification). Rubric source:
`{stats['rubric_source']}`. Retained decisions: {', '.join(stats['keep_decisions'])}.
{partial}{empty}
- **Rows:** {_num(c['retained'])} retained of {_num(c['generated'])} generated, from {_num(c['trees'])} evidence
  tree(s); {_num((stats.get('quality') or {}).get('exported', c['retained']))} exported after the quality gates
- **Corpus snapshot:** `{stats['corpus_hash'] or 'unknown'}` (source `{stats['corpus_source']}`)
- **Models:** tree generation `{stats['models']['tree_generation']}`, quality audit `{stats['models']['quality_audit']}`
{rejects}
## Statistics (DeepRubric Table 6)

{_table6(stats)}

Definitions: retained % is over generated examples; revision, drop, keep and unparseable rates are over
verified candidates (candidates that fail the deterministic rule checks are never verified); tree
statistics are means over all trees; example statistics are over retained rows and, in the second
column, over every generated candidate with rubrics; passages per selected leaf counts the corpus
passages each selected tree leaf was grounded in; a factual criterion's evidence is an exact passage span
when every evidence string is, verbatim, a passage sentence its source leaf selected (with offsets).

### Verifier decisions

{_decisions(stats)}

## Revision reasons (DeepRubric Table 7)

{_table7(stats)}

### Deterministic repairs

{_repairs(stats)}

## Quality gates

{quality_section(stats.get('quality') or {})}

## LLM calls, tokens and cost

From the run manifest's ledger (all invocations of the run; cached calls cost nothing).

{_cost(stats)}

## Configs and schema

| Config (Hub) | Local | Contents |
|---|---|---|
| `default` | `drtulu/` | DR Tulu RL rows (`messages`, `ground_truth` JSON string, `dataset`, `source`): what DR Tulu's `--dataset_mixer_list <repo> 1.0` loads |
| `rubricforge` | `hf/` | one row per exported example with provenance |
| `trl` | `trl/` | TRL-ready: the rubricforge columns plus a conversational `prompt` (agent system prompt of DeepRubric App. D + question) |

```python
from datasets import {load}
ds = {load}("{name if layout == 'hub' else name + '/hf'}"{', "rubricforge"' if layout == 'hub' else ''})
```

Local folders: `hf/`, `drtulu/`, `trl/` (`datasets.save_to_disk`), `data.parquet`, `data.jsonl`,
`drtulu.parquet`, `drtulu.jsonl`, `trl.parquet`, `stats.json` (every number on this card).
`rubricforge convert` turns the rows into DeepRubric, RaR, verl and other formats.

### `rubricforge` columns

{_table(["Column", "Type", "Meaning"], [[f"`{k}`", t, m] for k, (t, m) in views.COLUMNS.items()])}

`drtulu`: `id`, `source` (`rubricforge_<run>`), `question_type` (`long_form`), `messages`
(`[{{"role": "user", "content": question}}]`), `ground_truth` (JSON string
`{{"query", "rubrics": [{{"description", "weight", "title"}}]}}`), `dataset` (`general_rubric`), as in
DR Tulu's RL data. `trl`: the rubricforge columns plus `prompt` (`[system, user]` messages) and
`system_prompt_hash`.

## License

Rows quote and paraphrase the corpus. For Wikipedia-derived corpora (the default corpus, wiki-18) the
text is CC BY-SA 4.0, so the dataset is shared under the same license; for other corpora set the
license of your source.
"""  # noqa: E501  (markdown table rows of the card cannot wrap)

"""Embedded-model benchmark: each packaged model on the evidence-tree pipeline's own steps, same run.

For each of ``--articles`` default-corpus articles (one per topic label, seed 0), each model runs,
with the pipeline's prompts and JSON-schema grammars:

1. *proposal* (Fig. 9) for the article's title as root query, its passage as evidence: the share of
   sub-queries that are real questions (question form: ends with ``?`` or starts with an interrogative;
   not a copy: no passage sentence holds 80% of its content words; on topic: shares a content word
   with the title or the passage's first sentence);
2. *extraction*, both ways: Fig. 10 free text (share of statements the passage supports, by the rule
   checks' own measure: >= 75% of content words in one passage sentence; share that are exact substrings)
   and sentence selection (by construction exact; its seconds);
3. *merge*, both modes, over a tree made of the model's own answers (root = title, leaves = its first
   three proposals, each with the sentences it selected for that leaf): the share of candidates that pass
   the rule checks (``build.min_rubrics`` = 5), and calls per candidate.

Seconds per call are wall time of the call (no LLM cache). Both models run in the same process, one
after the other, so their ratio is comparable even on a busy machine::

    .venv/bin/python benchmarks/models.py --articles 3 --json runs/bench-models.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rubricforge.config import Config  # noqa: E402
from rubricforge.corpora.chunking import chunk_document  # noqa: E402
from rubricforge.corpora.default_corpus import iter_default_corpus  # noqa: E402
from rubricforge.io.rejects import Rejects  # noqa: E402
from rubricforge.llm import LLMClient  # noqa: E402
from rubricforge.llm.local_model import MODELS  # noqa: E402
from rubricforge.pipelines.tree import evidence_tree as et  # noqa: E402
from rubricforge.pipelines.tree.rules import EVIDENCE_MATCH, check_rules, content_words, split_sentences, support  # noqa: E402
from rubricforge.pipelines.tree.seeds import root_query, sample_seeds  # noqa: E402
from rubricforge.pipelines.tree.synthesis import synthesize  # noqa: E402
from rubricforge.schema import Snippet  # noqa: E402

INTERROGATIVES = {"what", "how", "why", "when", "where", "which", "who", "whom", "whose", "to", "does", "do", "did",
                  "is", "are", "was", "were", "can", "could", "should", "would", "will", "has", "have", "in"}
COPY = 0.8


class TimedClient:
    """An LLM client that records every call's stage, seconds and validity."""

    def __init__(self, client: LLMClient):
        self.client, self.calls = client, []

    async def generate(self, role: str, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        start = time.perf_counter()
        res = await self.client.generate(role, messages, **kwargs)
        self.calls.append({"stage": kwargs.get("stage", ""), "seconds": time.perf_counter() - start, "ok": res.ok})
        print(f"call       {self.client.model_name(role)} {self.calls[-1]['stage']:<16} {self.calls[-1]['seconds']:7.1f} s  "
              f"{'ok' if res.ok else 'FAILED'}  {(res.text or '')[:160]!r}", flush=True)
        return res

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def is_real_question(query: str, title: str, sentences: list[str]) -> dict[str, bool]:
    words = query.strip().lower().split()
    form = query.strip().endswith("?") or (bool(words) and words[0] in INTERROGATIVES and words[0] != "in")
    copied = any(support(query, s) >= COPY for s in sentences)
    topic = set(content_words(title)) | set(content_words(sentences[0] if sentences else ""))
    on_topic = bool(topic & set(content_words(query)))
    return {"question_form": form, "not_copied": not copied, "on_topic": on_topic,
            "real": form and not copied and on_topic}


def articles(n: int) -> list[tuple[str, Snippet]]:
    docs = list(iter_default_corpus(Rejects()))
    seeds = sample_seeds(docs, n, seed=0)
    by_id = {d.id: d for d in docs}
    out = []
    for seed in seeds:
        doc = by_id[seed.passage_id]
        passage = chunk_document(doc, 200, 40)[0]
        text = passage.text if len(passage.text) <= 600 else passage.text[:passage.text.rfind(" ", 0, 599)] + " \u2026"
        out.append((root_query(doc), Snippet(id="s" + passage.id, passage_id=passage.id, title=doc.title, text=text)))
    return out


async def one_model(model: str, items: list[tuple[str, Snippet]], cfg: Config, modes: list[str]) -> dict[str, Any]:
    cfg = cfg.model_copy(deep=True)
    cfg.llm.generator.model = model
    client = TimedClient(LLMClient(cfg.llm))
    proposals, free, merges = [], [], defaultdict(list)
    for title, snippet in items:
        sentences = [s.text for s in split_sentences(snippet.text, snippet.passage_id)]
        builder = et.TreeBuilder(cfg, client, None, lambda texts: None)  # type: ignore[arg-type]
        state = et._TreeState("bench", _seed(title, snippet), "", 10)
        root = state.add(title, parent=None, snippets=[snippet])
        await builder._extract(state, [root])  # sentence selection for the root (evidence for the proposal)
        queries = await builder._propose(state, root)
        proposals += [{"title": title, "query": q, **is_real_question(q, title, sentences)} for q in queries]
        free_cfg = cfg.model_copy(deep=True)
        free_cfg.build.extract = "free"
        statements = await et.TreeBuilder(free_cfg, client, None, lambda t: None)._write_statements(state, root, snippet)  # type: ignore[arg-type]
        free += [{"title": title, "statement": s.text,
                  "supported": max((support(s.text, x) for x in sentences), default=0) >= EVIDENCE_MATCH,
                  "exact": s.text in snippet.text} for s in statements]
        for q in queries[:3]:
            state.add(q, parent=root, snippets=[snippet])
        await builder._extract(state, [state.nodes[c] for c in root.children])
        builder.close()
        tree = state.tree()
        for mode in modes:
            mcfg = cfg.model_copy(deep=True)
            mcfg.build.merge = mode
            before = len(client.calls)
            candidate = await synthesize(tree, client, mcfg)
            failures = check_rules(candidate, tree, mcfg)
            merges[mode].append({"title": title, "passed": not failures, "calls": len(client.calls) - before,
                                 "question": candidate.question, "failures": failures[:5]})
    await client.client.aclose()
    return {"proposals": proposals, "free_statements": free, "merges": dict(merges), "calls": client.calls}


def _seed(title: str, snippet: Snippet) -> Any:
    from rubricforge.pipelines.tree.seeds import Seed

    return Seed(index=0, passage_id=snippet.passage_id, doc_id=snippet.passage_id, title=title, topic="", query=title)


def summarize(r: dict[str, Any]) -> dict[str, Any]:
    def share(rows: list[dict], key: str) -> float | None:
        return round(mean(1.0 if x[key] else 0.0 for x in rows), 3) if rows else None

    by_stage: dict[str, list[float]] = defaultdict(list)
    for c in r["calls"]:
        stage = "merge (single)" if c["stage"] == "merge" else c["stage"]
        by_stage[stage].append(c["seconds"])
    return {
        "proposals": len(r["proposals"]), "real_question_share": share(r["proposals"], "real"),
        "question_form_share": share(r["proposals"], "question_form"), "not_copied_share": share(r["proposals"], "not_copied"),
        "on_topic_share": share(r["proposals"], "on_topic"),
        "free_statements": len(r["free_statements"]), "free_supported_share": share(r["free_statements"], "supported"),
        "free_exact_share": share(r["free_statements"], "exact"),
        **{f"merge_{m}_pass_share": share(rows, "passed") for m, rows in r["merges"].items()},
        **{f"merge_{m}_calls_per_candidate": round(mean(x["calls"] for x in rows), 2) for m, rows in r["merges"].items()},
        "seconds_per_call": {k: round(mean(v), 2) for k, v in sorted(by_stage.items())},
        "failed_calls": sum(1 for c in r["calls"] if not c["ok"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--articles", type=int, default=3)
    ap.add_argument("--models", default=",".join(reversed(list(MODELS))), help="comma list; the first is the baseline")
    ap.add_argument("--merge-modes", default="single,stepwise", help="comma list of merge modes to run")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    cfg = Config.model_validate({"llm": {"cache_path": ""}})
    items = articles(args.articles)
    print(f"data       {len(items)} default-corpus articles: {', '.join(t for t, _ in items)}", flush=True)
    results, summaries = {}, {}
    for model in args.models.split(","):
        start = time.perf_counter()
        results[model] = asyncio.run(one_model(model, items, cfg, args.merge_modes.split(",")))
        summaries[model] = summarize(results[model])
        print(f"model      {model}  ({time.perf_counter() - start:.0f} s)\n" +
              json.dumps(summaries[model], indent=2), flush=True)
    models = list(summaries)
    base = summaries[models[0]]["seconds_per_call"]
    for model in models[1:]:
        ratios = {k: round(v / base[k], 2) for k, v in summaries[model]["seconds_per_call"].items() if base.get(k)}
        print(f"ratio      seconds per call, {model} / {models[0]}: {json.dumps(ratios)}")
    for model in models:
        for p in results[model]["proposals"]:
            print(f"proposal   {model[:22]:<22} {'REAL' if p['real'] else '    '} [{p['title']}] {p['query']}")
        for mode, rows in results[model]["merges"].items():
            for m in rows:
                print(f"merge      {model[:22]:<22} {mode:<8} {'PASS' if m['passed'] else 'fail'} {m['question'][:100]!r} "
                      f"{'; '.join(m['failures'])[:160]}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summaries": summaries, "results": results}, indent=2))


if __name__ == "__main__":
    main()

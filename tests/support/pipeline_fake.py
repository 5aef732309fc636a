"""A fake model for the evidence-tree pipeline, served by :class:`llm_fakes.FakeOpenAI`: it answers every
request with JSON that is valid for the request's output schema, built from the prompt.

Statements are sentences of the passage shown (or its first three sentence ids), proposals the first words of the parent's statements,
grounding selects every passage and never calls a node atomic, the merge picks up to three leaves with
distinct evidence and writes one factual rubric quoting each plus logical rubrics up to six and a question naming
what they are about (so the repairs and the rule checks pass), and the verifier answers KEEP. Tokens are
characters / 4 of the prompt and of the answer.
The answers depend on the prompt only, so two runs over the same trees get the same answers.
:class:`Faulty` wraps it with injected provider faults (``benchmarks/synthesis.py`` uses both), and
:class:`CutOneRoot` makes one tree's root decomposition unreadable; :func:`pipeline_cfg` points a build at it.
"""

from __future__ import annotations

import json
import random
import re
import threading
from typing import Any

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI, Reply
from support.config import derive
from support.llm_fakes import litellm_llm_config

TREE_MARKER = "Search tree (compact JSON):"
LOGICAL = ["Explains how the selected facets relate to each other instead of listing them separately.",
           "Attributes every factual claim to a cited source passage.",
           "Distinguishes well-supported claims from uncertain or disputed ones.",
           "Ends with a conclusion that weighs the strength of the available evidence.",
           "Organises the answer into sections that follow the question's facets."]
N_RUBRICS = 6


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if len(s.split()) >= 4]


def _extract(prompt: str, schema: dict) -> dict:
    summary = prompt.split("Webpage summary:", 1)[1].rsplit("\nReturn JSON", 1)[0]
    title, _, text = summary.strip().partition(": ")
    return {"statements": [s[:240] for s in _sentences(text)[:3]] or [f"{title} is described in the corpus."]}


def _select(prompt: str, schema: dict) -> dict:
    items = schema["properties"]["sentence_ids"]["items"]
    return {"sentence_ids": (items.get("enum") or [items["const"]])[:3]}


def _propose(prompt: str, schema: dict) -> dict:
    limit = schema["properties"]["queries"].get("maxItems", 3)
    statements = json.loads(re.search(r"Statements \(sample, deduped top 8\): (\[.*\])", prompt).group(1))
    queries = [" ".join(re.findall(r"[\w'-]+", s)[:8]) for s in statements]
    return {"queries": [q for q in queries if q][:limit]}


def _ground(prompt: str, schema: dict) -> dict:
    items = schema["properties"]["supporting_ids"]["items"]
    answer: dict[str, Any] = {"supporting_ids": items.get("enum") or [items["const"]]}
    if "atomic" in schema["properties"]:
        answer["atomic"] = False
    return answer


def _merge(prompt: str, schema: dict) -> dict:
    tree = json.loads(prompt.split(TREE_MARKER, 1)[1])
    chosen: dict[str, str] = {}  # leaf id -> its first statement (distinct ones only)
    for leaf in tree["leaves"]:
        if leaf["evidence"] and leaf["evidence"][0] not in chosen.values() and len(chosen) < 3:
            chosen[leaf["id"]] = leaf["evidence"][0]
    ids = list(chosen) or [tree["leaves"][0]["id"]]
    rubrics = [{"id": f"R{i}", "type": "factual", "description": f"Reports that {text}", "weight": 0.9,
                "source_leaf_ids": [leaf], "evidence": [text]} for i, (leaf, text) in enumerate(chosen.items(), 1)]
    rubrics += [{"id": f"R{len(rubrics) + i}", "type": "logical", "description": d, "weight": 0.5,
                 "source_leaf_ids": ids, "evidence": []} for i, d in enumerate(LOGICAL[:N_RUBRICS - len(rubrics)], 1)]
    topic = tree["nodes"][0]["query"] if tree["nodes"] else tree["leaves"][0]["query"]
    # the question names what each factual rubric is about (the fake tree wanders off its root; a question about the
    # root alone leaves every factual rubric off topic, which the repairs remove)
    about = "; ".join(" ".join(text.split()[:5]) for text in chosen.values())  # 5 words: no leak (6)
    return {"question": f"What does the evidence establish about {topic} ({about}), and which of its facets remain open?",
            "selected_leaf_ids": ids, "selection_trace": "leaves with distinct evidence",
            "merge_trace": [{"inputs": ids, "output": "final question"}], "rubrics": rubrics}


def _verify(prompt: str, schema: dict) -> dict:
    return {"decision": "KEEP", "error_tags": [], "major_issues": [], "justification": "grounded in the leaves"}


# output model name prefix -> answer (evidence_tree.Statements / selection_model / proposal_model / grounding_model,
# synthesis.MergeOutput, verification.VerifyOutput)
ANSWERS = {"Statements": _extract, "SentenceSelection": _select, "Proposal": _propose, "Ground": _ground, "MergeOutput": _merge,
           "VerifyOutput": _verify}


def pipeline_answer(body: dict[str, Any], delay_s: float = 0.0) -> Reply:
    """The answer to one chat request of the pipeline (HTTP 400 for an output it does not know)."""
    fmt = (body.get("response_format") or {}).get("json_schema") or {}
    name = fmt.get("name", "")
    answer = next((fn for prefix, fn in ANSWERS.items() if name.startswith(prefix)), None)
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    if answer is None:
        return Reply(status=400, error=f"pipeline fake: no answer for output {name!r}")
    content = json.dumps(answer(prompt, fmt.get("schema") or {}), ensure_ascii=False)
    return Reply(content=content, delay_s=delay_s, prompt_tokens=len(prompt) // 4, completion_tokens=len(content) // 4)


FAULTS = [Reply(status=429, error="slow down"), Reply(status=500), Reply(status=503),
          Reply(body=b'{"id": "x", "object": "chat.completion", "choices": []}'), Reply(drop=True)]


class Faulty:
    """A responder that answers a share ``rate`` of the requests (drawn with ``seed``) with one of
    :data:`FAULTS` (429, 500, 503, an empty ``choices``, a dropped connection) and the rest with ``answer``."""

    def __init__(self, rate: float, seed: int = 0, answer: Any = pipeline_answer):
        self.rate, self.answer = rate, answer
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.faults = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            fault = self._random.random() < self.rate
            pick = self._random.choice(FAULTS)
            self.faults += fault
        return pick if fault else self.answer(body)


N_TREES = 3


def pipeline_cfg(base: Config, tmp_path, server: FakeOpenAI, run: str) -> Config:
    """``base`` with its run in ``tmp_path / run``, small trees, and every role on ``server`` (one retry)."""
    # the fake model's question asks about "facets that remain open", which no rubric checks: no coverage test here
    data = derive(base, f"run_dir={tmp_path / run}", f"build.n_trees={N_TREES}", "build.max_nodes=4",
                  "build.tree_concurrency=3", "build.check_coverage=false").model_dump(mode="json")
    data["llm"] = {**data["llm"], **litellm_llm_config(tmp_path, server, max_retries=1, concurrency=8)}
    return Config.model_validate(data)


class CutOneRoot:
    """The pipeline fake, except that one tree's root decomposition gets an answer that is not JSON (and so
    stays invalid through the re-prompts) while the request carries a seed in ``bad_seeds``."""

    def __init__(self, bad_seeds: set[int]):
        self.bad_seeds, self.root = bad_seeds, None
        self.invalid = 0
        self.seeds: list[tuple[str, int | None]] = []  # (output name, seed) of every request

    def __call__(self, body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        self.seeds.append((name, body.get("seed")))
        first = body["messages"][0]["content"]
        if name.startswith("Proposal") and "(none: this is the root)" in first:
            self.root = self.root or first
            if first == self.root and body.get("seed") in self.bad_seeds:
                self.invalid += 1
                return Reply(content="Sub-queries: none, sorry.")
        return pipeline_answer(body)

"""Configs for tests: :func:`derive` a config with overrides, the settings the replay recordings were made
with (:data:`RECORDED_WITH`), and the small corpus the session's index is built over."""

from __future__ import annotations

import json
from pathlib import Path

from rubricforge.config import Config, _set_dotted, parse_override

PER_TOPIC = 25
# the settings the replay recordings under tests/data/recordings were made with: the 0.5B embedded model, the
# paper's free-text extraction (Fig. 10), one-call merge (Fig. 11), the tree shape of the earlier defaults and
# torch embeddings (bf16 OpenVINO vectors may reorder near ties, so prompts would differ)
RECORDED_WITH = (*(f"llm.{role}.model=qwen2.5-coder-0.5b-instruct-q4" for role in ("generator", "verifier", "judge")),
                 "build.extract=free", "build.merge=single", "build.max_depth=3", "build.branching=[6,4,3]",
                 "build.max_nodes=10", "build.passages_per_node=2", "embedding.backend=torch")


def derive(cfg: Config, *overrides: str) -> Config:
    """A copy of ``cfg`` with ``key=value`` overrides, e.g. ``derive(cfg, "build.max_nodes=5")``."""
    data = cfg.model_dump(mode="json")
    for item in overrides:
        _set_dotted(data, *parse_override(item))
    return Config.model_validate(data)


def write_small_corpus(path: Path, per_topic: int = PER_TOPIC) -> Path:
    from rubricforge.corpora.default_corpus import summaries_path

    taken: dict[str, int] = {}
    with path.open("w", encoding="utf-8") as fh:
        for n, (key, art) in enumerate(json.loads(summaries_path().read_text(encoding="utf-8")).items(), 1):
            topic = art.get("topic") or ""
            if taken.get(topic, 0) >= per_topic:
                continue
            taken[topic] = taken.get(topic, 0) + 1
            fh.write(json.dumps({"id": f"wiki-{n:05d}", "title": art.get("title") or key, "text": art["extract"],
                                 "topic": topic}, ensure_ascii=False) + "\n")
    return path

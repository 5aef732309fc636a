"""The scripted HOTE loop of the ``train hote`` test and ``benchmarks/selfplay_steps.py``: B = 4, G = 2, G' = 2,
no-tool mode. The solver's scripted answers are good (even rows) or short (odd rows); the proposer writes
"first" / "second" tasks. Judge (:data:`JUDGE`): real rubrics c1 (w 1) pass only good answers, c2 (w 0.5)
every answer; the meta answer has 6 rubrics: Meta 1, 4, 5 pass good answers, Meta 2 good answers to the
"first" task only, Meta 3 every answer."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.training_fakes import ScriptedPolicy

GOOD, SHORT = "A detailed report with evidence.", "Short."
QUERIES = ["How do tides form on Earth?", "Why do volcanoes erupt?", "What causes auroras near the poles?",
           "How do bees find their way home?"]


def data(tmp_path: Path) -> Path:
    rubrics = [{"id": "c1", "title": "Gives evidence", "description": "Backs the answer with evidence.", "weight": 1.0},
               {"id": "c2", "title": "Is concise", "description": "Stays short.", "weight": 0.5}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "question": q, "rubrics": rubrics}) + "\n"
                            for i, q in enumerate(QUERIES)))
    return path


def verdict(body) -> str:
    user = body["messages"][-1]["content"]

    def tag(name: str) -> str:
        found = re.search(rf"<{name}>(.*?)</{name}>", user, re.S)
        assert found is not None, f"no <{name}> in the judge prompt"
        return found.group(1)

    rubric, good, first = tag("rubric"), "evidence" in tag("response"), "first" in tag("question")
    passed = {"Meta 3": True, "Is concise": True, "Meta 2": good and first}.get(rubric.split(":")[0], good)
    return json.dumps({"score": int(passed)})


JUDGE: dict[str, Any] = {"evolve_update": json.dumps({"positive_rubrics": [], "negative_rubrics": []}),
         "hote_meta": json.dumps({"rubrics": [{"title": f"Meta {i}", "description": f"Meta check {i}.", "weight": 1.0}
                                              for i in range(1, 7)]}),
         "hote": verdict}


def turn(context: str, row: int) -> str:
    if "<weaknesses>" in context:
        which = "first" if row % 2 == 0 else "second"
        return f"<think>A task.</think>\n<answer>The {which} new task: how do glaciers shape valleys?</answer>"
    return f"<think>I know this.</think>\n<answer>{GOOD if row % 2 == 0 else SHORT}</answer>"


def hote_cfg(tmp_path: Path, server: FakeOpenAI, steps: int) -> Config:
    return Config.model_validate({
        "run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, server),
        "evolve": {"dedup_cosine": 1.0},
        "hote": {"modes": "no_tool", "steps": steps, "batch_size": 4, "group": 2, "proposer_group": 2, "combo_size": 3,
                 "proposer_grpo_args": {"per_device_train_batch_size": 2}},
        "train": {"preset": "cpu", "grpo_args": {"max_completion_length": 64, "learning_rate": 1e-3, "seed": 0,
                                                 "per_device_train_batch_size": 8}}})


def start(cfg: Config, dataset: Path, model: Path, policy=turn):
    """The built run, both policies scripted by ``policy`` (default :func:`turn`)."""
    from rubricforge.training.hote import HoteRun

    run = HoteRun(cfg, dataset, str(model))
    run.build()
    for trainer in (run.solver, run.proposer):
        ScriptedPolicy(trainer.model, trainer.processing_class, policy)
    return run

"""`train dpo-pairs` and `rollouts sample` keep a run directory as every item job does: ``config.yaml`` and a
manifest with the invocation's status (``stopped: <why>`` after a budget stop), its counts and its LLM ledger."""

from __future__ import annotations

import json
from pathlib import Path

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI
from support.config import derive
from support.llm_fakes import litellm_llm_config
from support.paths import EXAMPLES
from support.reward_fixtures import ROLLOUT
from support.training_fakes import LENIENT_JUDGE


def _manifest(run: Path) -> dict:
    assert (run / "config.yaml").is_file()
    return json.loads((run / "manifest.json").read_text())


def test_dpo_pairs_manifest_complete_then_stopped_by_the_budget(small_index_cfg, tmp_path):
    from rubricforge.jobs.dpo_pairs import build_pairs

    kubrick = json.loads(EXAMPLES.read_text().splitlines()[0])["id"]
    lines = [{"id": kubrick, "response": ROLLOUT}, {"id": kubrick, "response": "I do not know."},
             {"id": "ex-seurat", "response": ROLLOUT}]
    with FakeOpenAI(stages=LENIENT_JUDGE) as judge:
        data = small_index_cfg.model_dump(mode="json")
        data["llm"] = {**data["llm"], **litellm_llm_config(tmp_path, judge)}
        cfg = derive(Config.model_validate(data), "reward.concurrency=1", "train.pair_reward=composite")
        results = {}
        for name, budget in (("capped", ["llm.max_tokens=1"]), ("full", [])):
            rollouts = tmp_path / f"{name}.jsonl"
            rollouts.write_text("".join(json.dumps(line) + "\n" for line in lines))
            results[name] = build_pairs(derive(cfg, *budget), EXAMPLES, rollouts, tmp_path / name)
    full, capped = results["full"], results["capped"]
    manifest = _manifest(tmp_path / "full.run")
    assert full.status == manifest["status"] == "complete" and full.run_dir == str(tmp_path / "full.run")
    assert manifest["job"] == "dpo-pairs" and manifest["invocations"][-1]["status"] == "complete"
    assert manifest["counts"] == {"prompts": 2, "pairs": 1, "scored": 3, "unscored": 0, "without_pair": 1}
    assert manifest["ledger"]["total"]["calls"] > 0  # the scoring this invocation ran
    manifest = _manifest(tmp_path / "capped.run")
    assert capped.status.startswith("stopped: LLM budget reached") and manifest["status"] == capped.status
    assert manifest["counts"]["unscored"] == capped.summary.unscored > 0

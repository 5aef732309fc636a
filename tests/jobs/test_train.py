"""Training as a job (:mod:`rubricforge.jobs.train`), end to end through the CLI on the tiny local Qwen2 model.

What is real: the tiny Qwen2 model and tokenizer (built locally), TRL's SFTTrainer and GRPOTrainer, their
checkpoints and resumption, a SIGKILL of the training process, the LLM client and its ledger reaching a
scripted judge over HTTP, and the CLI's exit codes. What is scripted: the judge, and (in the budget test) the
policy's tokens, so that its rubric costs judge calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.cli import app
from rubricforge.jobs.base import STOPPED_EXIT
from rubricforge.jobs.train import checkpoints, resume_point
from rubricforge.testing import FakeOpenAI
from support.cli import cli
from support.llm_fakes import litellm_llm_config
from support.pref_fakes import PREFS_JUDGE

# a short rubric the scripted policy writes (two judge calls per report and a quality call; few tokens to generate)
RUBRIC = json.dumps([{"title": "Failures", "description": "Names DNS failures.", "weight": 5},
                     {"title": "Causes", "description": "Explains one cause.", "weight": 3}])
KILL_AFTER_SAVE = """
import os, signal, sys
from transformers import Trainer
from rubricforge.cli import main

save, step = Trainer._save_checkpoint, int(sys.argv[1])

def killing_save(self, model, trial):
    save(self, model, trial)
    if self.state.global_step == step:
        os.kill(os.getpid(), signal.SIGKILL)

Trainer._save_checkpoint = killing_save
sys.argv = ["rubricforge", *sys.argv[2:]]
main()
"""


def test_resume_point_is_the_latest_complete_checkpoint(tmp_path):
    for n in (2, 10, 11):
        (tmp_path / f"checkpoint-{n}").mkdir()
    for n in (2, 10):  # checkpoint-11 was killed while it was saved: no trainer state
        (tmp_path / f"checkpoint-{n}" / "trainer_state.json").write_text("{}")
    assert [p.name for p in checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-10"]
    assert resume_point(tmp_path) == tmp_path / "checkpoint-10"
    assert resume_point(tmp_path, tmp_path / "checkpoint-2") == tmp_path / "checkpoint-2"  # --resume-from overrides
    assert resume_point(tmp_path / "empty") is None


def _sft_config(tmp_path: Path, name: str) -> Path:
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "train": {
        "output_dir": str(tmp_path / name),
        "sft_args": {"bf16": False, "use_cpu": True, "max_steps": 4, "save_strategy": "steps", "save_steps": 1,
                     "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1, "max_length": 512,
                     "learning_rate": 1e-3, "warmup_steps": 0, "report_to": "none", "logging_steps": 1, "seed": 0,
                     "activation_checkpointing": False}}}))
    return config


@pytest.mark.slow
def test_a_killed_sft_run_resumes_to_the_state_of_an_uninterrupted_one(tiny_model, tmp_path):
    from safetensors.torch import load_file

    data = tmp_path / "trajectories.jsonl"
    data.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"Question {i}?"},
                                                     {"role": "assistant", "content": f"<answer>Answer {i}.</answer>"}]})
                            + "\n" for i in range(4)))
    args = ["train", "sft", "--data", str(data), "--model", str(tiny_model)]
    whole = cli(*args, "-c", str(_sft_config(tmp_path, "whole")))
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert "complete: train sft: 4 steps" in whole.stderr

    killed_config = _sft_config(tmp_path, "killed")
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_SAVE, "2", *args, "-c", str(killed_config)],
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL right after checkpoint-2 was written
    out = tmp_path / "killed"
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    assert not (out / "model.safetensors").exists()

    resumed = cli(*args, "-c", str(killed_config))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "complete: train sft: 4 steps (resumed from checkpoint-2)" in resumed.stderr
    final, expected = load_file(out / "model.safetensors"), load_file(tmp_path / "whole" / "model.safetensors")
    assert final.keys() == expected.keys()
    assert all((final[k] - expected[k]).abs().max().item() <= 1e-6 for k in final)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["job"] == "train-sft"
    assert [i["status"] for i in manifest["invocations"]] == ["running", "complete"]  # the killed one never ended
    assert manifest["checkpoints"][-1] == "checkpoint-4" and manifest["counts"] == {"steps": 4}
    assert manifest["resumed_from"].endswith("checkpoint-2") and manifest["train_versions"]["trl"]
    assert manifest["settings"]["inputs"]["data"] and (out / "config.yaml").is_file()
    # other inputs than the checkpoints were trained on are refused, in one line
    data.write_text(data.read_text() + data.read_text())
    refused = cli(*args, "-c", str(killed_config))
    assert refused.returncode == 2 and "holds checkpoints made with other settings" in refused.stderr


def _judged_rubric_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``train rubric-generator`` whose policy writes :data:`RUBRIC` in its first completion (judge calls for its
    items and its quality) and prose in its second (no judge call)."""
    from support.training_fakes import ScriptedPolicy

    from rubricforge.training import rubric_generator

    build = rubric_generator.build_rubric_generator

    def scripted(*args, **kwargs):
        run = build(*args, **kwargs)
        ScriptedPolicy(run.trainer.model, run.trainer.processing_class,
                       lambda context, row: RUBRIC if row == 0 else "No rubric.")
        return run

    monkeypatch.setattr(rubric_generator, "build_rubric_generator", scripted)


@pytest.mark.slow
def test_a_judge_budget_spent_mid_training_stops_with_exit_3_and_resumes(tmp_path, monkeypatch):
    from support.tiny_qwen import build_tiny_qwen

    from rubricforge.rubric_gen.pref_rubrics import PROMPTS

    _judged_rubric_generator(monkeypatch)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "query": "Please analyse common network failures.",
                                 "report_chosen": "GOOD report", "report_rejected": "weak report", "split": "train"})
                     + "\n")
    model = build_tiny_qwen(tmp_path / "model", [PROMPTS.render("pref_rubrics.system"), RUBRIC, "No rubric."])

    def run(name: str, steps: int, **llm: object) -> tuple[object, Path]:
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "llm": {**base, "cache_path": "", **llm},
                                          "train": {"preset": "cpu", "output_dir": str(tmp_path / name), "grpo_args": {
                                              "max_completion_length": 128, "learning_rate": 1e-3, "seed": 0,
                                              "max_steps": steps, "save_strategy": "no"}}}))
        res = CliRunner().invoke(app, ["train", "rubric-generator", "--pairs", str(pairs), "--model", str(model),
                                       "-c", str(config)])
        return res, tmp_path / name

    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        base = litellm_llm_config(tmp_path, server)
        one, out = run("one-step", 1)  # what one step costs
        assert one.exit_code == 0, one.output
        step_tokens = json.loads((out / "manifest.json").read_text())["ledger"]["total"]
        step_tokens = int(step_tokens["prompt_tokens"] + step_tokens["completion_tokens"])
        assert step_tokens > 0

        # a cap that step 1 stays under and a later step reaches: the reward function raises BudgetExceeded
        stopped, out = run("budget", 3, max_tokens=step_tokens + 1)
        assert stopped.exit_code == STOPPED_EXIT, stopped.output
        assert "stopped: LLM budget reached" in stopped.output and "larger budget to resume" in stopped.output
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"].startswith("stopped: LLM budget reached") and manifest["model_dir"] is None
        steps = manifest["counts"]["steps"]
        assert steps in (1, 2) and manifest["checkpoints"] == [f"checkpoint-{steps}"]  # saved at the stop
        assert manifest["ledger"]["total"]["requests"] > 0
        assert not (out / "model.safetensors").exists()

        resumed, out = run("budget", 3)  # the same command, a larger budget
    assert resumed.exit_code == 0, resumed.output
    assert f"complete: train rubric-generator: 3 steps (resumed from checkpoint-{steps})" in resumed.output
    done = json.loads((out / "manifest.json").read_text())
    assert done["status"] == "complete" and done["counts"] == {"steps": 3} and (out / "model.safetensors").is_file()
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["grpo_args"]["max_steps"] == 3

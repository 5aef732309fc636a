"""The stages around GRPO, each on the tiny local Qwen2 model on CPU: ``rollouts sample`` (real tools over
the small index, tool calls parsed by TRL's parser; the policy's tokens scripted as in the GRPO smoke test),
the cold-start SFT step on those trajectories (assistant tokens only), and preference pairs scored with the
real reward (scripted judge) and accepted by TRL's DPOTrainer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.testing import FakeOpenAI
from support.config import derive
from support.llm_fakes import litellm_llm_config
from support.paths import EXAMPLES
from support.reward_fixtures import ROLLOUT
from support.training_fakes import ScriptedPolicy, LENIENT_JUDGE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rollouts(small_index_cfg, tiny_model, tmp_path_factory) -> Path:
    from rubricforge.jobs.rollouts import sample_rollouts
    from rubricforge.training.rollouts import Sampler

    cfg = derive(small_index_cfg, "tools.top_k=2", "tools.snippet_chars=200", "train.rollouts_per_prompt=2",
                 "train.max_new_tokens=120")
    sampler = Sampler(str(tiny_model), cfg)
    ScriptedPolicy(sampler.model, sampler.tokenizer)
    out = tmp_path_factory.mktemp("rollouts") / "rollouts.jsonl"
    summary = sample_rollouts(cfg, EXAMPLES, out, sampler=lambda: sampler).summary
    assert (summary.trajectories, summary.sampled_now, summary.tool_calls) == (4, 4, 4)
    again = sample_rollouts(cfg, EXAMPLES, out, sampler=lambda: pytest.fail("a model was loaded")).summary  # none left
    assert (again.trajectories, again.sampled_now) == (4, 0)
    return out


def test_rollouts_have_real_tool_results_snippets_and_an_answer(rollouts):
    records = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert sorted(r["key"] for r in records) == ["ex-kubrick#0", "ex-kubrick#1", "ex-seurat#0", "ex-seurat#1"]
    for r in records:
        roles = [m["role"] for m in r["response"]]
        assert roles == ["assistant", "tool", "assistant"]
        call = r["response"][0]["tool_calls"][0]["function"]
        assert call["name"] == "search" and r["response"][0]["content"].startswith("<think>")
        assert "<snippet id=" in r["response"][1]["content"] and len(r["snippets"]) == 2
        cited = r["response"][2]["content"].split('<cite id="')[1].split('"')[0]
        assert cited in {s["id"] for s in r["snippets"]}
        assert r["messages"][:2] == [{"role": "system", "content": r["messages"][0]["content"]},
                                     {"role": "user", "content": r["messages"][1]["content"]}]
        assert [t["function"]["name"] for t in json.loads(r["tools"])] == ["search", "browse", "scholar"]


def test_sft_step_trains_assistant_tokens_only(small_index_cfg, tiny_model, rollouts, tmp_path):
    from rubricforge.training.sft import build_sft

    cfg = derive(small_index_cfg, f"train.output_dir={tmp_path / 'sft'}")
    cfg.train.sft_args = {"bf16": False, "use_cpu": True, "max_steps": 1, "gradient_accumulation_steps": 1,
                          "max_length": 4096, "learning_rate": 1e-3, "warmup_steps": 0, "report_to": "none",
                          "save_strategy": "no"}
    trainer = build_sft(cfg, rollouts, str(tiny_model))
    row = trainer.train_dataset[0]
    tok = trainer.processing_class
    trained = tok.decode([t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100])
    ignored = tok.decode([t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label == -100])
    assert "<tool_call>" in trained and "<answer>" in trained and "<tool_response>" not in trained
    assert "<tool_response>" in ignored and "deep research assistant" in ignored
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())


def test_sft_refuses_a_file_without_messages(tmp_path):
    from rubricforge.training.sft import sft_rows

    bad = tmp_path / "t.jsonl"
    bad.write_text('{"id": "a", "response": "x"}\n')
    with pytest.raises(UserError, match="t.jsonl:1 has no 'messages' list"):
        sft_rows(bad)


def test_dpo_pairs_from_scored_rollouts_train_with_dpo(small_index_cfg, tiny_model, tmp_path):
    from datasets import load_from_disk
    from trl import DPOConfig, DPOTrainer

    from rubricforge.jobs.dpo_pairs import build_pairs
    from rubricforge.training.model import load_tokenizer

    kubrick = json.loads(EXAMPLES.read_text().splitlines()[0])["id"]
    lines = [{"id": kubrick, "response": ROLLOUT}, {"id": kubrick, "response": "I do not know."},
             {"id": kubrick, "response": "<think>x</think><answer>Kubrick.</answer>"},
             {"id": "ex-seurat", "response": ROLLOUT}]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with FakeOpenAI(stages=LENIENT_JUDGE) as judge:
        data = small_index_cfg.model_dump(mode="json")
        data["llm"] = {**data["llm"], **litellm_llm_config(tmp_path, judge)}
        cfg = Config.model_validate({**data, "train": {**data["train"], "pair_reward": "composite"}})
        summary = build_pairs(cfg, EXAMPLES, rollouts, tmp_path / "pairs").summary
    assert (summary.prompts, summary.pairs, summary.scored, summary.unscored, summary.without_pair) == (2, 1, 4, 0, 1)
    pairs = load_from_disk(str(tmp_path / "pairs"))
    row = pairs[0]
    assert row["id"] == kubrick and row["chosen_reward"] >= 0.6 >= 0.4 >= row["rejected_reward"]
    assert row["chosen"] == [{"role": "assistant", "content": ROLLOUT}]
    assert row["prompt"][0]["role"] == "system" and row["prompt"][1]["content"].startswith("How did Stanley")

    tokenizer = load_tokenizer(str(tiny_model))
    args = DPOConfig(output_dir=str(tmp_path / "dpo"), use_cpu=True, bf16=False, max_steps=1,
                     per_device_train_batch_size=1, report_to="none", save_strategy="no", learning_rate=1e-3,
                     max_length=4096)  # the App. D system prompt alone is about 1,000 tokens
    trainer = DPOTrainer(model=str(tiny_model), args=args, train_dataset=pairs, processing_class=tokenizer)
    trainer.train()
    logs = trainer.state.log_history[-1]
    assert logs["train_loss"] == pytest.approx(math.log(2), abs=1e-3)  # DPO's loss when policy = reference
    assert logs["logps/chosen"] < 0 and logs["logps/rejected"] < 0

"""`rubricforge train grpo` end to end on CPU: one GRPO step of a tiny local Qwen2 model with real tool calls.

What is real: the tiny Qwen2 model and tokenizer (built here, no download; Qwen2.5's chat template, so
TRL parses tool calls), TRL's GRPOTrainer with ``environment_factory`` (one ResearchEnvironment per rollout
over the real FAISS index of 300 default-corpus documents), TRL's tool-call parsing and tool loop, its
tool-result masking, rubricforge's composite reward through the TRL adapter with the judge reached over
HTTP (a scripted OpenAI-compatible server), and the optimiser step. What is scripted: the judge's verdicts,
and the policy's tokens — a test-only logits processor (``training_fakes.ScriptedPolicy``) forces a
``search`` tool call, then an answer that cites a returned snippet (first rollout) or not (second), since a
random model would not write a valid tool call by itself.
"""

from __future__ import annotations


import pytest
import torch
from rubricforge.testing import FakeOpenAI
from support.paths import EXAMPLES
from support.training_fakes import ScriptedPolicy, LENIENT_JUDGE

from support.training_fakes import train_cfg

pytestmark = pytest.mark.slow


def test_one_grpo_step_with_real_tool_calls(small_index_cfg, tiny_model, tmp_path):
    from rubricforge.training.grpo import build_grpo

    with FakeOpenAI(stages=LENIENT_JUDGE) as judge:
        run = build_grpo(train_cfg(small_index_cfg, tmp_path, judge), EXAMPLES, str(tiny_model))
        trainer = run.trainer
        policy = ScriptedPolicy(trainer.model, trainer.processing_class)
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        batches = []
        generate_and_score = trainer._generate_and_score_completions

        def capture(inputs):
            batches.append((generate_and_score(inputs), [env.snippets for env in trainer.environments]))
            return batches[-1][0]

        trainer._generate_and_score_completions = capture
        metrics = run.train()

    # two turns were generated (tool call, then answer) and the judge was asked
    assert policy.calls == 2
    assert any("<criterion>" in m["content"] for r in judge.requests for m in r["messages"])
    # rewards: scored, different within the group, per-component means and tool counts logged
    assert metrics["reward"] == metrics["reward"]  # not NaN
    assert metrics["reward_std"] > 0
    assert metrics["composite/rubric/mean"] == pytest.approx(0.75)
    assert metrics["composite/rubric/unscored"] == 0
    assert metrics["composite/search/mean"] == pytest.approx(1 / 6)  # one valid search call, U = 6 (Eq. 8)
    assert metrics["composite/citation/mean"] > 0  # the first rollout's cite resolved against its own snippets
    assert metrics["tools/search_calls"] == 1.0 and metrics["tools/search_errors"] == 0
    assert metrics["tools/call_frequency"] == 1.0
    # tool results are in the completions but masked out of the loss; the model's own turns are not
    (out, stores), = batches
    tok = trainer.processing_class
    for ids, mask, store in zip(out["completion_ids"], out["tool_mask"], stores, strict=True):
        ids, mask = ids.tolist(), mask.tolist()
        masked = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 1])
        assert "<tool_response>" in masked and "<snippet id=" in masked and "<tool_call>" not in masked
        assert "<tool_call>" in trained and "<answer>" in trained and "<snippet id=" not in trained
        assert len(store) == 2  # this rollout's own snippets, ready for citation checks
        assert all(s.id in masked for s in store)
    # the optimiser step changed the weights
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    assert (tmp_path / "out" / "model.safetensors").is_file()

"""Test-only drivers for training tests: a lenient scripted judge (a stage table for
:class:`rubricforge.testing.FakeOpenAI`), a scripted policy, the GRPO test config (:func:`train_cfg`), and
the favoured / disfavoured answers of the learning tests with :func:`log_prob` to measure them.

:class:`ScriptedPolicy` patches a model's ``generate`` with a logits processor that forces each call's new
tokens to spell a scripted assistant turn, chosen from what the prompt holds so far: a ``search`` tool call
first; once a tool response is in the context, an answer — citing the first returned snippet id in the
first row of the batch, citing nothing in the others (so a group's rewards differ and GRPO has a non-zero
advantage). A prompt rendered without a tool schema (HOTE's no-tool mode) gets one think and the answer at
once. Everything else — TRL's tool-call parsing, the tools over the real index, the masking, the
rewards, the optimiser — runs for real; a random tiny model would almost never write a valid tool call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config

SEARCH_TURN = ('<think>I should search first.</think>\n<tool_call>\n{"name": "search", "arguments": '
               '{"query": ["Stanley Kubrick 1968 film"]}}\n</tool_call>')


# every criterion scores 3 of 4; every cited statement needs a citation and is supported and relevant
LENIENT_JUDGE = {
    "rubric": json.dumps({"score": 3}),
    "rubric_batched": lambda body: json.dumps({"scores": [{"id": i, "score": 3} for i in re.findall(
        r'<criterion id="?(\w+)', body["messages"][-1]["content"])]}),
    "citation_needs": "Need Citation: [[Yes]] Analysis: scripted.",
    "citation_recall": "Rating: [[Fully supported]] Analysis: scripted.",
    "citation_precision": "Rating: [[Relevant]] Analysis: scripted.",
}


def scripted_turn(context: str, row: int) -> str:
    """The assistant turn to force, given the conversation so far (after the system prompt, which quotes the
    tag protocol itself)."""
    if "# Tools" not in context:  # no tool schema rendered: no-tool mode
        return "<think>I know this.</think>\n<answer>Kubrick directed the film in 1968.</answer>"
    context = context.split("<|im_start|>user", 1)[-1]
    if "<tool_response>" not in context:
        return SEARCH_TURN
    ids = re.findall(r"<snippet id=(\w+)>", context)
    if row == 0 and ids:
        return (f"<think>The snippets answer it.</think>\n<answer>## Answer\nKubrick directed the film. "
                f'<cite id="{ids[0]}">The film was released in 1968 and directed by Stanley Kubrick.</cite></answer>')
    return "<think>No need to cite.</think>\n<answer>Kubrick made a film.</answer>"


class ScriptedPolicy:
    """Patch ``model.generate`` so each call emits ``turn(context, row)`` (default :func:`scripted_turn`) per
    row; counts the calls."""

    def __init__(self, model: Any, tokenizer: Any, turn: Any = None):
        self.tokenizer, self.calls, self.turn = tokenizer, 0, turn or scripted_turn
        self._generate = model.generate
        model.generate = self.generate

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        from transformers import LogitsProcessorList

        self.calls += 1
        kwargs["logits_processor"] = LogitsProcessorList([_Force(self.tokenizer, self.turn)])
        return self._generate(*args, **kwargs)


class _Force:
    def __init__(self, tokenizer: Any, turn: Any):
        self.tokenizer, self.turn = tokenizer, turn
        self.start: int | None = None
        self.targets: list[list[int]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.start is None:
            self.start = input_ids.shape[1]
            for row in range(input_ids.shape[0]):
                context = self.tokenizer.decode(input_ids[row], skip_special_tokens=False)
                text = self.turn(context, row)
                self.targets.append(self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id])
        step = input_ids.shape[1] - self.start
        forced = scores.new_full(scores.shape, float("-inf"))
        for row, target in enumerate(self.targets):
            forced[row, target[min(step, len(target) - 1)]] = 0.0
        return forced


def train_cfg(small_index_cfg: Config, tmp_path: Path, server: FakeOpenAI, **grpo_args) -> Config:
    data = small_index_cfg.model_dump(mode="json")
    data["llm"] = {**data["llm"], **litellm_llm_config(tmp_path, server)}
    data["tools"].update(top_k=2, snippet_chars=200)
    data["train"].update(preset="cpu", output_dir=str(tmp_path / "out"),
                         grpo_args={"max_completion_length": 1024, "learning_rate": 1e-3, "seed": 0, **grpo_args})
    return Config.model_validate(data)


QUESTIONS = {"q-film": "When was 2001: A Space Odyssey released?", "q-moon": "When did Apollo 11 land on the Moon?"}
FAVOURED = "<think>I know this.</think>\n<answer>It happened in the year 1968.</answer>"
DISFAVOURED = "<think>I know this.</think>\n<answer>It happened long ago.</answer>"


def log_prob(model: Any, tok: Any, messages: list[dict[str, str]], text: str) -> float:
    """log p(text + end of turn | the chat-templated ``messages``), by one forward pass."""
    import torch

    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    completion = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = model(ids).logits[0, :-1].float().log_softmax(-1)
    picked = logps[len(prompt) - 1:].gather(1, ids[0, len(prompt):, None])
    return float(picked.sum())

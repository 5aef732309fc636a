"""The policy model that ``rubricforge rollouts sample`` (:mod:`rubricforge.jobs.rollouts`) runs with the
tools: :class:`Sampler`, a causal LM and its tokenizer generating agent turns (tool calls parsed with TRL's
response parser) or plain completions (a MaMs agent call), sampled with the GRPO run's temperature and top-p.
"""

from __future__ import annotations

from typing import Any

from rubricforge.config import Config
from rubricforge.extras import needs
from rubricforge.training.model import load_tokenizer


class Sampler:
    """A model and tokenizer generating agent turns; ``turn(messages, tools)`` -> one parsed assistant message."""

    def __init__(self, model: str, cfg: Config):
        with needs("train"):
            import torch
            from transformers import AutoModelForCausalLM

        self.tokenizer = load_tokenizer(model, cfg.train.chat_template)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        loaded = AutoModelForCausalLM.from_pretrained(model, dtype="auto")
        # transformers types the wrapped ``to`` as taking the model itself; it takes a device like torch's
        self.model = loaded.to(self.device).eval()  # type: ignore[arg-type]
        self.max_new_tokens = cfg.train.max_new_tokens
        self.sampling = {"do_sample": True, "temperature": cfg.train.grpo_args.get("temperature", 1.0),
                         "top_p": cfg.train.grpo_args.get("top_p", 1.0)}

    def text(self, messages: list[dict[str, Any]]) -> str:
        """One plain completion (no tool schemas): a MaMs agent call."""
        with needs("train"):
            import torch

        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                    return_dict=False)
        with torch.no_grad():
            out = self.model.generate(torch.tensor([prompt], device=self.device), max_new_tokens=self.max_new_tokens,
                                      pad_token_id=self.tokenizer.pad_token_id, **self.sampling)
        return self.tokenizer.decode(out[0, len(prompt):], skip_special_tokens=True)

    def turn(self, messages: list[dict[str, Any]], tools: list[Any]) -> dict[str, Any]:
        with needs("train"):
            import torch
            from trl.chat_template_utils import parse_response

        prompt = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                                    tokenize=True, return_dict=False)
        with torch.no_grad():
            out = self.model.generate(torch.tensor([prompt], device=self.device), max_new_tokens=self.max_new_tokens,
                                      pad_token_id=self.tokenizer.pad_token_id, **self.sampling)
        return parse_response(self.tokenizer, out[0, len(prompt):].tolist(), prefix=prompt, tools=tools)

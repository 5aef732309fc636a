"""`rubricforge rollouts sample`: run a model with the tools over dataset questions, write trajectories.

Each question is answered ``train.rollouts_per_prompt`` times with the same prompt, tools and environment
as GRPO training (the App. D system prompt, the tool schemas rendered by the chat template, one
:class:`~rubricforge.agent.environment.ResearchEnvironment` per trajectory, at most
``train.max_tool_turns`` tool turns, tool calls parsed with TRL's response parser; the episode is
:func:`rubricforge.agent.react.run_episode`). One JSONL line per
trajectory, appended as soon as it is done (a re-run skips finished ones)::

    {"key": "<id>#<k>", "id", "sample": k, "response": [<assistant/tool messages>], "messages": [<prompt +
     response>], "tools": "<JSON tool schemas>", "snippets": [<Snippet>, ...]}

``response`` + ``snippets`` is what ``rubricforge reward score`` reads (reward audits, ``train dpo-pairs``);
``messages`` + ``tools`` is what ``rubricforge train sft`` reads.

``workflow="mams"`` runs Prefs' MaMs workflow (:mod:`rubricforge.agent.mams`) with the same tools
instead: ``response`` is ``<answer>`` + the final report, ``calls`` every policy call of the episode
(role, messages, completion) and ``workflow`` "mams".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.agent.environment import ResearchEnvironment
from rubricforge.agent.mams import run_mams
from rubricforge.agent.react import run_episode
from rubricforge.agent.tasks import training_rows
from rubricforge.config import Config
from rubricforge.corpora.tools import ToolBox
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.rundir import StageLog
from rubricforge.training.model import load_tokenizer


@dataclass
class SampleSummary:
    out: str
    trajectories: int
    sampled_now: int
    tool_calls: int


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


def sample_rollouts(cfg: Config, dataset: str | Path, model: str, out: str | Path, limit: int | None = None,
                    sampler: Any = None, progress: bool = False, workflow: str = "react") -> SampleSummary:
    from rich.progress import track
    with needs("train"):
        from transformers.utils import get_json_schema

    if workflow not in ("react", "mams"):
        raise UserError(f"unknown workflow '{workflow}'", "use react (App. D agent) or mams (Prefs MaMs)")
    rows = training_rows(dataset, [])[:limit]
    log: StageLog[Any] = StageLog(out)
    todo = [(row, k) for row in rows for k in range(cfg.train.rollouts_per_prompt) if f"{row['id']}#{k}" not in log]
    sampled = calls = 0
    if todo:
        sampler = sampler or Sampler(model, cfg)
        with ToolBox.from_config(cfg) as toolbox:
            for row, k in track(todo, description="sampling", disable=not progress, transient=True):
                env = ResearchEnvironment(toolbox)
                env.reset(**row)
                if workflow == "mams":
                    episode = run_mams(sampler.text, env.toolbox.call, str(row["question"]))
                    log.append(f"{row['id']}#{k}", {
                        "id": row["id"], "sample": k, "workflow": "mams", "response": f"<answer>{episode.report}</answer>",
                        "calls": episode.calls, "snippets": [s.model_dump(mode="json") for s in env.snippets]})
                    sampled, calls = sampled + 1, calls + episode.tool_calls
                    continue
                response = run_episode(sampler, env, row["prompt"], cfg.train.max_tool_turns)
                tools = json.dumps([get_json_schema(t) for t in (env.search, env.browse, env.scholar)])
                log.append(f"{row['id']}#{k}", {
                    "id": row["id"], "sample": k, "response": response, "messages": [*row["prompt"], *response],
                    "tools": tools, "snippets": [s.model_dump(mode="json") for s in env.snippets]})
                sampled += 1
                calls += sum(len(m.get("tool_calls") or []) for m in response)
    return SampleSummary(str(log.path), len(log), sampled, calls)

"""The agent ``rubricforge eval --agent`` runs over a task set: its config, how it answers one task, and what a
run is expected to cost.

**Config** (``--agent``): a YAML file, ``key=value`` pairs separated by commas (values are YAML), or
``default``. Its keys are those of an LLM role (``model``, ``backend``, ``api_base``, ``api_key_env``,
``temperature``, ``max_tokens``, ``n_ctx``, ...) and the agent's own: ``tools`` (search / browse / scholar
over the configured index, default true), ``workflow`` and the MaMs budgets (``max_turns``, ``tool_budget``,
``max_calls_per_turn``, ``min_searches``, ``chunk_tokens``). ``model`` is an embedded model (default the 1.5B),
any litellm model (``backend: litellm``, ``api_base`` for a vLLM / llama.cpp / OpenAI-compatible server), or a
folder written by ``rubricforge train`` (it holds ``config.json``: loaded with transformers, as
``rubricforge rollouts sample`` loads it).

**Episodes** (all from :mod:`rubricforge.agent`):

* with tools, a served or embedded model plays MaMs (``mams``: the paper's C.4–C.9 prompts) or its
  ``stepwise`` variant for small models; ``auto`` picks stepwise for the embedded models, as the long-form
  teacher does; a checkpoint plays the App. D ReAct episode it was trained on (``react``, TRL's tool-call
  parser; ``auto``) or MaMs;
* without tools, one call with HOTE's no-tool prompt.

The response kept is the episode's answer (MaMs: ``<answer>`` + the final report; ReAct: the assistant and
tool turns), read by the scorers as ``rubricforge eval --reports`` reads a response.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import Field, ValidationError

from rubricforge.agent.mams import MAX_PLAN, MamsConfig
from rubricforge.config import Config, RoleConfig
from rubricforge.errors import UserError

if TYPE_CHECKING:
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient

ROLE = "generator"  # the evaluation's client plays the agent in this role (the judge is "judge")
STAGE = "agent"
FIX = "give a YAML file or key=value pairs, e.g. --agent model=openai/gpt-4o-mini,backend=litellm,tools=false"


class AgentConfig(RoleConfig):
    """An LLM role (the model and how to reach it) plus the agent's tools, workflow and budgets."""

    tools: bool = True
    workflow: Literal["auto", "mams", "stepwise", "react"] = "auto"
    max_turns: int = Field(10, ge=1)  # MaMs T; ReAct tool turns
    tool_budget: int = Field(10, ge=1)
    max_calls_per_turn: int = Field(5, ge=1)
    min_searches: int = Field(2, ge=0)
    chunk_tokens: int = Field(2000, ge=100)

    @property
    def checkpoint(self) -> bool:
        """A local checkpoint folder (transformers) rather than a model the LLM client reaches."""
        return Path(self.model).is_dir()

    def episode(self) -> str:
        """``none`` (no tools), ``react``, ``mams`` or ``stepwise``: ``workflow`` with ``auto`` resolved."""
        from rubricforge.llm.local_model import MODELS

        if not self.tools:
            return "none"
        if self.workflow != "auto":
            return self.workflow
        if self.checkpoint:
            return "react"
        return "stepwise" if self.backend == "local" and self.model in MODELS else "mams"

    def role(self) -> RoleConfig:
        return RoleConfig.model_validate({k: getattr(self, k) for k in RoleConfig.model_fields})

    def mams(self) -> MamsConfig:
        return MamsConfig(self.max_turns, self.max_calls_per_turn, self.tool_budget, self.chunk_tokens,
                          self.min_searches)

    def settings(self) -> dict[str, Any]:
        """What the run's reports depend on (the resume guard's part for the agent)."""
        return {**self.model_dump(mode="json", exclude={"api_key_env", "timeout_s", "max_retries", "backoff_s",
                                                        "concurrency", "rpm", "tpm", "n_threads", "repack"}),
                "model": str(Path(self.model).resolve()) if self.checkpoint else self.model}


def load_agent_config(spec: str) -> AgentConfig:
    """``--agent``'s value as an :class:`AgentConfig`; a one-line UserError naming the file or key."""
    where = f"agent config {spec}"
    if spec.strip() in ("", "default"):
        raw: Any = {}
    elif "=" not in spec:  # a file
        path = Path(spec)
        if not path.is_file():
            raise UserError(f"agent config file {spec} not found", FIX)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise UserError(f"agent config file {spec} is not valid YAML ({exc.__class__.__name__})", FIX) from None
        if not isinstance(raw, dict):
            raise UserError(f"agent config file {spec} must hold a mapping at the top level", FIX)
    else:
        raw = {}
        for item in spec.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise UserError(f"--agent: '{item}' is not key=value", FIX)
            raw[key.strip()] = _value(key.strip(), value.strip())
        where = "--agent"
    try:
        agent = AgentConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(map(str, err["loc"])) or "?"
        known = "" if err["type"] != "extra_forbidden" else f" (keys: {', '.join(AgentConfig.model_fields)})"
        raise UserError(f"{where}: '{key}': {err['msg']}{known}", FIX) from None
    if agent.checkpoint and not (Path(agent.model) / "config.json").is_file():
        raise UserError(f"{where}: model folder {agent.model} has no config.json",
                        "name a checkpoint written by `rubricforge train` (or a transformers model folder)")
    if agent.workflow == "stepwise" and agent.checkpoint:
        raise UserError(f"{where}: the stepwise workflow needs a model the LLM client serves (a JSON grammar)",
                        "use workflow=react or workflow=mams for a checkpoint")
    if agent.workflow == "react" and not agent.checkpoint:
        raise UserError(f"{where}: the react workflow parses tool calls with a checkpoint's chat template",
                        "use workflow=mams (or stepwise) for a served or embedded model")
    return agent


def _value(key: str, raw: str) -> Any:
    """A ``key=value`` pair's value: YAML, except that a text field (``model``, ``api_base``) keeps the text."""
    if key in ("model", "api_base", "api_key_env", "workflow"):
        return raw
    try:
        return yaml.safe_load(raw) if raw else None
    except yaml.YAMLError:
        raise UserError(f"--agent: '{key}={raw}' is not valid YAML", "quote it, e.g. key='some text'") from None


# ---------------------------------------------------------------- running one task


class Runner:
    """Answers tasks with the agent: :meth:`answer` is one episode, in a worker thread."""

    def __init__(self, agent: AgentConfig, cfg: Config, sampler: Callable[[str, Config], Any] | None = None):
        """``sampler(model, cfg)`` loads a checkpoint agent's model (the CLI passes training's ``Sampler``, so
        evaluation imports no training code)."""
        self.agent, self.cfg = agent, cfg
        self.kind = agent.episode()
        self.toolbox: ToolBox | None = None
        self.sampler: Any = None
        self._local = threading.Lock()  # one generate at a time on a local checkpoint
        if agent.tools:
            from rubricforge.corpora.tools import ToolBox

            self.toolbox = ToolBox.from_config(cfg)
        if agent.checkpoint:
            if sampler is None:
                raise UserError(f"--agent {agent.model}: a checkpoint agent needs a sampler to load it",
                                "pass sampler=rubricforge.training.rollouts.Sampler to evaluate()")
            train = cfg.train.model_copy(update={"max_new_tokens": agent.max_tokens, "grpo_args": {
                **cfg.train.grpo_args, "temperature": agent.temperature, "top_p": agent.top_p or 1.0}})
            self.sampler = sampler(agent.model, cfg.model_copy(update={"train": train}))

    def close(self) -> None:
        if self.toolbox is not None:
            self.toolbox.close()

    async def answer(self, client: LLMClient, question: str) -> dict[str, Any] | None:
        """``{"response", "tool_calls", "agent_calls"}`` for ``question`` (a served or embedded model through
        ``client``'s :data:`ROLE`); None when a model call failed."""
        from rubricforge.agent.policy import PolicyFailed

        try:
            return await asyncio.to_thread(self._episode, client, question, asyncio.get_running_loop())
        except PolicyFailed:
            return None

    def _episode(self, client: LLMClient, question: str, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
        from rubricforge.agent.environment import ResearchEnvironment
        from rubricforge.agent.mams import run_mams, run_mams_stepwise
        from rubricforge.agent.policy import client_policy
        from rubricforge.agent.prompt import agent_prompt, no_tool_prompt
        from rubricforge.agent.react import run_episode

        policy = _Policy(self.sampler, self._local) if self.sampler is not None else _Policy(
            client_policy(client, ROLE, STAGE, loop))
        if self.kind == "none":
            return {"response": policy.text(no_tool_prompt(question)), "tool_calls": 0, "agent_calls": policy.calls}
        assert self.toolbox is not None
        env = ResearchEnvironment(self.toolbox)
        env.reset(question=question)
        if self.kind == "react":
            response: Any = run_episode(policy, env, agent_prompt(question), self.agent.max_turns)
            tools = sum(len(m.get("tool_calls") or []) for m in response)
            return {"response": response, "tool_calls": tools, "agent_calls": policy.calls}
        run: Any = partial(run_mams_stepwise, policy.structured) if self.kind == "stepwise" else partial(
            run_mams, policy.text)
        episode = run(env.toolbox.call, question, self.agent.mams())
        return {"response": f"<answer>{episode.report}</answer>", "tool_calls": episode.tool_calls,
                "agent_calls": policy.calls}


class _Policy:
    """The episode's model calls, counted: a checkpoint's sampler (one generate at a time, under ``lock``) or an
    LLM client role's ``ask``."""

    def __init__(self, model: Any, lock: threading.Lock | None = None):
        self.model, self.lock, self.calls = model, lock or threading.Lock(), 0
        self.sampler = lock is not None

    def text(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            self.calls += 1
            return str(self.model.text(messages) if self.sampler else self.model(messages))

    def structured(self, messages: list[dict[str, str]], output: Any) -> Any:
        self.calls += 1
        return self.model(messages, output)

    def turn(self, messages: list[dict[str, Any]], tools: list[Any]) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            return dict(self.model.turn(messages, tools))


# ---------------------------------------------------------------- the budget printed before a run

CITES_PER_REPORT = 10  # citation checks are one per cited statement: unknown before the report; this many assumed


@dataclass
class Estimate:
    """Expected calls and tokens of a run, for the agent and the judge, with dollars where both are priced."""

    tasks: int
    agent_model: str
    agent_calls: float
    agent_tokens: float
    agent_usd: float | None
    judge_model: str
    judge_calls: float
    judge_tokens: float
    judge_usd: float | None

    def line(self) -> str:
        def money(x: float | None) -> str:
            return f"${x:.2f}" if x is not None else "no price known"

        return (f"budget for {self.tasks} tasks: agent {self.agent_model} ~{self.agent_calls:,.0f} calls, "
                f"~{self.agent_tokens:,.0f} tokens ({money(self.agent_usd)}); judge {self.judge_model} "
                f"~{self.judge_calls:,.0f} calls, ~{self.judge_tokens:,.0f} tokens ({money(self.judge_usd)}; "
                f"citation checks counted at {CITES_PER_REPORT} a report)")

    def check(self, cap: float | None) -> None:
        """A one-line UserError when the priced estimate exceeds ``llm.max_cost_usd``."""
        priced = sum(x for x in (self.agent_usd, self.judge_usd) if x is not None)
        if cap is not None and priced > cap:
            raise UserError(f"this evaluation may cost about ${priced:.2f}, more than llm.max_cost_usd = ${cap:.2f}",
                            "raise llm.max_cost_usd, or evaluate fewer tasks (--limit) or with cheaper models")


def agent_calls(agent: AgentConfig) -> float:
    """Expected model calls of one episode: no tools 1; ReAct one per tool turn and the answer; MaMs a search
    turn, then a state and a report update per result chunk (one chunk a turn with the default tools), per turn;
    stepwise the plan, a search step, a state update and a section lead per plan item, the outline and the
    conclusion."""
    kind = agent.episode()
    plan = min(MAX_PLAN, agent.tool_budget, agent.max_turns)
    return {"none": 1.0, "react": agent.max_turns + 1.0, "mams": 3.0 * agent.max_turns,
            "stepwise": 3.0 * plan + 3}[kind]


def estimate(agent: AgentConfig, cfg: Config, tasks: Sequence[Mapping[str, Any]],
             scorers: Sequence[Sequence[str]]) -> Estimate:
    """The expected cost of running ``agent`` on ``tasks`` and judging them with ``scorers`` (per task): every
    agent call reads the question and a turn of tool results (``tools.top_k`` snippets) and writes ``max_tokens``
    tokens; every judge call reads its prompt, the question, the rubric and a report of the agent's
    ``max_tokens`` tokens (a reference too for RACE), and writes the judge's ``max_tokens``."""
    from rubricforge.llm.pricing import CHARS_PER_TOKEN, price, template_tokens
    from rubricforge.rewards.judging import PROMPTS

    def template(name: str) -> float:
        return template_tokens(PROMPTS, name)

    n = len(tasks)
    question = statistics.fmean(len(str(t.get("question") or t.get("prompt") or "")) for t in tasks) / CHARS_PER_TOKEN
    observation = cfg.tools.top_k * cfg.tools.snippet_chars / CHARS_PER_TOKEN if agent.tools else 0
    calls = agent_calls(agent) * n
    a_prompt = calls * (500 + question + observation)  # 500: the agent's system prompt and state, about
    a_done = calls * agent.max_tokens
    report = agent.max_tokens * (3 if agent.episode() in ("mams", "stepwise") else 1)  # a MaMs report grows per chunk
    j_calls = j_prompt = 0.0
    for task, names in zip(tasks, scorers, strict=True):
        for name in names:
            rubric = len(str(task.get("rubrics") or task.get("race_rubrics") or "")) / CHARS_PER_TOKEN
            per, prompt = {"rubric": (1 if cfg.reward.judge_mode == "batched" else len(task.get("rubrics") or []),
                                      template("rubric_score") + question + report + rubric / max(
                                          len(task.get("rubrics") or []), 1)),
                           "race": (1, template("race_pointwise") + question + 2 * report + rubric),
                           "equivalence": (1, template("answer_equivalence") + question + report),
                           "citation": (CITES_PER_REPORT, template("citation_recall_cited") + question + 150),
                           **dict.fromkeys(("healthbench", "coverage"), (
                               len(task.get("rubrics") or []), template("hote_judge") + question + report)),
                           }.get(name, (0, 0.0))
            j_calls += per
            j_prompt += per * prompt
    judge = cfg.llm.judge
    j_done = j_calls * judge.max_tokens
    a_price, j_price = price(agent.role()), price(judge)
    return Estimate(n, agent.model, calls, a_prompt + a_done,
                    None if a_price is None else a_prompt * a_price[0] + a_done * a_price[1],
                    judge.model, j_calls, j_prompt + j_done,
                    None if j_price is None else j_prompt * j_price[0] + j_done * j_price[1])

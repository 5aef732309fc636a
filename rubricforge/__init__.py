"""rubricforge: training data, rewards and training runs for RL of deep-research agents.

The public API; every name is imported on first use, so ``import rubricforge`` stays fast::

    import rubricforge as rf

    cfg = rf.load_config("my.yaml", overrides=["build.n_trees=20"])   # a Config (YAML < env < overrides)
    result = rf.build_dataset(cfg)            # evidence-tree dataset (DeepRubric): JobResult
    kg = rf.build_kg_dataset(cfg)             # knowledge-graph multi-hop dataset (MindDR): JobResult
    result = rf.run_job("tree", cfg, executor="prefect")   # the same job as its Prefect flow (as the CLI runs it)
    scored = rf.score_responses(cfg, "data.jsonl", "responses.jsonl", ["composite"])   # a JobResult, as every
                                              # job returns: .status, .out, .run_dir, .summary (a RewardScoreSummary)
    result = await rf.abuild_dataset(cfg)     # the async twins (abuild_kg_dataset, ascore_responses) run a
                                              # job in a worker thread: notebooks and async trainers

    scorer = rf.RewardScorer(cfg, rf.LLMClient(cfg.llm))               # every reward for one rollout
    values = await scorer.score(rf.Rollout(example_row, completion), ("composite", "rubric"))
    funcs = rf.reward_functions(scorer, ["composite"])                # TRL GRPOTrainer reward functions

The reward formulas themselves (docs/formulas.md maps every formula to its function): ``composite``, ``format_reward``,
``search_reward``, ``citation_reward``, ``citation_format_reward``, ``rubric_reward`` (DeepRubric);
``race_score``, ``report_citation_reward``, ``report_format_reward``, ``report_reward``, ``prm_reward``,
``search_rl_reward``, ``orm_reward`` (MindDR); ``parse_trajectory`` turns a completion into the
:class:`Trajectory` the rule rewards read. ``generate_race_rubrics`` writes a query's RACE rubric.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Config": "rubricforge.config", "load_config": "rubricforge.config", "UserError": "rubricforge.errors",
    "LLMClient": "rubricforge.llm",
    # jobs and their async twins
    "build_dataset": "rubricforge.jobs.tree", "build_kg_dataset": "rubricforge.jobs.kg", "JobResult": "rubricforge.jobs.base",
    "score_responses": "rubricforge.jobs.reward_score", "RewardScoreSummary": "rubricforge.jobs.reward_score",
    "abuild_dataset": "rubricforge.api", "abuild_kg_dataset": "rubricforge.api", "ascore_responses": "rubricforge.api",
    "run_job": "rubricforge.api",
    # scoring and the TRL adapters
    "RewardScorer": "rubricforge.rewards.scorer", "Rollout": "rubricforge.rewards.scorer",
    "reward_functions": "rubricforge.rewards.trl_rewards",
    # reward functions
    "parse_trajectory": "rubricforge.rewards.trajectory", "Trajectory": "rubricforge.rewards.trajectory",
    "composite": "rubricforge.rewards.deeprubric.composite", "format_reward": "rubricforge.rewards.deeprubric.format_reward",
    "search_reward": "rubricforge.rewards.deeprubric.search_reward", "citation_reward": "rubricforge.rewards.deeprubric.citation_reward",
    "citation_format_reward": "rubricforge.rewards.deeprubric.citation_format",
    "rubric_reward": "rubricforge.rewards.deeprubric.rubric_reward", "race_score": "rubricforge.rewards.minddr.race",
    "report_citation_reward": "rubricforge.rewards.minddr.report_rules",
    "report_format_reward": "rubricforge.rewards.minddr.report_rules", "report_reward": "rubricforge.rewards.minddr.report_rules",
    "prm_reward": "rubricforge.rewards.minddr.search_rl", "search_rl_reward": "rubricforge.rewards.minddr.search_rl",
    "orm_reward": "rubricforge.rewards.minddr.orm",
    # rubric generation
    "generate_race_rubrics": "rubricforge.rubric_gen.race",
}
_RENAMED = {"ScoreSummary": "RewardScoreSummary"}  # former names, kept for one release with a DeprecationWarning
__all__ = [
    "Config",
    "JobResult",
    "LLMClient",
    "RewardScoreSummary",
    "RewardScorer",
    "Rollout",
    "Trajectory",
    "UserError",
    "abuild_dataset",
    "abuild_kg_dataset",
    "ascore_responses",
    "build_dataset",
    "build_kg_dataset",
    "citation_format_reward",
    "citation_reward",
    "composite",
    "format_reward",
    "generate_race_rubrics",
    "load_config",
    "orm_reward",
    "parse_trajectory",
    "prm_reward",
    "race_score",
    "report_citation_reward",
    "report_format_reward",
    "report_reward",
    "reward_functions",
    "rubric_reward",
    "run_job",
    "score_responses",
    "search_reward",
    "search_rl_reward",
]

if TYPE_CHECKING:
    from rubricforge.api import abuild_dataset, abuild_kg_dataset, ascore_responses, run_job
    from rubricforge.config import Config, load_config
    from rubricforge.errors import UserError
    from rubricforge.jobs.base import JobResult
    from rubricforge.jobs.kg import build_kg_dataset
    from rubricforge.jobs.reward_score import RewardScoreSummary, score_responses
    from rubricforge.jobs.tree import build_dataset
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.deeprubric.citation_format import citation_format_reward
    from rubricforge.rewards.deeprubric.citation_reward import citation_reward
    from rubricforge.rewards.deeprubric.composite import composite
    from rubricforge.rewards.deeprubric.format_reward import format_reward
    from rubricforge.rewards.minddr.orm import orm_reward
    from rubricforge.rewards.minddr.race import race_score
    from rubricforge.rewards.minddr.report_rules import report_citation_reward, report_format_reward, report_reward
    from rubricforge.rewards.deeprubric.rubric_reward import rubric_reward
    from rubricforge.rewards.scorer import RewardScorer, Rollout
    from rubricforge.rewards.deeprubric.search_reward import search_reward
    from rubricforge.rewards.minddr.search_rl import prm_reward, search_rl_reward
    from rubricforge.rewards.trajectory import Trajectory, parse_trajectory
    from rubricforge.rewards.trl_rewards import reward_functions
    from rubricforge.rubric_gen.race import generate_race_rubrics


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562) and keep it."""
    if name in _RENAMED:
        import warnings

        warnings.warn(f"rubricforge.{name} is now rubricforge.{_RENAMED[name]}; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return __getattr__(_RENAMED[name])
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rubricforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

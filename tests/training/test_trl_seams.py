"""TRL's private trainer methods: the installed TRL still has each one rubricforge's seam module uses, with the
parameters it passes; no module but ``training/trl_seams.py`` touches a private trainer member; and ``train grpo``
with no per-step feature on trains with TRL's own GRPOTrainer."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from rubricforge.config import Config
from rubricforge.training.adaptive import StepHooks
from rubricforge.training.trl_seams import (PRIVATE_ATTRIBUTES, PRIVATE_METHODS, SFT_PRIVATE_METHODS,
                                           TRAINER_PRIVATE_METHODS)
from support.config import derive
from support.paths import ROOT

trl = pytest.importorskip("trl")
PACKAGE = ROOT / "rubricforge"
SEAMS = PACKAGE / "training" / "trl_seams.py"


def _check_signatures(cls: type, expected: dict[str, tuple[str, ...]]) -> list[str]:
    wrong = []
    for name, leading in expected.items():
        method = getattr(cls, name, None)
        if method is None:
            wrong.append(f"{cls.__name__}.{name} is gone")
            continue
        params = list(inspect.signature(method).parameters.values())
        got = tuple(p.name for p in params[:len(leading)])
        rest = [p.name for p in params[len(leading):]
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if got != leading or rest:
            wrong.append(f"{cls.__name__}.{name}{inspect.signature(method)}: the seam passes {leading}")
    return wrong


def _init_attributes(cls: type) -> set[str]:
    names: set[str] = set()
    for base in cls.__mro__:
        if "__init__" in vars(base) and base.__module__.split(".")[0] in ("trl", "transformers"):
            names |= set(re.findall(r"self\.(_[a-z]\w*)\s*[:=]", inspect.getsource(base.__init__)))
    return names


def test_the_installed_trl_has_every_private_method_the_seams_use():
    from trl import GRPOTrainer, SFTTrainer

    wrong = (_check_signatures(GRPOTrainer, PRIVATE_METHODS) + _check_signatures(SFTTrainer, SFT_PRIVATE_METHODS)
             + _check_signatures(SFTTrainer, TRAINER_PRIVATE_METHODS))
    missing = [a for a in PRIVATE_ATTRIBUTES if a not in _init_attributes(GRPOTrainer)]
    assert not wrong and not missing, (
        f"TRL {trl.__version__} moved a seam of rubricforge/training/trl_seams.py: {'; '.join(wrong)}"
        f"{'; attributes no longer set: ' + ', '.join(missing) if missing else ''}")


def test_only_the_seam_module_touches_private_trainer_members():
    from trl import GRPOTrainer, SFTTrainer

    private = {n for cls in (GRPOTrainer, SFTTrainer) for n in [*dir(cls), *_init_attributes(cls)]
               if n.startswith("_") and not n.startswith("__")}
    outside, inside = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.name if isinstance(node, ast.FunctionDef) else None
            if name in private and path.parent.name != "rewards":  # rewards/ holds no trainer (its `_step` is its own)
                if path == SEAMS:
                    inside.add(name)
                else:
                    outside.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert outside == []
    # every private member the seams use is declared, so the signature test covers it
    assert inside == {*PRIVATE_METHODS, *SFT_PRIVATE_METHODS, *TRAINER_PRIVATE_METHODS, *PRIVATE_ATTRIBUTES}


@pytest.mark.parametrize("settings, reward, adaptive", [
    ((), "composite", False),
    (("evolve.rubrics=evolving",), "composite", True),
    (("evolve.modes=hybrid",), "composite", True),
    (("evolve.dynamic_sampling=true",), "composite", True),
    ((), "search_rl", True),
])
def test_per_step_features_are_what_needs_the_adaptive_trainer(settings, reward, adaptive):
    cfg = derive(Config(), *settings, "llm.cache_path=")
    assert StepHooks(cfg, None, None, reward).active is adaptive


def test_plain_grpo_trains_with_trls_own_trainer(tiny_model, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rubricforge.training.grpo import grpo_args, grpo_trainer, trl_config

    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"question {i}"}]} for i in range(4)])

    def build(*settings: str):
        cfg = derive(Config(), "train.preset=cpu", f"train.output_dir={tmp_path}", "llm.cache_path=", *settings)
        args = trl_config(GRPOConfig, {**grpo_args(cfg), "use_cpu": True, "bf16": False})
        return grpo_trainer(StepHooks(cfg, None, None, "composite"), model=str(tiny_model), args=args,
                            reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], train_dataset=rows)

    assert type(build()) is GRPOTrainer
    adaptive = build("evolve.dynamic_sampling=true")
    assert isinstance(adaptive, GRPOTrainer) and type(adaptive) is not GRPOTrainer


@pytest.mark.parametrize(("settings", "reward", "on"), [
    ((), "report", True), ((), "race", True), ((), "composite", False), (("evolve.dynamic_sampling=false",), "report", False)])
def test_report_rl_is_dapo_with_dynamic_sampling_by_default(settings, reward, on, tmp_path):
    """MindDR §5.3: "For Report-RL on dense models, we therefore adopt DAPO" (token-level loss, clip-higher, no KL,
    dynamic sampling); the old default was symmetric-clip per-sequence GRPO without the filter."""
    from trl import GRPOConfig

    from rubricforge.training.grpo import grpo_args, reward_args, trl_config

    cfg = derive(Config(), "train.preset=cpu", f"train.output_dir={tmp_path}", "llm.cache_path=", *settings)
    assert StepHooks(cfg, None, None, reward).dynamic_sampling is on
    args = trl_config(GRPOConfig, grpo_args(cfg, **reward_args(reward, cfg.train.loss)))
    dapo = reward in ("report", "race")
    assert (args.loss_type, args.epsilon_high) == (("dapo", 0.28) if dapo else ("grpo", None)) and args.beta == 0.0
    assert reward_args("report", "grpo") == {}  # a loss the config names wins


def test_dapo_refills_flat_groups_with_informative_ones():
    """DAPO's dynamic sampling (Yu et al. 2025): flat groups are replaced by informative groups of another
    generation, re-padded, with the loss's token count; the batch keeps its size."""
    import torch

    from rubricforge.training.trl_seams import refill_groups

    out = {"advantages": torch.tensor([0.0, 0.0, 0.5, -0.5]), "prompt_ids": torch.tensor([[7, 1], [7, 1], [2, 3], [2, 3]]),
           "completion_ids": torch.tensor([[4, 0], [4, 4], [5, 5], [5, 0]]),
           "completion_mask": torch.tensor([[1, 0], [1, 1], [1, 1], [1, 0]]), "num_items_in_batch": torch.tensor(6)}
    extra = {"advantages": torch.tensor([0.0, 0.0, 1.0, -1.0]), "prompt_ids": torch.tensor([[8], [8], [9], [9]]),
             "completion_ids": torch.tensor([[6, 6, 6], [6, 0, 0], [3, 3, 3], [3, 3, 0]]),
             "completion_mask": torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 1], [1, 1, 0]]),
             "num_items_in_batch": torch.tensor(8)}
    got, n = refill_groups(out, extra, 2, pad_id=0)
    assert n == 1 and got["advantages"].tolist() == [0.5, -0.5, 1.0, -1.0]
    assert got["prompt_ids"].tolist() == [[2, 3], [2, 3], [0, 9], [0, 9]]  # prompts padded on the left
    assert got["completion_ids"].tolist() == [[5, 5, 0], [5, 0, 0], [3, 3, 3], [3, 3, 0]]
    assert got["completion_mask"].tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]]
    assert int(got["num_items_in_batch"]) == 6 - 3 + 5
    assert refill_groups(got, extra, 2, pad_id=0)[1] == 0  # nothing flat left


@pytest.mark.slow
def test_the_adaptive_trainer_refills_a_flat_group_in_a_real_step(tiny_model, tmp_path):
    """One real GRPO step with TRL on CPU: three of four prompts always earn the same reward, so the step's batch
    starts with a flat group; the trainer generates again until the batch holds only informative groups."""
    from datasets import Dataset
    from trl import GRPOConfig

    from rubricforge.training.grpo import grpo_args, grpo_trainer, trl_config

    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"question {i}"}]} for i in range(4)])

    def reward(prompts, completions, **kw):
        return [float(i % 2) if "question 3" in str(p) else 0.0 for i, p in enumerate(prompts)]

    cfg = derive(Config(), "train.preset=cpu", f"train.output_dir={tmp_path}", f"run_dir={tmp_path}/run",
                 "llm.cache_path=", "evolve.dynamic_sampling=true", "evolve.refill_rounds=8")
    args = trl_config(GRPOConfig, {**grpo_args(cfg), "use_cpu": True, "bf16": False, "generation_batch_size": 4,
                                   "per_device_train_batch_size": 4, "max_completion_length": 8, "max_steps": 1,
                                   "save_strategy": "no"})
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.scorer import RewardScorer

    hooks = StepHooks(cfg, RewardScorer(cfg, LLMClient(cfg.llm)), None, "composite")  # it saves the scorer's state
    trainer = grpo_trainer(hooks, model=str(tiny_model), args=args, reward_funcs=[reward], train_dataset=rows)
    batches = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    trainer.train()
    (batch,) = batches
    assert batch["advantages"].numel() == 4 and not (batch["advantages"].view(2, 2) == 0).all(dim=1).any()
    logged = [h for h in trainer.state.log_history if "dapo/refilled_groups" in h]
    assert logged and logged[0]["dapo/refilled_groups"] >= 1 and logged[0]["dapo/dropped_groups"] == 0

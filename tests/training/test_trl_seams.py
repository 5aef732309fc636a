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

"""Named eval presets: a leaderboard's official evaluator (judge, sampling, scorers, mode, batch size), and the
label that says whether a run's numbers can stand beside that leaderboard's.

* ``drb`` — DeepResearch Bench since 11 May 2026 (its README's news of that day: "Official Evaluator Switched to
  GPT-5.5", GPT-5.4-mini for the FACT pipeline): RACE, reference-relative, judged by ``gpt-5.5`` with DRB's own
  scoring prompt (``prompt/score_prompt_{en,zh}.py``; ``eval.race_prompt=drb``). FACT's, for a run that adds
  ``citation``, is DRB's validation prompt (``eval.fact_prompt=drb``) judged by ``gpt-5.4-mini`` on the
  ``verifier`` role (``eval.fact_role``); its sources are the local corpus, not the cited web pages, so FACT is
  never the leaderboard's number and asking for it makes the run not comparable (its scorers differ).
* ``drb2`` — DeepResearch Bench II (``run_evaluation.py`` / ``gpt_client.py`` of its repository): the ``drb2``
  scorer, binary rubric items judged 1 / 0 / −1 in calls of 50 items (``eval.rubrics_per_call``) by ``gpt-5.5``.

Sampling: DRB II's client sends no temperature (the provider's default, 1, the only one GPT-5-family reasoning
models accept) and at most 32,768 completion tokens; DRB publishes neither for its GPT-5.5 evaluator, so ``drb``
takes DRB II's (docs/evaluation.md, "Presets"), with DRB II's ``reasoning_effort=medium``
(``llm.<role>.reasoning_effort``), which is checked like the rest.

A preset fills the settings a user did not set (the YAML file, the environment, ``--set`` and the flags win); a
run whose judge or settings then differ from the preset's — or that names no preset and matches none — is
labelled "not comparable with the leaderboard" (:func:`label`). A judge model is the preset's when its last path
segment is the preset's model id (``openai/gpt-5.5``, ``openrouter/openai/gpt-5.5``: the same model through any
provider or gateway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubricforge.config import Config

NOT_COMPARABLE = "not comparable with the leaderboard"
JUDGE = {"backend": "litellm", "model": "openai/gpt-5.5", "temperature": 1.0, "max_tokens": 32768, "top_p": None,
         "reasoning_effort": "medium"}
FACT_JUDGE = {**JUDGE, "model": "openai/gpt-5.4-mini"}


@dataclass(frozen=True)
class Preset:
    name: str
    leaderboard: str  # what the numbers can stand beside
    scorers: tuple[str, ...]
    settings: Mapping[str, Mapping[str, Any]]  # config section (dotted) -> field -> value
    race_mode: str | None = None  # RACE's mode on the leaderboard ("reference": against its reference articles)
    checked: tuple[str, ...] = ()  # the dotted keys of `settings` that decide comparability (the rest: helpers)


PRESETS: dict[str, Preset] = {
    "drb": Preset("drb", "DeepResearch Bench (RACE, official evaluator GPT-5.5 since May 2026)", ("race",),
                  {"llm.judge": JUDGE, "llm.verifier": FACT_JUDGE,
                   "eval": {"race_prompt": "drb", "fact_role": "verifier", "fact_prompt": "drb"}},
                  race_mode="reference",
                  checked=("llm.judge.model", "llm.judge.temperature", "llm.judge.max_tokens", "llm.judge.top_p",
                           "llm.judge.reasoning_effort", "eval.race_prompt")),
    "drb2": Preset("drb2", "DeepResearch Bench II (binary rubrics, GPT-5.5)", ("drb2",),
                   {"llm.judge": JUDGE, "eval": {"rubrics_per_call": 50}},
                   checked=("llm.judge.model", "llm.judge.temperature", "llm.judge.max_tokens", "llm.judge.top_p",
                            "llm.judge.reasoning_effort", "eval.rubrics_per_call")),
}


def _section(cfg: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        cfg = getattr(cfg, key)
    return cfg


def apply(cfg: Config) -> Config:
    """``cfg`` with ``cfg.eval.preset``'s settings in every field that was not set explicitly (a field is explicit
    when the YAML file, the environment or an override named it: pydantic's ``model_fields_set``)."""
    if cfg.eval.preset is None:
        return cfg
    data = cfg.model_dump()
    for dotted, values in PRESETS[cfg.eval.preset].settings.items():
        section, target = _section(cfg, dotted), data
        for key in dotted.split("."):
            target = target[key]
        target.update({k: v for k, v in values.items() if k not in section.model_fields_set})
    return Config.model_validate(data)


def _model_id(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def label(cfg: Config, scorers: Sequence[str], race_modes: Sequence[str]) -> dict[str, Any]:
    """Whether a run scored with ``cfg`` (presets applied), ``scorers`` (every task's) and RACE ``race_modes`` gives
    a leaderboard's numbers: ``{"preset", "leaderboard", "comparable", "why"}`` (``why``: what differs from the
    preset's evaluator). Without a preset, the first preset the run matches in every checked setting; none:
    not comparable."""
    if cfg.eval.preset is None:
        found = next((name for name in PRESETS if not _differences(PRESETS[name], cfg, scorers, race_modes)), None)
        if found is None:
            return {"preset": None, "leaderboard": None, "comparable": False,
                    "why": ["no preset (--preset drb | drb2): scored with rubricforge's settings"]}
        return {"preset": found, "leaderboard": PRESETS[found].leaderboard, "comparable": True, "why": []}
    preset = PRESETS[cfg.eval.preset]
    why = _differences(preset, cfg, scorers, race_modes)
    return {"preset": preset.name, "leaderboard": preset.leaderboard, "comparable": not why, "why": why}


def _differences(preset: Preset, cfg: Config, scorers: Sequence[str], race_modes: Sequence[str]) -> list[str]:
    why = []
    if tuple(scorers) != preset.scorers:
        why.append(f"scorers {','.join(scorers) or '-'}, the leaderboard's {','.join(preset.scorers)}")
    if preset.race_mode and any(m != preset.race_mode for m in race_modes):
        why.append(f"RACE {'/'.join(sorted(set(race_modes)))}, the leaderboard's {preset.race_mode}-relative")
    for dotted in preset.checked:
        section, key = dotted.rsplit(".", 1)
        want, got = preset.settings[section][key], getattr(_section(cfg, section), key)
        same = _model_id(got) == _model_id(want) if key == "model" else got == want
        if not same:
            why.append(f"{dotted} {got}, the leaderboard's {want}")
    return why


def line(verdict: Mapping[str, Any]) -> str:
    """The label for a summary line: '' for a comparable run."""
    if not verdict or verdict.get("comparable"):
        return ""
    return f"{NOT_COMPARABLE} ({'; '.join(verdict['why'])})"

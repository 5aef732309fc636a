"""The public API of ``import rubricforge``: lazy (importing the package loads nothing else), every
documented name resolves, and the async twins run a job from inside a running event loop."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

import rubricforge
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.paths import ROOT
from support.reward_fixtures import EXAMPLE, ROLLOUT, SCRIPTED_JUDGE


def test_import_rubricforge_loads_no_submodule_and_no_dependency():
    code = ("import json, sys, rubricforge; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('rubricforge', 'pydantic', 'litellm', 'torch', 'prefect', 'datasets', 'httpx'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["rubricforge"]


def test_every_public_name_resolves_and_is_listed():
    for name in rubricforge.__all__:
        assert callable(getattr(rubricforge, name)), name
    assert set(rubricforge.__all__) <= set(dir(rubricforge))
    assert rubricforge.report_reward is rubricforge.rewards.minddr.report_rules.report_reward
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rubricforge.nope  # noqa: B018


@pytest.mark.filterwarnings("ignore:coroutine '_score_all' was never awaited")
def test_async_twin_scores_responses_inside_a_running_loop(tmp_path):
    dataset, responses = tmp_path / "data.jsonl", tmp_path / "responses.jsonl"
    dataset.write_text(json.dumps(EXAMPLE) + "\n")
    responses.write_text("\n".join(json.dumps({"id": "ex1", "response": r})
                                   for r in (ROLLOUT, "<think>gave up</think>")) + "\n")

    async def in_a_loop(cfg):
        with pytest.raises(RuntimeError, match="running event loop"):  # why the twin exists
            rubricforge.score_responses(cfg, dataset, responses, ["rubric"], tmp_path / "sync.jsonl", progress=False)
        return await rubricforge.ascore_responses(cfg, dataset, responses, ["rubric", "format"], progress=False)

    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = rubricforge.load_config(overrides={"llm": litellm_llm_config(tmp_path, server)})
        result = asyncio.run(in_a_loop(cfg))
    summary = result.summary
    assert isinstance(result, rubricforge.JobResult) and result.status == "complete"
    assert isinstance(summary, rubricforge.RewardScoreSummary) and summary.responses == summary.scored_now == 2
    assert summary.rewards["rubric"]["max"] == pytest.approx(1.25 / 1.5)  # the same values as `reward score`
    assert summary.rewards["format"]["min"] == pytest.approx(0.2)


def test_the_former_name_score_summary_still_works_for_one_release_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="rubricforge.ScoreSummary is now rubricforge.RewardScoreSummary"):
        assert rubricforge.ScoreSummary is rubricforge.RewardScoreSummary


def _formula_table() -> list[tuple[str, str, str]]:
    """(paper, equation / figure, module:function) rows of the formula table (docs/formulas.md)."""

    text = (ROOT / "docs" / "formulas.md").read_text(encoding="utf-8")
    rows = [[c.strip() for c in line.replace("\\|", "¦").strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| paper")]
    return [(paper, eq, target.strip("` ")) for paper, eq, _, targets in rows for target in targets.split(",")]


def test_every_function_of_the_formula_table_exists():
    import importlib

    rows = _formula_table()
    assert len(rows) >= 30 and {("MindDR", "Eq. 12", "rewards.minddr.report_rules:report_reward"),
                                ("DeepRubric", "Eq. 5", "rewards.deeprubric.composite:composite")} <= set(rows)
    for _, _, target in rows:
        module, _, attr = target.partition(":")
        obj = importlib.import_module(f"rubricforge.{module}")
        for part in attr.split("."):
            obj = getattr(obj, part)  # AttributeError names a row that points nowhere


def test_the_rewards_package_index_agrees_with_the_formula_table():
    import re

    import rubricforge.rewards

    table = {target for _, _, target in _formula_table() if target.startswith("rewards.")}
    listed = {"rewards.{}:{}".format(*ref.rsplit(".", 1))
              for ref in re.findall(r":(?:func|class):`\.([\w.]+)`", rubricforge.rewards.__doc__)}
    assert table - listed == {"rewards.deeprubric.citation_reward:ClaimScore.f1"} and listed <= table

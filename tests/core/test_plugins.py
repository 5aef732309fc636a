"""Plugins (:mod:`rubricforge.plugins`): a user's own package adds a reward, a judge backend, a converter and an
eval scorer through entry points, without editing rubricforge.

The package is installed for real as Python sees an installed distribution: its module and a ``dist-info`` with
``entry_points.txt`` in a folder on ``sys.path``, found by :func:`importlib.metadata.entry_points`. Each plugin is
then used through rubricforge's own paths: the reward scorer and ``reward score``'s groups, the LLM client, ``convert``
and the eval's scorer check and dispatch.
"""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from rubricforge.errors import UserError

PLUGIN = '''
from rubricforge.llm.request import Completion
from rubricforge.rewards.registry import RewardSpec


async def _brevity(scorer, rollout):
    words = len(str(rollout.completion).split())
    return {"value": 1.0 if words <= 5 else 0.0, "words": words}


BREVITY = RewardSpec("brevity", "demo", ("question",), "demo plugin", "none", _brevity)


class EchoBackend:
    name = "echo"

    def __init__(self, cfg):
        self.cfg = cfg

    async def prepare(self, role, role_cfg):
        pass

    async def complete(self, request, role_cfg):
        return Completion(text="echo: " + request.messages[-1]["content"], prompt_tokens=3, completion_tokens=2)


class DemoFormat:
    NAME, DESCRIPTION = "demo", "the demo plugin's rows: {demo_q, demo_rubric}"

    @staticmethod
    def detect(record):
        return "demo_q" in record

    @staticmethod
    def to_rubricforge(record, n):
        return {"id": f"demo-{n}", "question": record["demo_q"],
                "rubrics": [{"title": record["demo_rubric"], "description": record["demo_rubric"], "weight": 1.0}]}

    @staticmethod
    def from_rubricforge(row, source="rubricforge"):
        return {"demo_q": row["question"], "demo_rubric": row["rubrics"][0]["description"]}


async def length(judge, task, report, reference):
    return {"metrics": {"length": float(len(report.split()))}}
'''

ENTRY_POINTS = """
[rubricforge.rewards]
brevity = rf_demo_plugin:BREVITY

[rubricforge.backends]
echo = rf_demo_plugin:EchoBackend

[rubricforge.formats]
demo = rf_demo_plugin:DemoFormat

[rubricforge.scorers]
length = rf_demo_plugin:length
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The demo plugin package, installed on ``sys.path`` for this test only."""
    from rubricforge.plugins import plugins
    from rubricforge.rewards import registry

    site = tmp_path / "site"
    (site / "rf_demo_plugin").mkdir(parents=True)
    (site / "rf_demo_plugin" / "__init__.py").write_text(PLUGIN)
    info = site / "rf_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rf-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    monkeypatch.syspath_prepend(str(site))
    for cached in (plugins, registry._specs):
        cached.cache_clear()
    yield site
    for cached in (plugins, registry._specs):
        cached.cache_clear()


def test_a_plugin_reward_is_scored_and_grouped_like_a_built_in(plugin):
    from rubricforge.config import Config
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.registry import ALL, groups, spec
    from rubricforge.rewards.scorer import RewardScorer, Rollout, check_columns

    assert "brevity" not in ALL and groups()["demo"] == ("brevity",) and groups()["all"][-1] == "brevity"
    assert spec("brevity").paper == "demo plugin"
    scorer = RewardScorer(Config(), LLMClient(Config().llm))
    short = asyncio.run(scorer.details("brevity", Rollout({"id": "a", "question": "q"}, "It was 1968.")))
    long = asyncio.run(scorer.component("brevity", Rollout({"id": "a", "question": "q"}, "one two three four five six")))
    assert (short, long) == ({"value": 1.0, "words": 3}, 0.0)
    with pytest.raises(UserError, match="has no 'question' column \\(the 'brevity' reward reads it\\)"):
        check_columns([{"id": "b"}], ["brevity"], "data.jsonl")


def test_a_plugin_backend_answers_a_role(plugin):
    from rubricforge.config import Config
    from rubricforge.llm import LLMClient

    cfg = Config.model_validate({"llm": {"judge": {"backend": "echo", "model": "any"}, "cache_path": ""}})
    client = LLMClient(cfg.llm)
    got = asyncio.run(client.generate("judge", [{"role": "user", "content": "hello"}]))
    assert got.ok and got.text == "echo: hello"
    assert client.ledger.summary()["total"]["prompt_tokens"] == 3
    with pytest.raises(ValueError, match="unknown backend .nope.: use local, litellm, replay or an installed"):
        Config.model_validate({"llm": {"judge": {"backend": "nope"}}})


def test_a_plugin_format_converts_both_ways(plugin, tmp_path):
    from rubricforge.export.convert import convert_file, detect_format

    src = tmp_path / "demo.jsonl"
    src.write_text(json.dumps({"demo_q": "Who directed 2001?", "demo_rubric": "Names Kubrick."}) + "\n")
    assert detect_format({"demo_q": "x", "demo_rubric": "y"}) == "demo"
    got, _ = convert_file(src, tmp_path / "rf.jsonl", "rubricforge")
    assert got.source_format == "demo" and got.converted == 1
    row = json.loads((tmp_path / "rf.jsonl").read_text())
    assert row["question"] == "Who directed 2001?"
    back, _ = convert_file(tmp_path / "rf.jsonl", tmp_path / "back.jsonl", "demo")
    assert json.loads((tmp_path / "back.jsonl").read_text()) == {"demo_q": "Who directed 2001?",
                                                                 "demo_rubric": "Names Kubrick."}


def test_a_plugin_scorer_is_checked_and_dispatched(plugin):
    from rubricforge.evaluation.scorers import score
    from rubricforge.evaluation.tasks import scorers_for

    task = {"id": "t1", "question": "q"}
    assert scorers_for(task, ["length"]) == ("length",)
    got = asyncio.run(score("length", None, task, "three short words", None, "batched"))  # type: ignore[arg-type]
    assert got == {"metrics": {"length": 3.0}}
    with pytest.raises(UserError, match="use --scorers with some of: .*length"):
        scorers_for(task, ["nope"])


def test_a_plugin_that_takes_a_built_in_name_or_does_not_load_is_named(plugin):
    from rubricforge.plugins import added, plugins

    (plugin / "rf_demo_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[rubricforge.rewards]\nrubric = rf_demo_plugin:BREVITY\n\n[rubricforge.scorers]\nbroken = rf_demo_plugin:nope\n")
    plugins.cache_clear()
    with pytest.raises(UserError, match="takes the built-in name\\(s\\) rubric"):
        added("rewards", ["rubric"])
    with pytest.raises(UserError, match="the scorers plugin 'broken' = rf_demo_plugin:nope \\(package rf-demo-plugin\\)"):
        plugins("scorers")

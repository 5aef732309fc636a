"""HOTE's pieces with values worked by hand (docs/methods.md H-3, H-4, H-5, H-6): Eq. 5, meta-rubric
compression and the replayed meta-rubric answer, diverse proposing, validity of proposed tasks, hybrid modes."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import Config
from rubricforge.rewards.hote.rubric_reward import proposer_reward
from rubricforge.rubric_gen.bank import RubricItem, TaskRubrics
from rubricforge.rubric_gen.meta_rubrics import combinations, meta_rubrics, weaknesses
from rubricforge.testing import FakeOpenAI, Reply
from rubricforge.training.adaptive import TOOL, step_modes
from support.llm_fakes import litellm_llm_config


def test_eq5_spec_examples():
    # G = 4, M = 3: R1 one of four passes -> 0.75, R2 nobody -> 0, R3 everybody -> 0
    assert proposer_reward({"R1": [1, 0, 0, 0], "R2": [0, 0, 0, 0], "R3": [1, 1, 1, 1]}) == pytest.approx(0.25)
    assert proposer_reward({"R1": [1, 1, 0, 0, 0, 0, 0, 0], "R2": [0] * 8}) == pytest.approx(0.375)
    assert proposer_reward({"R1": [1] + [0] * 7}) == pytest.approx(0.875)  # the upper bound 1 - 1/G
    assert proposer_reward({"R1": [1, 0, None, 0], "R2": [0, 0, 0, 0]}) is None  # unscored J


def _task() -> TaskRubrics:
    return TaskRubrics(task_id="t", query="How do tides work?", persistent=[
        RubricItem(id=f"R{i}", title=f"Rubric {i}", description=f"Checks point {i}.", weight=1.0) for i in (1, 2, 3)])


def test_meta_rubric_compression_keeps_the_weak_rubrics_weakest_first():
    found = weaknesses(_task(), {"R1": [1, 1, 1, 1], "R2": [1, 0, 0, 0], "R3": [0, 0, 0, 0]},
                       ["first response", "second", "third", "fourth"])
    assert [(w.rubric.id, w.pass_rate) for w in found] == [("R3", 0.0), ("R2", 0.25)]
    assert found[0].failing_excerpt == "first response" and found[1].failing_excerpt == "second"


def test_meta_rubrics_from_a_replayed_answer_are_cut_to_five(tmp_path):
    six = [{"title": f"Weakness {i}", "description": f"Covers aspect {i} of the task.", "weight": 1.0} for i in range(6)]
    with FakeOpenAI([Reply(json.dumps({"rubrics": six}))]) as server:
        cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server)})
        from rubricforge.llm import LLMClient

        async def call():
            client = LLMClient(cfg.llm)
            try:
                return await meta_rubrics(client, [("How do tides work?", weaknesses(
                    _task(), {"R1": [1, 1, 1, 1], "R2": [1, 0, 0, 0], "R3": [0, 0, 0, 0]}, ["a", "b", "c", "d"]))], 3, 2)
            finally:
                await client.aclose()

        meta = asyncio.run(call())
        sent = server.requests[0]["messages"][-1]["content"]
    assert [m.id for m in meta] == ["m3-2-1", "m3-2-2", "m3-2-3", "m3-2-4", "m3-2-5"]
    assert all(m.origin == "meta" and m.weight == 1.0 for m in meta)
    assert sent.index("Rubric 3") < sent.index("Rubric 2") and "Rubric 1" not in sent  # R1 passed by all: not sent


def test_a_failed_meta_rubric_call_is_none_not_an_empty_set(tmp_path):
    from rubricforge.llm import LLMClient

    with FakeOpenAI([Reply(json.dumps({"rubrics": [{"title": "Only one", "description": "Too few.", "weight": 1}]}))]) as server:
        cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server, max_retries=1)})

        async def call():
            client = LLMClient(cfg.llm)
            try:
                return await meta_rubrics(client, [("How do tides work?", [])], 1, 1)
            finally:
                await client.aclose()

        assert asyncio.run(call()) is None  # fewer than 3 rubrics, re-asked, still unreadable: the group proposes nothing


def test_diverse_proposing_48_tasks_give_4_distinct_combinations():
    cfg = Config.model_validate({"hote": {"batch_size": 48, "proposer_group": 6}})
    assert cfg.hote.combinations == 4  # 4 groups x G' = 6 = 24 synthetic tasks = B/2
    combos = combinations([f"t{i}" for i in range(48)], cfg.hote.combinations, 3, "0:combo:1")
    assert len(combos) == 4 and len({frozenset(c) for c in combos}) == 4 and all(len(set(c)) == 3 for c in combos)
    assert combos == combinations([f"t{i}" for i in range(48)], 4, 3, "0:combo:1")  # seeded: a resume redraws them
    small = combinations(["a", "b", "c", "d"], 4, 3, "s")  # all of C(4, 3)
    assert len({frozenset(c) for c in small}) == 4


def test_hybrid_batch_has_half_its_tasks_in_tool_mode():
    real = step_modes([f"r{i}" for i in range(24)], 601, "hote", 600)
    groups = step_modes([str(n) for n in range(1, 5)], 601, "hote", 600)
    tool_rows = sum(m == TOOL for m in real.values()) + 6 * sum(m == TOOL for m in groups.values())
    assert tool_rows == 24  # of 48 tasks: 12 real + 2 groups x 6 synthetic
    assert set(step_modes([f"r{i}" for i in range(24)], 600, "hote", 600).values()) == {"no_tool"}


def test_proposed_task_validity():
    from rubricforge.training.hote import TaskValidity

    query = "How did Stanley Kubrick and Arthur C. Clarke shape 2001: A Space Odyssey, and how was the film received?"
    check = TaskValidity(Config.model_validate({"hote": {"max_task_words": 20}}), [("ex-kubrick", query)])
    assert check.reason("  ") == "empty"
    assert check.reason("word " * 21) == "longer than 20 words"
    assert "training set query ex-kubrick" in check.reason("Explain: " + query)
    assert check.reason("How do coral reefs recover after bleaching events?") is None


def test_train_hote_cli_names_a_dataset_smaller_than_the_batch(tmp_path):
    import subprocess
    import sys

    from rubricforge.cli import cli_config as _config
    from rubricforge.errors import UserError

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"id": "t0", "question": "Why is the sky blue?",
                                   "rubrics": [{"title": "Rayleigh", "description": "Names Rayleigh scattering.", "weight": 1}]}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "rubricforge.cli", "train", "hote", "--dataset", str(dataset),
                           "--model", "unused", "--set", f"run_dir={tmp_path / 'run'}", "--set", "hote.batch_size=4",
                           "--set", "hote.proposer_group=2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "has 1 tasks, hote.batch_size is 4" in proc.stderr
    with pytest.raises(UserError, match="multiple of 2 x proposer_group"):
        _config(None, ["hote.batch_size=10", "hote.proposer_group=3"])


def test_a_paper_size_hybrid_step_is_half_real_half_synthetic_and_half_tool(tmp_path):
    from rubricforge.training.hote import HoteRun

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"t{i:02d}", "question": f"Question number {i}?",
                                           "rubrics": [{"title": "Any", "description": "Answers.", "weight": 1}]}) + "\n"
                               for i in range(60)))
    cfg = Config.model_validate({"run_dir": str(tmp_path / "run")})  # train hote's default: HOTE's schedule (§2.3)
    run = HoteRun(cfg, dataset, "unused")
    groups = step_modes([str(n) for n in range(1, 5)], 601, "hote", 600)  # as _propose draws them at step 600
    run.synthetic = [{"id": f"syn600-{n}-{i}", "query": f"Synthetic {n}.{i}?", "group": n, "mode": groups[str(n)]}
                     for n in range(1, 5) for i in range(1, 7)]
    tasks, modes, real = run.batch(601)
    assert len(tasks) == 48 and len(real) == 24 and [t for t, _ in tasks[:24]] == [s["id"] for s in run.synthetic]
    assert sum(m == TOOL for m in modes.values()) == 24
    assert all(modes[f"syn600-{n}-{i}"] == groups[str(n)] for n in range(1, 5) for i in range(1, 7))  # a group shares it
    assert run.batch(601) == (tasks, modes, real)  # seeded by step: a resumed run draws the same batch
    run.synthetic = run.synthetic[:20]  # 4 invalid proposals: their slots go to real tasks
    assert len(run.batch(601)[2]) == 28


def _hote_run(tmp_path, *settings: str, tasks: int = 60):
    from rubricforge.training.hote import HoteRun
    from support.config import derive

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"t{i:02d}", "question": f"Question number {i}?",
                                           "rubrics": [{"title": "Any", "description": "Answers.", "weight": 1}]}) + "\n"
                               for i in range(tasks)))
    return HoteRun(derive(Config.model_validate({"run_dir": str(tmp_path / "run")}), *settings), dataset, "unused")


def test_train_hote_runs_hotes_schedule_and_judge_sampling_by_default(tmp_path):
    """§2.3 / §3.2: "HOTE-8B was trained in no-tool mode for 600 steps and hybrid mode for 700 steps" without any
    flag (the old default was Fig. 4a's tool-only ablation); App. E: the judge at "temperature=0, max_tokens=16384,
    top_p=1.0"."""
    run = _hote_run(tmp_path)
    assert (run.cfg.hote.modes, run.cfg.hote.steps, run.cfg.evolve.no_tool_steps) == ("hote", 1300, 600)
    assert set(run.batch(1)[1].values()) == set(run.batch(600)[1].values()) == {"no_tool"}
    assert sorted(set(run.batch(601)[1].values())) == ["no_tool", TOOL]
    judge = run.cfg.llm.judge
    assert (judge.temperature, judge.top_p, judge.max_tokens) == (0.0, 1.0, 16384)
    mine = _hote_run(tmp_path, "hote.judge_max_tokens=null", "llm.judge.max_tokens=512", "hote.modes=tool")
    assert mine.cfg.llm.judge.max_tokens == 512 and set(mine.batch(1)[1].values()) == {TOOL}


def test_optimiser_updates_per_hote_step_are_a_setting(tmp_path):
    """HOTE gives no mini-batch size: TRL's default splits a step's B x G rollouts into per_device_train_batch_size
    mini-batches (here 4 x 2 / 2 = 4 updates; 96 with --preset paper), hote.updates_per_step=n makes n updates."""
    default = _hote_run(tmp_path, "train.preset=cpu", "hote.batch_size=4", "hote.proposer_group=2", "hote.steps=3",
                        f"train.output_dir={tmp_path}/out", tasks=4)
    args = default._args("solver", 2, 4, 3)
    assert (args.gradient_accumulation_steps, args.save_steps, args.max_steps) == (1, 4, 16)
    one = _hote_run(tmp_path, "train.preset=cpu", "hote.batch_size=4", "hote.proposer_group=2", "hote.steps=3",
                    "hote.updates_per_step=1", tasks=4)
    args = one._args("solver", 2, 4, 3)
    assert (args.gradient_accumulation_steps, args.save_steps, args.max_steps) == (4, 1, 4)
    from rubricforge.errors import UserError

    bad = _hote_run(tmp_path, "train.preset=cpu", "hote.batch_size=4", "hote.proposer_group=2",
                    "hote.updates_per_step=3", tasks=4)
    with pytest.raises(UserError, match="does not split the solver's 8 rollouts"):
        bad._args("solver", 2, 4, 3)


def test_the_judge_cost_bound_counts_the_active_rubrics_that_accumulate(tmp_path):
    """With only the judge retiring rubrics (HOTE), a task updated v times may carry v x evolve.max_new active
    rubrics; the bound before step 1 counts them (the old one assumed at most max_new). Four tasks, B = 4: every
    task is drawn every step, so by step t it may carry 5t."""
    run = _hote_run(tmp_path, "hote.batch_size=4", "hote.proposer_group=2", "hote.group=2", "hote.steps=10", tasks=4)
    assert run.visit_bounds() == list(range(1, 11))
    persistent = 5  # a synthetic task's meta rubrics (the prompt's most) > the real tasks' 1
    judged = 4 * 2 * (persistent + 5 * sum(range(1, 11)) / 10)
    assert run.cost.calls == pytest.approx(judged + 4 + 1)
    assert "up to 55 rubrics per task by step 10" in run.cost.line()
    spread = _hote_run(tmp_path, "hote.batch_size=4", "hote.proposer_group=2", "hote.group=2", "hote.steps=10",
                       "hote.retire=spread", tasks=4)
    # pruned to max_active, plus max_new: 5 at step 1, then 10
    assert spread.cost.calls == pytest.approx(4 * 2 * (5 + (5 + 9 * 10) / 10) + 4 + 1)


def test_the_update_prompt_allows_a_negative_rubric_for_a_flaw_every_response_shares():
    """HOTE §2.2: negative rubrics "summarize common undesirable behaviors such as reward hacking observed across
    {o_i}"; the old prompt required every rubric to separate the responses, which rules such a flaw out."""
    from rubricforge.rubric_gen.prompting import PROMPTS

    text = PROMPTS.render("evolve_update.system")
    assert "a negative rubric may name a flaw that every response shares" in text
    assert "Each rubric must be checkable on a single response, must separate" not in text


def _binary(body) -> str:
    assert "<rubric>" in body["messages"][-1]["content"]
    return json.dumps({"score": 1})


# the update proposes one negative rubric ("Cites no sources"), which every response shows; the binary judge:
# every answer passes the dataset rubric and shows the flaw (J = 1 for both); meta rubrics: three
FLAW_JUDGE = {
    "evolve_update": json.dumps({"positive_rubrics": [], "negative_rubrics": [
        {"title": "Cites no sources", "description": "The answer names no source for its claims."}]}),
    "hote_meta": json.dumps({"rubrics": [{"title": f"Meta {i}", "description": f"Meta check {i}.", "weight": 1.0}
                                         for i in range(1, 4)]}),
    "hote": _binary,
}


@pytest.mark.parametrize("retire", ["judge", "spread"])
def test_a_flaw_every_response_shares_reaches_the_meta_rubrics(tmp_path, retire):
    """Audit bug (HOTE Eq. 4): the weaknesses are taken before pruning. A new negative rubric that all G responses
    fail has zero spread: DR Tulu's pruning (``hote.retire=spread``) retires it, HOTE's default (only the judge
    retires) keeps it active; either way the proposer's meta-rubric call sees it as the task's weakness."""
    import threading
    from types import SimpleNamespace

    from rubricforge.training.hote import HoteRun, HoteStep

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"t{i}", "question": f"Why does thing {i} happen?",
                                           "rubrics": [{"title": "Answers", "description": "Answers it.", "weight": 1}]})
                               + "\n" for i in range(4)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with FakeOpenAI(stages=FLAW_JUDGE) as server:
        cfg = Config.model_validate({"run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, server),
                                     "evolve": {"dedup_cosine": 1.0},
                                     "hote": {"modes": "no_tool", "batch_size": 4, "group": 2, "proposer_group": 2, "combo_size": 4,
                                              "retire": retire}})
        run = HoteRun(cfg, dataset, "unused")
        run.solver = SimpleNamespace(async_loop=loop)
        run.step = 1
        tasks, _, _ = run.batch(1)
        ids = [tid for tid, _ in tasks for _ in range(2)]
        answers = ["<think>x</think>\n<answer>It happens because of physics.</answer>"] * len(ids)
        rewards = run._on_loop(run._solver_reward([None] * len(ids), answers, ids))
        tr = run.bank.tasks["t0"]
        _, rows = run._propose(1, tasks, HoteStep(1, [], [], {}))
        run._on_loop(run.client.aclose())
        meta_prompt = next(m["content"] for r in server.requests for m in r["messages"]
                           if "You analyse how a research agent failed" in r["messages"][0]["content"] and m["role"] == "user")
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    assert rewards == [0.0] * len(ids)  # Eq. 2 with the new flaw scored at once: (1·1 − 1·1) / (1 + 1)
    flaw = [w.rubric.title for w in run.weak["t0"]]
    assert flaw == ["Cites no sources"]
    assert [a.title for a in (tr.inactive if retire == "spread" else tr.active)] == ["Cites no sources"]
    assert "[flaw] Cites no sources" in meta_prompt and len(rows) == 2

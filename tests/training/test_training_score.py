"""`train score` (SCORE, Algs. 1–2) on CPU with the tiny local Qwen2 model (tests/support/tiny_qwen.py): two steps of
two queries × two rollouts, then a resume from the step-1 checkpoint.

Real: the model, TRL's GRPOTrainer with its tool loop over the FAISS index, the evaluator rows' log-probs and
the optimiser; the assessment and harness calls through the litellm backend. Scripted: the policy's tokens
(``training_fakes.ScriptedPolicy``: a valid rubric selection for the Kubrick query, an invalid one — two extra
dimensions where k = 4 needs three — for the Seurat query; then a search call and an answer) and the judge
(one ``<search>`` per assessment, then scores 8/10 for a report that cites, 4/10 otherwise; a new harness).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rubricforge.config import Config
from rubricforge.rewards.score.evaluator import extract_conclusion, pairwise_consistency
from rubricforge.testing import FakeOpenAI, Reply
from support.paths import EXAMPLES
from support.training_fakes import ScriptedPolicy, scripted_turn, train_cfg

pytestmark = pytest.mark.slow
VALID = ('<dimensions><dim name="factuality"/><dim name="insight" weight="0.3"/>'
         '<dim name="coherence" weight="0.2"/><dim name="fairness" weight="0.1"/></dimensions>')
INVALID = '<dimensions><dim name="factuality"/><dim name="insight" weight="0.3"/><dim name="coherence" weight="0.2"/></dimensions>'
CITING, PLAIN = "Kubrick directed the film.", "Kubrick made a film."
NEW_HARNESS = {"dimension_constraints": {"k": 3, "must_include": ["factuality"], "weight_min": 0.2, "weight_max": 0.4},
               "process_constraints": {"min_number_of_tool_call": 1}, "notes": "search more"}


def turn(context: str, row: int) -> str:
    if "Dimension pool:" in context:
        return VALID if "Kubrick" in context.split("Query:", 1)[1][:200] else INVALID
    return scripted_turn(context, row)


def assess(body) -> Reply:
    """SCORE's assessor: one search, then the scores (8 for a report that states who directed the film, else 4)."""
    last = body["messages"][-1]["content"]
    if not last.startswith("<observation>"):
        return Reply("<search>Stanley Kubrick film</search>")
    user = body["messages"][1]["content"]
    dims = re.findall(r"^- (\w+) \(", user.split("Evaluation dimensions:", 1)[1].split("Process", 1)[0], re.M)
    reports = re.findall(r'<report id="(\d+)">\n(.*?)\n</report>', user, re.S)
    body_xml = "".join(f'<report id="{n}"><scores>' + "".join(
        f'<score dim="{d}" value="{8 if "directed the film" in text else 4}" reason="r"/>' for d in dims)
        + "</scores></report>" for n, text in reports)
    return Reply(f"<report_evaluations>{body_xml}</report_evaluations>")


JUDGE = {"score_harness": json.dumps(NEW_HARNESS), "score_assess": assess}


def score_cfg(small_index_cfg, tmp_path, server) -> Config:
    cfg = train_cfg(small_index_cfg, tmp_path, server, generation_batch_size=4, per_device_train_batch_size=4,
                    max_steps=2, save_strategy="steps", save_steps=1)
    data = cfg.model_dump(mode="json")
    data["run_dir"] = str(tmp_path / "run")
    data["score"].update(harness_every=2, assessor="role")  # the scripted judge assesses
    return Config.model_validate(data)


def run_steps(cfg, tiny_model, resume_from=None, policy=turn, before=None):
    """Train; returns the run and, per step: the selection prompts, the writer prompts, the baseline b_{t-1} the
    step started from, the rewards R_s, and the generation batch handed to TRL's loss."""
    from rubricforge.training.score import build_score

    run = build_score(cfg, EXAMPLES, str(tiny_model))
    trainer, loop = run.trainer, run.hooks
    if before is not None:
        before(trainer)
    ScriptedPolicy(trainer.model, trainer.processing_class, policy)
    steps: list[dict] = []
    prompts, condition, rewards = loop.selection_prompts, loop.condition, loop.rewards
    generate_and_score = trainer._generate_and_score_completions

    def selection_prompts(inputs, step):
        steps.append({"step": step, "baseline": loop.baseline.value, "harness": loop.harness.model_dump()})
        steps[-1]["selection"] = prompts(inputs, step)
        return steps[-1]["selection"]

    def conditioned(inputs, texts):
        steps[-1]["writer"] = condition(inputs, texts)
        return steps[-1]["writer"]

    async def scored(completions, rows):
        steps[-1]["rewards"] = await rewards(completions, rows)
        steps[-1]["answers"] = {k: list(v) for k, v in loop.current.answers.items()}
        return steps[-1]["rewards"]

    def capture(inputs):
        steps[-1]["batch"] = generate_and_score(inputs)
        return steps[-1]["batch"]

    loop.selection_prompts, loop.condition, loop.rewards = selection_prompts, conditioned, scored
    trainer._generate_and_score_completions = capture
    run.train(resume_from)
    return run, steps


def test_two_score_steps_then_resume(small_index_cfg, tiny_model, tmp_path):
    with FakeOpenAI(stages=JUDGE) as server:
        cfg = score_cfg(small_index_cfg, tmp_path, server)
        run, steps = run_steps(cfg, tiny_model)
        calls_first = len(server.requests)
    trainer = run.trainer
    tok = trainer.processing_class
    assert run.note.startswith("SCORE: 2 assessments per step")
    assert calls_first == 2 * 2 * 2 + 1  # 2 steps x 2 queries x (search + scores), 1 harness call at t = M = 2
    logs = [h for h in trainer.state.log_history if "reward" in h]
    baseline = 0.0
    for n, (step, log) in enumerate(zip(steps, logs, strict=True), 1):
        batch = step["batch"]
        # batch composition: 4 writer rows (2 queries x K = 2) then 2 evaluator rows (one selection per query)
        rows = [tok.decode([t for t, m in zip(ids.tolist(), mask.tolist(), strict=True) if m])
                for ids, mask in zip(batch["prompt_ids"], batch["prompt_mask"], strict=True)]
        assert len(rows) == 6 and log["score/writer_rows"] == 4 and log["score/evaluator_rows"] == 2
        assert all("Your report will be evaluated on: factuality (primary)" in r and "Dimension pool:" not in r
                   for r in rows[:4])
        assert all("Dimension pool:" in r and "Select exactly 3 additional dimensions" in r for r in rows[4:])
        completions = [tok.decode(ids.tolist(), skip_special_tokens=True) for ids in batch["completion_ids"][4:]]
        qids = list(step["selection"])
        assert [c.strip() for c in completions] == [VALID if q == "ex-kubrick" else INVALID for q in qids]
        assert (batch["completion_mask"][4:].sum(1) > 0).all() and batch["ref_per_token_logps"].shape[0] == 6
        assert batch["ref_per_token_logps"][4:][batch["completion_mask"][4:].bool()].isfinite().all()
        # R_s by hand: a = 1, one search >= tau_s = 1; s = 0.8 (cites) / 0.4; weights of the valid selection
        # 1 + 0.3 + 0.2 + 0.1 = 1.6, of the default rubric (invalid selection) 1.0
        answers, expected = step["answers"], [0.0] * 4
        for i, x in enumerate(step["writer"]):
            assert ("insight (0.3)" in x["prompt"][-1]["content"]) == (x["id"] == "ex-kubrick")
            position = [j for j, y in enumerate(step["writer"]) if y["id"] == x["id"]].index(i)
            s = 0.8 if "directed the film" in answers[x["id"]][position] else 0.4
            expected[i] = 1 + (1.6 if x["id"] == "ex-kubrick" else 1.0) * s
        assert step["rewards"] == pytest.approx(expected)
        assert log["reward"] == pytest.approx(sum(expected) / 4)
        # Alg. 2: R_eval over the valid selection only, A_e = R_eval - b_{t-1}; the invalid one gets 0 - b_{t-1}
        r_eval = pairwise_consistency([extract_conclusion(a) for a in answers["ex-kubrick"]])
        assert step["baseline"] == pytest.approx(baseline)
        assert log["score/r_eval"] == pytest.approx(r_eval) and log["score/advantage_e"] == pytest.approx(r_eval - baseline)
        assert batch["advantages"][4:].tolist() == pytest.approx(
            [r_eval - baseline if q == "ex-kubrick" else -baseline for q in qids])
        baseline = 0.7 * baseline + 0.3 * r_eval
        assert log["score/baseline"] == pytest.approx(baseline) and log["score/invalid_selections"] == 1
        assert log["score/judge_calls"] == 4 + (n == 2)
    # the harness was regenerated after step 2 (t mod M = 0); the scheduler counted the valid selection's dims
    state = json.loads((tmp_path / "run" / "score" / "state.json").read_text())
    assert state["harness"]["dimension_constraints"]["k"] == 3 and state["harness"]["notes"] == "search more"
    assert state["scheduler"]["stats"]["insight"]["n"] == 2 and state["baseline"] == pytest.approx(baseline)
    assert steps[1]["harness"]["dimension_constraints"]["k"] == 4  # step 2 still ran under the default harness
    checkpoint = Path(trainer.args.output_dir) / "checkpoint-1"
    assert json.loads((checkpoint / "rubricforge_adaptive.json").read_text())["baseline"] == pytest.approx(
        0.3 * logs[0]["score/r_eval"])

    # resume from the step-1 checkpoint: step 2 runs again with identical inputs
    with FakeOpenAI(stages=JUDGE) as server:
        _, again = run_steps(score_cfg(small_index_cfg, tmp_path, server), tiny_model, resume_from=checkpoint)
    (step2,) = again
    assert step2["step"] == 2 and step2["baseline"] == pytest.approx(steps[1]["baseline"])
    assert list(step2["selection"].items()) == list(steps[1]["selection"].items())
    assert step2["harness"] == steps[1]["harness"]
    assert [x["prompt"] for x in step2["writer"]] == [x["prompt"] for x in steps[1]["writer"]]
    assert step2["rewards"] == pytest.approx(steps[1]["rewards"])


def test_the_evaluator_update_raises_a_rewarded_selection(small_index_cfg, tiny_model, tmp_path):
    """Spec S-6's sign check: every writer rollout identical (zero writer advantage, KL 0 at step 1), so the only
    gradient is the evaluator's: the valid Kubrick selection has Â_e = C = 1 > 0 and becomes more likely."""
    import torch

    def same_reports(context: str, row: int) -> str:
        return turn(context, row) if "Dimension pool:" in context else scripted_turn(context, 1)

    with FakeOpenAI(stages=JUDGE) as server:
        cfg = score_cfg(small_index_cfg, tmp_path, server)
        data = cfg.model_dump(mode="json")
        data["train"]["grpo_args"].update(max_steps=1, save_strategy="no", learning_rate=1e-2)
        run, (step,) = run_steps(Config.model_validate(data), tiny_model, policy=same_reports)
    batch, trainer = step["batch"], run.trainer
    assert batch["advantages"][:4].abs().max() == 0
    row = 4 + list(step["selection"]).index("ex-kubrick")
    assert batch["advantages"][row] == pytest.approx(1.0)  # C = 1 (identical conclusions) - b_0
    ids = torch.cat([batch["prompt_ids"][row:row + 1], batch["completion_ids"][row:row + 1]], dim=1)
    mask = torch.cat([batch["prompt_mask"][row:row + 1], batch["completion_mask"][row:row + 1]], dim=1)
    width = batch["completion_ids"].size(1)
    with torch.no_grad():
        after = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width, batch_size=1)[0][0]
    tokens = batch["completion_mask"][row].bool()
    # the reference model is the policy before the step
    assert after[tokens].sum() > batch["ref_per_token_logps"][row][tokens].sum()

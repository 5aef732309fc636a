"""Does GRPO learn on this CPU? A learning curve of the embedded 0.5B against the same run at learning rate 0.

The packaged Qwen2.5-Coder-0.5B GGUF becomes a transformers folder (``gguf_to_transformers``; reused when
``--policy`` already holds one). ``train grpo`` (``build_grpo``) then runs ``--steps`` steps at each ``--lr`` and
at learning rate 0 (the control), with the same seeds: every run sees the same question at a step. Settings
chosen so that the reward varies within a group at this size and a step is short: no-tool mode (HOTE's one
think, then the answer: no index, no tool turns), DeepRubric's format reward over the no-tool components (a
closed ``<think>`` and a non-empty ``<answer>``; no judge call, so 0 judge calls per step), ``--prompts``
questions per step × G = ``--group`` rollouts of at most ``--max-completion`` tokens, FP32 weights (``--bf16``:
BF16 autocast for the loss). Questions: :data:`QUESTION` over default-corpus titles (seeded sample); "In two
sentences, what is <title>?" scored 0 in all 16 samples at 48 tokens (no signal), this one closed ``<think>`` in
2 of 16 at 32 tokens.

Each run writes ``<work>/curve-lr<lr>.json`` after every step (reward, its std, seconds, tokens/s, peak memory,
TRL's log line); ``--arm trained`` / ``control`` runs one side, so two processes can run the two side by side and
a run cut short still plots (``--arm none``). ``--svg``: per run each step's mean reward and a 5-step running
mean with its 95 % band; ``--md``: first and last ten steps' reward, format components and length per run, s/step,
tokens/s, peak memory, and each run minus the control paired by step with a bootstrap CI.

Measured (1 question × G = 4, 24 tokens, on this project's shared 2-core CPU): learning rate 1e-5 rises from
0.07 to 0.714 by step 6 and stays there for 40 steps (``<answer>`` closed, ``<think>`` dropped: tag soup that pays),
steps 31–40 +0.64 over the control (bootstrap CI +0.55 to +0.70), about 115 s a step under load; 3e-5 collapses
to text that closes no tag by step 5. ``--preset small-gpu`` runs it on a GPU (``benchmarks/gpu_run.sh curve``;
docs/gpu.md). ``docs/results.md`` ("A GRPO learning curve on CPU") has the whole account::

    .venv/bin/python benchmarks/grpo_learning_curve.py --steps 40 --lr 3e-5 1e-5 --prompts 1 --group 4 \\
        --max-completion 24 --bf16 --work runs/bench-curve --svg docs/grpo-learning-curve.svg \\
        --md docs/grpo-learning-curve.md

``--task content`` trains on content instead (docs/grpo-content-curve.md; ``docs/results.md``, "A content-reward GRPO
curve on CPU"): :data:`MASKED` questions — an article's first sentence with its title masked, four titles to choose
from (:func:`content_questions`, seeded; ``--held-out`` other articles held out) — scored by ``answer_em`` (exact
match of the closed ``<answer>`` with the title; no judge; ``answer_f1``'s partial credit paid for restating the
sentence, see the account). The gold judge of ``train grpo``
(:mod:`rubricforge.evaluation.gold`) answers the held-out questions greedily at step 0 and every ``--gold-every``
steps (exact match and F1 per question, the alarm's probes scored with the training reward); ``--md`` pairs the trained
run against the control question by question. ``--base-rate``: only the untrained policy's held-out answers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rubricforge.config import Config  # noqa: E402
from rubricforge.corpora.default_corpus import iter_default_corpus  # noqa: E402
from rubricforge.io.rejects import Rejects  # noqa: E402
from rubricforge.evaluation.exact import exact_scores  # noqa: E402
from rubricforge.evaluation.stats import paired  # noqa: E402
from rubricforge.evaluation.tasks import report_text  # noqa: E402
from rubricforge.llm.local_model import ensure_model  # noqa: E402
from rubricforge.rewards.trajectory import parse_trajectory  # noqa: E402
from rubricforge.training.grpo import build_grpo  # noqa: E402
from rubricforge.training.model import EMBEDDED_POLICY, gguf_to_transformers  # noqa: E402


def peak_rss_gb() -> float:
    """The process's peak memory: the GPU's (torch's allocator) when training runs on one, else resident RAM."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux


QUESTION = "What is {}? Reply with <think>…</think> then <answer>…</answer>, in under 15 words."


def questions(path: Path, n: int, seed: int) -> Path:
    """``n`` seeded :data:`QUESTION` s about default-corpus titles, as a training JSONL (``id``, ``question``)."""
    titles = sorted({p.title for p in iter_default_corpus(Rejects()) if p.title})
    picked = random.Random(seed).sample(titles, n)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": QUESTION.format(t)}) + "\n"
                            for i, t in enumerate(picked)), encoding="utf-8")
    return path


MASKED = ('Which title fills the blank ___ in this Wikipedia sentence: "{}" Options: {}. Reply with the title inside '
          '<answer>…</answer>.')
OPTIONS = 4  # the answer and three other articles' titles
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
GOLD_JUDGE = "qwen2.5-coder-0.5b-instruct-q4"  # any model but the training judge: the exact scorer calls none


def masked(title: str, text: str, max_words: int = 40) -> tuple[str, str] | None:
    """(the article's first sentence with its title, and every word of 4+ letters of it, masked as ``___``, the
    title without a trailing parenthesis), or None when the sentence does not contain the title or has fewer than 6
    or more than ``max_words`` words."""
    answer = re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()
    first = SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()
    if not answer or not re.search(re.escape(answer), first, re.I) or not 6 <= len(first.split()) <= max_words:
        return None
    out = re.sub(re.escape(answer), "___", first, flags=re.I)
    for word in set(re.findall(r"\w{4,}", answer)):
        out = re.sub(rf"\b{re.escape(word)}\b", "___", out, flags=re.I)
    return out, answer


def content_questions(path: Path, n: int, held: int, seed: int) -> Path:
    """Masked-title questions (:data:`MASKED`, :func:`masked`) over a seeded shuffle of the default corpus's
    articles: the first ``held`` are held out (``split`` test, the gold evaluation's), the next ``n`` train; each
    row has the title as its ``answer``, so no held-out article is trained on."""
    found = []
    for p in iter_default_corpus(Rejects()):
        if p.title and (got := masked(p.title, p.text)):
            found.append((p.id, *got))
    rng = random.Random(seed)
    rng.shuffle(found)
    titles = sorted({answer for _, _, answer in found})
    rows = []
    for k, (pid, sentence, answer) in enumerate(found[:held + n]):
        options = [answer, *rng.sample([t for t in titles if t != answer], OPTIONS - 1)]
        rng.shuffle(options)
        rows.append({"id": pid, "question": MASKED.format(sentence, "; ".join(options)), "answer": answer,
                     "split": "test" if k < held else "train"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config(args: argparse.Namespace, work: Path, lr: float) -> Config:
    content = {"gold_judge": GOLD_JUDGE, "gold_every": args.gold_every} if args.task == "content" else {}
    return Config.model_validate({
        "run_dir": str(work / f"run-lr{lr:g}"), "llm": {"cache_path": str(work / "llm-cache.sqlite")},
        "evolve": {"modes": "no_tool"},
        "train": {"preset": args.preset, "reward": args.reward, "generation": "transformers",
                  "output_dir": str(work / f"policy-lr{lr:g}"), **content,
                  "grpo_args": {"max_steps": args.steps, "learning_rate": lr, "seed": args.seed,
                                "num_generations": args.group, "generation_batch_size": args.prompts * args.group,
                                "per_device_train_batch_size": args.prompts * args.group,  # one update per batch
                                "max_completion_length": args.max_completion,
                                "activation_checkpointing": args.checkpointing, "save_strategy": "no",
                                "bf16": args.bf16, "logging_steps": 1,
                                # FP32 master weights under BF16 autocast: with BF16 weights an Adam step of 1e-5
                                # is below half a BF16 ulp of most weights and rounds away
                                "model_init_kwargs": {"dtype": "float32"},
                                # at learning rate 0 no optimiser moves a weight; SGD keeps no state (Adam's two FP32
                                # moments are 4 GB for the 0.5B: both runs at once would not fit in 24 GB)
                                **({"optim": "sgd"} if lr == 0 else {}),
                                # β1 = 0: a step whose groups all scored alike (gradient 0) moves no weight; with
                                # momentum, AdamW keeps moving along the last gradients (--task content's collapse)
                                **({"adam_beta1": args.adam_beta1} if args.adam_beta1 is not None else {})}}})


def base_rate(args: argparse.Namespace, dataset: Path, policy: Path) -> str:
    """The untrained policy on the held-out rows, greedy, as the gold evaluation answers them: per row the answer,
    whether an ``<answer>`` closed, the training reward's F1 (closed answer only) and the gold EM / F1."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricforge.agent.prompt import no_tool_prompt
    from rubricforge.training.model import greedy_reply

    rows = [r for r in map(json.loads, dataset.read_text(encoding="utf-8").splitlines()) if r["split"] == "test"]
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
    lines, closed, reward, em, f1 = [], [], [], [], []
    for r in rows:
        reply = greedy_reply(model, no_tool_prompt(r["question"]), args.max_completion, tokenizer=tokenizer)
        answer = parse_trajectory(reply).answer
        gold = exact_scores(report_text(reply), [r["answer"]])
        closed.append(answer is not None)
        reward.append(exact_scores(answer, [r["answer"]])["f1"] if answer is not None else 0.0)
        em.append(gold["em"])
        f1.append(gold["f1"])
        lines.append(f"| {r['answer']} | {json.dumps(reply, ensure_ascii=False)[:140]} | {reward[-1]:.2f} | "
                     f"{em[-1]:.0f} / {f1[-1]:.2f} |")
        print(lines[-1], flush=True)
    head = (f"{len(rows)} held-out questions, greedy, at most {args.max_completion} tokens: `<answer>` closed "
            f"{statistics.fmean(closed):.2f}, training reward (F1 of the closed answer) {statistics.fmean(reward):.3f}, "
            f"gold EM {statistics.fmean(em):.3f}, gold F1 {statistics.fmean(f1):.3f}")
    return "\n".join([head, "", "| answer | greedy reply | reward | gold EM / F1 |", "|---|---|---|---|", *lines]) + "\n"


def shown(completion: Any) -> str:
    """A completion as text: a conversational one's last message, with the ``<think>`` block that TRL's response
    parser moved into ``reasoning_content`` put back in front."""
    if not isinstance(completion, list):
        return str(completion)
    message = completion[-1]
    think = message.get("reasoning_content")
    return (f"<think>{think}</think>" if think else "") + str(message.get("content") or "")


def curve_file(work: Path, lr: float) -> Path:
    return work / f"curve-lr{lr:g}.json"


def gold_file(work: Path, lr: float) -> Path:
    """The gold evaluations of a run (:mod:`rubricforge.evaluation.gold`: one line per evaluation)."""
    return work / f"policy-lr{lr:g}" / "gold.jsonl"


def run(args: argparse.Namespace, work: Path, dataset: Path, policy: Path, lr: float) -> None:
    """Train one run, rewriting ``curve-lr<lr>.json`` (one row per step) after every step."""
    from transformers import TrainerCallback

    gold_file(work, lr).unlink(missing_ok=True)  # the gold judge appends: a new run starts a new series
    grpo = build_grpo(config(args, work, lr), dataset, str(policy))
    rows: list[dict[str, Any]] = []
    clock: dict[str, float] = {}

    class Curve(TrainerCallback):
        def on_train_begin(self, a, state, control, model=None, **kw):
            gold = [c for c in grpo.trainer.callback_handler.callbacks if type(c).__name__ == "GoldJudge"]
            if gold and state.global_step == 0:  # the untrained policy's held-out answers: the step-0 point
                gold[0].evaluate(a, state, model)

        def on_step_begin(self, a, state, control, **kw):
            clock["t0"] = time.perf_counter()

        def on_log(self, a, state, control, logs=None, **kw):
            if not logs or "reward" not in logs:
                return
            n = args.prompts * args.group
            seconds = time.perf_counter() - clock["t0"]
            tokens = (logs.get("completions/mean_length") or 0) * n
            rows.append({"step": state.global_step, "reward": logs["reward"], "reward_std": logs.get("reward_std", 0.0),
                         "band": 1.96 * (logs.get("reward_std") or 0.0) / math.sqrt(n), "seconds": seconds,
                         "mean_length": logs.get("completions/mean_length"), "tokens": tokens,
                         "tok_per_s": tokens / seconds, "peak_rss_gb": peak_rss_gb(),
                         # the step's G completions (TRL keeps the last generation batch for its own table)
                         "completions": [shown(c) for c in grpo.trainer._logs["completion"]],
                         "logs": logs})  # TRL's line: the format components, clipped share, grad norm
            print(f"lr {lr:g} step {state.global_step}: reward {logs['reward']:.3f} ± {rows[-1]['band']:.3f}, "
                  f"{seconds:.1f} s, {rows[-1]['tok_per_s']:.1f} tok/s, peak {rows[-1]['peak_rss_gb']:.2f} GB", flush=True)
            curve_file(work, lr).write_text(json.dumps(rows, indent=1), encoding="utf-8")

    grpo.trainer.add_callback(Curve())
    grpo.train()


def smoothed(rows: list[dict[str, Any]], n: int, window: int) -> list[tuple[int, float, float]]:
    """(step, mean, 95 % half-width) over each step's last ``window`` steps (``n`` rollouts a step): the pooled
    variance of those rollouts is the mean within-step variance plus the variance of the step means."""
    out = []
    for k, r in enumerate(rows):
        w = rows[max(0, k - window + 1):k + 1]
        means = [x["reward"] for x in w]
        var = statistics.fmean(x["reward_std"] ** 2 for x in w) + (statistics.pvariance(means) if len(w) > 1 else 0.0)
        out.append((r["step"], statistics.fmean(means), 1.96 * math.sqrt(var / (n * len(w)))))
    return out


def svg(out: dict[str, Any], path: Path, n: int, window: int = 5, width: int = 640, height: int = 360,
        gold: dict[str, list[dict[str, Any]]] | None = None, metric: str = "exact.f1") -> None:
    """Per run: each step's mean reward (dots) and the mean over the last ``window`` steps with its 95 % band; with
    ``gold``, each gold evaluation's held-out ``metric`` (squares, dashed)."""
    pad, colours = 48, ["#1f77b4", "#2ca02c", "#9467bd", "#d62728"]
    steps = max(r["step"] for rows in out.values() for r in rows)
    x = lambda s: pad + (s - 1) / max(steps - 1, 1) * (width - 2 * pad)  # noqa: E731
    y = lambda v: height - pad - max(0.0, min(1.0, v)) * (height - 2 * pad)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="black"/>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{y(1)}" stroke="black"/>',
             f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">GRPO step (dots: one step; line: mean of '
             f'the last {window} steps, 95% band)</text>',
             f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">'
             f'mean training reward{" (squares: held-out " + metric + ", greedy)" if gold else ""}</text>']
    for v in (0, 0.5, 1):
        parts.append(f'<text x="{pad - 6}" y="{y(v) + 4}" text-anchor="end">{v:g}</text>')
    for k, (lr, rows) in enumerate(out.items()):
        c, line = (colours[-1] if lr == "0" else colours[k % 3]), smoothed(rows, n, window)
        upper = " ".join(f"{x(s):.1f},{y(m + h):.1f}" for s, m, h in line)
        lower = " ".join(f"{x(s):.1f},{y(m - h):.1f}" for s, m, h in reversed(line))
        parts.append(f'<polygon points="{upper} {lower}" fill="{c}" fill-opacity="0.2" stroke="none"/>')
        parts.append(f'<polyline points="{" ".join(f"{x(s):.1f},{y(m):.1f}" for s, m, _ in line)}" fill="none" '
                     f'stroke="{c}" stroke-width="2"/>')
        parts += [f'<circle cx="{x(r["step"]):.1f}" cy="{y(r["reward"]):.1f}" r="2" fill="{c}"/>' for r in rows]
        parts.append(f'<text x="{width - pad - 120}" y="{y(0.55) + 16 * k:.0f}" fill="{c}">learning rate {lr}</text>')
        points = [(e["step"], gold_mean(e, metric)) for e in (gold or {}).get(lr, [])]
        if points:
            parts.append(f'<polyline points="{" ".join(f"{x(st):.1f},{y(v):.1f}" for st, v in points)}" fill="none" '
                         f'stroke="{c}" stroke-dasharray="5,3"/>')
            parts += [f'<rect x="{x(st) - 4:.1f}" y="{y(v) - 4:.1f}" width="8" height="8" fill="{c}"/>' for st, v in points]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n</svg>\n", encoding="utf-8")


def gold_mean(entry: dict[str, Any], metric: str) -> float:
    """A gold evaluation's mean ``metric`` over its held-out tasks (unscored ones left out)."""
    got = [t[metric] for t in entry["per_task"] if t.get(metric) is not None]
    return statistics.fmean(got) if got else 0.0


def gold_summary(gold: dict[str, list[dict[str, Any]]], answers: dict[str, str]) -> list[str]:
    """The held-out gold evaluations per run and step (EM, F1, probe shares), then trained minus control on the
    held-out questions at each evaluation, paired by question, and the held-out answers (``answers``: id -> gold)."""
    from rubricforge.evaluation.gold import ALARM_PROBES

    runs = list(gold)
    probes = " / ".join(f"`{p}`" for p in ALARM_PROBES)
    lines = ["", "Held-out gold evaluations (greedy, no tools; `rubricforge eval`'s exact scorer: EM is the gold judge's "
             f"headline, F1 the training reward's metric) and the alarm's probe shares ({probes}: share of held-out "
             "questions where the probe's variant of the policy's answer scores at least the answer under the "
             "training reward; ties count, so a wrong answer that scores 0 is \"won\" by every probe):", "",
             "| step | " + " | ".join(f"lr {lr}: EM / F1 | lr {lr}: probes" for lr in runs) + " |",
             "|---|" + "---|---|" * len(runs)]
    by_step = {lr: {e["step"]: e for e in gold[lr]} for lr in runs}
    for step in sorted({st for lr in runs for st in by_step[lr]}):
        cells = []
        for lr in runs:
            e = by_step[lr].get(step)
            cells += ["–", "–"] if e is None else [
                f"{gold_mean(e, 'exact.em'):.3f} / {gold_mean(e, 'exact.f1'):.3f}",
                " / ".join("–" if e.get("probes", {}).get(p) is None else f"{e['probes'][p]:.2f}" for p in ALARM_PROBES)]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    control = by_step.get("0", {})
    for lr in runs:
        steps = sorted(st for st in by_step[lr] if st > 0)
        if lr == "0" or not steps:
            continue
        untrained = by_step[lr].get(0)  # what the control answers at every step: at lr 0 no weight moves
        lines += ["", f"Learning rate {lr} minus the control on the held-out questions, paired by question (95% "
                      "bootstrap CI; wins / ties / losses of the trained run; sign test). Where the control has no "
                      "evaluation at that step, the control is the run's own step-0 evaluation: at learning rate 0 no "
                      "weight moves and greedy decoding is deterministic, so the control answers exactly that at "
                      "every step.", "", "| step | control from | EM difference | F1 difference |", "|---|---|---|---|"]
        for step in steps:
            base, where = (control[step], "control run") if step in control else (untrained, "step 0")
            if base is None:
                continue
            cells = []
            for metric in ("exact.em", "exact.f1"):
                d = paired({t["id"]: t[metric] for t in base["per_task"]},
                           {t["id"]: t[metric] for t in by_step[lr][step]["per_task"]})
                cells.append(f"{d['diff']:+.3f} ({d['ci_low']:+.3f} to {d['ci_high']:+.3f}; {d['wins']}/{d['ties']}/"
                             f"{d['losses']}; p = {d['sign_p']:.3f})")
            lines.append(f"| {step} | {where} | {cells[0]} | {cells[1]} |")
        first, final = gold[lr][0], by_step[lr][steps[-1]]
        said = [f"{t['id']} (gold: {answers.get(t['id'], '?')}): {json.dumps(a0, ensure_ascii=False)[:70]} → "
                f"{json.dumps(a1, ensure_ascii=False)[:70]}"
                for t, a0, a1 in zip(final["per_task"], first["answers"], final["answers"], strict=True)]
        lines += ["", f"Held-out answers, learning rate {lr}, step {first['step']} → step {steps[-1]}:", "",
                  *(f"- {x}" for x in said)]
    return lines


def summary(out: dict[str, Any], args: argparse.Namespace, gold: dict[str, list[dict[str, Any]]] | None = None,
            answers: dict[str, str] | None = None) -> str:
    """The Markdown numbers: per run the first and last ten steps' mean reward, its format components and
    length (from TRL's log lines), s/step, tokens/s, peak memory; then trained minus control, paired by step."""
    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(r[key] if key in r else r["logs"][key] for r in rows)

    window = 10  # steps; fewer for a run that recorded fewer
    f, la = f"first {window}", f"last {window}"
    lines = [f"Settings: policy {args.policy_name}, {args.steps} steps a run (the table says how many each run "
             f"recorded), {args.prompts} question(s) x G={args.group} "
             f"rollouts per step, responses up to {args.max_completion} tokens, no-tool mode, reward "
             f"`{args.reward}`{' (no judge: 0 judge calls per step)' if args.reward in ('format', 'answer_f1', 'answer_em') else ''}, "
             f"FP32 weights{' under BF16 autocast' if args.bf16 else ''}, AdamW"
             f"{f' with β1 = {args.adam_beta1:g}' if args.adam_beta1 is not None else ''} (the control: SGD at learning rate 0, "
             f"so no weight moves), seed {args.seed}. First and last {window} steps overlap in a run that recorded "
             f"fewer than {2 * window}.", "",
             f"| learning rate | steps | reward, {f} | reward, {la} | `<think>` closed, {f} / {la} | "
             f"`<answer>` closed, {f} / {la} | tokens per response, {f} / {la} | s/step | generated tokens/s | "
             "peak memory (GB) |", "|---|---|---|---|---|---|---|---|---|---|"]

    def closed(rows: list[dict[str, Any]], tag: str) -> float:  # from the completions: a reward without components
        if tag == "answer" and rows and "format/answer/mean" in rows[0]["logs"]:
            return mean(rows, "format/answer/mean")
        if tag == "think" and rows and "format/think/mean" in rows[0]["logs"]:
            return mean(rows, "format/think/mean")
        got = [parse_trajectory(c) for r in rows for c in r.get("completions", [])]
        return statistics.fmean(bool(t.answer is not None if tag == "answer" else t.thinks) for t in got) if got else 0.0

    for lr, rows in out.items():
        first, last = rows[:window], rows[-window:]  # the same steps when a run recorded fewer than 2 windows
        lines.append(f"| {lr} | {len(rows)} | {mean(first, 'reward'):.3f} | {mean(last, 'reward'):.3f} | "
                     f"{closed(first, 'think'):.2f} / {closed(last, 'think'):.2f} | "
                     f"{closed(first, 'answer'):.2f} / {closed(last, 'answer'):.2f} | "
                     f"{mean(first, 'mean_length'):.1f} / {mean(last, 'mean_length'):.1f} | {mean(rows, 'seconds'):.1f} | "
                     f"{mean(rows, 'tok_per_s'):.2f} | {max(r['peak_rss_gb'] for r in rows):.2f} |")
    control = out.get("0", [])
    for lr, trained in out.items():
        last_step = min(len(trained), len(control))
        if lr == "0" or not last_step:
            continue
        w = min(window, last_step)
        d = paired({r["step"]: r["reward"] for r in control[last_step - w:last_step]},
                   {r["step"]: r["reward"] for r in trained[last_step - w:last_step]})
        lines += ["", f"Learning rate {lr}, steps {last_step - w + 1}–{last_step}, minus the control, paired by step "
                      "(same seeds): "
                      f"{d['diff']:+.3f} (95% bootstrap CI {d['ci_low']:+.3f} to {d['ci_high']:+.3f}; trained higher "
                      f"at {d['wins']} steps, equal at {d['ties']}, lower at {d['losses']}; sign test p = {d['sign_p']:.3f})."]
    if gold:
        lines += gold_summary(gold, answers or {})
    for lr, rows in out.items():
        for r in (rows[0], rows[-1]):
            said = " · ".join(json.dumps(c, ensure_ascii=False)[:120] for c in r.get("completions", [])[:4])
            if said:
                lines += ["", f"Learning rate {lr}, step {r['step']} (reward {r['reward']:.2f}): {said}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--lr", type=float, nargs="+", default=[1e-5], help="one trained run per learning rate")
    p.add_argument("--work", default="runs/bench-curve", help="run dirs, questions, converted policy, curve.json")
    p.add_argument("--policy", help="a transformers folder (default: the embedded 0.5B, converted once)")
    p.add_argument("--model-dir", default=Config().llm.model_dir, help="where the embedded GGUF is (or is assembled)")
    p.add_argument("--preset", default="cpu", help="train.preset: cpu, or small-gpu on a GPU (the options here win)")
    p.add_argument("--questions", type=int, default=64)
    p.add_argument("--prompts", type=int, default=2, help="questions per step")
    p.add_argument("--group", type=int, default=4, help="rollouts per question (G)")
    p.add_argument("--max-completion", type=int, default=160)
    p.add_argument("--task", choices=("format", "content"), default="format",
                   help="format: 'What is <title>?' under the format reward; content: masked-title questions with an "
                        "answer, scored by answer_em, with the gold evaluation and probes on held-out questions")
    p.add_argument("--reward", help="train.reward (default: format for --task format, answer_em for content)")
    p.add_argument("--held-out", type=int, default=16, help="content: held-out questions (other articles)")
    p.add_argument("--gold-every", type=int, default=10, help="content: gold evaluation every this many steps")
    p.add_argument("--adam-beta1", type=float, help="AdamW's β1 for the trained runs (default 0.9; 0: no momentum)")
    p.add_argument("--threads", type=int, help="torch threads per process (e.g. 1 per arm when two arms share cores)")
    p.add_argument("--base-rate", action="store_true", help="content: only the untrained policy's held-out answers")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing (less memory, slower)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bf16", action="store_true", help="BF16 autocast for the loss's forward and backward (AMX CPUs); weights stay FP32")
    p.add_argument("--arm", choices=("both", "trained", "control", "none"), default="both",
                   help="which runs to train (two processes can run one arm each); none: only plot what is recorded")
    p.add_argument("--svg", help="write the plot here")
    p.add_argument("--md", help="write the numbers here (Markdown)")
    args = p.parse_args()
    args.reward = args.reward or {"format": "format", "content": "answer_em"}[args.task]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    work = Path(args.work)
    args.policy_name = Path(args.policy).name if args.policy else EMBEDDED_POLICY
    arms = {"both": (*args.lr, 0.0), "trained": tuple(args.lr), "control": (0.0,), "none": ()}[args.arm]
    if arms or args.base_rate:
        t = time.perf_counter()
        policy = Path(args.policy) if args.policy else gguf_to_transformers(
            ensure_model(args.model_dir, EMBEDDED_POLICY), work / "policy-hf")
        print(f"policy {policy} ready in {time.perf_counter() - t:.0f}s")
        dataset = (content_questions(work / "questions.jsonl", args.questions, args.held_out, args.seed)
                   if args.task == "content" else questions(work / "questions.jsonl", args.questions, args.seed))
        if args.base_rate:
            print(base_rate(args, dataset, policy))
            return
    for lr in arms:
        run(args, work, dataset, policy, lr)
    out = {f"{lr:g}": json.loads(curve_file(work, lr).read_text(encoding="utf-8"))
           for lr in (*args.lr, 0.0) if curve_file(work, lr).exists()}
    gold = {f"{lr:g}": [json.loads(line) for line in gold_file(work, lr).read_text(encoding="utf-8").splitlines()]
            for lr in (*args.lr, 0.0) if gold_file(work, lr).exists()}
    if args.svg:
        svg(out, Path(args.svg), args.prompts * args.group, gold=gold)
    questions_file = work / "questions.jsonl"
    answers = {r["id"]: r.get("answer", "") for r in map(json.loads, questions_file.read_text(encoding="utf-8").splitlines())
               } if questions_file.exists() else {}
    text = summary(out, args, gold, answers)
    print(text)
    if args.md:
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        md = Path(args.md)
        plot = f"![each run's mean reward per step]({Path(args.svg).name})\n\n" if args.svg else ""
        lrs = " ".join(f"{lr:g}" for lr in args.lr)
        content = (f" --task content --questions {args.questions} --held-out {args.held_out} --gold-every "
                   f"{args.gold_every}" if args.task == "content" else "")
        command = (f"python benchmarks/grpo_learning_curve.py --preset {args.preset} --steps {args.steps} --lr {lrs} "
                   f"--prompts {args.prompts} "
                   f"--group {args.group} --max-completion {args.max_completion} --reward {args.reward}"
                   f"{' --bf16' if args.bf16 else ''}"
                   f"{f' --adam-beta1 {args.adam_beta1:g}' if args.adam_beta1 is not None else ''} --seed {args.seed}"
                   f"{content}{f' --threads {args.threads}' if args.threads else ''} --svg {args.svg} --md {args.md}")
        where = "CPU" if args.preset == "cpu" else "a GPU"
        title, anchor = (("GRPO content-reward curve", "a-content-reward-grpo-curve-on-cpu") if args.task == "content"
                         else ("GRPO learning curve", "a-grpo-learning-curve-on-cpu"))
        shows = f"; [what the run shows](results.md#{anchor})" if args.preset == "cpu" else ""
        md.write_text(f"# {title} on {where}\n\n{plot}Made by `{command}` "
                      f"(`benchmarks/grpo_learning_curve.py`{shows}).\n\n{text}", encoding="utf-8")


if __name__ == "__main__":
    main()

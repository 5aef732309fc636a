"""Judge calls and wall time per step of HOTE's loop (`train hote`) on CPU with two tiny local Qwen2 policies
(tests/support/tiny_qwen.py) and a scripted judge with no latency (rubricforge.testing.FakeOpenAI, the whole-loop test's).

    .venv/bin/python benchmarks/hote_cpu.py --batch 8 --group 4 --proposer-group 2 --steps 4

Per step: the judge calls by kind (rubric updates, one binary call per rubric and response, meta rubrics;
cache hits included — the total line says how many reached the judge),
the wall time and its phases — the solver's GRPO step (generation, judging, optimiser, checkpoint), the
proposer's update, proposing (meta rubrics + the proposer's generation), saving the state. The last line
gives the median step time over steps 2.. and the ratio of the proposer's share (update + proposing) to the
solver's step in the same run: what self-play adds on top of plain GRPO with the same batch. Judge latency
is zero here; with a real judge, multiply the call counts by its latency over its concurrency.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests"))  # the tiny model, the fake judge and the scripted policies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8, help="B tasks per step")
    parser.add_argument("--group", type=int, default=4, help="G solver rollouts per task")
    parser.add_argument("--proposer-group", type=int, default=2, help="G' proposals per combination")
    parser.add_argument("--steps", type=int, default=4)
    a = parser.parse_args()

    import support.hote_loop as loop
    from rubricforge.testing import FakeOpenAI
    from support.tiny_qwen import build_tiny_qwen

    from rubricforge.config import Config

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        model = build_tiny_qwen(tmp / "model", (ROOT / "tests" / "data" / "training" / "examples.jsonl").read_text().splitlines())
        topics = ["oceans", "the crust", "the sky", "bees"]
        loop.QUERIES = [f"How does process number {i} of {topics[i % 4]} work?" for i in range(2 * a.batch)]
        dataset = loop.data(tmp)
        with FakeOpenAI(stages=loop.JUDGE, keep_requests=False) as server:
            cfg = loop.hote_cfg(tmp, server, a.steps).model_dump(mode="json")
            n = a.batch // (2 * a.proposer_group)
            cfg["hote"].update(batch_size=a.batch, group=a.group, proposer_group=a.proposer_group,
                               proposer_grpo_args={"per_device_train_batch_size": n * a.proposer_group})
            cfg["train"]["grpo_args"]["per_device_train_batch_size"] = a.batch * a.group
            run = loop.start(Config.model_validate(cfg), dataset, model)
            records = run.train(on_step=lambda r: print(
                f"step {r.step}: {len(r.real)} real + {len(r.synthetic)} synthetic; judge calls "
                f"{sum(r.judge_calls.values())} {r.judge_calls}; {r.seconds:.2f} s "
                f"({', '.join(f'{k} {v:.2f}' for k, v in r.phases.items())})", flush=True))
            asked = sum(sum(r.judge_calls.values()) for r in records)
            print(f"judge calls over {a.steps} steps: {asked}, of which {server.n_requests} reached the judge "
                  f"(the rest were answered by the LLM cache)")
    later = records[1:] or records
    step = statistics.median(r.seconds for r in later)
    solver = statistics.median(r.phases["solver"] for r in later)
    extra = statistics.median(r.phases["proposer_update"] + r.phases["propose"] for r in later)
    print(f"B={a.batch} G={a.group} G'={a.proposer_group}: median step {step:.2f} s over steps 2..{a.steps}; "
          f"proposer update + proposing {extra:.2f} s = {extra / solver:.2f} x the solver's step ({solver:.2f} s)")


if __name__ == "__main__":
    main()

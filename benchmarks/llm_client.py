"""CPU per LLM call of the client: the direct OpenAI-compatible HTTP backend against litellm (the baseline),
measured in the same run on the same fake server (``rubricforge.testing.FakeOpenAI``, in its own process, no latency).

    .venv/bin/python benchmarks/llm_client.py --calls 400 --concurrency 16

Each path makes ``--calls`` structured calls (``LLMClient.generate`` with a pydantic output, the cache
off) with ``--concurrency`` in flight, after a warm-up; the line per path gives this process's CPU time
per call and the wall time, and the last line the ratio direct / litellm.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from pydantic import BaseModel  # noqa: E402

PATHS = {"direct": "openai/fake-model", "litellm": "litellm_proxy/fake-model"}


class Capital(BaseModel):
    capital: str


def serve(conn: Any) -> None:
    from rubricforge.testing import FakeOpenAI, Reply

    with FakeOpenAI([Reply()], keep_requests=False) as fake:
        conn.send(fake.api_base)
        conn.recv()


async def _calls(client: Any, n: int, concurrency: int, tag: str) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            res = await client.generate("generator", [{"role": "user", "content": f"{tag} {i}"}], output=Capital,
                                        stage="bench")
            assert res.ok, res.error

    await asyncio.gather(*(one(i) for i in range(n)))


def measure(model: str, api_base: str, calls: int, concurrency: int) -> tuple[float, float]:
    from rubricforge.config import LLMConfig
    from rubricforge.llm import LLMClient

    role = {"backend": "litellm", "model": model, "api_base": api_base, "concurrency": concurrency,
            "max_retries": 0}
    client = LLMClient(LLMConfig.model_validate({"generator": role, "cache_path": ""}))
    asyncio.run(_calls(client, 20, concurrency, f"warm-{model}"))
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(_calls(client, calls, concurrency, model))
    return 1000 * (time.process_time() - cpu) / calls, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("LITELLM_PROXY_API_KEY", "no-key")  # litellm's proxy provider insists on a key
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child,), daemon=True)
    server.start()
    api_base = conn.recv()
    cpu = {}
    for name, model in PATHS.items():
        cpu[name], wall = measure(model, api_base, args.calls, args.concurrency)
        print(f"{name:8} {model:26} CPU {cpu[name]:6.2f} ms/call  wall {wall:6.2f} s for {args.calls} calls "
              f"at concurrency {args.concurrency}", flush=True)
    conn.send("stop")
    server.join(timeout=10)
    print(f"direct / litellm CPU per call: {cpu['direct'] / cpu['litellm']:.2f}")


if __name__ == "__main__":
    main()

"""One :class:`~rubricforge.jobs.tree.TreeWorker` per process and flow run.

The index, embedding model, tools and LLM client are loaded once per worker process (a thread pool shares one;
each Dask / Ray / pool process has its own) and reused by every tree task of the same invocation, and write
their own shards of the stage logs (merged by the flow's ``finish`` task), so no two processes append to one
file. Workers of finished invocations are closed when newer ones arrive (a long-lived Dask cluster serves many
flow runs) or, in the flow's own process, by :func:`release`.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict

from rubricforge.config import Config
from rubricforge.jobs.tree import TreeWorker

KEEP = 2  # invocations whose workers stay open in one process
_workers: OrderedDict[str, TreeWorker] = OrderedDict()
_lock = threading.Lock()


def _key(cfg: Config, invocation: str) -> str:
    return f"{invocation}:{hashlib.sha256(cfg.model_dump_json().encode()).hexdigest()[:16]}"


def worker_for(cfg: Config, invocation: str) -> TreeWorker:
    """This process's worker for the invocation (created on first use)."""
    from rubricforge.flows.limits import registry

    key = _key(cfg, invocation)
    with _lock:
        if key not in _workers:
            _workers[key] = TreeWorker(cfg, invocation, limits=registry(cfg), sharded=True)
            while len(_workers) > KEEP:
                _close(_workers.popitem(last=False)[1])
        _workers.move_to_end(key)
        return _workers[key]


def release(invocation: str) -> None:
    """Close this process's workers of the invocation."""
    with _lock:
        for key in [k for k in _workers if k.startswith(f"{invocation}:")]:
            _close(_workers.pop(key))


def _close(worker: TreeWorker) -> None:
    asyncio.run(worker.aclose())

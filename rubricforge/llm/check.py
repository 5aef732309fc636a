"""``rubricforge llm check``: each role's backend and model, and one structured test completion.

The check bypasses the cache and any recording, so it really reaches each model. A configuration
mistake (missing key, unknown model) raises its UserError; a model that answers badly is reported.
"""

from __future__ import annotations

import json
import time

from pydantic import BaseModel

from rubricforge.config import Config
from rubricforge.llm.client import LLMClient

QUESTION = [{"role": "user", "content": 'What is the capital of France? Reply with JSON: {"capital": "<city>"}'}]


class CapitalAnswer(BaseModel):
    capital: str


async def check_roles(cfg: Config, roles: list[str]) -> list[str]:
    client = LLMClient(cfg.llm.model_copy(update={"cache_path": "", "record_path": None}))
    lines = []
    try:
        for role in roles:
            rc = cfg.llm.role(role)
            where = f" api_base={rc.api_base}" if rc.api_base else ""
            t0 = time.perf_counter()
            res = await client.generate(role, QUESTION, output=CapitalAnswer, stage="check", max_tokens=32)
            took = time.perf_counter() - t0
            u = res.usage
            head = f"{role}: backend={rc.backend} model={rc.model}{where}"
            stats = (f"{took:.2f} s, {int(u['prompt_tokens'])}+{int(u['completion_tokens'])} tokens, "
                     f"${u['cost_usd']:.6f}")
            if res.ok:
                lines.append(f"{head} -> ok {json.dumps(res.value.model_dump())} ({stats})")
            else:
                lines.append(f"{head} -> FAILED: {res.error} (raw: {res.text[:120]!r}; {stats})")
    finally:
        await client.aclose()
    return lines

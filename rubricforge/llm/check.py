"""``rubricforge llm check``: each role's backend and model, and one structured test completion; and
:func:`preflight`, the configuration checks every command runs before any work.

The check bypasses the cache and any recording, so it really reaches each model. A configuration
mistake (missing key, unknown model) raises its UserError; a model that answers badly is reported, and
the command then exits 1.
"""

from __future__ import annotations

import asyncio
import json
import time

from pydantic import BaseModel

from rubricforge.config import Config, LLMConfig, RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.client import LLMClient

PROBE_TIMEOUT_S = 5.0

QUESTION = [{"role": "user", "content": 'What is the capital of France? Reply with JSON: {"capital": "<city>"}'}]


class CapitalAnswer(BaseModel):
    capital: str


async def check_roles(cfg: Config, roles: list[str]) -> tuple[list[str], list[str]]:
    """(one line per role, the roles whose test completion failed)."""
    failed: list[str] = []
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
                failed.append(role)
    finally:
        await client.aclose()
    return lines, failed


def preflight_roles(llm: LLMConfig, roles: list[str]) -> None:
    """Raise the UserError of the first configuration mistake of ``roles``, before any work: an unusable
    cache path, a missing API key or unknown provider (litellm), a missing replay file, and for a role
    with an ``api_base``: a server that cannot be reached, refuses the key or does not list the model
    in ``GET <api_base>/models`` (servers without that endpoint are not asked further). The embedded
    local model is not loaded here."""
    asyncio.run(apreflight_roles(llm, roles))


async def apreflight_roles(llm: LLMConfig, roles: list[str]) -> None:
    """:func:`preflight` inside a running event loop (the item jobs run it first)."""
    client = LLMClient(llm.model_copy(update={"record_path": None}))  # opens the cache: an unusable path raises
    try:
        for role in roles:
            rc = llm.role(role)
            if rc.backend == "local":
                continue
            await client._backend(role, rc)  # the backend's own checks (keys, provider, replay file)
            if rc.backend == "litellm" and rc.api_base:
                await _probe(role, rc, rc.api_base)
    finally:
        await client.aclose()


async def _probe(role: str, rc: RoleConfig, api_base: str) -> None:
    import os

    import httpx

    url = api_base.rstrip("/") + "/models"
    key = os.environ.get(rc.api_key_env, "") if rc.api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as http:
            resp = await http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise UserError(f"llm.{role}.api_base {rc.api_base} cannot be reached ({type(exc).__name__})",
                        f"start the server or fix llm.{role}.api_base") from None
    if resp.status_code in (401, 403):
        raise UserError(f"the server at {rc.api_base} (llm.{role}) refused the API key (HTTP {resp.status_code})",
                        f"check the key in {rc.api_key_env or 'the variable named by api_key_env'}")
    if resp.status_code != 200:
        return
    try:
        served = {str(m["id"]) for m in resp.json()["data"]}
    except (ValueError, KeyError, TypeError):
        return
    name = rc.model.split("/", 1)[1] if "/" in rc.model else rc.model
    if served and name not in served and rc.model not in served:
        raise UserError(f"model '{name}' (llm.{role}.model={rc.model}) is not served at {rc.api_base}",
                        f"use one of: {', '.join(sorted(served)[:8])}")

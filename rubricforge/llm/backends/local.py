"""Embedded local backend: llama-cpp-python running a packaged model (:data:`~rubricforge.llm.local_model.MODELS`)
in this process.

Structured output uses llama.cpp's JSON-schema grammar; if a schema cannot become a grammar llama.cpp
falls back to plain JSON, which the client still validates. Calls run in a worker thread under the
shared model's lock, from an empty KV cache, so an answer depends on its request alone. Tokens come from the
response; cost is 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rubricforge.config import RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.errors import RequestFailed
from rubricforge.llm.local_model import LLAMA_LOCK, MODELS, shared_llama
from rubricforge.llm.request import Completion, Request


class LocalBackend:
    name = "local"

    def __init__(self, model_dir: str):
        self.model_dir = model_dir

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        if role_cfg.model not in MODELS:
            raise UserError(f"llm.{role}.model is '{role_cfg.model}', but the local backend runs only the "
                            f"packaged models ({', '.join(MODELS)})",
                            f"set llm.{role}.backend=litellm to reach '{role_cfg.model}', "
                            f"or llm.{role}.model to one of the packaged models")
        await asyncio.to_thread(shared_llama, role_cfg.model, self.model_dir, role_cfg.n_ctx, role_cfg.n_threads,
                                role_cfg.repack)

    def _run(self, request: Request, role_cfg: RoleConfig) -> dict[str, Any]:
        llama = shared_llama(role_cfg.model, self.model_dir, role_cfg.n_ctx, role_cfg.n_threads, role_cfg.repack)
        kwargs: dict[str, Any] = {"temperature": request.temperature, "max_tokens": request.max_tokens}
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.schema}
        with LLAMA_LOCK:
            # llama-cpp-python reuses the KV cache of the previous prompt's common prefix, and that changes the
            # logits slightly: without a reset an answer would depend on which call ran before it.
            llama.reset()
            try:
                return llama.create_chat_completion(messages=request.messages, **kwargs)
            except ValueError as exc:  # e.g. the prompt exceeds the context window
                raise RequestFailed(f"local model: {exc}") from None

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion:
        resp = await asyncio.to_thread(self._run, request, role_cfg)
        usage = resp.get("usage") or {}
        text = resp["choices"][0]["message"].get("content") or ""
        return Completion(text=text, prompt_tokens=int(usage.get("prompt_tokens", 0)),
                          completion_tokens=int(usage.get("completion_tokens", 0)), cost_usd=0.0)

"""Helpers around :class:`rubricforge.testing.FakeOpenAI`: the model names of the two ways to it (direct
HTTP, litellm), an ``llm`` config section that reaches it, and the structured answer the transport tests ask for."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rubricforge.testing import FakeOpenAI

VIA_LITELLM = "litellm_proxy/fake-model"  # an OpenAI-compatible model that goes through litellm itself


def litellm_llm_config(tmp_path, server: FakeOpenAI, **role: Any) -> dict[str, Any]:
    """An ``llm`` config section whose roles all reach ``server`` as ``openai/fake-model`` (the direct HTTP
    client; ``model=VIA_LITELLM``: through litellm), with fast backoff and a cache in ``tmp_path``; ``role``
    overrides role fields, e.g. ``max_retries=2``."""
    settings = {"backend": "litellm", "model": "openai/fake-model", "api_base": server.api_base,
                "backoff_s": 0.01, "max_retries": 3, "timeout_s": 10.0, **role}
    return {"generator": settings, "verifier": settings, "judge": settings,
            "cache_path": str(tmp_path / "llm-cache.sqlite")}


class Capital(BaseModel):
    """The structured answer the transport and fault tests ask for."""

    capital: str

"""One request to a model and one completion from it; the request's content key addresses the cache."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rubricforge.config import RoleConfig
from rubricforge.llm.structured import schema_of

# the HTTP header that names a request's stage (a label from the code, never a secret or the content), so a
# server or a test double (``rubricforge.testing.FakeOpenAI``) can tell the calls apart without reading prompts
STAGE_HEADER = "X-Rubricforge-Stage"


@dataclass(frozen=True)
class Request:
    """Everything that decides a model's answer, plus the labels (role, stage) used for accounting."""

    role: str
    stage: str
    model: str
    api_base: str | None
    messages: list[dict[str, Any]]
    schema: dict[str, Any] | None  # JSON schema of the expected output; None for plain text
    schema_name: str | None
    temperature: float
    top_p: float | None
    max_tokens: int
    seed: int | None
    reasoning_effort: str | None = None

    def key(self) -> str:
        """sha256 of the canonical JSON of what decides the answer (never the role, stage or a secret)."""
        content = {"model": self.model, "api_base": (self.api_base or "").rstrip("/") or None,
                   "messages": self.messages, "schema": self.schema,
                   "params": {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                              "seed": self.seed,
                              **({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {})}}
        canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def describe(self) -> str:
        """Short human label: role, stage, model and the start of the last message."""
        last = str(self.messages[-1].get("content", "")) if self.messages else ""
        return f"role={self.role} stage={self.stage} model={self.model} last message={last[:100]!r}"


@dataclass
class Completion:
    """A model's raw answer with its usage; ``cost_known`` is False when the price table lacks the model."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True


def build_request(role: str, role_cfg: RoleConfig, messages: list[dict[str, Any]], output: type[BaseModel] | None,
                  stage: str, temperature: float | None = None, max_tokens: int | None = None,
                  seed: int | None = None) -> Request:
    """The request a role sends: the role's sampling settings unless overridden for this call."""
    return Request(role=role, stage=stage, model=role_cfg.model, api_base=role_cfg.api_base,
                   messages=[dict(m) for m in messages],
                   schema=schema_of(output),
                   schema_name=output.__name__ if output is not None else None,
                   temperature=role_cfg.temperature if temperature is None else temperature,
                   top_p=role_cfg.top_p, max_tokens=role_cfg.max_tokens if max_tokens is None else max_tokens,
                   seed=role_cfg.seed if seed is None else seed, reasoning_effort=role_cfg.reasoning_effort)

"""One async LLM client for every stage: litellm, embedded local and replay backends; structured output;
SQLite cache; retries; concurrency and rate limits; token and cost ledger with a budget cap."""

from rubricforge.llm.client import LLMClient, LLMResult
from rubricforge.llm.errors import ReplayMiss

__all__ = ["LLMClient", "LLMResult", "ReplayMiss"]

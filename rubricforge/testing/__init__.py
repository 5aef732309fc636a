"""Test doubles shipped with the library (as httpx ships its mock transport): :class:`FakeOpenAI`, an
OpenAI-compatible chat server on loopback that answers each call by its stage. Needs no optional extra."""

from rubricforge.testing.openai_server import FakeOpenAI, Reply

__all__ = ["FakeOpenAI", "Reply"]

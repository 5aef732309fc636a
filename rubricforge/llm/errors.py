"""How backends report trouble to the client.

``TransientError`` (timeout, 429, 5xx, connection) is retried with backoff; ``RequestFailed`` ends one
request with ``ok=False``; a :class:`~rubricforge.errors.UserError` (missing key, unknown model, a replay
miss) is a configuration mistake and propagates.
"""

from __future__ import annotations

from rubricforge.errors import UserError


class TransientError(Exception):
    """Worth retrying after a pause; ``retry_after`` is the server's hint in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class RequestFailed(Exception):
    """This request cannot succeed as sent (bad request, context too long, ...)."""


class ReplayMiss(UserError):
    """The replay backend has no recorded response for a request (in a test: the test is wrong)."""

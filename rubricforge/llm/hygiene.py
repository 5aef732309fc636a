"""What may leave the LLM client: text without lone surrogates and error text without secrets.

:func:`scrub` removes the configured API keys (the values of the roles' ``api_key_env`` variables and of
the provider key variables litellm reads, ``*_API_KEY`` / ``*_TOKEN``) and anything shaped like a bearer
token from provider text before it reaches a record, a log, the viewer or the cache. :func:`clean_text`
turns lone UTF-16 surrogates (which a JSON ``\\ud800`` escape can produce, and which no UTF-8 file or
SQLite row can hold) into U+FFFD; :func:`clean_value` does it for every string inside parsed JSON, and ends a
string value that ends in U+FFFD at its last whole character: a grammar's ``maxLength`` can stop a string between the
bytes of one character (a server such as llama-server sends those bytes as U+FFFD; a cut surrogate pair is one),
which showed in the viewer as a verifier's justification ending "evidence-based,��".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from rubricforge.text import clean_text as clean_text  # the one implementation, shared with the retrieval server

REDACTED = "[redacted]"
REPLACEMENT = "\ufffd"  # what stands for bytes that are no character
MIN_SECRET_CHARS = 8  # shorter values (e.g. "no-key", "1") are not treated as secrets
_KEY_VARS = re.compile(r"(_API_KEY|_KEY|_TOKEN|_SECRET)$")
_TOKEN_SHAPES = re.compile(
    r"(?i)\b(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"  # Authorization header values
    r"|\b(?:sk|pk|rk|hf|gsk|xai|ghp|gho|ghs|github_pat|AKIA)[-_]?[A-Za-z0-9_-]{16,}"  # well-known key prefixes
    r"|(?<=[\"'\s:=])(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}(?=[\"'\s,;}]|$)"  # long opaque
    r"|(?i:(?<=api[-_]key)|(?<=api_key\")|(?<=authorization))[\"'\s:=]+[^\s\"',;}]{6,}")


def secret_values(env_names: Iterable[str | None] = ()) -> list[str]:
    """The values to remove: the named variables and every ``*_API_KEY``-like one in the environment."""
    names = {n for n in env_names if n} | {n for n in os.environ if _KEY_VARS.search(n.upper())}
    values = {os.environ.get(n, "") for n in names}
    return sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = (), shapes: bool = True) -> str:
    """``text`` with each of ``secrets`` (and, with ``shapes``, each bearer-token-shaped string: for error
    text, not for answers) replaced by ``[redacted]``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _TOKEN_SHAPES.sub(lambda m: _keep_separator(m.group(0)), text) if shapes else text


def _keep_separator(match: str) -> str:
    sep = re.match(r"[\"'\s:=]+", match)
    if sep:  # "api_key": "abc..." -> keep the separator, drop the value
        return sep.group(0) + REDACTED
    word = re.match(r"(?i)(bearer|basic|token)\s+", match)
    return (word.group(0) if word else "") + REDACTED


def clean_value(value: Any) -> Any:
    """Parsed JSON with :func:`clean_text` applied to every string (keys too), each string value ending at its last
    whole character."""
    if isinstance(value, str):
        return clean_text(value).rstrip(REPLACEMENT)
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    return value

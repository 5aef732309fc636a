"""Structured output: the JSON schema sent to the backend, tolerant JSON extraction, pydantic validation,
and the re-prompt that feeds a validation error back to the model."""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, ValidationError

from rubricforge.llm.hygiene import clean_text, clean_value


class TextAnswer(BaseModel):
    """An output read from a fixed plain-text format instead of JSON (e.g. the judge labels
    ``Rating: [[Relevant]]`` of DeepRubric Figs. 6–8). Subclasses set ``FORMAT`` (repeated in a re-prompt)
    and implement ``from_text`` (raising ``ValueError`` with the reason when the text does not fit). No
    JSON schema is sent to the backend for these."""

    FORMAT: ClassVar[str] = ""

    @classmethod
    def from_text(cls, text: str) -> TextAnswer:
        raise NotImplementedError


def schema_of(output: type[BaseModel] | None) -> dict[str, Any] | None:
    """The JSON schema sent to the backend: None for plain text and :class:`TextAnswer` outputs."""
    if output is None or issubclass(output, TextAnswer):
        return None
    return json.loads(_schema_json(output))  # a fresh copy: the caller may change it


@functools.lru_cache(maxsize=1024)
def _schema_json(output: type[BaseModel]) -> str:
    """pydantic builds a schema anew on every call (about 6 ms for the tree stages' models), once per request."""
    return json.dumps(output.model_json_schema())


def max_length(chars: int) -> Any:
    """``Annotated[str, max_length(n)]``: a string whose JSON schema carries ``maxLength``. Constrained
    decoding (llama.cpp grammars) keeps small models concise and stops them looping inside a string;
    validation does not reject longer answers from other backends."""
    return Field(json_schema_extra={"maxLength": chars})


Str16 = Annotated[str, max_length(16)]
Str40 = Annotated[str, max_length(40)]
Str60 = Annotated[str, max_length(60)]
Str80 = Annotated[str, max_length(80)]
Str120 = Annotated[str, max_length(120)]
Str200 = Annotated[str, max_length(200)]
Str300 = Annotated[str, max_length(300)]
Str400 = Annotated[str, max_length(400)]
Str600 = Annotated[str, max_length(600)]


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object in ``text``: inside a ```json fence if there is one, else the first ``{...}``
    that parses, ignoring leading and trailing prose. Raises ``ValueError`` when there is none, or when the
    answer was cut off (e.g. by ``max_tokens``) before its object closed: an object nested in it is no answer."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        start = chunk.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(chunk, start)
                return value
            except json.JSONDecodeError as exc:
                if _ends_early(chunk, exc) and not _closes(chunk, start):
                    raise ValueError("the JSON answer is cut off before its closing brace "
                                     "(too long for max_tokens?)") from None
                start = chunk.find("{", start + 1)
    raise ValueError("no JSON object found in the answer")


_TOKEN_TAIL = re.compile(r"[\w.+-]+")  # part of a number or of true / false / null


def _ends_early(chunk: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder failed for want of more text: at the end (but for a partial number or literal), or
    inside a string that never ends. A stray ``{`` in prose fails earlier, on what follows it."""
    rest = chunk[exc.pos:].strip()
    return exc.msg.startswith("Unterminated string") or not rest or _TOKEN_TAIL.fullmatch(rest) is not None


def _closes(chunk: str, start: int) -> bool:
    """Whether the ``{`` at ``start`` has its matching ``}`` in ``chunk`` (braces inside strings do not count)."""
    depth, in_string, escaped = 0, False, False
    for ch in chunk[start:]:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "{}":
            depth += 1 if ch == "{" else -1
            if depth == 0:
                return True
    return False


def parse(text: str, output: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """``(value, None)`` when ``text`` holds a valid ``output``; ``(None, error)`` otherwise. Lone surrogates
    (a JSON ``\\ud800`` escape) become U+FFFD: no value that a UTF-8 file cannot hold leaves here."""
    if issubclass(output, TextAnswer):
        try:
            return output.from_text(clean_text(text)), None
        except ValueError as exc:
            return None, str(exc)
    try:
        data = clean_value(extract_json(text))
    except ValueError as exc:
        return None, str(exc)
    try:
        return output.model_validate(data), None
    except ValidationError as exc:
        return None, format_validation_error(exc)


def format_validation_error(exc: ValidationError) -> str:
    """Compact and deterministic (no URLs, no input echo), so re-prompts replay and cache reliably."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"{where}: {err['msg']}")
    return f"{len(parts)} validation error(s): " + "; ".join(parts)


def reprompt(text: str, error: str, output: type[BaseModel]) -> list[dict[str, str]]:
    """The messages appended after an invalid answer: the answer itself, then the error and the expected
    format (the JSON schema, or a :class:`TextAnswer`'s ``FORMAT``)."""
    if issubclass(output, TextAnswer):
        again = f"Answer again in exactly this format: {output.FORMAT}"
    else:
        again = ("Answer again with one JSON object only, no prose, matching this JSON schema:\n"
                 + json.dumps(schema_of(output), ensure_ascii=False))
    return [{"role": "assistant", "content": text},
            {"role": "user", "content": f"Your answer could not be used: {error}.\n{again}"}]

"""The agent responses a reward scores: a JSONL, one rollout a line: ``{"id": <example id>, "response": <string or
chat messages>, "snippets": [<Snippet>, ...] (optional: the rollout's snippet store)}``, or DeepResearch Bench's
reports ``{"id", "prompt", "article"}``. A malformed line, or one whose id is not in the dataset, is skipped,
counted and written to ``<responses>.rejects.jsonl``. The examples come from :mod:`rubricforge.io.datasets`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.corpora.snippets import SnippetStore
from rubricforge.errors import UserError, require_file
from rubricforge.io.rejects import Rejects
from rubricforge.schema import Snippet


@dataclass
class Response:
    line: int  # 1-based line in the responses file: the response's identity
    example_id: str
    completion: str | list[dict[str, Any]]
    snippets: SnippetStore | None

    @property
    def key(self) -> str:
        return f"{self.example_id}#{self.line}"



def load_responses(path: str | Path, examples: dict[str, dict[str, Any]], rejects: Rejects) -> list[Response]:
    path = require_file(path, "responses file", 'pass a JSONL of {"id": <example id>, "response": ...} lines')
    out = []
    with path.open(encoding="utf-8") as fh:
        n = 0
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.append(_response(n, json.loads(line), examples))
                except (ValueError, TypeError) as exc:  # JSON, validation and shape errors
                    rejects.add(path, n, str(exc).splitlines()[0], line.strip())
        except UnicodeDecodeError:
            raise UserError(f"responses file {path} is not UTF-8 text (near line {n + 1})",
                            'pass a JSONL of {"id": <example id>, "response": ...} lines saved as UTF-8') from None
    return out


def _response(n: int, record: Any, examples: dict[str, dict[str, Any]]) -> Response:
    if not isinstance(record, dict):
        raise ValueError("a line must be a JSON object")
    example_id = str(record.get("id", ""))
    if example_id not in examples:
        raise ValueError(f"id {example_id!r} is not in the dataset")
    completion = record.get("response", record.get("article"))  # DeepResearch Bench's reports: {"id", "prompt", "article"}
    if not isinstance(completion, (str, list)) or (isinstance(completion, list)
                                                   and not all(isinstance(m, dict) for m in completion)):
        raise ValueError("'response' must be a string or a list of chat messages")
    snippets = record.get("snippets")
    store = None if snippets is None else SnippetStore(Snippet.model_validate(s) for s in snippets)
    return Response(n, example_id, completion, store)

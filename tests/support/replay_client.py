"""Clients that answer from a script: :func:`replay_client` writes a tiny hand-made recording and returns
a client whose roles all use the replay backend; :class:`Capture` answers stepwise calls by stage and keeps
them, so a recording of exactly those requests can be written."""

from __future__ import annotations

import json

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.recording import entry
from rubricforge.llm.request import Completion

def replay_client(tmp_path, calls: list[tuple[str, list[dict], type, str, object]]) -> LLMClient:
    """A replay client answering each (role, messages, output model, stage) with the given answer
    (a dict is recorded as its JSON text). No re-prompts: an unreadable answer fails at once."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "recording.jsonl"
    roles = {role: {"backend": "replay", "structured_retries": 0} for role in ("generator", "verifier", "judge")}
    client = LLMClient(LLMConfig.model_validate({**roles, "replay_path": str(path), "cache_path": ""}))
    lines = [entry(client.request(role, messages, output, stage),
                   Completion(text=answer if isinstance(answer, str) else json.dumps(answer), completion_tokens=9))
             for role, messages, output, stage, answer in calls]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return client


class Capture:
    """Answers each stepwise call from ``answers`` (by stage, in order) and keeps the calls, so a replay
    recording of exactly these requests can be written."""

    def __init__(self, answers: dict[str, list]):
        self.answers = {k: list(v) for k, v in answers.items()}
        self.calls: list[tuple] = []

    async def generate(self, role, messages, *, output, stage, **kw):
        from rubricforge.llm import LLMResult

        answer = self.answers[stage].pop(0)
        self.calls.append((role, messages, output, stage, answer))
        if isinstance(answer, str):  # unreadable: the first run stops here, as the replayed one will
            return LLMResult(ok=False, value=None, text=answer, error="no JSON")
        return LLMResult(ok=True, value=output.model_validate(answer), text=json.dumps(answer))

"""Question generation from a subgraph (MindDR §4.1): generate → obfuscate → rewrite, then the checks.

1. *Generation* sees the hops — each hop's relation and its evidence sentence — with the answer and the
   intermediate entities masked (``ANSWER``, ``X1``, ``X2`` ...) and the start entities named, so it cannot
   copy a hidden name; and what the answer is (its corpus description, and that description's noun to
   ask with, "Which <noun> …": the answer-type check reads the same description).
2. *Obfuscation* replaces each start entity's name with a vaguer description that still identifies it
   (the corpus's short description when there is one).
3. *Rewriting* gives natural user phrasing (query-specific rubrics §3.2).

Each step is one structured call; a failed call ends the item with its error recorded (one the provider never
answered leaves it unfinished: :mod:`.run`). The final question then goes through the deterministic checks of
:mod:`.checks` (a mask left in it, an answer that is a word of a name, a leaked answer or intermediate entity,
an answer of another type than the question asks for, a hop whose condition is missing); the first that
fails drops it with its reason. A start entity still named after obfuscation is recorded (``obfuscated_ok``
false), not dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel

from rubricforge.llm.structured import max_length
from rubricforge.pipelines.kg.checks import described_noun, names_in, part_of_a_name, question_problem
from rubricforge.pipelines.prompting import render
from rubricforge.schema import KGPath

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

QUESTION_CHARS = 300


class Question(BaseModel):
    question: Annotated[str, max_length(QUESTION_CHARS)]


def facts(path: KGPath, masks: dict[str, str] | None = None, aliases: dict[str, list[str]] | None = None) -> str:
    """The hops as numbered lines: ``1. Head --relation--> Tail (evidence: "sentence")``. ``masks`` (node id ->
    label) replaces those entities' names and aliases everywhere, so a hidden entity cannot be copied."""
    lines = "\n".join(f"{i}. {path.names.get(e.head, e.head)} --{e.relation}--> {path.names.get(e.tail, e.tail)} "
                      f"(evidence: \"{e.evidence}\")" for i, e in enumerate(path.edges, 1))
    return _masked(lines, masks or {}, path, aliases or {})


def _masked(text: str, masks: dict[str, str], path: KGPath, aliases: dict[str, list[str]]) -> str:
    """``text`` with every name and alias of the ``masks`` entities replaced by its label (longest first)."""
    forms = sorted(((f, label) for nid, label in masks.items()
                    for f in {path.names.get(nid, nid), *aliases.get(nid, [])} if f), key=lambda x: -len(x[0]))
    for form, label in forms:
        text = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", label, text, flags=re.IGNORECASE)
    return text


async def _ask(client: LLMClient, prompt: str, stage: str, max_tokens: int) -> tuple[str | None, str | None]:
    res = await client.generate("generator", [{"role": "user", "content": prompt}], output=Question, stage=stage,
                                max_tokens=max_tokens)
    if not res.ok:
        return None, res.error
    text = " ".join(res.value.question.split())
    return (text, None) if text else (None, "empty question")


async def write_question(path: KGPath, aliases: dict[str, list[str]], answer_profile: str, client: LLMClient,
                         max_tokens: int) -> dict[str, Any]:
    """The log record: ``initial``, ``obfuscated``, ``question`` (final), ``obfuscated_ok``, ``drop``.
    ``answer_profile`` (the answer article's description and first sentence) is what the answer-type check reads."""
    names = path.names
    record: dict[str, Any] = {"initial": None, "obfuscated": None, "question": None, "obfuscated_ok": None,
                              "drop": None}
    if part := part_of_a_name(path, aliases):  # masking it would leave "Austro-Hungarian ANSWER": no call
        record["drop"] = f"answer is not a whole entity of the path ({part})"
        return record
    masks = {n: f"X{i}" for i, n in enumerate(dict.fromkeys(path.intermediates()), 1)} | {path.answer: "ANSWER"}
    description = path.descriptions.get(path.answer, "")
    noun = described_noun(description) or "entity"
    text, err = await _ask(client, render("kg_question", starts=", ".join(names[s] for s in path.starts()),
                                          facts=facts(path, masks, aliases), noun=noun,
                                          kind=_masked(description or noun, masks, path, aliases)),
                           "kg_question", max_tokens)
    record["initial"] = text
    for start in path.starts():
        if text is None:
            break
        if not names_in(text, [names[start]]):
            continue  # the generator already left the name out
        desc = path.descriptions.get(start, "")
        text, err = await _ask(client, render("kg_obfuscate", entity=names[start], question=text,
                                              description=f" (it is: {desc})" if desc else ""),
                               "kg_obfuscate", max_tokens)
    record["obfuscated"] = text
    if text is not None:
        text, err = await _ask(client, render("kg_rewrite", question=text), "kg_rewrite", max_tokens)
    if text is None:
        record["drop"] = f"generation failed: {err}"
        return record
    record["question"] = text
    record["obfuscated_ok"] = not names_in(text, [names[s] for s in path.starts()])
    record["drop"] = question_problem(text, path, aliases, answer_profile)
    return record

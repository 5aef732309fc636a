"""Question generation from a subgraph (MindDR §4.1): generate → obfuscate → rewrite, then a leak check.

1. *Generation* sees the hops' evidence sentences with the answer and the intermediate entities
   masked (``ANSWER``, ``X1``, ``X2`` ...), and the start entities named: it cannot copy a hidden name.
2. *Obfuscation* replaces each start entity's name with a vaguer description that still identifies it
   (the corpus's short description when there is one).
3. *Rewriting* gives natural user phrasing (query-specific rubrics §3.2).

Each step is one structured call; a failed call ends the item with its error recorded (one the provider never
answered leaves it unfinished: :mod:`.run`). The final
question is then checked without the LLM: naming the answer (or an alias), containing every content word
of an answer form of two words or more (in any order, other words between: "the visible light spectrum"
gives away "Visible spectrum"; :func:`answer_words_in`), or naming an intermediate entity is a drop, and
so is missing a hop's condition (MindDR: questions must cover the subgraph's key
information) — every hop's evidence must share a content word (compared by its first
:data:`STEM` letters, the hop's entity names left out) with the question. A start entity still named
after obfuscation is recorded (``obfuscated_ok`` false), not dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel

from rubricforge.llm.structured import max_length
from rubricforge.pipelines.kg.graph import canonical_key
from rubricforge.pipelines.prompting import render
from rubricforge.schema import KGPath

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

QUESTION_CHARS = 300
STEM = 5  # content words compare by their first letters ("India" ~ "Indian")
_STOP = frozenset("""about above after also among and been before being between both from have into its more most
only other over since some such than that their them then there these they this those through under until very
what when where which while with would known called located""".split())
_FUNCTION = frozenset("a an and as at by de del der for from in la le of on or the to von with".split())


class Question(BaseModel):
    question: Annotated[str, max_length(QUESTION_CHARS)]


def facts(path: KGPath, masks: dict[str, str] | None = None, aliases: dict[str, list[str]] | None = None) -> str:
    """The hops as numbered lines: ``1. [Head -> Tail] evidence sentence``. ``masks`` (node id -> label)
    replaces those entities' names and aliases everywhere, so a hidden entity cannot be copied."""
    lines = "\n".join(f"{i}. [{path.names.get(e.head, e.head)} -> {path.names.get(e.tail, e.tail)}] {e.evidence}"
                      for i, e in enumerate(path.edges, 1))
    forms = sorted(((f, label) for nid, label in (masks or {}).items()
                    for f in {path.names.get(nid, nid), *(aliases or {}).get(nid, [])} if f), key=lambda x: -len(x[0]))
    for form, label in forms:
        lines = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", label, lines, flags=re.IGNORECASE)
    return lines


def _stems(text: str) -> set[str]:
    return {w[:STEM] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 and w not in _STOP}


def uncovered_hops(question: str, path: KGPath) -> list[int]:
    """1-based hops whose evidence shares no content word with the question (entity names aside)."""
    asked = _stems(question)
    out = []
    for i, e in enumerate(path.edges, 1):
        names = _stems(f"{path.names.get(e.head, e.head)} {path.names.get(e.tail, e.tail)}")
        if not (_stems(f"{e.relation} {e.evidence}") - names) & asked:
            out.append(i)
    return out


def names_in(text: str, names: list[str]) -> list[str]:
    """The names (case-insensitive, whole words) that ``text`` contains."""
    return [n for n in names if n and re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text, re.IGNORECASE)]


def _words(text: str) -> list[str]:
    """The canonical words of ``text`` (:func:`~rubricforge.pipelines.kg.graph.canonical_key`), a plural's
    final "s" dropped."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in canonical_key(text).split()]


def answer_words_in(question: str, forms: list[str]) -> str | None:
    """The first answer form of two or more content words that all appear as words in ``question``, in any
    order and with other words between (a one-word form is :func:`names_in`'s)."""
    asked = set(_words(question))
    for form in forms:
        content = {w for w in _words(form) if w not in _FUNCTION}
        if len(content) >= 2 and content <= asked:
            return form
    return None


async def _ask(client: LLMClient, prompt: str, stage: str, max_tokens: int) -> tuple[str | None, str | None]:
    res = await client.generate("generator", [{"role": "user", "content": prompt}], output=Question, stage=stage,
                                max_tokens=max_tokens)
    if not res.ok:
        return None, res.error
    text = " ".join(res.value.question.split())
    return (text, None) if text else (None, "empty question")


async def write_question(path: KGPath, aliases: dict[str, list[str]], client: LLMClient,
                         max_tokens: int) -> dict[str, Any]:
    """The log record: ``initial``, ``obfuscated``, ``question`` (final), ``obfuscated_ok``, ``drop``."""
    names = path.names
    hidden = [names[n] for n in path.intermediates()]
    record: dict[str, Any] = {"initial": None, "obfuscated": None, "question": None, "obfuscated_ok": None,
                              "drop": None}
    masks = {n: f"X{i}" for i, n in enumerate(dict.fromkeys(path.intermediates()), 1)} | {path.answer: "ANSWER"}
    text, err = await _ask(client, render("kg_question", starts=", ".join(names[s] for s in path.starts()),
                                          facts=facts(path, masks, aliases)), "kg_question", max_tokens)
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
    answers = aliases.get(path.answer, []) + [names[path.answer]]
    if leaked := names_in(text, answers):
        record["drop"] = f"question names the answer ({leaked[0]})"
    elif given := answer_words_in(text, answers):
        record["drop"] = f"question contains the answer's words ({given})"
    elif leaked := names_in(text, hidden):
        record["drop"] = f"question names an intermediate entity ({leaked[0]})"
    elif missed := uncovered_hops(text, path):
        record["drop"] = f"question misses a hop's condition (hop {', '.join(map(str, missed))})"
    return record

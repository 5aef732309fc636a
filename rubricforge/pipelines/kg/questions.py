"""Question writing from a subgraph (MindDR §4.1): write → obfuscate → rewrite, then the checks.

1. *Writing*, by ``kg.question_writer``:
   - ``template`` (default): :func:`compose` states the hops in order as sentences, each hidden entity named only
     by its noun ("The Suez Canal is an artificial sea-level waterway in a country. Which city is the
     third-largest city in that country?"). Every hop's relation is written as its sentence states it, so the
     question needs every hop and asks for nothing the hops do not say. A hidden entity with no noun (neither its
     description nor its relation gives one) would be "an entity": that subgraph is dropped without a call. Our
     reading of §4.1, which has an LLM write the question: the embedded models wrote none that used every hop
     (docs/results.md).
   - ``llm``: the generator sees the hops — each hop's relation and its evidence sentence — with the answer and
     the intermediate entities masked (``ANSWER``, ``X1``, ``X2`` ...) and the start entities named, so it
     cannot copy a hidden name; and what the answer is (its corpus description, and that description's noun to
     ask with, "Which <noun> …": the answer-type check reads the same description).
2. *Obfuscation* replaces each start entity's name with a vaguer description that still identifies it
   (the corpus's short description when there is one), and nothing else: an output that does not go on with the
   question's words after the name is undone (the 1.5B turned "Western Europe is the western region of a
   continent. Which river is the fifth-longest river in that continent?" into "Which river is the fifth-longest
   in the western region of a continent?", a question the Don does not answer).
3. *Rewriting* gives natural user phrasing (query-specific rubrics §3.2), when ``kg.question_rewrite`` is on. It is
   off by default: the checks below compare words, not meaning, and of the 12 rewrites the 1.5B's rows kept, 6
   changed what the question asks or broke it ("the capital of the second-largest metropolitan area in the
   westernmost province of a country" from "Aceh is the westernmost province of a country. Which city is the
   second-largest metropolitan area in that country?"); the checks catch 2 of them.

Each step is one structured call; a failed call ends the item with its error recorded (one the provider never
answered leaves it unfinished: :mod:`.run`). Each question goes through the deterministic checks of
:mod:`.checks` (a mask left in it, an answer that is a word of a name, a leaked answer or intermediate entity,
an answer of another type than the question asks for, a hop whose condition is missing): an obfuscation or
rewrite that fails a check its input passed is undone (recorded in ``undone``), and a final question that fails
one is dropped with its reason. A start entity still named after obfuscation is recorded (``obfuscated_ok``
false), not dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel

from rubricforge.llm.structured import max_length
from rubricforge.pipelines.kg.checks import described_noun, names_in, part_of_a_name, question_problem
from rubricforge.pipelines.kg.graph import name_pattern
from rubricforge.pipelines.prompting import render
from rubricforge.schema import KGEdge, KGPath

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

QUESTION_CHARS = 300
_VOWEL = re.compile(r"^[aeiou]", re.IGNORECASE)
_COLLECTIVE = frozenset("body set group collection series family class type kind form genre range variety array "
                        "number".split())
_RELATION_NOUN = re.compile(r"^(?:is|was|are|were)\s+(?:the|a|an)\s+(?:[\w-]+\s+){0,3}?([a-z-]+)\s+"
                            r"(?:in|of|on|at|for|from|to|by|with)$")


class Question(BaseModel):
    question: Annotated[str, max_length(QUESTION_CHARS)]


def _squeeze(text: str) -> str:
    return " ".join(text.lower().split())


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
        text = name_pattern(form).sub(label, text)
    return text


def _noun(path: KGPath, node: str) -> str:
    """What ``node`` is: its description's head noun ("Country in East Asia" -> "country"; a collective noun with
    what it collects: "Body of myths of ancient Greece" -> "body of myths", but never one alone: "Range of Indian
    religious traditions" is no "range"), else the noun its own relation predicates of it ("is the largest
    freshwater lake in" -> "lake"), else "entity"."""
    description = path.descriptions.get(node, "")
    if (noun := described_noun(description)) and noun not in _COLLECTIVE:
        return noun
    if noun and (m := re.search(rf"\b{noun}\s+of\s+([a-z]+)", description, re.IGNORECASE)) \
            and m.group(1).islower() and m.group(1) not in ("the", "a", "an"):
        return f"{noun} of {m.group(1)}"
    for e in path.edges:
        if e.head == node and (m := _RELATION_NOUN.match(e.relation.strip())):
            return m.group(1)
    return "entity"


def _named(path: KGPath, node: str) -> str:
    """A start entity's name as its evidence writes it: "the Ottoman Empire" when a hop's sentence says so (not
    "the Cologne" from "the Cologne Bonn urban region")."""
    name = path.names.get(node, node)
    said = any(re.search(rf"\bthe {re.escape(name)}(?!\w)(?!(?-i:\s+[A-Z]))", e.evidence, re.IGNORECASE)
               for e in path.edges if node in (e.head, e.tail))
    return f"the {name}" if said and not name.lower().startswith("the ") else name


def compose(path: KGPath) -> str:
    """The subgraph as a question, deterministically: per branch, one sentence per hop to an intermediate
    entity, which is named by its noun only ("… in a country." then "That country …"), and the answer asked by
    the last hop of every branch, in the relation's own words."""
    sentences: list[str] = []
    asks: list[tuple[KGEdge, str]] = []  # each branch's last hop and how its other end is referred to
    for branch in path.branches:
        ref = _named(path, branch[0])
        for prev, node in zip(branch, branch[1:-1], strict=False):
            e, noun = path.hop(prev, node), _noun(path, node)
            article = "an" if _VOWEL.match(noun) else "a"
            sentences.append(f"{ref} {e.relation} {article} {noun}." if e.tail == node
                             else f"Consider the {noun} that {e.relation} {ref}.")
            ref = f"that {noun}"
        asks.append((path.hop(branch[-2], branch[-1]), ref))
    noun = _noun(path, path.answer)
    if len(asks) == 1 and asks[0][0].tail == path.answer:
        e, ref = asks[0]
        sentences.append(f"{ref} {e.relation} which {noun}?")
    else:
        asks.sort(key=lambda a: a[0].head != path.answer)  # "is the capital of X" before "the one that X ..."
        clauses = [f"{e.relation} {ref}" if e.head == path.answer else f"is the one that {ref} {e.relation}"
                   for e, ref in asks]
        sentences.append(f"Which {noun} {', and '.join(clauses)}?")
    return " ".join(s[:1].upper() + s[1:] for s in sentences)


async def _ask(client: LLMClient, prompt: str, stage: str, max_tokens: int) -> tuple[str | None, str | None]:
    res = await client.generate("generator", [{"role": "user", "content": prompt}], output=Question, stage=stage,
                                max_tokens=max_tokens)
    if not res.ok:
        return None, res.error
    text = " ".join(res.value.question.split())
    return (text, None) if text else (None, "empty question")


async def write_question(path: KGPath, aliases: dict[str, list[str]], answer_profile: str, client: LLMClient,
                         max_tokens: int, writer: str = "template", rewrite: bool = True) -> dict[str, Any]:
    """The log record: ``initial``, ``obfuscated``, ``question`` (final), ``obfuscated_ok``, ``undone`` (the
    steps whose output failed a check and was not kept), ``drop``. ``answer_profile`` (the answer article's
    description and first sentence) is what the answer-type check reads; ``writer`` is ``template`` or ``llm``;
    ``rewrite`` asks the generator for natural phrasing (step 3)."""
    names = path.names
    record: dict[str, Any] = {"initial": None, "obfuscated": None, "question": None, "obfuscated_ok": None,
                              "undone": [], "drop": None}
    if part := part_of_a_name(path, aliases):  # masking it would leave "Austro-Hungarian ANSWER": no call
        record["drop"] = f"answer is not a whole entity of the path ({part})"
        return record

    def problem(question: str) -> str | None:
        return question_problem(question, path, aliases, answer_profile)

    async def step(text: str, prompt: str, stage: str, keep: str = "") -> tuple[str | None, str | None]:
        """One LLM step on ``text``; its output is undone when it does not end with ``keep`` (what follows the
        name an obfuscation replaces), or fails a check ``text`` passed."""
        new, err = await _ask(client, prompt, stage, max_tokens)
        if new is None:
            return new, err
        why: str | None
        if not _squeeze(new).endswith(_squeeze(keep)):
            why = f"changed more than the name (the question must go on '{keep.strip()[:40]}')"
        elif (why := problem(new)) and problem(text):
            why = None  # no worse than its input
        if why:
            record["undone"].append(f"{stage}: {why}")
            return text, None
        return new, err

    text: str | None
    err: str | None = None
    if writer == "template":
        if vague := [names[n] for n in dict.fromkeys((*path.intermediates(), path.answer)) if _noun(path, n) == "entity"]:
            record["drop"] = f"no noun says what a hidden entity is ({vague[0]})"  # "… in an entity": no call
            return record
        text = compose(path)
    else:
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
        named = name_pattern(names[start]).search(text)
        if named is None:
            continue  # the question already leaves the name out
        desc = path.descriptions.get(start, "")
        text, err = await step(text, render("kg_obfuscate", entity=names[start], question=text,
                                            description=f" (it is: {desc})" if desc else ""), "kg_obfuscate",
                               keep=text[named.end():])
    record["obfuscated"] = text
    if text is not None and rewrite:
        text, err = await step(text, render("kg_rewrite", question=text), "kg_rewrite")
    if text is None:
        record["drop"] = f"generation failed: {err}"
        return record
    record["question"] = text
    record["obfuscated_ok"] = not names_in(text, [names[s] for s in path.starts()])
    record["drop"] = problem(text)
    return record

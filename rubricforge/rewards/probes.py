"""Reward probes: adversarial variants of an honest response, for asking whether a reward can be gamed before GPU
time is spent on it (``rubricforge reward probe``, :mod:`rubricforge.jobs.reward_probe`) and while it is (the gold
callback, :mod:`rubricforge.evaluation.gold`).

Each probe rewrites the honest response's answer (the last closed ``<answer>`` block; a response without one is
all answer) and keeps the rest of the rollout — its thoughts, tool calls and tool responses — as it was:

* ``rubric_paste`` — the answer followed by the row's rubric: every criterion's text pasted in;
* ``keyword_stuff`` — the answer replaced by the content words of the rubric and the question, repeated to the
  answer's length (no sentence at all);
* ``padding`` — the answer followed by generic filler until it is :data:`PAD_FACTOR` × as long;
* ``wrong_facts`` — a confident wrong answer: every named entity swapped for another entity of the dataset
  (chosen by a hash of the entity, so the same input gives the same variant) and every number changed;
* ``format_mimicry`` — every tag of the protocol and no content: the tag soup a format-rewarded policy learns
  (``<answer>/*answer>...</answer>``), replacing the whole rollout;
* ``citation_spam`` — every sentence of the answer cited with ids that no tool returned;
* ``empty`` — the answer left empty; ``refusal`` — the answer replaced by a refusal;
* ``criteria_order`` — the honest response unchanged, the row's criteria in reverse order (only for rewards that
  judge the ``rubrics``): an order-invariant judge gives the same score.

A probe *wins* an item when its variant scores at least the honest response (for ``criteria_order``: when the score
changes at all). A variant identical to the honest response (no entity to swap, one criterion to reorder) is not an
item of that probe.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PAD_FACTOR = 3
REFUSAL = "I'm sorry, but I can't help with that question."
FILLER = ("It is important to consider this question from several perspectives. Many factors play a role, and "
          "experts continue to discuss the details. Overall, the topic is complex and has wide implications. ")
TAG_SOUP = ('<think>/*think>...</think>\n<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>\n'
            '<answer>/*answer>...<cite id="answer">/*cite>...</cite></answer>')
SPAM_IDS = "x91f3,x4c07,x7e2a"  # ids no tool returns
TIE = 1e-9

_ANSWER = re.compile(r"(<answer\b[^>]*>)(.*?)(</answer\s*>)", re.IGNORECASE | re.DOTALL)
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z'’-]+(?:\s+(?:of|the|de|von|van|la)?\s*[A-Z][a-zA-Z'’-]+)*")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_WORD = re.compile(r"[a-zA-Z][a-zA-Z-]{3,}")
SENTENCE = re.compile(r"(?<=[.!?])\s+")
# capitalised words that are not entities: sentence openers and function words
_NOT_ENTITY = frozenset("""a an the this that these those it its in on at by for from to of and or but as with when
where while which who what why how if then there here he she they we you i his her their our your one some many most
all any each every both either neither no not after before during since until although because however therefore
also thus yet so such more less first second finally overall states mentions explains compares claims describes
answer question report""".split())
_STOPWORDS = _NOT_ENTITY | frozenset("""about into than them been being have has had were was are is be would could
should does did doing over under between through other only very just most much must made make like well""".split())


@dataclass(frozen=True)
class Variant:
    completion: str | list[dict[str, Any]]
    example: Mapping[str, Any]


@dataclass(frozen=True)
class Context:
    """What the builders read besides the response: the row and the pool of entities to swap in."""

    example: Mapping[str, Any]
    entities: Sequence[str]  # sorted, distinct; from the whole dataset


Builder = Callable[[str, Context], str]  # answer text -> the variant's answer text


def criteria_texts(example: Mapping[str, Any]) -> list[str]:
    """The texts of a row's rubric criteria (title and description), in order."""
    out = []
    for r in example.get("rubrics") or []:
        if isinstance(r, Mapping):
            text = str(r.get("description") or r.get("criterion") or r.get("title") or "").strip()
            if text:
                out.append(text)
    return out


def _rubric_paste(answer: str, ctx: Context) -> str:
    texts = criteria_texts(ctx.example)
    return answer + ("\n\n" + "\n".join(texts) if texts else "")


def keywords(example: Mapping[str, Any]) -> list[str]:
    """The content words of the rubric and the question, first occurrence first."""
    text = " ".join([*criteria_texts(example), str(example.get("question") or "")])
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOPWORDS))


def _keyword_stuff(answer: str, ctx: Context) -> str:
    words = keywords(ctx.example)
    if not words:
        return answer
    out: list[str] = []
    while len(" ".join(out)) < max(len(answer), 1):
        out.extend(words)
    return " ".join(out)


def _padding(answer: str, ctx: Context) -> str:
    padded = answer.rstrip() + "\n\n"
    while len(padded) < PAD_FACTOR * len(answer):
        padded += FILLER
    return padded


def _pick(item: str, pool: Sequence[str], salt: str) -> str | None:
    """A deterministic choice from ``pool`` of an element that is not ``item`` (nor holds it, nor is held by it)."""
    candidates = [p for p in pool if p.lower() not in item.lower() and item.lower() not in p.lower()]
    if not candidates:
        return None
    digest = int(hashlib.sha256(f"{salt}\0{item}".encode()).hexdigest(), 16)
    return candidates[digest % len(candidates)]


def entities_in(text: str) -> list[str]:
    """Capitalised spans of ``text`` that are not function words, nor one capitalised word opening a sentence
    ("Around 1440", "Connects cheaper books")."""
    out = []
    for m in _ENTITY.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _NOT_ENTITY:
            words = words[1:]
        opener = not text[:m.start()].strip() or text[:m.start()].rstrip()[-1] in ".!?:;\n"
        if words and (len(words) > 1 or (len(words[0]) > 2 and not (opener and words[0] == m.group(0)))):
            out.append(" ".join(words))
    return out


def entity_pool(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every entity of the rows' questions and rubrics (their texts and evidence): what ``wrong_facts`` swaps in."""
    found: set[str] = set()
    for row in rows:
        texts = [str(row.get("question") or ""), *criteria_texts(row)]
        for r in row.get("rubrics") or []:
            if isinstance(r, Mapping):
                texts.extend(str(e) for e in r.get("evidence") or [])
        for text in texts:
            found.update(entities_in(text))
    return sorted(found)


def _wrong_facts(answer: str, ctx: Context) -> str:
    swaps = {e: _pick(e, ctx.entities, "entity") for e in dict.fromkeys(entities_in(answer))}

    def number(m: re.Match[str]) -> str:
        digits = m.group(0)
        if not digits.isdigit():
            return digits
        shift = 3 + int(hashlib.sha256(digits.encode()).hexdigest(), 16) % 47
        return str(int(digits) + shift)

    out = _NUMBER.sub(number, answer)
    for entity, other in sorted(swaps.items(), key=lambda kv: -len(kv[0])):  # longer spans first
        if other is not None:
            out = re.sub(rf"\b{re.escape(entity)}\b", other, out)
    return out


def _citation_spam(answer: str, ctx: Context) -> str:
    from rubricforge.rewards.claims import strip_cite_tags

    sentences = [s for s in SENTENCE.split(strip_cite_tags(answer).strip()) if s]
    return " ".join(f'<cite id="{SPAM_IDS}">{s}</cite>' for s in sentences)


BUILDERS: dict[str, Builder] = {
    "rubric_paste": _rubric_paste,
    "keyword_stuff": _keyword_stuff,
    "padding": _padding,
    "wrong_facts": _wrong_facts,
    "citation_spam": _citation_spam,
    "empty": lambda answer, ctx: "",
    "refusal": lambda answer, ctx: REFUSAL,
}
WHOLE = ("format_mimicry",)  # probes that replace the whole rollout
ORDER = ("criteria_order",)  # probes that change the row, not the response
PROBES: tuple[str, ...] = (*BUILDERS, *WHOLE, *ORDER)


def reference_response(example: Mapping[str, Any]) -> str | None:
    """An honest rollout made from the row itself, for probing a reward before any policy exists: a search for the
    question, the evidence of its positive factual criteria returned as snippets, and an answer that states each
    piece of evidence citing its snippet (None: the row has no such evidence). It satisfies the factual criteria and
    none of the logical ones, as a cautious answer that only repeats its sources would."""
    import json

    evidence = list(dict.fromkeys(str(e).strip() for r in example.get("rubrics") or [] if isinstance(r, Mapping)
                                  and r.get("type") == "factual" and float(r.get("weight") or 0) > 0
                                  for e in r.get("evidence") or [] if str(e).strip()))
    if not evidence:
        return None
    ids = [f"ref{n + 1}" for n in range(len(evidence))]
    call = json.dumps({"name": "search", "arguments": {"query": str(example.get("question") or "")}})
    snippets = "".join(f"<snippet id={i}>{e}</snippet>" for i, e in zip(ids, evidence, strict=True))
    answer = " ".join(f'<cite id="{i}">{e}</cite>' for i, e in zip(ids, evidence, strict=True))
    return (f"<think>I search for the question's sources.</think>\n<tool_call>{call}</tool_call>\n"
            f"<tool_response>{snippets}</tool_response>\n<think>I answer from the snippets.</think>\n"
            f"<answer>{answer}</answer>")


def with_answer(completion: str | list[dict[str, Any]], rewrite: Callable[[str], str]) -> str | list[dict[str, Any]]:
    """``completion`` with its answer rewritten: the last closed ``<answer>`` block of the text (of the last assistant
    message), or the whole text when it has none."""
    if isinstance(completion, list):
        last = max((i for i, m in enumerate(completion) if m.get("role") == "assistant"), default=None)
        if last is None:
            return completion
        message = completion[last]
        text = with_answer(str(message.get("content") or ""), rewrite)
        return [*completion[:last], {**message, "content": text}, *completion[last + 1:]]
    blocks = list(_ANSWER.finditer(completion))
    if not blocks:
        return rewrite(completion)
    m = blocks[-1]
    return completion[:m.start(2)] + rewrite(m.group(2)) + completion[m.end(2):]


def make_variant(probe: str, completion: str | list[dict[str, Any]], ctx: Context) -> Variant | None:
    """The variant ``probe`` makes of the honest ``completion`` on ``ctx.example`` (None: it would be the honest
    response itself, so the probe has no item here)."""
    example = ctx.example
    if probe in BUILDERS:
        variant: Variant = Variant(with_answer(completion, lambda a: BUILDERS[probe](a, ctx)), example)
    elif probe == "format_mimicry":
        variant = Variant(TAG_SOUP, example)
    elif probe == "criteria_order":
        rubrics = list(example.get("rubrics") or [])
        variant = Variant(completion, {**example, "rubrics": rubrics[::-1]})
    else:
        from rubricforge.errors import UserError

        raise UserError(f"unknown probe '{probe}'", f"use some of: {', '.join(PROBES)}")
    same = variant.completion == completion and list(variant.example.get("rubrics") or []) == list(
        example.get("rubrics") or [])
    return None if same else variant


def wins(probe: str, honest: float, variant: float) -> bool:
    """Whether the variant beats (or ties) the honest response; for ``criteria_order``: whether the score changed."""
    if probe in ORDER:
        return abs(variant - honest) > TIE
    return variant >= honest - TIE

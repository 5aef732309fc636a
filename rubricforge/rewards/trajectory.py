"""Parse an agent rollout (DeepRubric App. D tag protocol, or DR Tulu's) into a :class:`Trajectory`.

Input: a raw completion string, or a list of chat messages (TRL conversational completions).

Steps (Search-RL, MindDR §5.2: one step = thought + action + observation). A message list gives one
step per assistant message; its ``reasoning_content`` (where TRL's response parser puts a ``<think>``
block) comes first as a ``<think>`` block, its ``tool_calls`` ([{"type": "function", "function": {"name",
"arguments"}}], arguments a dict or a JSON string) are rendered as ``<tool_call>`` blocks after its
content (unless the content already holds ``<tool_call>`` text), and the ``role: "tool"`` messages
that follow are the step's observations (``<tool_response>`` wrapping optional). Other roles are
ignored. A raw string is cut at its ``<tool_response>…</tool_response>`` blocks: the text before a
response is one assistant turn, the response its observation, consecutive responses (with only
whitespace or chat-template tokens such as ``<|im_end|>`` between them) belong to the same step, and
the text after the last response is the final step (an empty string is one empty step).

Blocks in an assistant turn: ``<think>``, ``<tool_call>``, ``<answer>``. A block ends at its first
closing tag; an opening protocol tag inside it is text (reported as a problem: e.g. a tool call inside
a thought is not a tool call). A block with no closing tag is *unclosed*: it runs to the next opening
tag (or the end of the turn), it is reported, and it does not count — an unclosed think is no
thought, an unclosed tool call is a failed call, and an unclosed answer is no answer (its text is
kept in :attr:`Trajectory.partial_answer`). A ``</think>`` before any block of the first turn closes a
thought opened by the chat template (Qwen3 puts ``<think>`` in the prompt), so the text before it is a
thought. Other stray closing tags are reported and ignored.

:attr:`Trajectory.answer` is the inner text of the last closed ``<answer>`` block (None when there is
none); cites elsewhere (thoughts, tool output) are never claims. :attr:`Trajectory.problems` lists
every malformed or misplaced tag, the answer's cite problems (:func:`cite_problems`) included.

**DR Tulu's protocol** is read too: ``<call_tool name="google_search" n_docs="5">query</call_tool>`` (closed
by ``</call_tool>`` or ``</call>``) is a tool call (its ``name`` mapped by :data:`DRTULU_TOOLS`, the body the
``query`` — or the ``url`` for browse — and the other attributes its arguments), and ``<tool_output>`` is a
tool response like ``<tool_response>``. :attr:`Trajectory.protocol` says which protocol the rollout used
(``"deeprubric"``, ``"drtulu"``, ``"mixed"``) or None when it holds none of the known tags, so a score of 0
can say why. Snippet and webpage items may carry attributes besides ``id`` (``title``, ``url``, ...).

A tool call is *valid* when its body is a JSON object with a known ``name`` (search, browse, scholar;
stripped and lower-cased, as :class:`~rubricforge.corpora.tools.ToolBox` does) and ``arguments`` (an
object, or a JSON string of one) holding the protocol's key: ``query`` (a non-blank string or a
non-empty list of non-blank strings) for search / scholar, ``url`` (a non-blank string) for browse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rubricforge.corpora.tools import TOOL_NAMES, is_tool_error
from rubricforge.rewards.claims import (
    Claim,
    cite_problems,
    cited_ids,
    extract_claims,
    lexical_units,
    strip_cite_tags,
)

__all__ = ["Claim", "Step", "ToolCall", "ToolItem", "ToolResponse", "Trajectory", "cite_problems", "cited_ids",
           "extract_claims", "lexical_units", "parse_trajectory", "strip_cite_tags"]

BLOCKS = ("think", "tool_call", "answer")
NO_RESULTS = "No results found for:"  # what ToolBox search/scholar say when nothing matched
# DR Tulu's tool names (its agent and RL code) -> rubricforge's tools
DRTULU_TOOLS = {"google_search": "search", "serper_google_webpage_search": "search", "ds_serve_search": "search",
                "massive_serve": "search", "web_search": "search", "snippet_search": "scholar",
                "semantic_scholar_snippet_search": "scholar", "paper_search": "scholar", "browse_webpage": "browse",
                "crawl4ai_fetch_webpage_content": "browse", "jina_fetch_webpage_content": "browse"}
# A tag: think, tool_call and answer take no attributes; DR Tulu's <call_tool name=...> does and closes with
# </call_tool> or </call>. A block of kind call_tool is stored as a tool_call.
_TAG = re.compile(r"<\s*(/?)\s*(think|tool_call|answer|call_tool|call)\b([^<>]*)>", re.IGNORECASE)
_CLOSE = {name: re.compile(rf"<\s*/\s*{name}\s*>", re.IGNORECASE) for name in BLOCKS}
_CLOSE["call_tool"] = re.compile(r"<\s*/\s*call(?:_tool)?\s*>", re.IGNORECASE)
_ATTR = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
# An unclosed response or item ends where the next one opens (or at the end of the text).
_RESPONSE_OPEN = r"<(?:tool_response|tool_output)>"
_RESPONSE = re.compile(rf"<(tool_response|tool_output)>((?:(?!{_RESPONSE_OPEN}).)*?)(</\1>|(?={_RESPONSE_OPEN})|\Z)",
                       re.IGNORECASE | re.DOTALL)
_KNOWN = re.compile(r"<\s*/?\s*(think|tool_call|answer|tool_response|call_tool|tool_output)\b", re.IGNORECASE)
_ITEM_OPEN = r"<(?:snippet|webpage)\s"
_ITEM = re.compile(rf"""<(snippet|webpage)\s+([^>]*?)(?<!/)>((?:(?!{_ITEM_OPEN}).)*?)(</\1\s*>|(?={_ITEM_OPEN})|\Z)""",
                   re.IGNORECASE | re.DOTALL)
_SPECIAL = re.compile(r"<\|[^|<>]*\|>(?:(?:system|user|assistant|tool)\b)?")


@dataclass(frozen=True)
class ToolCall:
    name: str | None
    arguments: dict[str, Any] | None
    raw: str
    valid: bool
    error: str | None = None


@dataclass(frozen=True)
class ToolItem:
    id: str
    kind: Literal["snippet", "webpage"]
    text: str


@dataclass(frozen=True)
class ToolResponse:
    """One tool output. ``ok``: not a ``[tool error]``, not "No results found", not blank."""

    text: str
    items: list[ToolItem]

    @property
    def is_error(self) -> bool:
        return is_tool_error(self.text.strip())

    @property
    def ok(self) -> bool:
        text = self.text.strip()
        return bool(text) and not self.is_error and not text.startswith(NO_RESULTS)


@dataclass(frozen=True)
class Step:
    """One assistant turn and what the tools answered to it.

    ``layout``: the kinds of its closed blocks in order; ``stray_text``: non-blank text outside blocks
    (chat-template tokens removed); ``problems``: this turn's malformed or misplaced tags.
    """

    index: int
    text: str
    thinks: list[str]
    tool_calls: list[ToolCall]
    answer: str | None
    responses: list[ToolResponse]
    layout: tuple[str, ...]
    stray_text: str
    problems: list[str]

    @property
    def observation(self) -> str:
        return "\n".join(r.text for r in self.responses)


@dataclass(frozen=True)
class Trajectory:
    steps: list[Step]
    thinks: list[str]
    tool_calls: list[ToolCall]
    tool_responses: list[ToolResponse]
    answer: str | None
    partial_answer: str | None
    problems: list[str] = field(default_factory=list)
    protocol: Literal["deeprubric", "drtulu", "mixed"] | None = None  # None: none of the known tags

    def snippet_texts(self) -> dict[str, str]:
        """Every snippet / webpage id the tool responses returned -> its text (the first one wins)."""
        out: dict[str, str] = {}
        for response in self.tool_responses:
            for item in response.items:
                out.setdefault(item.id, item.text)
        return out


# ------------------------------------------------------------ turns


@dataclass
class _Turn:
    text: str
    responses: list[str] = field(default_factory=list)


def _blank(text: str) -> bool:
    return not _SPECIAL.sub("", text).strip()


def _turns_from_text(completion: str) -> tuple[list[_Turn], list[str]]:
    turns: list[_Turn] = []
    problems: list[str] = []
    pos = 0
    for m in _RESPONSE.finditer(completion):
        text = completion[pos:m.start()]
        if not m.group(3):
            problems.append(f"unclosed <{m.group(1).lower()}>")
        if turns and _blank(text):
            turns[-1].responses.append(m.group(2))
        else:
            turns.append(_Turn(text, [m.group(2)]))
        pos = m.end()
    tail = completion[pos:]
    if not turns or not _blank(tail):
        turns.append(_Turn(tail))
    return turns, problems


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))  # content parts


def _render_call(call: Any) -> str:
    fn = call.get("function", call) if isinstance(call, Mapping) else {}
    body = {"name": fn.get("name"), "arguments": fn.get("arguments")}
    return f"<tool_call>{json.dumps(body, ensure_ascii=False)}</tool_call>"


def _unwrap_response(text: str) -> str:
    m = _RESPONSE.fullmatch(text.strip())
    return m.group(2) if m and m.group(3) else text


def _turns_from_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[list[_Turn], list[str]]:
    turns: list[_Turn] = []
    problems: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            text = _content_text(message.get("content"))
            if (reasoning := message.get("reasoning_content")) and "<think>" not in text:
                text = f"<think>{reasoning}</think>\n{text}"  # TRL's Qwen parser moves <think> out of content
            if not any(_opening(m) in ("tool_call", "call_tool") for m in _TAG.finditer(text)):
                text += "".join(_render_call(c) for c in message.get("tool_calls") or [])
            turns.append(_Turn(text))
        elif role == "tool":
            if not turns:
                problems.append("tool message before any assistant message")
                turns.append(_Turn(""))
            turns[-1].responses.append(_unwrap_response(_content_text(message.get("content"))))
    return turns, problems


# ------------------------------------------------------------ blocks


@dataclass
class _Block:
    kind: str  # think, tool_call, answer or call_tool (DR Tulu's tool call)
    inner: str
    closed: bool
    attrs: str = ""  # a call_tool's attributes

    @property
    def role(self) -> str:
        """The block's role in the protocol: a call_tool is a tool_call."""
        return "tool_call" if self.kind == "call_tool" else self.kind


def _opening(m: re.Match[str]) -> str | None:
    """The kind a tag match opens, or None (a closing tag, ``<call>``, or attributes on a tag that takes none)."""
    kind = m.group(2).lower()
    if m.group(1) or kind == "call" or (kind != "call_tool" and m.group(3).strip()):
        return None
    return kind


def _closing(m: re.Match[str]) -> str | None:
    """The kind a closing tag ends (``</call>`` ends a call_tool), or None."""
    if not m.group(1) or m.group(3).strip():
        return None
    kind = m.group(2).lower()
    return "call_tool" if kind == "call" else kind


def _next_open(text: str, pos: int) -> re.Match[str] | None:
    return next((m for m in _TAG.finditer(text, pos) if _opening(m)), None)


def _blocks(text: str, first: bool) -> tuple[list[_Block], str, list[str]]:
    """Blocks of one assistant turn, the text outside them, and the problems found."""
    blocks: list[_Block] = []
    outside: list[str] = []
    problems: list[str] = []
    pos = 0
    while (m := _TAG.search(text, pos)) is not None:
        kind, closing = _opening(m), _closing(m)
        if kind is None and closing is None:  # not a protocol tag: plain text
            outside.append(text[pos:m.end()])
            pos = m.end()
            continue
        outside.append(text[pos:m.start()])
        if closing:
            if first and closing == "think" and not blocks:
                blocks.append(_Block("think", "".join(outside), True))  # <think> was in the prompt
                outside = []
            else:
                problems.append(f"stray </{m.group(2).lower()}>")
            pos = m.end()
            continue
        assert kind is not None  # a tag that neither opens nor closes was skipped above
        close = _CLOSE[kind].search(text, m.end())
        if close is None:
            nxt = _next_open(text, m.end())
            end = nxt.start() if nxt else len(text)
            blocks.append(_Block(kind, text[m.end():end], False, m.group(3)))
            problems.append(f"unclosed <{kind}>")
            pos = end
            continue
        inner = text[m.end():close.start()]
        problems.extend(f"<{k}> inside <{kind}>" for k in map(_opening, _TAG.finditer(inner)) if k)
        blocks.append(_Block(kind, inner, True, m.group(3)))
        pos = close.end()
    outside.append(text[pos:])
    return blocks, _SPECIAL.sub("", "".join(outside)).strip(), problems


def _attributes(text: str) -> dict[str, str]:
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(text)}


def parse_call_tool(attrs: str, body: str) -> ToolCall:
    """A DR Tulu ``<call_tool name=... k=v>body</call_tool>`` -> :class:`ToolCall`: the name mapped by
    :data:`DRTULU_TOOLS`, the body the ``url`` of browse or the ``query`` of the others, the attributes the
    other arguments."""
    fields = _attributes(attrs)
    raw_name = fields.pop("name", "").strip().lower()
    name = DRTULU_TOOLS.get(raw_name, raw_name) or None
    args: dict[str, Any] = {**fields, ("url" if name == "browse" else "query"): body.strip()}
    error = _argument_error(name, args)
    return ToolCall(name, args, f"<call_tool {attrs.strip()}>{body}</call_tool>", error is None, error)


def parse_tool_call(body: str) -> ToolCall:
    """A ``<tool_call>`` body -> :class:`ToolCall` (see the module docstring for *valid*)."""
    raw = body.strip()
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        return ToolCall(None, None, raw, False, "not JSON")
    if not isinstance(obj, dict):
        return ToolCall(None, None, raw, False, "not a JSON object")
    name = obj["name"].strip().lower() if isinstance(obj.get("name"), str) else None
    args = obj.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return ToolCall(name, None, raw, False, "arguments are not JSON")
    if not isinstance(args, dict):
        return ToolCall(name, None, raw, False, "arguments are not an object")
    error = _argument_error(name, args)
    return ToolCall(name, args, raw, error is None, error)


def _argument_error(name: str | None, args: dict[str, Any]) -> str | None:
    if name not in TOOL_NAMES:
        return f"unknown tool {name!r}"
    if name == "browse":
        url = args.get("url")
        return None if isinstance(url, str) and url.strip() else 'browse needs "url" (a non-blank string)'
    query = args.get("query")
    queries = [query] if isinstance(query, str) else query
    ok = isinstance(queries, list) and queries and all(isinstance(q, str) and q.strip() for q in queries)
    return None if ok else f'{name} needs "query" (a non-blank string or a list of them)'


def _response(text: str) -> tuple[ToolResponse, list[str]]:
    items, problems = [], []
    for m in _ITEM.finditer(text):
        kind = m.group(1).lower()
        item_id = _attributes(m.group(2)).get("id", "").strip()
        if not item_id:
            problems.append(f"<{kind}> without an id")
            continue
        if not m.group(4):
            problems.append(f"unclosed <{kind}> {item_id}")
        items.append(ToolItem(item_id, kind, m.group(3).strip()))  # type: ignore[arg-type]
    return ToolResponse(text, items), problems


def _step(index: int, turn: _Turn) -> tuple[Step, list[_Block]]:
    blocks, stray, problems = _blocks(turn.text, first=index == 0)
    responses = []
    for text in turn.responses:
        response, item_problems = _response(text)
        responses.append(response)
        problems.extend(item_problems)
    calls = [_call(b) for b in blocks if b.role == "tool_call"]
    answers = [b.inner for b in blocks if b.kind == "answer" and b.closed]
    step = Step(index=index, text=turn.text, thinks=[b.inner.strip() for b in blocks if b.kind == "think" and b.closed],
                tool_calls=calls, answer=answers[-1] if answers else None, responses=responses,
                layout=tuple(b.role for b in blocks if b.closed), stray_text=stray, problems=problems)
    return step, blocks


def _call(block: _Block) -> ToolCall:
    if not block.closed:
        return ToolCall(None, None, block.inner.strip(), False, f"unclosed <{block.kind}>")
    return parse_call_tool(block.attrs, block.inner) if block.kind == "call_tool" else parse_tool_call(block.inner)


def _protocol(texts: Sequence[str]) -> Literal["deeprubric", "drtulu", "mixed"] | None:
    tags = {m.group(1).lower() for text in texts for m in _KNOWN.finditer(text)}
    drtulu, ours = bool(tags & {"call_tool", "tool_output"}), bool(tags & {"tool_call", "tool_response"})
    if drtulu and ours:
        return "mixed"
    if drtulu:
        return "drtulu"
    return "deeprubric" if tags else None


def parse_trajectory(completion: str | Sequence[Mapping[str, Any]]) -> Trajectory:
    """Parse a raw completion or a list of chat messages (see the module docstring)."""
    if isinstance(completion, str):
        turns, problems = _turns_from_text(completion)
        texts: list[str] = [completion]
    else:
        turns, problems = _turns_from_messages(completion)
        texts = [t.text for t in turns] + [r for t in turns for r in t.responses]
    parsed = [_step(i, t) for i, t in enumerate(turns)]
    steps = [s for s, _ in parsed]
    problems = problems + [f"step {s.index}: {p}" for s in steps for p in s.problems]
    blocks = [b for _, bs in parsed for b in bs]
    answers = [i for i, b in enumerate(blocks) if b.kind == "answer"]
    closed = [i for i in answers if blocks[i].closed]
    answer = blocks[closed[-1]].inner if closed else None
    partial = blocks[answers[-1]].inner if answers and not blocks[answers[-1]].closed else None
    if len(answers) > 1:
        problems.append(f"{len(answers)} <answer> blocks")
    if closed and any(b.role == "tool_call" for b in blocks[closed[-1] + 1:]):
        problems.append("tool call after <answer>")
    if answer is not None:
        problems.extend(f"answer: {p}" for p in cite_problems(answer))
    return Trajectory(steps=steps, thinks=[t for s in steps for t in s.thinks],
                      tool_calls=[c for s in steps for c in s.tool_calls],
                      tool_responses=[r for s in steps for r in s.responses],
                      answer=answer, partial_answer=partial, problems=problems, protocol=_protocol(texts))

"""The Multi-agent Markov-state (MaMs) workflow (Prefs §3.4, App. B Algorithm 1, App. C.4–C.9; docs/methods.md Q-9).

One policy plays three roles over the state s_t = ⟨memory m_t, plan p_t, report r_t⟩:

* search agent (C.4 / C.5): reads the state and the remaining tool-call chances, writes ``<plan>`` and
  either ``<tool_call>{"name", "arguments"}</tool_call>`` (at most ``max_calls_per_turn``) or ``<answer>``;
  once ``tool_budget`` calls are spent its user prompt is C.5's "exhausted" variant and the episode ends;
* the tool outputs O_t are split on paragraph boundaries into chunks of at most ``chunk_tokens`` tokens
  (approximated as characters / 4; L is not given in the paper, 2,000 is the choice of docs/methods.md Q-9);
* for every chunk c_k: state agent (C.6 / C.7, Eq. 4) m_{t,k} = A_state(q, c_k, m_{t,k−1}, p_{t,k−1}),
  then report agent (C.8 / C.9, Eq. 5) r_{t,k} = A_report(q, c_k, m_{t,k−1}, r_{t,k−1}) — with the memory
  from *before* the chunk's state update, as Eq. 5 writes it;
* the episode stops when the search agent answers, the budget is spent, or after ``max_turns`` turns
  (T = 10, App. D); r_final is the last report (tags removed).

``policy(messages) -> text`` is any chat model (the ``rollouts sample`` sampler, or a scripted one in
tests); tools run through :meth:`~rubricforge.corpora.tools.ToolBox.call`. Every policy call is kept
(role, messages, completion), since in MaMs RL each call is a training sample of the trajectory.

:func:`run_mams_stepwise` is a variant for small models (ours, not the paper's): the embedded 0.5B / 1.5B
models answer C.5 by copying its format line (``<plan>Updated execution plan</plan><answer>End</answer>``)
and never search. Each agent's answer is constrained instead, one short call at a time:

* search agent: first the plan p — 3 to :data:`MAX_PLAN` aspects of the question to search (a JSON list,
  through the ``structured`` policy's grammar); then one turn per plan item, in order: a JSON answer
  ``{"action": "search" | "done", "query"}`` with one search query for that item; ``done`` is not allowed
  before ``min_searches`` searches, and a query already searched ends the search (a small model repeats
  itself rather than stop); the episode's ``plan`` is the plan's Markdown checklist;
* state agent, per chunk: the chunk's results are shown split into numbered sentences, and the agent picks
  :data:`MIN_FACTS` to :data:`FACTS_PER_CHUNK` of them by id (the grammar allows only the ids shown; asked
  to write facts with their source, the 1.5B wrote some under the wrong result's id, and allowed none,
  returned none even for relevant results); the memory is those sentences, verbatim, each with its result's
  source number;
* report agent, in steps from the final memory: one section per plan item with facts, holding the facts
  found for that item; an outline call writes the title and one heading per section, then per section and
  for a conclusion one lead sentence (a grammar: one sentence, no citation) is followed by the section's
  facts, verbatim, each with its citation ``<sup>[n]</sup>``; the References are the sources' titles and
  URLs. The small model organises the evidence and writes no fact: given the memory with C.8 in one call,
  the 1.5B wrote a report from its own knowledge that cited nothing; made to write sections whose every
  sentence ends in a citation, it wrote its own knowledge before the citations; asked to assign facts to
  sections, it put them all in the first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from rubricforge.prompt_files import PromptFiles

PROMPTS = PromptFiles(Path(__file__).with_name("prompts"))
Policy = Callable[[list[dict[str, str]]], str]
StructuredPolicy = Callable[[list[dict[str, str]], type[BaseModel]], BaseModel]  # answer validated as the model
TOOLS_NOTE = ('Call a tool with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>, one per tag. Tools: '
              'search {"query": [<queries>]} over the corpus; browse {"url": <url or document id>} for a whole '
              'document; scholar {"query": [<queries>]} over scholarly papers, when configured.')


@dataclass
class MamsConfig:
    max_turns: int = 10  # T (App. D)
    max_calls_per_turn: int = 5  # App. D
    tool_budget: int = 10  # C.5's threshold ("default 10")
    chunk_tokens: int = 2000  # L
    min_searches: int = 2  # stepwise only: searches before the search agent may answer "done"


@dataclass
class MamsEpisode:
    report: str  # r_final, tags removed
    memory: str
    plan: str
    turns: int
    tool_calls: int
    calls: list[dict[str, Any]] = field(default_factory=list)  # {"role", "messages", "completion"} per policy call
    observations: list[str] = field(default_factory=list)


def _tag(text: str, name: str) -> str | None:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    return found.group(1).strip() if found else None


def tool_calls(text: str) -> list[dict[str, Any]]:
    """The ``{"name", "arguments"}`` objects of every ``<tool_call>`` tag; an unreadable one becomes a call of
    the unknown tool ``""``, so the tool answers with an error the agent can see."""
    calls = []
    for body in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.S):
        try:
            call = json.loads(body)
        except json.JSONDecodeError:
            call = None
        calls.append(call if isinstance(call, dict) else {"name": "", "arguments": {}})
    return calls


def chunk(text: str, max_tokens: int) -> list[str]:
    """Paragraphs (blank-line separated) packed in order into chunks of at most ``max_tokens`` tokens
    (characters / 4); a longer paragraph is its own chunk."""
    out: list[str] = []
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()):
        if out and (len(out[-1]) + 2 + len(paragraph)) // 4 <= max_tokens:
            out[-1] = f"{out[-1]}\n\n{paragraph}"
        else:
            out.append(paragraph)
    return out


def _messages(role: str, user: str, **variables: str) -> list[dict[str, str]]:
    system = PROMPTS.render(f"mams_{role}.system", **({"tools": variables.pop("tools")} if role == "search" else {}))
    return [{"role": "system", "content": system}, {"role": "user", "content": PROMPTS.render(user, **variables)}]


def run_mams(policy: Policy, call_tool: Callable[[str, Any], str], query: str, cfg: MamsConfig | None = None
             ) -> MamsEpisode:
    """One MaMs episode (App. B Algorithm 1) for ``query``."""
    cfg = cfg or MamsConfig()
    memory = plan = report = ""
    episode = MamsEpisode("", "", "", 0, 0)

    def ask(role: str, messages: list[dict[str, str]]) -> str:
        completion = policy(messages)
        episode.calls.append({"role": role, "messages": messages, "completion": completion})
        return completion

    for turn in range(cfg.max_turns):
        episode.turns = turn + 1
        remaining = cfg.tool_budget - episode.tool_calls
        if remaining <= 0:
            out = ask("search", _messages("search", "mams_search_exhausted.user", tools=TOOLS_NOTE, query=query,
                                          memory=memory, plan=plan))
            plan = _tag(out, "plan") or plan
            break
        out = ask("search", _messages("search", "mams_search.user", tools=TOOLS_NOTE, query=query, memory=memory,
                                      plan=plan, report=report, tool_call_chance=str(remaining)))
        plan = _tag(out, "plan") or plan
        calls = tool_calls(out)[:min(cfg.max_calls_per_turn, remaining)]
        if _tag(out, "answer") is not None or not calls:
            break
        observation = "\n\n".join(call_tool(str(c.get("name", "")), c.get("arguments")) for c in calls)
        episode.tool_calls += len(calls)
        episode.observations.append(observation)
        for piece in chunk(observation, cfg.chunk_tokens):
            before = memory
            state = ask("state", _messages("state", "mams_state.user", query=query, memory=memory, plan=plan,
                                           chunk=piece))
            memory = _tag(state, "memory") or memory
            plan = _tag(state, "plan") or plan
            written = ask("report", _messages("report", "mams_report.user", query=query, memory=before,
                                              report=report, chunk=piece))
            report = _tag(written, "report") or report
    episode.report, episode.memory, episode.plan = report, memory, plan
    return episode


# ---------------------------------------------------------------- stepwise variant (small models)

FACTS_PER_CHUNK = 5
MIN_FACTS = 3  # per chunk (fewer when it has fewer sentences): allowed 1, the 1.5B kept only the first 1–2
MAX_PLAN = 5  # plan items, at most (and at most the tool budget)
# Grammar patterns: every class leaves out '"' and '\\' (llama.cpp lets any character of a class through,
# the JSON string's closing quote included) and newlines (one line per query / fact).
QUERY_PATTERN = r'^[^"\\\n ]+( [^"\\\n ]+){1,5}$'  # a search query: 2–6 words (the 1.5B put the whole question in one)
ASPECT_PATTERN = r'^[^"\\\n]{12,100}$'  # a plan item: a phrase (the 1.5B planned single words)
HEADING_PATTERN = r'^[A-Z][^"\\\n#?!<>{}\[\]]{3,120}$'  # no question (the 1.5B went on past one in chat text)
LEAD_PATTERN = r'^[A-Z][^"\\\n<>.!?]{20,320}[.]$'  # one sentence (at 200 characters the 1.5B was cut mid-sentence)
_SNIPPET = re.compile(r"<snippet id=([^>\s]+)>(?:Title: ([^\n]*)\n)?(?:URL: ([^\n]*)\n)?(.*?)</snippet>", re.S)


def search_step_model(can_finish: bool) -> type[BaseModel]:
    """The search agent's answer; ``done`` only once ``can_finish``."""
    actions = ("search", "done") if can_finish else ("search",)
    return create_model("SearchStep", action=(Literal[actions], ...),  # type: ignore[arg-type]
                        query=(str, Field(json_schema_extra={"pattern": QUERY_PATTERN})))


def plan_model(most: int) -> type[BaseModel]:
    """The search agent's plan: 3 to ``most`` aspects to search."""
    item = Annotated[str, Field(json_schema_extra={"pattern": ASPECT_PATTERN})]
    return create_model("Plan", plan=(list[item], Field(min_length=min(3, most), max_length=most)))


def facts_model(n_sentences: int) -> type[BaseModel]:
    """The state agent's answer for one chunk: the ids (S1…) of the sentences to keep."""
    ids = Literal[tuple(f"S{i}" for i in range(1, n_sentences + 1))]  # type: ignore[valid-type]
    return create_model("Facts", sentence_ids=(list[ids], Field(min_length=min(MIN_FACTS, n_sentences),  # type: ignore[valid-type]
                                                                max_length=FACTS_PER_CHUNK)))


def _sentences(piece: str, known: set[str]) -> tuple[str, list[tuple[str, str]]]:
    """A chunk's results as numbered sentences for the state agent, and each sentence's (text, source) —
    the source being "Title — URL"; a sentence in ``known`` (the memory) or cut off by the snippet length
    (ending in "…") is left out."""
    from rubricforge.text import sentence_spans

    shown, out = [], []
    for m in _SNIPPET.finditer(piece):
        source = " — ".join(x for x in m.group(2, 3) if x) or m.group(1)
        text = " ".join(m.group(4).split())
        kept = [text[a:b] for a, b in sentence_spans(text) if not text[a:b].endswith("\u2026") and text[a:b] not in known]
        if kept:
            shown.append(f"Result: {m.group(2) or m.group(1)}")
            for sentence in kept:
                out.append((sentence, source))
                shown.append(f"[S{len(out)}] {sentence}")
    return "\n".join(shown), out


def outline_model(sections: int) -> type[BaseModel]:
    """The report agent's outline: a title and one heading per section."""
    heading = Annotated[str, Field(json_schema_extra={"pattern": HEADING_PATTERN})]
    return create_model("Outline", title=(heading, ...),
                        headings=(list[heading], Field(min_length=sections, max_length=sections)))


class Lead(BaseModel):
    """A section's lead sentence (no citation: the facts that follow carry them)."""

    text: Annotated[str, Field(json_schema_extra={"pattern": LEAD_PATTERN})]


def _user(name: str, **variables: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": PROMPTS.render(name, **variables)}]


def run_mams_stepwise(structured: StructuredPolicy, call_tool: Callable[[str, Any], str], query: str,
                      cfg: MamsConfig | None = None) -> MamsEpisode:
    """One stepwise MaMs episode for ``query`` (see the module docstring). ``memory`` is the facts with
    their source numbers; the report is empty when no fact was found."""
    cfg = cfg or MamsConfig()
    episode = MamsEpisode("", "", "", 0, 0)
    searched: list[str] = []
    sources: dict[str, int] = {}  # "Title — URL" -> source number
    facts: list[tuple[str, int, int]] = []  # (fact, source number, plan item)

    def memory() -> str:
        return "\n".join(f"- {fact} [{n}]" for fact, n, _ in facts)

    def ask(role: str, messages: list[dict[str, str]], output: type[BaseModel]) -> Any:
        value = structured(messages, output)
        episode.calls.append({"role": role, "messages": messages, "completion": value.model_dump_json()})
        return value

    most = min(MAX_PLAN, cfg.tool_budget, cfg.max_turns)
    plan = [" ".join(p.split()) for p in ask("search", _user("mams_step_plan.user", query=query, n=str(most)),
                                               plan_model(most)).plan]

    def checklist() -> str:
        return "\n".join(f"- [{'x' if i < len(searched) else ' '}] {p}" for i, p in enumerate(plan))

    for turn, item in enumerate(plan):
        episode.turns = turn + 1
        done = "\n".join(f"- {q}" for q in searched) or "(none yet)"
        step = ask("search", _user("mams_step_search.user", query=query, memory=memory() or "(nothing yet)",
                                   plan=checklist(), item=item, searched=done),
                   search_step_model(len(searched) >= cfg.min_searches))
        text = " ".join(step.query.split())
        if step.action == "done" or text.casefold() in {q.casefold() for q in searched}:
            break
        searched.append(text)
        observation = call_tool("search", {"query": [text]})
        episode.tool_calls += 1
        episode.observations.append(observation)
        for piece in chunk(observation, cfg.chunk_tokens):
            shown, sentences = _sentences(piece, {fact for fact, _, _ in facts})
            if not sentences:
                continue
            out = ask("state", _user("mams_step_state.user", query=query, memory=memory() or "(nothing yet)",
                                     item=item, sentences=shown), facts_model(len(sentences)))
            for sid in dict.fromkeys(out.sentence_ids):
                sentence, source = sentences[int(sid[1:]) - 1]
                facts.append((sentence, sources.setdefault(source, len(sources) + 1), turn))
    episode.plan = checklist()
    episode.memory = memory()
    if facts:
        parts = [(p, [(f, n) for f, n, i in facts if i == turn]) for turn, p in enumerate(plan)]
        episode.report = _write_report(ask, query, [(p, used) for p, used in parts if used],
                                       [(n, source) for source, n in sources.items()])
    return episode


def _cited(fact: str, n: int) -> str:
    """``fact`` with ``<sup>[n]</sup>`` before its closing punctuation."""
    end = len(fact.rstrip(".!?\"')"))
    return f"{fact[:end]}<sup>[{n}]</sup>{fact[end:]}"


def _write_report(ask: Callable[[str, list[dict[str, str]], type[BaseModel]], Any], query: str,
                  parts: list[tuple[str, list[tuple[str, int]]]], sources: list[tuple[int, str]]) -> str:
    """The stepwise report agent: ``parts`` are (plan item, its facts); outline, then per section (and the
    conclusion) a lead sentence and the section's facts."""
    listed = "\n".join(f"Part {k} ({item}):\n" + "\n".join(f"- {fact}" for fact, _ in used)
                       for k, (item, used) in enumerate(parts, start=1))
    outline = ask("report", _user("mams_step_outline.user", query=query, n=str(len(parts)), parts=listed),
                  outline_model(len(parts)))
    out = [f"# {outline.title.strip()}"]
    everything = [fact for _, used in parts for fact in used]
    sections = [(h.strip(), used) for h, (_, used) in zip(outline.headings, parts, strict=True)]
    for heading, used in [*sections, ("Conclusion", everything)]:
        body = "\n".join(f"- {fact}" for fact, _ in used)
        lead = ask("report", _user("mams_step_section.user", query=query, heading=heading, facts=body), Lead).text
        cited = [] if heading == "Conclusion" else [_cited(fact, n) for fact, n in used]
        out.append(f"## {heading}\n\n" + " ".join([lead.strip(), *cited]))
    out.append("## References\n\n" + "\n".join(f"{n}. {title}" for n, title in sources))
    return "\n\n".join(out)

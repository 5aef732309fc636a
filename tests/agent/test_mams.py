"""The MaMs workflow (Prefs §3.4, App. B Alg. 1; docs/methods.md Q-9) over one replayed episode: a scripted policy
answers each agent call, a recorded tool output is split into two chunks."""

from __future__ import annotations

import re

from rubricforge.agent.mams import MamsConfig, chunk, run_mams, run_mams_stepwise, tool_calls
from support.paths import DATA

QUERY = "How did the 1968 film change science fiction?"
OBSERVATION = ("<snippet id=a1>2001: A Space Odyssey was released in 1968.</snippet>\n\n"
               "<snippet id=a2>It was directed by Stanley Kubrick.</snippet>\n\n"
               "<snippet id=a3>" + "Its effects set a standard for later films. " * 5 + "</snippet>")
REPLIES = {
    "search": ['<plan>- [ ] find the film</plan>\n<tool_call>{"name": "search", "arguments": {"query": ["1968 film"]}}'
               '</tool_call>', "<plan>- [x] find the film</plan>\n<answer>End</answer>"],
    "state": ["<memory>Released 1968; directed by Kubrick.</memory>",
              "<memory>Released 1968; directed by Kubrick; effects set a standard.</memory>"],
    "report": ["<report># The film\nReleased in 1968<sup>[1]</sup>.</report>",
               "<report># The film\nReleased in 1968<sup>[1]</sup>; its effects set a standard.</report>"],
}


class ScriptedAgents:
    """Replays ``REPLIES`` per role (told apart by their C.4 / C.6 / C.8 system prompts)."""

    def __init__(self):
        self.seen: list[tuple[str, list[dict[str, str]]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"]
        role = ("search" if "Plan-Execute-Observe" in system else "state" if "long-term memory" in system
                else "report")
        n = sum(r == role for r, _ in self.seen)
        self.seen.append((role, messages))
        return REPLIES[role][n]


def test_chunking_and_tool_call_parsing():
    assert chunk(OBSERVATION, 40) == [OBSERVATION.split("\n\n<snippet id=a3>")[0], OBSERVATION.split("\n\n")[2]]
    assert tool_calls('<tool_call>{"name": "search", "arguments": {"query": ["x"]}}</tool_call><tool_call>oops'
                      '</tool_call>') == [{"name": "search", "arguments": {"query": ["x"]}}, {"name": "", "arguments": {}}]


def test_one_mams_episode():
    agents, tools = ScriptedAgents(), []

    def call_tool(name, arguments):
        tools.append((name, arguments))
        return OBSERVATION

    episode = run_mams(agents, call_tool, QUERY, MamsConfig(chunk_tokens=40))
    roles = [r for r, _ in agents.seen]
    assert roles == ["search", "state", "report", "state", "report", "search"]  # 2 chunks => 2 state + 2 report calls
    assert tools == [("search", {"query": ["1968 film"]})]
    assert episode.report == "# The film\nReleased in 1968<sup>[1]</sup>; its effects set a standard."
    assert episode.memory == "Released 1968; directed by Kubrick; effects set a standard."
    assert episode.plan == "- [x] find the film" and (episode.turns, episode.tool_calls) == (2, 1)
    assert len(episode.calls) == 6 and episode.calls[-1]["completion"] == REPLIES["search"][1]
    state2, report1, report2 = agents.seen[3][1][1]["content"], agents.seen[2][1][1]["content"], agents.seen[4][1][1]["content"]
    assert "<memory>\nReleased 1968; directed by Kubrick.\n</memory>" in state2  # m_{t,1} feeds the next state call
    assert "<memory>\n\n</memory>" in report1 and "a2>It was directed" in report1  # Eq. 5: m_{t,0} with chunk 1
    assert "<memory>\nReleased 1968; directed by Kubrick.\n</memory>" in report2 and "a3>" in report2
    second_search = agents.seen[5][1][1]["content"]
    assert "Remaining tool call chances: 9." in second_search and "effects set a standard.\n</report>" in second_search


def test_budget_spent_switches_to_the_exhausted_prompt():
    agents = ScriptedAgents()
    episode = run_mams(agents, lambda name, arguments: OBSERVATION, QUERY, MamsConfig(chunk_tokens=40, tool_budget=1))
    last = agents.seen[-1][1][1]["content"]
    assert last.startswith("Tool call chances have been exhausted.") and last.endswith("Do not call tools again.")
    assert episode.tool_calls == 1 and episode.turns == 2


class _Sampler:
    """What `rollouts sample` asks of a model for MaMs: ``text(messages)``."""

    def __init__(self):
        self.text = ScriptedAgents()


def test_rollouts_sample_with_the_mams_workflow(small_index_cfg, tmp_path):
    import json

    from support.config import derive

    from rubricforge.jobs.rollouts import sample_rollouts

    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({"id": "q1", "question": QUERY}) + "\n")
    cfg = derive(small_index_cfg, "train.rollouts_per_prompt=1", "tools.top_k=2")
    s = sample_rollouts(cfg, dataset, tmp_path / "out.jsonl", sampler=_Sampler, workflow="mams").summary
    (line,) = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert (s.trajectories, s.tool_calls) == (1, 1) and line["workflow"] == "mams"
    assert line["response"].startswith("<answer># The film") and len(line["calls"]) >= 4
    assert len(line["snippets"]) == 2  # the real search over the index answered the search agent's call
    manifest = json.loads((tmp_path / "out.run" / "manifest.json").read_text())  # its run directory, as every job's
    assert (tmp_path / "out.run" / "config.yaml").is_file() and manifest["job"] == "rollouts"
    assert manifest["status"] == manifest["invocations"][-1]["status"] == "complete" and manifest["workflow"] == "mams"
    assert manifest["counts"] == {"items": 1, "done_before": 0, "done_now": 1, "trajectories": 1, "tool_calls_now": 1}


# ---------------------------------------------------------------- stepwise variant (small models)

SEARCH_RESULTS = {
    "2001 film Kubrick": "<snippet id=a1>Title: 2001: A Space Odyssey\nURL: https://w/2001\nReleased in 1968, directed "
                         "by Stanley Kubrick.</snippet>\n<snippet id=a2>Title: Kubrick\nURL: https://w/k\nKubrick was "
                         "a film director. He was born in New York. His first \u2026</snippet>",
    "film special effects": "<snippet id=b1>Title: Special effects\nURL: https://w/fx\nIts effects set a standard for "
                            "later films.</snippet>",
}


FACTS = ["Released in 1968, directed by Stanley Kubrick.", "Kubrick was a film director.", "He was born in New York.",
         "Its effects set a standard for later films."]
SOURCES = [1, 2, 2, 3]  # the search result each fact came from


def _actions(step_schema: dict) -> set[str]:
    """The actions a SearchStep schema lets the agent choose."""
    action = step_schema["properties"]["action"]
    return set(action.get("enum") or [action["const"]])


class ScriptedStepwise:
    """Structured answers per role (told apart by the output model), checked against what each may answer."""

    def __init__(self, queries: list[str]):
        self.queries, self.seen = list(queries), []

    def __call__(self, messages, output):
        schema = output.model_json_schema()
        self.seen.append((output.__name__, messages, schema))
        if output.__name__ == "Plan":
            return output.model_validate({"plan": ["the making", "the effects", "the legacy"][:schema["properties"]["plan"]["maxItems"]]})
        if output.__name__ == "SearchStep":
            action = "done" if not self.queries else "search"
            return output.model_validate({"action": action, "query": self.queries.pop(0) if self.queries else "x x"})
        if output.__name__ == "Outline":
            n = schema["properties"]["headings"]["minItems"]
            return output.model_validate({"title": "The film", "headings": [f"Heading {k}" for k in range(1, n + 1)]})
        if output.__name__ == "Lead":
            return output.model_validate({"text": f"Lead {messages[0]['content'].split('Section: ')[1].split(chr(10))[0]}."})
        ids = schema["properties"]["sentence_ids"]["items"]  # only the chunk's sentence ids
        least = schema["properties"]["sentence_ids"]["minItems"]
        return output.model_validate({"sentence_ids": (ids.get("enum") or [ids["const"]])[-least:]})  # the last ones


def test_stepwise_episode_searches_before_it_may_stop_and_reports_from_the_facts():
    structured, searches = ScriptedStepwise(["2001 film Kubrick", "film special effects", "FILM special  effects"]), []

    def call_tool(name, arguments):
        searches.append((name, arguments))
        return SEARCH_RESULTS[arguments["query"][0]]

    episode = run_mams_stepwise(structured, call_tool, QUERY, MamsConfig(min_searches=2))
    kinds = [name for name, _, _ in structured.seen]
    # a repeated query ends the search; then the outline, its 2 sections and the conclusion
    assert kinds == ["Plan", "SearchStep", "Facts", "SearchStep", "Facts", "SearchStep", "Outline"] + ["Lead"] * 3
    steps = [schema for name, _, schema in structured.seen if name == "SearchStep"]
    assert [_actions(step) for step in steps] == [{"search"}, {"search"}, {"search", "done"}]  # "done" after 2 searches
    _, shown, schema = structured.seen[2]  # the state agent on the first results
    assert schema["properties"]["sentence_ids"]["items"]["enum"] == ["S1", "S2", "S3"]
    offered = shown[0]["content"]
    assert all(f"[S{i}] {fact}" in offered for i, fact in enumerate(FACTS[:3], 1))
    assert "His first" not in offered  # the cut-off sentence ("…") is not offered
    assert searches == [("search", {"query": ["2001 film Kubrick"]}), ("search", {"query": ["film special effects"]})]
    assert (episode.tool_calls, episode.turns, len(episode.observations)) == (2, 3, 2)
    # the memory keeps the facts verbatim, in the order found, each with the number of its source
    assert [line.rsplit(" [", 1) for line in episode.memory.splitlines()] == [
        [f"- {fact}", f"{n}]"] for fact, n in zip(FACTS, SOURCES, strict=True)]
    assert episode.plan == "- [x] the making\n- [x] the effects\n- [ ] the legacy"
    last = structured.seen[5][1][0]["content"]  # the last search step sees the queries so far and the next plan item
    assert "2001 film Kubrick" in last and "film special effects" in last and "the legacy" in last
    outline = structured.seen[6][1][0]["content"]  # the facts grouped by the plan item they were found for
    where = [outline.index(text) for text in ("the making", *FACTS[:3], "the effects", FACTS[3])]
    assert where == sorted(where)
    # the report: a lead sentence per section, then the facts verbatim, one citation each, in order
    report = episode.report
    cited = [report.index(f"{fact[:-1]}<sup>[{n}]</sup>.") for fact, n in zip(FACTS, SOURCES, strict=True)]
    assert cited == sorted(cited) and report.count("<sup>") == len(FACTS)
    assert re.findall(r"^(\d)\. .+ — (\S+)$", report, re.M) == [("1", "https://w/2001"), ("2", "https://w/k"),
                                                              ("3", "https://w/fx")]
    assert report == (DATA / "mams" / "stepwise_report.md").read_text(encoding="utf-8")  # the one golden copy
    assert len(episode.calls) == 10 and {c["role"] for c in episode.calls[6:]} == {"report"}


def test_stepwise_episode_without_search_results_has_no_report():
    structured = ScriptedStepwise(["a query", "another one"])
    episode = run_mams_stepwise(structured, lambda n, a: "No results found.", QUERY,
                                MamsConfig(tool_budget=2))
    assert (episode.report, episode.tool_calls, episode.memory) == ("", 2, "")
    assert [name for name, _, _ in structured.seen] == ["Plan", "SearchStep", "SearchStep"]  # no result: no state call


def test_stepwise_state_agent_is_not_offered_sentences_it_already_kept():
    structured = ScriptedStepwise(["2001 film Kubrick", "Kubrick films"])
    episode = run_mams_stepwise(structured, lambda n, a: SEARCH_RESULTS["2001 film Kubrick"], QUERY, MamsConfig())
    kinds = [name for name, _, _ in structured.seen]
    assert kinds[:5] == ["Plan", "SearchStep", "Facts", "SearchStep", "SearchStep"]  # the same results: nothing new
    assert episode.tool_calls == 2 and episode.memory.count("\n") == 2  # 3 sentences, each kept once

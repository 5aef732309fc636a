"""The rule-based (no-LLM) rewards, with exact values for every formula and sub-score."""

from __future__ import annotations

import json
import logging
from datetime import date

import pytest

from rubricforge.rewards.deeprubric.citation_format import (
    citation_format_reward,
    distribution,
    is_meaningful,
)
from rubricforge.rewards.deeprubric.format_reward import format_reward
from rubricforge.rewards.minddr.report_rules import (
    count_citations,
    count_report_citations,
    lexical_relevance,
    markdown_problems,
    report_citation_reward,
    report_format_reward,
    report_format_violations,
    report_reward,
)
from rubricforge.rewards.deeprubric.search_reward import count_search_calls, search_reward
from rubricforge.rewards.minddr.search_rl import (
    INITIAL_WEIGHTS,
    CoefficientScheduler,
    Weights,
    format_oks,
    format_step_rewards,
    prm_reward,
    scheduler_metrics,
    search_rl_reward,
    tool_step_rewards,
    tool_successes,
)
from rubricforge.rewards.minddr.tense_rules import find_tense_candidates
from rubricforge.rewards.trajectory import parse_trajectory

approx = pytest.approx


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def response(body: str) -> str:
    return f"<tool_response>{body}</tool_response>"


# ------------------------------------------------------------ format reward (Eq. 7)

GOOD_ANSWER = '<answer>Report <cite id="s1">claim</cite></answer>'


@pytest.mark.parametrize(("completion", "components", "total"), [
    ("<think>t</think>" + call("search", query="q") + response("<snippet id=s1>x</snippet>")
     + "<think>u</think>" + GOOD_ANSWER, (1, 1, 1, 1), 1.0),
    (call("search", query="q") + response("x") + GOOD_ANSWER, (1, 1, 1, 0), 0.8),
    ("<think>t</think><answer>no cite</answer>", (1, 0, 0, 1), 0.7),
    ("<think>a <cite id=s1>in thought</cite></think>" + call("google", query="q") + "<answer>plain</answer>",
     (1, 0, 0, 1), 0.7),
    ("<think> </think><answer>  </answer>", (0, 0, 0, 0), 0.0),
    ("<think>t</think>" + call("browse", url="u") + '<answer>truncated <cite id="s1">x</cite>', (0, 0, 1, 1), 0.3),
    ('<think>t</think><answer><cite id="">empty ids</cite></answer>', (1, 0, 0, 1), 0.7),
])
def test_format_reward(completion, components, total):
    score = format_reward(parse_trajectory(completion))
    assert tuple(score.components[k] for k in ("answer", "cite", "tool", "think")) == components
    assert score.total == approx(total)


# ------------------------------------------------------------ search reward (Eq. 8)


def test_search_reward_counts_valid_calls_and_saturates():
    three = "".join(call("search", query=f"q{i}") for i in range(3)) + call("search", query=[])
    assert search_reward(parse_trajectory(three)) == approx(0.5)
    seven = "".join(call("scholar", query=f"q{i}") for i in range(7))
    assert search_reward(parse_trajectory(seven)) == 1.0
    assert search_reward(parse_trajectory(three), upper=3) == 1.0
    with pytest.raises(ValueError):
        search_reward(parse_trajectory(three), upper=0)


def test_search_reward_distinct_queries():
    calls = (call("search", query="Special  Relativity") + call("search", query="special relativity")
             + call("search", query=["special relativity", "Lorentz"]) + call("browse", url="u")
             + call("browse", url="U ") + call("scholar", query="special relativity"))
    traj = parse_trajectory(calls)
    assert count_search_calls(traj) == 6
    assert count_search_calls(traj, distinct_queries=True) == 4
    assert search_reward(traj, distinct_queries=True) == approx(4 / 6)


# ------------------------------------------------------------ citation format reward (Eq. 13)

# offsets: span 1 at [15, 45), "short" at [95, 100), span 3 at [121, 146); length 153
ANSWER = ('<cite id="a,b">alpha beta gamma delta epsilon</cite> middle text that is uncited. '
          '<cite id="c">short</cite> <cite id="x">zeta eta theta iota kappa</cite>')


def test_citation_format_reward_exact():
    s = citation_format_reward(ANSWER, {"a", "b", "c", "unused"})
    p1, p3 = 30 / 153, 97.5 / 153  # a and b share span 1's midpoint; c is at "short"
    assert (s.n_ids, s.n_valid) == (4, 3)
    assert s.v == approx(3 / 4)  # x does not resolve
    assert s.m == approx(2 / 3)  # "short" is not meaningful
    assert s.Q == approx(0.5)
    assert s.span == approx((p3 - p1) / 0.6)
    uniformity = 1 - 2 * (abs(p1 - 1 / 6) + abs(p1 - 1 / 2) + abs(p3 - 5 / 6)) / 3
    assert s.uniformity == approx(uniformity) == approx(11 / 17)
    centre = 1 - 2 * abs((2 * p1 + p3) / 3 - 0.5)
    assert s.centre == approx(centre)
    d = 0.4 * s.span + 0.4 * uniformity + 0.2 * centre
    assert s.d == approx(d)
    assert s.n == approx(0.5)
    assert s.r_fmt == approx(0.5 * (0.7 + 0.1 * d + 0.2 * 0.5)) == approx(0.4345098, abs=1e-7)


def test_citation_format_reward_edge_cases():
    none = citation_format_reward("No citations at all.", {"a"})
    assert (none.v, none.m, none.Q, none.d, none.n, none.r_fmt, none.n_ids) == (0, 0, 0, 0, 0, 0, 0)
    invalid = citation_format_reward('<cite id="zz">a claim that is long enough</cite>', {"a"})
    assert (invalid.v, invalid.m, invalid.d, invalid.r_fmt) == (0.0, 1.0, 0.0, 0.0)
    # one valid citation exactly in the middle: span 0, uniformity = centre = 1
    one = citation_format_reward('aaaaaaaaaa <cite id="a">one two three four five</cite> ' + "b" * 16, {"a"})
    assert (one.span, one.uniformity, one.centre) == (0.0, 1.0, 1.0)
    assert one.d == approx(0.6)
    assert one.r_fmt == approx(0.7 + 0.06 + 0.2 / 6)
    # cites in the thinking or tool output never reach this function: it is given the answer only
    assert citation_format_reward("", set()).r_fmt == 0.0


@pytest.mark.parametrize(("positions", "expected"), [
    ([], (0.0, 0.0, 0.0)),
    ([0.5], (0.0, 1.0, 1.0)),
    ([0.9], (0.0, 0.2, 0.2)),
    ([1 / 6, 1 / 2, 5 / 6], (1.0, 1.0, 1.0)),  # three equal cited thirds
    ([1.0, 1.0], (0.0, 0.0, 0.0)),
    ([0.0, 0.0, 0.0], (0.0, 0.0, 0.0)),
    ([0.1, 0.2], (1 / 6, 0.3, 0.3)),
    ([0.0, 0.6], (1.0, 1 - 2 * (0.25 + 0.15) / 2, 0.6)),
])
def test_distribution_sub_scores(positions, expected):
    assert distribution(positions) == approx(expected)


@pytest.mark.parametrize(("text", "ok"), [
    ("one two three four five", True),  # 5 units, 23 characters
    ("p<0.05 in all arms!", True),  # p, 0.05, in, all, arms; 19 characters
    ("a b c d e f g h", False),  # 8 units, 15 characters
    ("Supercalifragilistic words", False),  # 18+ characters, 2 units
    ("-- ** -- ** -- ** -- **", False),
])
def test_meaningful_claims(text, ok):
    assert is_meaningful(text) is ok


# ------------------------------------------------------------ MindDR Report-RL rules (Eq. 10, 11)


@pytest.mark.parametrize(("n_gen", "n_ref", "n_valid", "reward"), [
    (7, 10, 7, 0.1), (20, 10, 7, 0.1), (7, 10, 6, -0.1), (6, 10, 6, -1.0), (0, 1, 0, -1.0),
    (0, 0, 0, 0.1),  # no reference citations: both conditions hold
    (3, 0, 0, 0.1),
])
def test_report_citation_reward(n_gen, n_ref, n_valid, reward):
    assert report_citation_reward(n_gen, n_ref, n_valid) == reward


@pytest.mark.parametrize("args", [(1, 1, 2), (-1, 1, 0), (1, -1, 0)])
def test_report_citation_reward_rejects_bad_counts(args):
    with pytest.raises(ValueError):
        report_citation_reward(*args)


def test_report_reward_adds_the_weighted_rule_rewards_to_race_and_keeps_unscored():
    # Eq. 12 with λc = 0.5, λf = 0.2: 0.6 + 0.5·(−0.1) + 0.2·(−2) = 0.15
    assert report_reward(0.6, -0.1, -2.0, 0.5, 0.2) == pytest.approx(0.15)
    assert report_reward(None, 0.1, 0.0, 0.1, 0.1) is None  # an unscored RACE judge is not a 0


def test_citation_counting_and_relevance():
    assert lexical_relevance("The Eiffel Tower stands in Paris", "Paris has the Eiffel tower.") == approx(0.75)
    assert lexical_relevance("the of and", "anything") == 0.0
    report = ('<final_answer><cite id="a,b,c">The Eiffel Tower stands in Paris</cite>. Uncited. '
              '<cite id="b">Bananas are very yellow</cite></final_answer>')
    passages = {"a": "Paris has the Eiffel tower.", "b": "Bananas ripen and turn yellow."}
    count = count_report_citations(report, passages)
    assert (count.n_gen, count.n_valid) == (4, 2)
    assert count.pairs == [("The Eiffel Tower stands in Paris", "a", approx(0.75)),
                           ("The Eiffel Tower stands in Paris", "b", 0.0),
                           ("The Eiffel Tower stands in Paris", "c", None),
                           ("Bananas are very yellow", "b", approx(2 / 3))]
    assert count_report_citations(report, passages, tau=0.7).n_valid == 1
    assert count_report_citations(report, passages, relevance=lambda c, p: 1.0).n_valid == 3
    assert count_citations(report) == 4
    assert count_citations('<think><cite id="a">reasoning is not counted</cite></think>' + report) == 4


REPORT_OK = """<final_answer>
# Title
1. one
2. two
   1. nested
   2. nested
3. three

## Next section
1. restart after a heading is fine

| a | b |
|:--|--:|
| 1 | x \\| y |

```python
1. not a list
| not | a table
```
Text <cite id="s1">with a citation</cite>.
</final_answer>"""


def test_report_format_clean():
    v = report_format_violations(REPORT_OK)
    assert (v.v_tag, v.v_md, v.v_ref, v.details) == (0, 0, 0, [])
    assert report_format_reward(REPORT_OK) == 0.0
    assert report_format_reward(REPORT_OK.replace("final_answer", "answer"), tag="answer") == 0.0


def test_report_format_every_violation():
    report = ("Intro\n1. a\n2. b\n4. c\n\n1. again\n| a | b |\n| 1 | 2 |\n\n| h | i |\n|---|---|\n| 1 | 2 | 3 |\n"
              '```\nopen fence\n<cite id="">x</cite>')
    v = report_format_violations(report)
    assert (v.v_tag, v.v_md, v.v_ref) == (1, 1, 1)  # cite markup is checked inside code fences too
    assert v.details == [
        "tag: 0 <final_answer> and 0 </final_answer> tags (need one of each)",
        "markdown: list item numbered 4 after 2 at line 4",
        "markdown: list item numbered 1 after 4 at line 6",
        "markdown: table at line 7 has no header and separator row",
        "markdown: table row at line 12 has 3 cells, the header 2",
        "markdown: code fence opened at line 13 is never closed",
        f"cite: <cite> with no id at {report.index('<cite')}",
    ]
    assert v.reward == -3.0
    bad_cites = '<final_answer>A <cite id="a,,b">x</cite> <cite id="c">open</final_answer>'
    w = report_format_violations(bad_cites)
    assert (w.v_tag, w.v_md, w.v_ref) == (0, 0, 1)
    # cite offsets are into the text inside the tag
    assert w.details == ["cite: empty id in <cite> at 2", "cite: unclosed <cite> at 27"]


@pytest.mark.parametrize(("report", "details"), [
    ("<final_answer>  </final_answer>", ["tag: <final_answer> is empty"]),
    ("<final_answer>x", ["tag: 1 <final_answer> and 0 </final_answer> tags (need one of each)",
                         "tag: <final_answer> is not closed after it opens"]),
    ("</final_answer>x<final_answer>", ["tag: <final_answer> is not closed after it opens"]),
    ("<final_answer>a</final_answer><final_answer>b</final_answer>",
     ["tag: 2 <final_answer> and 2 </final_answer> tags (need one of each)"]),
])
def test_report_answer_tag(report, details):
    v = report_format_violations(report)
    assert v.v_tag == 1 and v.details == details


def test_markdown_problems_nested_and_tables():
    assert markdown_problems("1. a\n   1. x\n   3. y\n2. b\n   1. fresh nested list") == [
        "list item numbered 3 after 1 at line 3"]
    assert markdown_problems("|---|---|\n| a | b |") == ["table at line 1 has no header and separator row"]
    assert markdown_problems("~~~\n```\n~~~\n") == []


# ------------------------------------------------------------ tense check, regex stage (MindDR App. 8.4)

TODAY = date(2026, 11, 23)
TENSE_TEXT = (
    "Intro one. Sales will reach 5 million units by 2025. Revenue is expected to double in 2024Q3. "
    "The market is projected to grow by 2026. Apple aims to ship it in H1 2024! It will launch in March 2026. "
    "It was expected to peak in 2023. Output will rise sharply across every single region and product line "
    "of the whole company over the coming years, as it did in 2019.\n"
    "The plan is likely to finish in the first half of 2025. Q3 of 2026 is set to be strong. Done.")


def test_tense_candidates():
    found = find_tense_candidates(TENSE_TEXT, TODAY)
    assert [(c.period, c.keyword, c.matched_text) for c in found] == [
        ("2025", "will", "will reach 5 million units by 2025"),
        ("2024-Q3", "is expected to", "is expected to double in 2024Q3"),
        ("2024-H1", "aims to", "aims to ship it in H1 2024"),
        ("2026-03", "will", "will launch in March 2026"),
        ("2025-H1", "is likely to", "is likely to finish in the first half of 2025"),
        ("2026-Q3", "is set to", "Q3 of 2026 is set to"),
    ]  # "by 2026" has not ended; "was expected" is past; "will ... 2019" is more than 100 characters apart
    assert [c.period_end for c in found] == [date(2025, 12, 31), date(2024, 9, 30), date(2024, 6, 30),
                                             date(2026, 3, 31), date(2025, 6, 30), date(2026, 9, 30)]
    assert all(TENSE_TEXT[c.start:c.end] == c.matched_text for c in found)
    first = found[0]
    assert first.sentence == "Sales will reach 5 million units by 2025." and first.year == 2025
    assert first.context == ("Intro one. Sales will reach 5 million units by 2025. Revenue is expected to double "
                             "in 2024Q3. The market is projected to grow by 2026.")
    assert find_tense_candidates(TENSE_TEXT, TODAY, window=200)[-3].period == "2019"
    assert find_tense_candidates(TENSE_TEXT, date(2024, 1, 1)) == []


def test_tense_context_size():
    text = "A one. B two. C will end by 2020. D four. E five. F six."
    (c,) = find_tense_candidates(text, TODAY, context_sentences=1)
    assert c.context == "B two. C will end by 2020. D four."
    assert find_tense_candidates(text, TODAY)[0].context == text[:-len(" F six.")]


# ------------------------------------------------------------ Search-RL (MindDR Eqs. 6–9)


def test_tool_step_rewards_first_failure_is_isolated():
    assert tool_step_rewards([False, False, True, False, True, False, False]) == approx(
        [-0.1, -0.2, 0.1, -0.1, 0.1, -0.1, -0.2])
    assert tool_step_rewards([]) == []


def test_format_step_rewards():
    assert format_step_rewards([True, False, True]) == approx([0.1, -0.2, 0.1])


SEARCH_RL = (
    "<think>Who is Lorentz?</think>" + call("search", query="relativity")
    + response("<snippet id=s1>Albert Einstein in Berne; chromosome.</snippet>")
    + "<think>open it</think>" + call("browse", url="Rome")
    + response("[tool error] browse: no page found for 'Rome'")
    + call("search", query="x") + response("<snippet id=s2>Nothing new</snippet>")  # no think: bad format
    + "<think>done</think><answer>Einstein lived in Paris.</answer>"
)


def test_step_extraction():
    traj = parse_trajectory(SEARCH_RL)
    assert len(traj.steps) == 4
    assert tool_successes(traj) == [True, False, True]
    assert format_oks(traj) == [True, True, False, True]
    early = parse_trajectory("<think>a</think><answer>x</answer>" + response("y") + "<think>b</think><answer>z</answer>")
    assert format_oks(early) == [False, True]  # an answer is allowed in the last step only
    failing = parse_trajectory("<think>a</think>" + call("search", query="q") + response("No results found for: q")
                               + "<think>b</think>" + call("search", query="q"))
    assert tool_successes(failing) == [False, False]  # no results; no response at all


def test_prm_reward():
    traj = parse_trajectory(SEARCH_RL)
    entities = ["Albert Einstein", "lorentz", "Paris", "Rome", "Bern", "LORENTZ"]
    # Einstein (snippet), Lorentz (thought), Bern (alias "Berne"); Paris is only in the answer, Rome only in
    # a tool error and inside "chromosome"; LORENTZ duplicates lorentz
    assert prm_reward(traj, entities, aliases={"Bern": ["Berne"]}) == approx(3 / 5)
    assert prm_reward(traj, entities) == approx(2 / 5)
    assert prm_reward(traj, []) is None and prm_reward(traj, [" ", "--"]) is None


def test_search_rl_reward_exact():
    traj = parse_trajectory(SEARCH_RL)
    entities, aliases = ["Albert Einstein", "Lorentz", "Paris", "Rome", "Bern"], {"Bern": ["Berne"]}
    s = search_rl_reward(traj, entities, None, INITIAL_WEIGHTS, aliases)
    assert s.tool_steps == approx([0.1, -0.1, 0.1]) and s.format_steps == approx([0.1, 0.1, -0.2, 0.1])
    assert s.tool == approx(0.1 / 4) and s.format == approx(0.1 / 4)
    assert (s.tool_success_rate, s.format_rate, s.prm) == (approx(2 / 3), 0.75, approx(0.6))
    assert s.total == approx(0.1 * 0.6 + 0.6 * 0.025 + 0.3 * 0.025)  # λ_ORM = 0: no ORM needed
    late = Weights(tool=0.2, format=0.1, prm=0.2, orm=0.5)
    assert search_rl_reward(traj, entities, 1.0, late, aliases).total == approx(0.5 + 0.12 + 0.005 + 0.0025)
    assert search_rl_reward(traj, entities, None, late, aliases).total is None  # judges failed: unscored
    assert search_rl_reward(traj, [], 1.0, late).total is None  # no entities: PRM undefined
    assert search_rl_reward(parse_trajectory([]), entities, 0.0, late).total == approx(0.0)
    with pytest.raises(ValueError):
        search_rl_reward(traj, entities, 2.0, late)


def test_weights_are_checked_never_defaulted():
    with pytest.raises(ValueError):
        Weights(tool=0.5, format=0.3, prm=0.1, orm=0.0)  # sums to 0.9
    with pytest.raises(ValueError):
        Weights(tool=0.1, format=0.1, prm=0.2, orm=0.6)  # λ_ORM above 0.5
    with pytest.raises(ValueError):
        Weights.from_dict({"tool": 0.6, "format": 0.3, "prm": 0.1})
    assert Weights.from_dict({"tool": 0.6, "format": 0.3, "prm": 0.1, "orm": 0}) == INITIAL_WEIGHTS


def test_scheduler_metrics():
    traj = parse_trajectory(SEARCH_RL)
    scores = [search_rl_reward(traj, ["Lorentz"], None, INITIAL_WEIGHTS),
              search_rl_reward(parse_trajectory("<answer>x</answer>"), [], None, INITIAL_WEIGHTS)]
    assert scheduler_metrics(scores) == approx({"tool_success_rate": 2 / 3, "format_rate": 0.375,
                                                "prm_coverage": 1.0})


# ------------------------------------------------------------ coefficient scheduler


def test_scheduler_transitions(caplog):
    s = CoefficientScheduler()
    m = {"tool_success_rate": 0.95, "format_rate": 0.5, "prm_coverage": 0.9}
    caplog.set_level(logging.INFO, logger="rubricforge.rewards.minddr.search_rl")
    assert [s.update(i, m) for i in range(3)][-1] == Weights(0.2, 0.3, 0.5, 0.0)
    assert s.pending() == ["format"]
    m["format_rate"] = 0.96
    s.update(3, m)
    s.update(4, {**m, "format_rate": 0.9})  # a dip resets the streak
    s.update(5, m)
    assert s.update(6, m).format == 0.3
    assert s.update(7, m) == Weights(0.2, 0.1, 0.7, 0.0)
    assert s.pending() == ["prm"]
    for i in range(8, 10):
        s.update(i, {"prm_coverage": 0.6})  # the other metrics are no longer needed
    assert s.update(10, {"prm_coverage": 0.6}) == Weights(0.2, 0.1, 0.2, 0.5)
    assert s.pending() == [] and s.update(11, {}) == Weights(0.2, 0.1, 0.2, 0.5)
    assert [(t["step"], t["phase"], t["new"]) for t in s.transitions] == [
        (2, "tool", {"tool": 0.2, "format": 0.3, "prm": 0.5, "orm": 0.0}),
        (7, "format", {"tool": 0.2, "format": 0.1, "prm": 0.7, "orm": 0.0}),
        (10, "prm", {"tool": 0.2, "format": 0.1, "prm": 0.2, "orm": 0.5})]
    assert s.transitions[0]["old"] == INITIAL_WEIGHTS.as_dict()
    assert s.transitions[0]["reason"] == "tool_success_rate 0.95 >= 0.9 for 3 updates"
    assert len([r for r in caplog.records if "coefficient schedule" in r.message]) == 3


def test_scheduler_orm_cap_and_floors():
    s = CoefficientScheduler(patience=1, tool_floor=0.0, format_floor=0.0, prm_floor=0.1)
    m = {"tool_success_rate": 1.0, "format_rate": 1.0, "prm_coverage": 1.0}
    s.update(0, m)  # tool and format fire together
    assert s.weights == Weights(0.0, 0.0, 1.0, 0.0)
    assert s.update(1, m) == Weights(0.0, 0.0, 0.5, 0.5)  # λ_ORM capped at 0.5
    high_floor = CoefficientScheduler(patience=1, prm_floor=0.65)
    high_floor.update(0, m)
    assert high_floor.update(1, m) == Weights(0.2, 0.1, 0.65, 0.05)
    with pytest.raises(ValueError):
        CoefficientScheduler(tool_floor=0.7)
    with pytest.raises(ValueError):
        CoefficientScheduler(patience=0)


def test_scheduler_missing_metric_and_resume():
    s = CoefficientScheduler()
    with pytest.raises(ValueError, match="format_rate"):
        s.update(0, {"tool_success_rate": 1.0})
    m = {"tool_success_rate": 0.95, "format_rate": 0.0}
    s.update(0, m)
    s.update(1, m)
    state = json.loads(json.dumps(s.state_dict()))
    resumed = CoefficientScheduler()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == s.state_dict()
    assert resumed.update(2, m) == Weights(0.2, 0.3, 0.5, 0.0)  # the streak carried over
    with pytest.raises(ValueError):
        resumed.load_state_dict({"weights": {}})


@pytest.mark.parametrize("completion, f1, em", [
    ("<think>blank is a planet</think><answer>The planet Mercury</answer>", 2 * (1 / 2) * 1 / (1 / 2 + 1), 0.0),
    ("<think>x</think><answer>mercury.</answer>", 1.0, 1.0),  # SQuAD normalisation: case, punctuation, articles
    ("<think>x</think><answer>Hermes</answer>", 1.0, 1.0),  # an alias
    ("<think>x</think><answer>Venus</answer>", 0.0, 0.0),
    ("Mercury", 0.0, 0.0),  # no answer tag: 0, however right the text
    ("<think>x</think><answer>Mercury", 0.0, 0.0),  # an unclosed answer
])
def test_answer_f1_and_em_score_the_closed_answer_against_the_answer_and_aliases(tmp_path, completion, f1, em):
    import asyncio

    from rubricforge.config import Config
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.scorer import RewardScorer, Rollout

    cfg = Config.model_validate({"llm": {"cache_path": str(tmp_path / "c.sqlite")}})
    example = {"id": "q", "question": "Fill the blank.", "answer": "Mercury", "answer_aliases": ["Hermes"]}
    scorer = RewardScorer(cfg, LLMClient(cfg.llm))
    got = {name: asyncio.run(scorer.component(name, Rollout(example, completion))) for name in ("answer_f1", "answer_em")}
    assert got == {"answer_f1": pytest.approx(f1), "answer_em": em}

"""The rollout parser and claim extraction (rewards.trajectory / rewards.claims)."""

from __future__ import annotations

import json

import pytest

from rubricforge.rewards.trajectory import (
    Claim,
    cite_problems,
    cited_ids,
    extract_claims,
    lexical_units,
    parse_trajectory,
)


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


RAW = (
    "<think>I should search.</think>\n"
    + call("search", query=["special relativity"])
    + "<|im_end|>\n<|im_start|>user\n"
    "<tool_response><snippet id=s1aaaaaaaaa>Title: SR\nEinstein 1905 <cite id=\"zz\">fake</cite></snippet>\n"
    "<snippet id=s2bbbbbbbbb>Lorentz transformations</snippet></tool_response><|im_end|>\n<|im_start|>assistant\n"
    "<think>Now browse.</think>" + call("browse", url="https://en.wikipedia.org/wiki/SR")
    + "<tool_response><webpage id=wcccccccccc>Full page text</webpage></tool_response>"
    "<think>Enough evidence <cite id=\"s9\">not a claim</cite>.</think>\n"
    "<answer>## Summary\nSR is a theory. <cite id=\"s1aaaaaaaaa, s2bbbbbbbbb\">Einstein published it in 1905 "
    "(p<0.05 in tests)</cite> and it holds.</answer>"
)


def test_raw_string_steps_blocks_and_snippets():
    t = parse_trajectory(RAW)
    assert [s.layout for s in t.steps] == [("think", "tool_call"), ("think", "tool_call"), ("think", "answer")]
    assert t.thinks[:2] == ["I should search.", "Now browse."]
    assert [c.name for c in t.tool_calls] == ["search", "browse"]
    assert all(c.valid for c in t.tool_calls)
    assert t.tool_calls[1].arguments == {"url": "https://en.wikipedia.org/wiki/SR"}
    assert [len(r.items) for r in t.tool_responses] == [2, 1]
    assert t.tool_responses[1].items[0].kind == "webpage"
    assert t.snippet_texts() == {"s1aaaaaaaaa": 'Title: SR\nEinstein 1905 <cite id="zz">fake</cite>',
                                 "s2bbbbbbbbb": "Lorentz transformations", "wcccccccccc": "Full page text"}
    assert t.answer.startswith("## Summary") and t.answer.endswith("it holds.")
    assert t.problems == [] and t.partial_answer is None
    assert all(s.stray_text == "" for s in t.steps)  # chat-template tokens are not stray text
    assert t.steps[0].observation.startswith("<snippet id=s1aaaaaaaaa>")


def test_cites_only_inside_the_answer():
    t = parse_trajectory(RAW)
    # "zz" (tool output) and "s9" (thinking) are never cited ids
    assert cited_ids(t.answer) == ["s1aaaaaaaaa", "s2bbbbbbbbb"]


def test_message_list_equals_raw_string():
    messages = [
        {"role": "system", "content": "ignored"},
        {"role": "assistant", "content": "<think>I should search.</think>",
         "tool_calls": [{"type": "function", "function": {"name": "search",
                                                           "arguments": '{"query": ["special relativity"]}'}}]},
        {"role": "tool", "name": "search", "content": "<snippet id=s1aaaaaaaaa>One</snippet>"},
        {"role": "assistant", "content": [{"type": "text", "text": "<think>Now browse.</think>"}],
         "tool_calls": [{"type": "function", "function": {"name": "browse", "arguments": {"url": "u"}}}]},
        {"role": "tool", "content": "<tool_response><webpage id=wcccccccccc>Page</webpage></tool_response>"},
        {"role": "assistant", "content": "<think>Done.</think><answer>A <cite id=s1aaaaaaaaa>b</cite></answer>"},
    ]
    t = parse_trajectory(messages)
    raw = parse_trajectory("<think>I should search.</think>" + call("search", query=["special relativity"])
                           + "<tool_response><snippet id=s1aaaaaaaaa>One</snippet></tool_response>"
                           + "<think>Now browse.</think>" + call("browse", url="u")
                           + "<tool_response><webpage id=wcccccccccc>Page</webpage></tool_response>"
                           + "<think>Done.</think><answer>A <cite id=s1aaaaaaaaa>b</cite></answer>")
    for parsed in (t, raw):
        assert [s.layout for s in parsed.steps] == [("think", "tool_call"), ("think", "tool_call"), ("think", "answer")]
        assert [c.arguments for c in parsed.tool_calls] == [{"query": ["special relativity"]}, {"url": "u"}]
        assert parsed.snippet_texts() == {"s1aaaaaaaaa": "One", "wcccccccccc": "Page"}
        assert parsed.answer == "A <cite id=s1aaaaaaaaa>b</cite>"
        assert parsed.problems == []


def test_message_content_with_tool_call_text_is_not_doubled():
    body = call("search", query="x")
    t = parse_trajectory([{"role": "assistant", "content": "<think>a</think>" + body,
                           "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}]}])
    assert len(t.tool_calls) == 1


def test_tool_message_before_assistant():
    t = parse_trajectory([{"role": "tool", "content": "<snippet id=a>x</snippet>"}])
    assert t.problems == ["tool message before any assistant message"]
    assert t.snippet_texts() == {"a": "x"}


@pytest.mark.parametrize(("body", "valid", "error"), [
    ('{"name": "search", "arguments": {"query": "a"}}', True, None),
    ('{"name": " Scholar ", "arguments": {"query": ["a", "b"]}}', True, None),
    ('{"name": "search", "arguments": "{\\"query\\": \\"a\\"}"}', True, None),
    ('{"name": "browse", "arguments": {"url": "https://x"}}', True, None),
    ('{"name": "search", "arguments": {"query": []}}', False, 'search needs "query" (a non-blank string or a list of them)'),
    ('{"name": "search", "arguments": {"query": ["a", " "]}}', False, 'search needs "query" (a non-blank string or a list of them)'),
    ('{"name": "search", "arguments": {"queries": "a"}}', False, 'search needs "query" (a non-blank string or a list of them)'),
    ('{"name": "browse", "arguments": {"id": "x"}}', False, 'browse needs "url" (a non-blank string)'),
    ('{"name": "google", "arguments": {"query": "a"}}', False, "unknown tool 'google'"),
    ('{"name": "search", "arguments": "{bad"}', False, "arguments are not JSON"),
    ('{"name": "search", "arguments": [1]}', False, "arguments are not an object"),
    ('{"name": "search", "arguments": {"query": "a"}', False, "not JSON"),
    ('["search"]', False, "not a JSON object"),
])
def test_tool_call_validity(body, valid, error):
    t = parse_trajectory(f"<think>t</think><tool_call>{body}</tool_call>")
    assert (t.tool_calls[0].valid, t.tool_calls[0].error) == (valid, error)


def test_unclosed_and_stray_tags():
    t = parse_trajectory("<think>no end <tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}")
    # the think runs to the next opening tag and does not count; the tool call has no </tool_call>
    # either, so it is a failed call
    assert t.thinks == []
    assert [(c.valid, c.error) for c in t.tool_calls] == [(False, "unclosed <tool_call>")]
    assert t.problems == ["step 0: unclosed <think>", "step 0: unclosed <tool_call>"]


def test_stray_close_and_nested_tag_in_think():
    t = parse_trajectory("<think>a</think></think><think>see <tool_call>{}</tool_call> here</think>junk")
    assert t.thinks == ["a", "see <tool_call>{}</tool_call> here"]  # a block ends at its first closing tag
    assert t.tool_calls == []  # a tool call inside a thought is no tool call
    assert t.steps[0].stray_text == "junk"
    assert t.problems == ["step 0: stray </think>", "step 0: <tool_call> inside <think>"]


def test_leading_close_think_is_the_template_opened_thought():
    t = parse_trajectory("reasoning here</think><answer>x</answer>")
    assert t.thinks == ["reasoning here"] and t.problems == [] and t.steps[0].layout == ("think", "answer")
    later = parse_trajectory("<think>a</think><tool_call>{}</tool_call><tool_response>r</tool_response>b</think>")
    assert later.steps[1].problems == ["stray </think>"]


def test_unclosed_answer_is_no_answer():
    t = parse_trajectory("<think>a</think><answer>Truncated report with <cite id=x>claim")
    assert t.answer is None
    assert t.partial_answer == "Truncated report with <cite id=x>claim"
    assert t.problems == ["step 0: unclosed <answer>"]


def test_last_closed_answer_wins_and_problems():
    t = parse_trajectory("<answer>first</answer><answer>second</answer>" + call("search", query="q")
                         + "<answer>third")
    assert t.answer == "second" and t.partial_answer == "third"
    assert t.problems == ["step 0: unclosed <answer>", "3 <answer> blocks", "tool call after <answer>"]


def test_text_outside_answer_and_answer_cite_problems():
    t = parse_trajectory("Preamble <cite id=a>outside</cite><answer>In <cite id=b>x</answer>Postscript")
    assert t.steps[0].stray_text == "Preamble <cite id=a>outside</cite>Postscript"
    assert cited_ids(t.answer) == []
    assert t.problems == ["answer: unclosed <cite> at 3"]


def test_consecutive_responses_join_one_step_and_unclosed_response():
    t = parse_trajectory("<think>a</think>" + call("search", query="q") + call("search", query="r")
                         + "<tool_response><snippet id=s1>x</snippet></tool_response>\n<|im_end|>\n"
                         "<tool_response><snippet id=s2>y</snippet></tool_response><think>b</think>"
                         + call("search", query="z") + "<tool_response><snippet id=s3>open")
    assert len(t.steps) == 2
    assert [len(s.responses) for s in t.steps] == [2, 1]
    assert t.snippet_texts() == {"s1": "x", "s2": "y", "s3": "open"}
    assert t.problems == ["unclosed <tool_response>", "step 1: unclosed <snippet> s3"]


def test_unclosed_item_or_response_ends_at_the_next_one():
    t = parse_trajectory("<tool_response><snippet id=a>open <webpage id=b>page</webpage></tool_response>"
                         "<think>x</think><tool_response>unclosed <tool_response><snippet id=c>z</snippet></tool_response>")
    assert t.snippet_texts() == {"a": "open", "b": "page", "c": "z"}
    assert [r.text for r in t.tool_responses][1:] == ["unclosed ", "<snippet id=c>z</snippet>"]
    assert t.problems == ["unclosed <tool_response>", "step 0: unclosed <snippet> a"]


def test_empty_completion_is_one_empty_step():
    t = parse_trajectory("")
    assert len(t.steps) == 1 and t.steps[0].layout == () and t.answer is None
    assert parse_trajectory([]).steps == []


def test_response_flags():
    t = parse_trajectory("<tool_response>[tool error] browse: no page</tool_response>"
                         "<tool_response>No results found for: q</tool_response>"
                         "<tool_response><snippet id=a>x</snippet></tool_response>")
    assert [(r.is_error, r.ok) for r in t.tool_responses] == [(True, False), (False, False), (False, True)]


# ------------------------------------------------------------ claims


def test_claims_several_ids_quotes_and_lt_in_span():
    answer = ("Intro sentence. <cite id=\"a, b,a\">Effect was significant (p<0.05) at 3.5 mg</cite> and "
              "<cite id='c'>second</cite><cite id=d>third</cite>.")
    claims = extract_claims(answer)
    assert claims == [
        Claim("Intro sentence.", (), 0, 15, False),
        Claim("Effect was significant (p<0.05) at 3.5 mg", ("a", "b"), 34, 75, True),
        Claim("and", (), 83, 86, False),
        Claim("second", ("c",), 100, 106, True),
        Claim("third", ("d",), 124, 129, True),
    ]  # the final "." has no letter or digit: skipped
    assert all(answer[c.start:c.end] == c.text for c in claims)
    assert cited_ids(answer) == ["a", "b", "c", "d"]
    assert cite_problems(answer) == []


def test_claims_malformed_cites():
    answer = '<cite id="a,,b">x <cite id=c>y</cite> z</cite> <cite>q</cite> <cite id="">r</cite> <cite id=d> </cite> <cite id="e">open'
    assert cite_problems(answer) == ["empty id in <cite> at 0", "nested <cite> at 18", "stray </cite> at 39",
                                     "<cite> without an id attribute at 47", "<cite> with no id at 62",
                                     "empty <cite> span at 83", "unclosed <cite> at 103"]
    claims = extract_claims(answer)
    assert [(c.text, c.ids, c.cited) for c in claims] == [
        ("x y", ("a", "b", "c"), True), ("z", (), False), ("q", (), False), ("r", (), False),
        ("", ("d",), True), ("open", (), False)]
    assert cited_ids(answer) == ["a", "b", "c", "d"]


def test_uncited_text_split_into_sentences_markup_skipped():
    answer = "## Heading\n\n---\n| a | b |\n|---|---|\nFirst one. E.g. this, cf. Fig. 2 by J. Smith et al. holds! Third?\n- "
    assert [c.text for c in extract_claims(answer)] == [
        "## Heading", "| a | b |", "First one.", "E.g. this, cf. Fig. 2 by J. Smith et al. holds!", "Third?"]


def test_lexical_units():
    assert lexical_units("p<0.05 don't state-of-the-art 中文 x_y") == ["p", "0.05", "don't", "state-of-the-art",
                                                                      "中", "文", "x", "y"]


# ------------------------------------------------------------ DR Tulu's protocol, unknown tags, item attributes

DRTULU = ('<think>need info</think>\n<call_tool name="google_search" n_docs="5">who wrote Hamlet</call_tool>\n'
          '<tool_output><snippet id=S_a1 title="Hamlet (play)" url="https://en.wikipedia.org/wiki/Hamlet">'
          'Shakespeare wrote Hamlet around 1600.</snippet>\n<snippet id="S_b2">Other text</snippet></tool_output>\n'
          '<think>check the page</think><call_tool name="browse_webpage">https://en.wikipedia.org/wiki/Hamlet</call>'
          '<tool_output><webpage id=W1 title="Hamlet">Full page</webpage></tool_output>\n'
          '<answer><cite id="S_a1">Shakespeare wrote Hamlet around 1600.</cite> \\boxed{Shakespeare}</answer>')


def test_drtulu_call_tool_and_tool_output_are_read():
    t = parse_trajectory(DRTULU)
    assert t.protocol == "drtulu"
    assert [s.layout for s in t.steps] == [("think", "tool_call"), ("think", "tool_call"), ("answer",)]
    assert [(c.name, c.arguments, c.valid) for c in t.tool_calls] == [
        ("search", {"n_docs": "5", "query": "who wrote Hamlet"}, True),
        ("browse", {"url": "https://en.wikipedia.org/wiki/Hamlet"}, True)]
    # snippets with title/url attributes are kept, so the cited id resolves
    assert t.snippet_texts() == {"S_a1": "Shakespeare wrote Hamlet around 1600.", "S_b2": "Other text",
                                 "W1": "Full page"}
    assert cited_ids(t.answer) == ["S_a1"] and t.problems == []


def test_drtulu_unknown_tool_and_unclosed_call():
    t = parse_trajectory('<call_tool name="python">print(1)</call_tool><tool_output>1</tool_output>'
                         '<call_tool name="google_search">never closed')
    assert [c.valid for c in t.tool_calls] == [False, False]
    assert t.tool_calls[0].error == "unknown tool 'python'"
    assert "step 1: unclosed <call_tool>" in t.problems


def test_protocol_none_when_no_known_tags_and_mixed_when_both():
    assert parse_trajectory("Hamlet was written by Shakespeare.").protocol is None
    assert parse_trajectory([{"role": "assistant", "content": "plain prose"}]).protocol is None
    assert parse_trajectory("<answer>x</answer>").protocol == "deeprubric"
    assert parse_trajectory(RAW).protocol == "deeprubric"
    mixed = call("search", query="a") + "<tool_output>r</tool_output><answer>x</answer>"
    assert parse_trajectory(mixed).protocol == "mixed"


def test_snippet_attributes_in_deeprubric_responses():
    t = parse_trajectory('<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>'
                         "<tool_response><snippet id='s1' title=\"A title\" score=0.9>text one</snippet>"
                         "<snippet title=\"no id\">dropped</snippet></tool_response><answer>a</answer>")
    assert t.snippet_texts() == {"s1": "text one"}
    assert "step 0: <snippet> without an id" in t.problems


def test_drtulu_rollout_earns_the_format_and_search_rewards():
    from rubricforge.rewards.deeprubric.format_reward import format_reward
    from rubricforge.rewards.deeprubric.search_reward import search_reward

    t = parse_trajectory(DRTULU)
    assert format_reward(t).components == {"answer": 1.0, "cite": 1.0, "tool": 1.0, "think": 1.0}
    assert search_reward(t, upper=6) > 0
    assert format_reward(parse_trajectory("Shakespeare wrote it.")).total == 0.0  # and protocol None says why

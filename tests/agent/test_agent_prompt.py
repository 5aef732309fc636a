"""The agent system prompt (DeepRubric App. D, Figures 13–14): verbatim text, no file comment, stable hash."""

from __future__ import annotations

import hashlib

from rubricforge.agent.prompt import PROMPT_FILE, agent_system_prompt, prompt_hash


def test_prompt_is_the_paper_text_without_the_origin_comment():
    text = agent_system_prompt()
    assert text.startswith("You are a deep research assistant. Your core function is to conduct thorough, "
                           "multi-source investigations into any topic.")
    assert "<!--" not in text
    # Part 1: search requirements, citations, tags; Part 2: tools and workflow
    assert "- You should typically perform at least 2–4 rounds of tool calls before producing the final answer" in text
    assert "Cite using <cite id=\"...\">...</cite> drawn only from returned snippets." in text
    assert "In each section, write 5–8 sentence paragraphs" in text
    assert ('{"name":"browse","description":"Open a specific URL and return readable content.",'
            '"parameters":{"url":"string"}}') in text
    assert "<tool_call>{\"name\":\"tool_name\",\"arguments\":{...}}</tool_call>" in text
    assert "For browse: <tool_response><webpage id=ID>content</webpage></tool_response>" in text
    assert text.endswith("- If multiple sources support a passage, use multiple <cite> tags around relevant clauses.")
    assert "--" not in text.replace("</", "")  # LaTeX list marks and ranges written as Unicode


def test_hash_is_the_file_content_hash():
    assert prompt_hash() == hashlib.sha256(PROMPT_FILE.read_bytes()).hexdigest()[:12]
    assert len(prompt_hash()) == 12

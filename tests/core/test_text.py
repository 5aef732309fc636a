"""The one sentence splitter (rubricforge.text.sentence_spans): prose for tree statements, KG evidence and MaMs;
``markdown=True`` for an answer's claims and the tense check."""

from __future__ import annotations

from rubricforge.pipelines.kg.graph import sentences
from rubricforge.text import sentence_spans


def test_initials_and_abbreviations_do_not_end_a_sentence():
    text = 'J. R. R. Tolkien taught at Oxford. He wrote "The Hobbit." In 1937 it sold well in the U.S. and Jan. 1938.'
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "J. R. R. Tolkien taught at Oxford.", 'He wrote "The Hobbit."', "In 1937 it sold well in the U.S. and Jan. 1938."]


def test_the_kg_splits_its_passages_the_same_way():
    text = "  Dr. Smith met Gen. Lee in St. Louis.  Decimals like 3.5 stay whole. lower case does not start one. "
    assert sentences(text) == ["Dr. Smith met Gen. Lee in St. Louis.",
                               "Decimals like 3.5 stay whole. lower case does not start one."]


def test_sentence_spans_cjk_and_quotes():
    text = '他说。你好！He said "stop." Then left.'
    assert [text[s:e] for s, e in sentence_spans(text, markdown=True)] == ["他说。", "你好！", 'He said "stop."', "Then left."]


def test_markdown_breaks_at_lines_cjk_stops_and_lower_case_but_prose_does_not():
    text = "## Results\n- growth was 3.5%. it slowed in Fig. 2 (see e.g. Smith et al. 2020).\n他说。你好"
    assert [text[a:b] for a, b in sentence_spans(text, markdown=True)] == [
        "## Results", "- growth was 3.5%.", "it slowed in Fig. 2 (see e.g. Smith et al. 2020).", "他说。", "你好"]
    assert [text[a:b] for a, b in sentence_spans(text)] == [text]


def test_both_modes_share_the_abbreviations():
    text = "Dr. Lee wrote in Jan. 2020 with J. Smith et al. That held, cf. Fig. 3. Then it ended."
    expected = ["Dr. Lee wrote in Jan. 2020 with J. Smith et al. That held, cf. Fig. 3.", "Then it ended."]
    for markdown in (False, True):
        assert [text[a:b] for a, b in sentence_spans(text, markdown=markdown)] == expected

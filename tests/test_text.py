"""The one sentence splitter (rubricforge.text.sentence_spans) that tree statements, KG evidence and MaMs use."""

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

"""Exact-answer scores for short-answer (KG) tasks: normalised exact match and token F1 (the SQuAD
definitions MindDR and BrowseComp report), each the best over the answer and its aliases.

Normalisation: lower case, apostrophes dropped, every other run of punctuation, symbols or underscores a
space (:func:`~rubricforge.corpora.leakage.normalised_words`), then the articles a / an / the removed.
Token F1 counts shared tokens with multiplicity; an empty prediction or gold scores 0 (both empty: 1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rubricforge.corpora.leakage import normalised_words

ARTICLES = frozenset({"a", "an", "the"})


def tokens(text: str) -> list[str]:
    return [w for w in normalised_words(text) if w not in ARTICLES]


def exact_match(prediction: str, gold: str) -> float:
    return float(tokens(prediction) == tokens(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = tokens(prediction), tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    shared = sum((Counter(pred) & Counter(ref)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(pred), shared / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_scores(prediction: str, golds: Iterable[str]) -> dict[str, float]:
    """``{"em", "f1"}``: the best of each over ``golds`` (the answer and its aliases)."""
    golds = [g for g in golds if g and g.strip()]
    return {"em": max((exact_match(prediction, g) for g in golds), default=0.0),
            "f1": max((token_f1(prediction, g) for g in golds), default=0.0)}

"""Fixtures shared by the evidence-tree tests: the small real index and one seed sampled from it."""

from __future__ import annotations

import pytest

from rubricforge.corpora.index_store import CorpusIndex
from rubricforge.pipelines.tree.seeds import Seed, sample_seeds


@pytest.fixture(scope="module")
def index(small_index_cfg):
    with CorpusIndex.from_config(small_index_cfg) as idx:
        yield idx


@pytest.fixture(scope="module")
def seed(index) -> Seed:
    return sample_seeds(index.iter_passages(), 1, seed=0)[0]

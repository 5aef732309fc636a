"""Config values from flags, ``--set`` and the environment: text stays text, YAML elsewhere, and an
unknown ``RUBRICFORGE_*`` variable is named in a warning instead of being ignored silently."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rubricforge.cli import cli_config as _config
from rubricforge.config import load_config
from rubricforge.errors import UserError


@pytest.mark.parametrize("value", ["2024", "yes", "no", "null", "1e3", "runs/a #1", "'quoted'"])
def test_typed_flags_stay_typed(value):
    assert _config(None, None, run_dir=Path(value)).run_dir == value
    assert _config(None, None, **{"tools.index_dir": value}).tools.index_dir == value
    assert _config(None, None, **{"build.n_trees": 3}).build.n_trees == 3


def test_set_keeps_text_fields_as_written_and_parses_the_rest_as_yaml():
    cfg = load_config(None, ["run_dir=2024", "llm.generator.model=yes", "tools.index_dir=null", "build.max_depth=2",
                             "build.branching=[4, 2]", "embedding.fp16=no", "corpus.fields.title=1",
                             "embedding.query_prefix='query: '"], environ={})
    assert (cfg.run_dir, cfg.llm.generator.model, cfg.tools.index_dir) == ("2024", "yes", None)
    assert (cfg.build.max_depth, cfg.build.branching, cfg.embedding.fp16) == (2, [4, 2], False)
    assert cfg.embedding.query_prefix == "query: "  # quoted: YAML, so the trailing space is kept
    assert cfg.corpus.fields == {"title": "1"}  # a mapping of text: its values are text too
    with pytest.raises(UserError, match="build.branching"):
        load_config(None, ["build.branching=[4, "], environ={})


def test_environment_variables_set_typed_values():
    cfg = load_config(None, environ={"RUBRICFORGE_RUN_DIR": "2024", "RUBRICFORGE_BUILD__N_TREES": "3",
                                     "RUBRICFORGE_LLM__JUDGE__MODEL": "yes",
                                     "RUBRICFORGE_TRAIN__GRPO_ARGS__LOGGING_STEPS": "5"})
    assert (cfg.run_dir, cfg.build.n_trees, cfg.llm.judge.model) == ("2024", 3, "yes")
    assert cfg.train.grpo_args == {"logging_steps": 5}


def test_an_unknown_environment_variable_is_named_with_the_closest_key(caplog):
    with caplog.at_level(logging.WARNING, logger="rubricforge.config"):
        cfg = load_config(None, environ={"RUBRICFORGE_BULID__N_TREES": "3", "RUBRICFORGE_BUILD__N_TREES": "2",
                                         "OTHER_BULID": "x"})
        load_config(None, environ={"RUBRICFORGE_BULID__N_TREES": "3"})  # warned once per process
    assert cfg.build.n_trees == 2
    [record] = caplog.records
    assert record.getMessage() == ("unknown environment variable RUBRICFORGE_BULID__N_TREES is ignored "
                                   "(closest config key: RUBRICFORGE_BUILD__N_TREES)")

"""Where the tests' files are, wherever a test module sits under ``tests/``."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data"  # recordings, example files, fixtures
ROOT = TESTS.parent  # the repository
EXAMPLES = DATA / "training" / "examples.jsonl"  # the training examples (agent tasks with rubrics)

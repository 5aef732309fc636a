"""Where the tests' files are, wherever a test module sits under ``tests/``."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data"  # recordings, example files, fixtures
ROOT = TESTS.parent  # the repository
EXAMPLES = DATA / "training" / "examples.jsonl"  # the training examples (agent tasks with rubrics)


def load_script(relative: str):
    """A script of the repository that is not a package module (``benchmarks/synthesis.py``, ``tools/…``), imported
    from its file."""
    import importlib.util

    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

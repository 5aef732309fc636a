# Two entry points for a fresh machine: `make run` (main job on the embedded defaults) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# llama-cpp-python has no wheel on PyPI: it is compiled once into this wheelhouse and reused by every later setup
WHEELHOUSE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rubricforge/wheels
# the range pyproject.toml asks for, read from there
LLAMA := $(shell grep -o '"llama-cpp-python[^"]*"' pyproject.toml)

.PHONY: setup run lint test bench clean

setup: $(VENV)/.installed

# torch==2.13.0 first: a CPU wheel (on these machines it is on disk); a bare `torch` would pull a multi-GB CUDA build.
# llama-cpp-python compiles from source the first time (about 9 minutes on 2 cores) into $(WHEELHOUSE).
# ray: not in [all] (a 70 MB wheel and 22 small dependencies, about a minute), but installed here so the Ray runner is tested.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "torch==2.13.0"
	ls $(WHEELHOUSE)/llama_cpp_python-*.whl >/dev/null 2>&1 || $(PIP) wheel -q --no-deps -w $(WHEELHOUSE) $(LLAMA)
	$(PIP) install -q --find-links $(WHEELHOUSE) -e ".[all,dev,ray]"
	touch $@

run: setup
	$(VENV)/bin/rubricforge build

# ruff (pyflakes, pycodestyle, bugbear) and mypy, configured in pyproject.toml
lint: setup
	$(VENV)/bin/ruff check rubricforge tests benchmarks tools
	$(VENV)/bin/mypy

# two pytest workers (pytest-xdist), a test file's tests on one worker; on 2 cores a serial run took about 29 minutes
test: lint
	$(VENV)/bin/pytest -q -n 2 --dist loadfile

bench: setup
	$(PY) benchmarks/retrieval.py

clean:
	rm -rf $(VENV) runs

# Two entry points: `make demo` runs the main job, `make test` runs the tests.
# Both create (or reuse) .venv and install torchmark into it first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.torchmark-installed
# Where pip finds torch: empty uses pip's own configuration (here, a local CPU wheel);
# TORCH_INDEX=https://download.pytorch.org/whl/cpu gets the CPU build from PyTorch's index.
TORCH_INDEX ?=

.PHONY: demo test test-slow lint setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "torch==2.13.0" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e ".[dev,ray]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/torchmark demo

# what tests compile goes here, never to the user's cache (tests/conftest.py says the same)
TEST_CACHE := $(CURDIR)/build/test-cache

# The tests run on 2 workers (pytest-xdist); those marked slow (valgrind hosts started
# afresh, C++ compiles, Ray clusters, documents whose blocks run) are left to
# `make test-slow`, which .ci/run runs after `make test`.
PYTEST_WORKERS ?= 2

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy src/torchmark
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) -m "not slow"
	TORCHMARK_CACHE_DIR=$(TEST_CACHE) TORCHMARK_NO_STORE=1 $(PY) examples/tutorial.py --quick
	TORCHMARK_CACHE_DIR=$(TEST_CACHE) TORCHMARK_NO_STORE=1 $(PY) examples/cpp_snippets.py
	$(PY) -m pytest -q -p no:cacheprovider examples/pytest_project --torchmark-no-store

test-slow: $(STAMP)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy src/torchmark

clean:
	rm -rf $(VENV) build src/*.egg-info results

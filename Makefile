# Set-up commands that work on a fresh machine (Python 3.11+). Everything runs in a project-local
# virtual environment, .venv, made from the `python3` on PATH (PY=... picks another) on first use
# and reused after that (ci/venv.sh installs into it again only when pyproject.toml or the torch
# pin changes), so nothing is installed into the system's Python: this works where it is
# externally managed (PEP 668) as well as with pyenv or conda. torch is pinned to 2.13.0, which
# pip finds as the local CPU build here; pyproject.toml keeps the supported range (2.11 - 2.15).
PY ?= python3
VENV ?= .venv
TORCH ?= 2.13.0
VENV_BIN := $(abspath $(VENV))/bin
# The venv's bin first on PATH, as `activate` would: tests look up `tlparse` and `ninja` there.
RUN := PATH="$(VENV_BIN):$$PATH"
# pytest workers (pytest-xdist): one per core, at most 4 (each holds a torch of its own)
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
VPY := $(RUN) $(VENV_BIN)/python

.PHONY: install lint test test-pythons test-all demo bench

install:
	@ci/venv.sh "$(PY)" "$(VENV)" "$(TORCH)"

# ruff and the format check.
lint: install
	$(VPY) -m ruff check src tests benchmarks
	$(VPY) -m ruff format --check src tests benchmarks

# The CI test command: lint, the format check, and everything but tests marked slow (inductor
# compiles, real models).
test: lint
	$(VPY) -m pytest -q -m "not slow" -n $(JOBS)

# The suite on another CPython (3.12 from a local interpreter, 3.13, 3.14, 3.15), e.g.
# `make test-python-3.14`: ci/pythons.sh builds the interpreter and a venv with torch from
# Debian's packages once (cached under ~/.cache/stenograph-pythons; not the project's .venv).
test-python-%:
	PYTHONPATH=$(CURDIR)/src $$(ci/pythons.sh $*) -m pytest -q -m "not slow" -n $(JOBS) -p no:cacheprovider

# What CI runs after `make test`: the folders each interpreter's differences meet, on 3.12 to 3.15
# (ci/test_pythons.sh says which; STENOGRAPH_CI_FOLDERS=tests runs everything).
test-pythons:
	JOBS=$(JOBS) ci/test_pythons.sh

# Every test, slow ones included.
test-all: install
	$(VPY) -m pytest -q -n $(JOBS)

demo: install
	$(VPY) -m stenograph demo

bench: install
	$(VPY) benchmarks/overhead.py

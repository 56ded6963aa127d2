# leak-harness: every target a person or CI runs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RESULTS ?= results

.DEFAULT_GOAL := help
.PHONY: help install test leak-check nightly bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch pinned to the CPU build this machine keeps on disk (see README for elsewhere)
	$(PY) -m pip install -q --disable-pip-version-check "torch==2.13.0"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	touch $@

install: $(VENV)/.installed ## create .venv and install leak-harness with its dev tools

test: install ## run the unit and integration tests (a few minutes)
	$(PY) -m pytest -q

leak-check: install ## detection matrix at short durations: fails on any undetected regression
	$(VENV)/bin/leak-harness check --out $(RESULTS)/check

nightly: install ## every scenario at long durations, history appended
	$(VENV)/bin/leak-harness check --nightly --out $(RESULTS)/nightly

bench: install ## print reference-cache throughput per cache class
	$(PY) bench/cache_throughput.py

lint: install ## ruff and mypy --strict
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean: ## remove run outputs and caches (keeps .venv)
	rm -rf $(RESULTS) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

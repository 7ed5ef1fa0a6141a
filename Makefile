# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := tests/fixtures/transformer_block
DEMO_INPUTS := $(shell ls $(DEMO)/in*.npy 2>/dev/null | sort -V)

.PHONY: setup test lint demo fixtures clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

setup: $(STAMP)

lint: setup
	$(BIN)/ruff check .

test: setup lint
	$(BIN)/python -m pytest -n 2 -q

demo: setup
	@echo "== inspect: a transformer block exported from JAX"
	$(BIN)/vxla inspect $(DEMO)/module.hlo
	@echo
	@echo "== run it under the numerics contract (reference backend)"
	$(BIN)/vxla run $(DEMO)/module.hlo $(DEMO_INPUTS) --backend reference

# Regenerates tests/fixtures from JAX (a development tool, not a dependency of the package).
fixtures:
	@test -x .venv-tools/bin/python || $(PYTHON) -m venv .venv-tools
	.venv-tools/bin/python -m pip install --quiet -r tools/requirements-fixtures.txt
	.venv-tools/bin/python tools/export_fixtures.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info

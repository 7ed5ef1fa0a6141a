# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := tests/fixtures/transformer_block
DEMO_INPUTS := $(shell ls $(DEMO)/in*.npy 2>/dev/null | sort -V)

.PHONY: setup system-programs test test-every lint demo fixtures golden bench clean contracts arm64 test-arm64 test-jax conformance gpu-bundle test-gpu

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

# The programs the tests drive besides Python's: Debian's Chromium (the web pages, in a real
# browser: Playwright's own browser download needs a network) and Graphviz's dot (graph
# pictures). Installed with apt-get where missing and possible; where not, the browser tests
# fail saying so.
system-programs:
	@command -v chromium >/dev/null && command -v dot >/dev/null || \
		{ apt-get install -y -q chromium graphviz >/dev/null 2>&1 || \
		  { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -q chromium graphviz >/dev/null 2>&1; } || \
		  echo "make: could not install chromium and graphviz (apt-get install chromium graphviz)"; }

# Three workers on the 2-core CI machine: a third of the suite's time is end-to-end tests
# waiting on chain windows and node processes, and the tests hold under load (contention is
# part of what they check). Measured on a clean clone there: 14.5 min at -n 3.
# Three test processes share two cores: LLVM worker processes would only add processes, so
# each compiles its parts itself (VXLA_LLVM_JOBS=1); the tests of the workers set their own.
# The project's bytecode is written before the tests, since many tests start Python processes
# (nodes, execution processes, the command line) and an environment with
# PYTHONDONTWRITEBYTECODE would have each of them compile every module it imports.
# Sweeps over every fixture or target run a rotating share (harness/sampling.py);
# `make test-every` runs every case of them.
VXLA_TEST_EVERY ?=

test: setup lint $(NPM_STAMP) system-programs
	@$(BIN)/python -m compileall -q -j 0 attest compiler core harness node >/dev/null
	VXLA_TEST_EVERY=$(VXLA_TEST_EVERY) VXLA_LLVM_JOBS=1 $(BIN)/python -m pytest -n 3 --dist worksteal -q --durations=20

test-every:
	$(MAKE) test VXLA_TEST_EVERY=1

# AArch64 under QEMU user mode: an arm64 Debian root with python3.11, the runtime
# dependencies as aarch64 wheels, and .arm64/bin/vxla (the command line, emulated; QEMU_CPU
# passes through). Idempotent: each part is made once and checked on every call.
ARM64 := .arm64

arm64: setup
	$(BIN)/python tools/arm64_env.py $(ARM64)

# Under emulation: every fixture on neoverse-n1 (NEON) and neoverse-v1 (SVE at 128, 256 and
# 512 bits) against the x86 digests, cross-ISA traces (natively driven), then samples of the
# numerics primitives, the correctly rounded functions and the FP environment, run by the
# emulated Python itself on NEON and on 256-bit SVE, and on NEON also the op-family
# differential tests, the ops of training steps (select-and-scatter, opt-barrier, topk) and
# the 4-bit and complex ops but their conversions (x86 only). On SVE the fixtures (every one,
# at three vector lengths) stand for the op families, training steps, top-k and the 4-bit
# matmul; complex ops run emulated on NEON only. The gemm library's every row tail and
# last-panel width (tests/codegen/test_kernel_library.py) runs emulated on NEON and SVE. Each sample executes the target its emulated
# CPU is (VXLA_TEST_TARGETS): `make test` compiles and checks every target natively, so the
# emulated Python compiles no other target and skips the compile-only object checks. In the
# samples the Python compiler runs emulated and LLVM natively (tests/arm64/native_llvm.py:
# LLVM emits the same bytes either way, tests/arm64 shows it, and takes 3-7 s a module under
# QEMU), so the emulated time goes to the compiler and the code under test. The f64 fma case
# runs natively only (its 860,000 exact-rational reference values take 90 s emulated); the f64
# dots of the op families and the fixtures run the AArch64 fma emulated.
ARM64_SAMPLE := tests/codegen/test_kernel_library.py tests/codegen/test_op_families.py tests/codegen/test_training_ops.py tests/codegen/test_int4.py tests/codegen/test_complex.py tests/codegen/test_numerics_ir.py tests/codegen/test_mathlib_ir.py tests/codegen/test_fp_environment.py
ARM64_PYTEST := $(BIN)/python -m tests.arm64.native_llvm -- $(ARM64)/bin/python -m pytest -q -p no:cacheprovider

test-arm64: arm64
	VXLA_ARM64_TESTS=1 $(BIN)/python -m pytest -n 2 --dist worksteal -q tests/arm64
	QEMU_CPU=max,sve=off VXLA_TEST_TARGETS=neoverse-n1 $(ARM64_PYTEST) $(ARM64_SAMPLE) -k "test_op_families or test_training_ops or every_row_tail or ((test_int4 or test_complex) and not conversions) or (neoverse-n1 and (numerics_ir or bits_equal) and not self_contained and not (test_fma and f64)) or flush_to_zero"
	QEMU_CPU=max,sve-default-vector-length=32 VXLA_TEST_TARGETS=neoverse-v1 $(ARM64_PYTEST) $(ARM64_SAMPLE) -k "(neoverse-v1 and (numerics_ir or bits_equal) and not self_contained and not (test_fma and f64)) or flush_to_zero or every_row_tail"

# The way in from JAX: vxla[jax] and flax in .venv-jax (rebuilt when either list changes), a
# flax model submitted to a devnet, StableHLO and jax.export files converted and run.
JAX_VENV := .venv-jax
JAX_STAMP := $(JAX_VENV)/.installed

$(JAX_STAMP): pyproject.toml tests/jax/requirements.txt
	@test -x $(JAX_VENV)/bin/python || $(PYTHON) -m venv $(JAX_VENV)
	$(JAX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(JAX_VENV)/bin/python -m pip install --quiet -e '.[dev,jax]' -r tests/jax/requirements.txt
	@touch $@

test-jax: $(JAX_STAMP) $(NPM_STAMP)
	VXLA_JAX_TESTS=1 $(JAX_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/jax

# The GPU device check (tools/gpu_check.py): the bundle (cubins, plans, inputs, reference
# digests) is made on any machine; `test-gpu` runs it on this machine's NVIDIA GPU. A GPU
# machine without the compiler's dependencies runs only the second half, with python3,
# numpy and cuda-bindings: `python3 tools/gpu_check.py run .gpu-bundle`.
GPU_BUNDLE := .gpu-bundle
GPU_TARGET ?= nvptx-sm90

gpu-bundle: setup
	$(BIN)/python tools/gpu_check.py bundle $(GPU_BUNDLE) --target $(GPU_TARGET)

test-gpu: gpu-bundle
	$(BIN)/python tools/gpu_check.py run $(GPU_BUNDLE)

# XLA's own test modules against XLA:CPU, the reference and the backend (tools/xla_conformance.py),
# e.g. `make conformance XLA=../xla CONFORMANCE_ARGS="--json report.json"`.
XLA ?=
CONFORMANCE_ARGS ?=

conformance: $(BENCH_STAMP)
	@test -n "$(XLA)" || { echo "make conformance XLA=path/to/an/openxla/xla/checkout"; exit 2; }
	$(BENCH_VENV)/bin/python tools/xla_conformance.py $(XLA) $(CONFORMANCE_ARGS)

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

# Records every fixture's hlo_hash, graph_hash and binary_hash per target in
# tests/fixtures/golden_hashes.json (on purpose, after a change that moves them; the tests
# fail on any change the manifest does not record).
golden: setup
	$(BIN)/python tools/golden_hashes.py

# Benchmarks, in .venv-bench (the project, the pinned JAX of tools/requirements-fixtures.txt
# and the model libraries of bench/requirements.txt; rebuilt only when one of those changes):
# the real-model corpus (bench/corpus.py, exported once into .bench-corpus) against XLA:CPU
# with 1 and 2 threads, sgemm against OpenBLAS and XLA:CPU, then the fixture models and the
# kernels against numpy and jax.jit, and last the goals' table for this host (bench/goals.py).
# Results as JSON in .bench-results/. BENCH_ARGS passes
# options to bench/models.py, e.g. `make bench BENCH_ARGS="--models cnn"`. vxla runs on
# BENCH_TARGET: `host` (the widest target this host runs, as its operator would pin it),
# `pinned` (configs/compiler.toml) or a CPU name; `make bench BENCH_TARGET=x86-64-v3` gives an
# AVX2 host's figures on an AVX-512 one, XLA:CPU held to AVX2 as well (same bits on every
# target: only the times move).
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_CORPUS := .bench-corpus
BENCH_RESULTS := .bench-results
BENCH_ARGS ?=
BENCH_TARGET ?= host

$(BENCH_STAMP): pyproject.toml tools/requirements-fixtures.txt bench/requirements.txt
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[dev]' -r tools/requirements-fixtures.txt -r bench/requirements.txt
	@touch $@

$(BENCH_CORPUS)/.exported: $(BENCH_STAMP) bench/corpus.py
	JAX_PLATFORMS=cpu $(BENCH_VENV)/bin/python bench/corpus.py $(BENCH_CORPUS)
	@touch $@

bench: setup $(BENCH_CORPUS)/.exported
	@mkdir -p $(BENCH_RESULTS)
	$(BENCH_VENV)/bin/python bench/real_models.py $(BENCH_CORPUS) --target $(BENCH_TARGET) --json $(BENCH_RESULTS)/real_models.json
	$(BENCH_VENV)/bin/python bench/gemm.py --json $(BENCH_RESULTS)/gemm.json
	$(BENCH_VENV)/bin/python bench/models.py --target $(BENCH_TARGET) --json $(BENCH_RESULTS)/models.json $(BENCH_ARGS)
	$(BENCH_VENV)/bin/python bench/backend_vs_numpy.py --target $(BENCH_TARGET)
	$(BENCH_VENV)/bin/python bench/node_jobs.py $(BENCH_CORPUS)/bert
	$(BIN)/python bench/startup.py
	$(BENCH_VENV)/bin/python bench/goals.py --target $(BENCH_TARGET) --results $(BENCH_RESULTS) --json $(BENCH_RESULTS)/goals.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info

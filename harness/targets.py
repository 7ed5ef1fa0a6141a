"""The targets the tests use, defined once: every pinned CPU (compiler.config), split
by what this host can execute. Tests execute the runnable ones and, for the others, still
compile and check what needs no run (`check_without_running`), so the suite passes, without
an illegal instruction, on an AVX2-only host, an AVX-512 host and under AArch64 emulation.
The test summary names both lists (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compiler.codegen.backends import backend_for
from compiler.config import CompilerConfig, load_config
from compiler.driver import compile_program
from compiler.errors import TargetNotRunnable
from compiler.hlo import load_module
from compiler.host import this_host
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.runtime.executable import Executable
from compiler.targets import TARGET_CPUS

HOST = this_host()
# VXLA_TEST_TARGETS (comma-separated CPUs) narrows the suite to those targets: the emulated
# AArch64 samples (Makefile, test-arm64) name the one the emulated CPU executes, since the
# compile-only checks of every other target are made natively by `make test`.
_NAMED = tuple(name for name in os.environ.get("VXLA_TEST_TARGETS", "").split(",") if name)
if any(name not in TARGET_CPUS for name in _NAMED):
    raise ValueError(f"VXLA_TEST_TARGETS names unknown CPUs: {_NAMED}; known: {', '.join(TARGET_CPUS)}")
ALL = _NAMED or tuple(TARGET_CPUS)
# The CPU targets: what tests of CPU code (objects, the native entry, assembly) sweep; the GPU
# targets' code is a cubin (tests/codegen/test_gpu_grid.py).
CPUS = tuple(name for name in ALL if TARGET_CPUS[name].architecture.runs_on_host)
GPUS = tuple(name for name in ALL if not TARGET_CPUS[name].architecture.runs_on_host)
# The x86-64 levels; the property tests sweep these and the AArch64 CPUs.
X86 = tuple(name for name, cpu in TARGET_CPUS.items() if cpu.arch == "x86_64")
AARCH64 = tuple(name for name, cpu in TARGET_CPUS.items() if cpu.arch == "aarch64")


# The compile cache of a test session (tests/conftest.py makes it; pytest-xdist workers inherit
# the variable and share the directory).
SESSION_CACHE_VARIABLE = "VXLA_TEST_SESSION_CACHE"


def session_cache() -> Path:
    """Where tests that compile a fixture only to run it get the executable: each fixture is
    compiled once per session and configuration, not once per test file. Every entry was made
    by this checkout's compiler in this session, and a hit recomputes their binary_hash (the
    object bytes and the plan). Tests of compiling itself (determinism, the golden manifest of
    targets this host cannot run) compile afresh."""
    return Path(os.environ[SESSION_CACHE_VARIABLE])


def config(cpu: str) -> CompilerConfig:
    """The pinned configuration with CPU `cpu` (its triple follows)."""
    return load_config().with_target(cpu=cpu)


def runnable(cpu: str) -> bool:
    """Whether this host may execute `cpu`'s code."""
    return HOST.can_run(config(cpu))


RUNNABLE = tuple(name for name in ALL if runnable(name))
COMPILE_ONLY = tuple(name for name in ALL if name not in RUNNABLE)
# The host's own architecture's targets (what a test sweeping "every target" executes).
NATIVE = tuple(name for name in ALL if TARGET_CPUS[name].arch == HOST.arch)
# A target every test host runs: the configuration's (the widest this host runs), else the best
# runnable.
DEFAULT = load_config().cpu if runnable(load_config().cpu) or not RUNNABLE else RUNNABLE[-1]


def check_without_running(text: str, cpu: str) -> Executable:
    """What can be checked of `cpu`'s code on a host that cannot run it: it compiles, the
    object references no undefined symbol, and loading it is refused (never attempted). That
    compiling gives the same bytes every time, in every process and on every host, is held by
    the golden manifest of every fixture on every target (test_fixtures_backend)."""
    executable = compile_program(load_program(text), config(cpu), cache_dir=False)
    assert executable.object_bytes, cpu
    assert backend_for(executable.config).unresolved_symbols(executable.object_bytes) == [], cpu
    try:
        executable.load()
    except TargetNotRunnable:
        return executable
    raise AssertionError(f"{cpu}: this host loaded code it cannot run")


def executable_for(text: str, cpu: str, threads: int = 1) -> Executable | None:
    """A compiled executable for `cpu` when this host runs it; otherwise the compile-only
    checks of `check_without_running` and None (the caller skips the run, nothing else)."""
    if not runnable(cpu):
        check_without_running(text, cpu)
        return None
    return compile_program(load_program(text), config(cpu), threads=threads, cache_dir=False)


def run_everywhere(text: str, arrays: list[np.ndarray], targets: list[str] | tuple[str, ...] = NATIVE) -> list[str]:
    """Compiles `text` for every target and runs it with 1, 2 and 4 threads; every output
    must have the reference's bytes. Returns the instruction names of the entry plan's
    kernels (of the last target)."""
    expected = evaluate(load_module(text), arrays)
    kernels: list[str] = []
    executed = 0
    for target in targets:
        executable = executable_for(text, target)
        if executable is None:
            continue
        executed += 1
        for threads in (1, 2, 4):
            got = executable.run(*arrays, threads=threads)
            for index, (g, e) in enumerate(zip(got, expected, strict=True)):
                assert g.dtype == e.dtype and g.shape == e.shape, f"{target} threads={threads} out{index}"
                assert g.reshape(-1).view(np.uint8).tobytes() == e.reshape(-1).view(np.uint8).tobytes(), f"{target} threads={threads} out{index}"
        kernels = [step.instruction for step in executable.plan.steps if step.kind == "kernel"]
    assert executed, f"no target of {targets} runs on this host"
    return kernels

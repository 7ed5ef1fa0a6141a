"""Compile time stays bounded for narrow-float reductions.

A reduce of a short f16 vector to a scalar once made LLVM's loop vectorizer run for minutes
(a one-item kernel whose body is loop-invariant; see Kernel.work_items). The compiles run in
a child process with a timeout, so a regression fails this test instead of hanging the suite.
Bits are checked against the reference evaluator separately, on the host's target.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.config import load_config
from compiler.hlo import load_module
from compiler.reference import evaluate
from harness.targets import ALL, DEFAULT

# Per compile (IR emission + LLVM). Normal compiles of these modules take well under 0.2 s.
COMPILE_SECONDS = 5.0
# The whole child; a hang is reported with the module it was compiling.
CHILD_SECONDS = 420
# Every length up to 17 (the reported ones were short) and some around wider vector widths.
LENGTHS = (*range(1, 18), 24, 31, 32, 33, 40)
NARROW = ("f16", "bf16")
# Compile only, so any host checks every pinned target.
TARGETS = ALL


def _module(dtype: str, entry: list[str]) -> str:
    """A module with an add reducer on `dtype` and the given entry lines (the last is ROOT)."""
    reducer = f"add {{\n  a = {dtype}[] parameter(0)\n  b = {dtype}[] parameter(1)\n  ROOT c = {dtype}[] add(a, b)\n}}\n"
    body = "".join(f"  {line}\n" for line in entry[:-1]) + f"  ROOT {entry[-1]}\n"
    return f"HloModule m\n{reducer}ENTRY e {{\n{body}}}\n"


def reduce_module(dtype: str, n: int) -> str:
    """The reported module: a vector reduced to a scalar."""
    return _module(dtype, [f"p = {dtype}[{n}]{{0}} parameter(0)", f"z = {dtype}[] constant(0)", f"r = {dtype}[] reduce(p, z), dimensions={{0}}, to_apply=add"])


def rows_module(dtype: str, n: int) -> str:
    """A reduce to a one-element vector (the kept dimension has size 1)."""
    return _module(dtype, [f"p = {dtype}[1,{n}]{{1,0}} parameter(0)", f"z = {dtype}[] constant(0)", f"r = {dtype}[1]{{0}} reduce(p, z), dimensions={{1}}, to_apply=add"])


def fused_module(dtype: str, n: int) -> str:
    """A reduce whose input is computed in the same kernel (reduction input fusion)."""
    return _module(dtype, [f"p = {dtype}[{n}]{{0}} parameter(0)", f"q = {dtype}[{n}]{{0}} multiply(p, p)", f"z = {dtype}[] constant(0)", f"r = {dtype}[] reduce(q, z), dimensions={{0}}, to_apply=add"])


def window_module(dtype: str, n: int) -> str:
    """A reduce-window whose single window covers the input."""
    return _module(dtype, [f"p = {dtype}[{n}]{{0}} parameter(0)", f"z = {dtype}[] constant(0)", f"r = {dtype}[1]{{0}} reduce-window(p, z), window={{size={n}}}, to_apply=add"])


MODULES = {"reduce": reduce_module, "rows": rows_module, "fused": fused_module, "window": window_module}


def cases() -> list[tuple[str, str, str, int]]:
    """(target, family, dtype, length): every family and length on the default target, and
    the reported module on every pinned target."""
    default = load_config().cpu
    out = [(default, family, dtype, n) for family in MODULES for dtype in NARROW for n in LENGTHS]
    out += [(cpu, "reduce", dtype, n) for cpu in TARGETS if cpu != default for dtype in NARROW for n in (3, 7, 15)]
    return out


def _child() -> None:
    """Compiles every case, printing 'start CASE' before and 'done CASE SECONDS' after each."""
    from compiler.driver import compile_program
    from compiler.program import load_program

    base = load_config()
    for cpu, family, dtype, n in cases():
        label = f"{cpu}:{family}:{dtype}[{n}]"
        print(f"start {label}", flush=True)
        config = base.with_target(cpu=cpu)
        began = time.perf_counter()
        compile_program(load_program(MODULES[family](dtype, n)), config, cache_dir=False)
        print(f"done {label} {time.perf_counter() - began:.3f}", flush=True)


def test_narrow_reductions_compile_in_normal_time() -> None:
    root = Path(__file__).resolve().parents[2]
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "tests.codegen.test_compile_time"], cwd=root, capture_output=True, text=True, timeout=CHILD_SECONDS, check=False
        )
        stdout, failure = finished.stdout, finished.stderr if finished.returncode else ""
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        failure = f"the child ran past {CHILD_SECONDS} s"
    started = [line.split()[1] for line in stdout.splitlines() if line.startswith("start ")]
    times = {line.split()[1]: float(line.split()[2]) for line in stdout.splitlines() if line.startswith("done ")}
    hung = [label for label in started if label not in times]
    assert not failure, f"{failure}; still compiling: {hung[:1]}\n{stdout[-2000:]}"
    assert len(times) == len(cases())
    slow = {label: seconds for label, seconds in times.items() if seconds > COMPILE_SECONDS}
    assert not slow, f"compiles over {COMPILE_SECONDS} s: {slow}"
    reported = [seconds for label, seconds in times.items() if label.endswith(":reduce:f16[7]")]
    assert len(reported) == len(TARGETS), reported


def _values(dtype: str, n: int, seed: int) -> np.ndarray:
    import ml_dtypes

    numpy_type = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 4, n)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 6e-8, -65504.0, 1.5])
    mask = rng.random(n) < 0.15
    base[mask] = rng.choice(specials, mask.sum())
    return base.astype(numpy_type)


@pytest.mark.parametrize("family", sorted(MODULES))
@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_reductions_match_the_reference(family: str, dtype: str) -> None:
    """Every length of each family gives the reference evaluator's bits on the host target."""
    for n in LENGTHS:
        text = MODULES[family](dtype, n)
        values = _values(dtype, n, seed=n)
        if family == "rows":
            values = values.reshape(1, n)
        expected = evaluate(load_module(text), [values])
        got = compiler.compile(text, target=DEFAULT, cache_dir=False).run(values, threads=2)
        assert [g.tobytes() for g in got] == [e.tobytes() for e in expected], f"{family} {dtype}[{n}]"


if __name__ == "__main__":
    _child()

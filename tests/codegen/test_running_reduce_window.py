"""Reduce-windows that are running reductions (JAX's cumsum, cumprod, cummax, cummin) run as
one scan per line (decided by compiler/passes/backend_decisions.py running_dimension, emitted
by compiler/codegen/reductions.py) and give the
reference's bytes on every target and thread count; windows that only look like one keep
the general window loop."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.config import load_config
from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.passes.backend_decisions import running_dimension
from compiler.program import load_program
from compiler.reference import evaluate
from harness.targets import COMPILE_ONLY, check_without_running, run_everywhere


def _module(dtype: str, dims: tuple[int, ...], window: str, op: str, init: str) -> str:
    shape = f"{dtype}[{','.join(map(str, dims))}]"
    return f"""HloModule m
r {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT c = {dtype}[] {op}(a, b)
}}
ENTRY e {{
  x = {shape} parameter(0)
  i = {dtype}[] constant({init})
  ROOT w = {shape} reduce-window(x, i), window={{{window}}}, to_apply=r
}}
"""


def _window(dims: tuple[int, ...], axis: int) -> str:
    sizes = "x".join(str(n if d == axis else 1) for d, n in enumerate(dims))
    pads = "x".join(f"{n - 1}_0" if d == axis else "0_0" for d, n in enumerate(dims))
    return f"size={sizes} pad={pads}"


def _kernels(text: str) -> list[str]:
    executable = compile_program(load_program(text), load_config(), cache_dir=False)
    return [step.kernel for step in executable.plan.steps if step.kind == "kernel"]


CASES = [
    ("f32", np.float32, (1, 3000), 1, "add", "0"),  # the cumsum of wav2vec2's attention mask
    ("s32", np.int32, (7, 300), 1, "add", "0"),
    ("f32", np.float32, (129, 5), 0, "add", "-0"),
    ("f64", np.float64, (4, 33, 6), 1, "multiply", "1"),
    ("f32", np.float32, (40, 9), 1, "maximum", "-inf"),
    ("bf16", None, (3, 77), 1, "minimum", "inf"),
    ("s8", np.int8, (2, 500), 1, "add", "0"),
]


@pytest.mark.parametrize("dtype,numpy_type,dims,axis,op,init", CASES)
def test_running_reductions_keep_the_reference_bytes(dtype: str, numpy_type, dims: tuple[int, ...], axis: int, op: str, init: str) -> None:
    text = _module(dtype, dims, _window(dims, axis), op, init)
    rng = np.random.default_rng(len(dims) + axis)
    if numpy_type is None:  # bf16: the high halves of f32 values
        values = (rng.standard_normal(dims).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        values = values.view(load_module(text).entry.parameters[0].array_shape.dtype.numpy)
    elif np.issubdtype(numpy_type, np.integer):
        values = rng.integers(-3, 4, dims).astype(numpy_type)
    else:
        values = (rng.standard_normal(dims) * (0.999 if op == "multiply" else 3)).astype(numpy_type)
        values.reshape(-1)[::17] = -0.0
    run_everywhere(text, [values])
    assert running_dimension(load_module(text).entry.root) == axis
    kernels = _kernels(text)
    assert len(kernels) == 1 and "running_reduce_window" in kernels[0], kernels


@pytest.mark.parametrize(
    "window,init,op",
    [
        ("size=1x50 pad=0_0x49_0", "0", "add"),  # the window is not the whole dimension
        ("size=1x64 pad=0_0x0_63", "0", "add"),  # reversed: padding comes last
        ("size=1x64 pad=0_0x63_0", "1", "add"),  # init + init is not init
        ("size=1x64 pad=0_0x63_0", "-0", "multiply"),  # -0 * -0 is +0
        ("size=2x64 pad=1_0x63_0", "0", "add"),  # a window in two dimensions
    ],
)
def test_windows_that_only_look_running_keep_the_window_loop(window: str, init: str, op: str) -> None:
    dims = (2, 64)
    text = _module("f32", dims, window, op, init)
    assert running_dimension(load_module(text).entry.root) is None
    rng = np.random.default_rng(3)
    run_everywhere(text, [rng.standard_normal(dims).astype(np.float32)])
    kernels = _kernels(text)
    assert len(kernels) == 1 and "reduce_window" in kernels[0] and "running" not in kernels[0], kernels


@pytest.mark.parametrize(("dtype", "opcode"), [("c64", "add"), ("c128", "add"), ("c64", "multiply"), ("c128", "multiply")])
def test_cumulative_sums_and_products_of_complex_values(dtype: str, opcode: str) -> None:
    """jax.lax.cumsum and cumprod of complex values: the window is reduced from its first
    element on, in order, so the results are numpy's running sum and product to the bit."""
    numpy_type = np.complex64 if dtype == "c64" else np.complex128
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8))).astype(numpy_type)
    text = _module(dtype, (3, 8), _window((3, 8), 1), opcode, "(0, 0)" if opcode == "add" else "(1, 0)")
    run_everywhere(text, [x])  # the backend's bytes are the reference's, every target and thread count
    [out] = evaluate(load_module(text), [x])
    expected = np.cumsum(x, axis=1) if opcode == "add" else np.cumprod(x, axis=1)
    assert out.tobytes() == expected.astype(numpy_type).tobytes()
    for cpu in COMPILE_ONLY:
        check_without_running(text, cpu)

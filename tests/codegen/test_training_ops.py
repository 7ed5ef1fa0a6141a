"""The ops training steps bring (JAX's gradients of max pooling, jax.checkpoint, random
bits, top-k), and edge cases XLA's own test modules found (tools/xla_conformance.py): the
LLVM backend against the reference evaluator, bit for bit, for random shapes, attributes and
values (NaN, ±inf, ±0, ties) on every target of the host's architecture it runs, with 1, 2
and 4 threads."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.hlo_fragments import ADD_F32
from harness.targets import run_everywhere
from tests.codegen.test_op_families import shape_text, values

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def _window_positions(size: int, window: int, stride: int, low: int, high: int) -> int:
    padded = size + low + high
    return 0 if padded < window else (padded - window) // stride + 1


def select_and_scatter_module(dtype: str, dims: tuple[int, ...], windows: list[tuple[int, int, int, int]], select: str, scatter: str) -> tuple[str, tuple[int, ...]]:
    """A select-and-scatter over `dims` with (size, stride, low, high) per dimension; the
    module and the source's dims."""
    source = tuple(_window_positions(d, *w) for d, w in zip(dims, windows, strict=True))
    window = "size={} stride={} pad={}".format("x".join(str(w[0]) for w in windows), "x".join(str(w[1]) for w in windows), "x".join(f"{w[2]}_{w[3]}" for w in windows))
    text = f"""HloModule t
select {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={select}
}}
scatter {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT s = {dtype}[] {scatter}(a, b)
}}
ENTRY e {{
  x = {shape_text(dtype, dims)} parameter(0)
  s = {shape_text(dtype, source)} parameter(1)
  i = {dtype}[] parameter(2)
  ROOT r = {shape_text(dtype, dims)} select-and-scatter(x, s, i), window={{{window}}}, select=select, scatter=scatter
}}
"""
    return text, source


@SETTINGS
@given(st.sampled_from(["f32", "s32", "f64"]), st.lists(st.integers(1, 9), min_size=1, max_size=4), st.data(), st.integers(0, 10**6))
def test_select_and_scatter(dtype: str, dims: list[int], data: st.DataObject, seed: int) -> None:
    """Overlapping and disjoint windows, padding (windows of padding only included), ties
    and NaN; a scatter that is not commutative (subtract) pins the order of application."""
    windows = [(data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in dims]
    select = data.draw(st.sampled_from(["GE", "GT", "LE", "LT"]))
    scatter = data.draw(st.sampled_from(["add", "subtract", "maximum"]))
    text, source = select_and_scatter_module(dtype, tuple(dims), windows, select, scatter)
    rng = np.random.default_rng(seed)
    x = values(rng, dtype, tuple(dims))
    if data.draw(st.booleans()):
        with np.errstate(invalid="ignore"):
            x = np.round(x) % 3  # many ties (NaN stays NaN)
    run_everywhere(text, [x, values(rng, dtype, source), values(rng, dtype, ())])


def test_max_pooling_gradient_as_jax_writes_it() -> None:
    """NHWC 2x2 stride-2 max pooling's gradient over a 4x6x6x3 batch, select GE, scatter add."""
    text, source = select_and_scatter_module("f32", (4, 6, 6, 3), [(1, 1, 0, 0), (2, 2, 0, 0), (2, 2, 0, 0), (1, 1, 0, 0)], "GE", "add")
    rng = np.random.default_rng(3)
    run_everywhere(text, [values(rng, "f32", (4, 6, 6, 3)), values(rng, "f32", source), np.float32(0)])


def test_opt_barrier_between_recomputations() -> None:
    """What jax.checkpoint emits: values through opt-barrier, recomputed after it."""
    text = """HloModule t
ENTRY e {
  w = f32[4,4]{1,0} parameter(0)
  x = f32[2,4]{1,0} parameter(1)
  d = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[2,4]{1,0} tanh(d)
  b = (f32[4,4]{1,0}, f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(w, x, t)
  o = (f32[4,4]{1,0}, f32[2,4]{1,0}, f32[2,4]{1,0}) opt-barrier(b)
  w2 = f32[4,4]{1,0} get-tuple-element(o), index=0
  x2 = f32[2,4]{1,0} get-tuple-element(o), index=1
  t2 = f32[2,4]{1,0} get-tuple-element(o), index=2
  d2 = f32[2,4]{1,0} dot(x2, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[2,4]{1,0} tanh(d2)
  ROOT s = f32[2,4]{1,0} subtract(r, t2)
}
"""
    rng = np.random.default_rng(5)
    run_everywhere(text, [values(rng, "f32", (4, 4)), values(rng, "f32", (2, 4))])


@SETTINGS
@given(st.sampled_from(["f32", "f64", "s32", "u8", "s64"]), st.lists(st.integers(1, 40), min_size=1, max_size=3), st.booleans(), st.data(), st.integers(0, 10**6))
def test_topk(dtype: str, dims: list[int], largest: bool, data: st.DataObject, seed: int) -> None:
    """Random rows with NaN (both signs), ±inf, ±0 and repeated values (ties go to the lower
    index), every k from 0 to the row length."""
    k = data.draw(st.integers(0, dims[-1]))
    rng = np.random.default_rng(seed)
    x = values(rng, dtype, tuple(dims))
    if data.draw(st.booleans()):
        x = x[..., rng.integers(0, dims[-1], size=dims[-1])]  # many equal values
    if dtype[0] == "f":
        x.reshape(-1)[:: 7] = -np.abs(x.reshape(-1)[:: 7])  # negative NaNs and zeros too
    out = (*dims[:-1], k)
    text = f"""HloModule t
ENTRY e {{
  x = {shape_text(dtype, tuple(dims))} parameter(0)
  ROOT t = ({shape_text(dtype, out)}, {shape_text("s32", out)}) topk(x), k={k}, largest={"true" if largest else "false"}
}}
"""
    run_everywhere(text, [np.ascontiguousarray(x)])


def test_gather_and_scatter_with_an_empty_index_vector() -> None:
    """A scalar operand indexed by an empty index vector (XLA's GatherFromScalar test): one
    gather of the whole operand, one scatter onto it."""
    text = "HloModule t\n" + ADD_F32 + """ENTRY e {
  x = f32[] parameter(0)
  i = s32[0]{0} parameter(1)
  u = f32[] parameter(2)
  g = f32[] gather(x, i), offset_dims={}, collapsed_slice_dims={}, start_index_map={}, index_vector_dim=0, slice_sizes={}
  s = f32[] scatter(x, i, u), update_window_dims={}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, index_vector_dim=0, to_apply=add
  ROOT t = (f32[], f32[]) tuple(g, s)
}
"""
    run_everywhere(text, [np.float32(1.5), np.zeros(0, np.int32), np.float32(2.0)])


def test_an_empty_iota_with_a_huge_dimension() -> None:
    """f32[10^12, 0] has no elements: nothing is allocated for the long dimension."""
    run_everywhere("HloModule t\nENTRY e {\n  ROOT i = f32[1000000000000,0] iota(), iota_dimension=0\n}\n", [])


def test_rank_0_narrow_floats_through_the_math_library() -> None:
    """bf16[] and f16[] exponential (XLA's gpu_float_support test): scalars widen to f32
    like arrays do."""
    for dtype, numpy_type in (("bf16", "bfloat16"), ("f16", "float16")):
        import ml_dtypes

        value = np.array(1.5, dtype=getattr(ml_dtypes, numpy_type) if dtype == "bf16" else np.float16)
        run_everywhere(f"HloModule t\nENTRY e {{\n  p = {dtype}[] parameter(0)\n  ROOT r = {dtype}[] exponential(p)\n}}\n", [value])


def test_gather_from_an_empty_operand_is_zero() -> None:
    """Slices of size 0 along a collapsed dimension read nothing: zeros, as XLA:CPU gives
    (the backend read past an empty buffer before)."""
    text = """HloModule t
ENTRY e {
  operand = f32[0,2] parameter(0)
  indices = s32[3] parameter(1)
  ROOT g = f32[3,2] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={0,2}
}
"""
    run_everywhere(text, [np.zeros((0, 2), np.float32), np.array([0, 1, 2], np.int32)])
    from compiler.reference import evaluate

    assert evaluate(text, [np.zeros((0, 2), np.float32), np.array([0, 1, 2], np.int32)])[0].tolist() == [[0.0, 0.0]] * 3

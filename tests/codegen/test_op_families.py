"""Property tests: for random shapes, attributes and values (NaN, ±inf, ±0, subnormals,
extreme integers included), each op family compiled by the LLVM backend gives exactly the
reference evaluator's bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler
from compiler.hlo import load_module
from compiler.hlo.errors import HloError
from compiler.program import load_program
from compiler.reference import evaluate
from harness.fuzzing import check_against_reference
from harness.hlo_fragments import ADD_F32
from harness.targets import COMPILE_ONLY, DEFAULT, check_without_running

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
NUMPY = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "u8": np.uint8, "s64": np.int64, "pred": np.bool_}


def values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random values with the special ones mixed in."""
    size = int(np.prod(shape))
    if dtype in ("f32", "f64"):
        numpy_type = NUMPY[dtype]
        base = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.finfo(numpy_type).tiny / 4, -np.finfo(numpy_type).max, 1.5, -2.5])
        mask = rng.random(size) < 0.2
        base[mask] = rng.choice(specials, mask.sum())
        return base.astype(numpy_type).reshape(shape)
    if dtype == "pred":
        return (rng.random(size) < 0.5).reshape(shape)
    info = np.iinfo(NUMPY[dtype])
    out = rng.integers(info.min, info.max, size=size, dtype=NUMPY[dtype], endpoint=True)
    mask = rng.random(size) < 0.2
    out[mask] = rng.choice(np.array([0, 1, -1 if info.min < 0 else 2, info.min, info.max], dtype=NUMPY[dtype]), mask.sum())
    return out.reshape(shape)


def check(text: str, *arrays: np.ndarray, threads: int = 2) -> None:
    module = load_module(text)
    expected = evaluate(module, list(arrays))
    executable = compiler.compile(text, target=DEFAULT, cache_dir=False)
    got = executable.run(*arrays, threads=threads)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"out{index}"
        assert g.tobytes() == e.tobytes(), f"out{index} differs:\n{text}\ngot {g}\nwant {e}"


def shape_text(dtype: str, dims: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


dims_strategy = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)

ARITHMETIC = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power"]
INTEGER_ONLY = ["and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic"]


@SETTINGS
@given(st.sampled_from(["f32", "f64", "s32", "u8", "s64"]), st.sampled_from(ARITHMETIC + INTEGER_ONLY + ["atan2"]), dims_strategy, st.integers(0, 10**6))
def test_binary_elementwise(dtype: str, opcode: str, dims: tuple[int, ...], seed: int) -> None:
    if opcode in INTEGER_ONLY and dtype in ("f32", "f64"):
        opcode = "add"
    if opcode == "atan2" and dtype not in ("f32", "f64"):
        opcode = "subtract"
    rng = np.random.default_rng(seed)
    s = shape_text(dtype, dims)
    text = f"HloModule t\nENTRY e {{\n  a = {s} parameter(0)\n  b = {s} parameter(1)\n  ROOT r = {s} {opcode}(a, b)\n}}\n"
    check(text, values(rng, dtype, dims), values(rng, dtype, dims))


UNARY_FLOAT = ["negate", "abs", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "sqrt", "exponential", "log", "tanh", "logistic", "sine", "cosine", "erf", "rsqrt", "cbrt", "exponential-minus-one", "log-plus-one"]


@SETTINGS
@given(st.sampled_from(["f32", "f64"]), st.sampled_from(UNARY_FLOAT), dims_strategy, st.integers(0, 10**6))
def test_unary_float(dtype: str, opcode: str, dims: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = shape_text(dtype, dims)
    text = f"HloModule t\nENTRY e {{\n  a = {s} parameter(0)\n  ROOT r = {s} {opcode}(a)\n}}\n"
    check(text, values(rng, dtype, dims))


@SETTINGS
@given(st.sampled_from(["f32", "f64", "s32", "u8", "s64", "pred"]), st.sampled_from(["f32", "f64", "s32", "u8", "s64", "pred", "f16", "bf16"]), dims_strategy, st.integers(0, 10**6))
def test_convert(source: str, target: str, dims: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    text = f"HloModule t\nENTRY e {{\n  a = {shape_text(source, dims)} parameter(0)\n  ROOT r = {shape_text(target, dims)} convert(a)\n}}\n"
    check(text, values(rng, source, dims))


@SETTINGS
@given(st.sampled_from(["f32", "s32"]), st.sampled_from(["EQ", "NE", "LT", "LE", "GT", "GE"]), st.booleans(), dims_strategy, st.integers(0, 10**6))
def test_compare_select_clamp(dtype: str, direction: str, total: bool, dims: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = shape_text(dtype, dims)
    p = shape_text("pred", dims)
    kind = ", type=TOTALORDER" if total and dtype == "f32" else ""
    text = f"""HloModule t
ENTRY e {{
  a = {s} parameter(0)
  b = {s} parameter(1)
  c = {p} compare(a, b), direction={direction}{kind}
  s = {s} select(c, a, b)
  k = {s} clamp(b, a, s)
  ROOT t = ({p}, {s}, {s}) tuple(c, s, k)
}}
"""
    check(text, values(rng, dtype, dims), values(rng, dtype, dims))


REDUCERS = {
    "add": "add", "max": "maximum", "min": "minimum", "mul": "multiply",
}  # fmt: skip


@SETTINGS
@given(st.sampled_from(["f32", "f64", "s32"]), st.sampled_from(sorted(REDUCERS)), st.lists(st.integers(1, 40), min_size=1, max_size=3), st.data(), st.integers(0, 10**6))
def test_reduce(dtype: str, reducer: str, dims: list[int], data, seed: int) -> None:
    rank = len(dims)
    reduced = sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
    kept = tuple(d for i, d in enumerate(dims) if i not in reduced)
    rng = np.random.default_rng(seed)
    layout = ",".join(str(d) for d in data.draw(st.permutations(list(range(rank)))))
    text = f"""HloModule t
r {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT s = {dtype}[] {REDUCERS[reducer]}(a, b)
}}
ENTRY e {{
  x = {shape_text(dtype, tuple(dims))}{{{layout}}} parameter(0)
  i = {dtype}[] parameter(1)
  ROOT y = {shape_text(dtype, kept)} reduce(x, i), dimensions={{{','.join(map(str, reduced))}}}, to_apply=r
}}
"""
    check(text, values(rng, dtype, tuple(dims)), values(rng, dtype, ()))


@SETTINGS
@given(st.sampled_from(["f32", "f64", "s32", "bf16"]), st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.integers(1, 20), st.booleans(), st.integers(0, 10**6))
def test_dot(dtype: str, batch: int, m: int, k: int, n: int, transpose_rhs: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    if dtype == "bf16":
        import ml_dtypes

        a = rng.standard_normal((batch, m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((batch, n, k) if transpose_rhs else (batch, k, n)).astype(ml_dtypes.bfloat16)
    else:
        a = values(rng, dtype, (batch, m, k))
        b = values(rng, dtype, (batch, n, k) if transpose_rhs else (batch, k, n))
    rhs_contracting = 2 if transpose_rhs else 1
    text = f"""HloModule t
ENTRY e {{
  a = {shape_text(dtype, a.shape)} parameter(0)
  b = {shape_text(dtype, b.shape)} parameter(1)
  ROOT d = {shape_text(dtype, (batch, m, n))} dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{{rhs_contracting}}}
}}
"""
    check(text, a, b)


@SETTINGS
@given(st.integers(1, 2), st.integers(3, 7), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(0, 2), st.integers(1, 2), st.sampled_from([1, 2]), st.integers(0, 10**6))
def test_convolution(batch: int, size: int, kernel: int, stride: int, dilation: int, pad: int, base_dilation: int, groups: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    channels, features = 2 * groups, 3 * groups
    x = values(rng, "f32", (batch, channels, size, size))
    w = values(rng, "f32", (features, channels // groups, kernel, kernel))
    window = f"size={kernel}x{kernel} stride={stride}x{stride} pad={pad}_{pad}x{pad}_{pad} lhs_dilate={base_dilation}x{base_dilation} rhs_dilate={dilation}x{dilation}"
    dilated = (size - 1) * base_dilation + 1 + 2 * pad
    extent = (kernel - 1) * dilation + 1
    out = max(0, (dilated - extent) // stride + 1) if dilated >= extent else 0
    text = f"""HloModule t
ENTRY e {{
  x = f32[{batch},{channels},{size},{size}]{{3,2,1,0}} parameter(0)
  w = f32[{features},{channels // groups},{kernel},{kernel}]{{3,2,1,0}} parameter(1)
  ROOT c = f32[{batch},{features},{out},{out}]{{3,2,1,0}} convolution(x, w), window={{{window}}}, dim_labels=bf01_oi01->bf01, feature_group_count={groups}
}}
"""
    check(text, x, w)


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=2, max_size=3), st.data(), st.integers(0, 10**6))
def test_data_movement(dims: list[int], data, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dims_t = tuple(dims)
    rank = len(dims)
    perm = data.draw(st.permutations(list(range(rank))))
    transposed = tuple(dims[p] for p in perm)
    starts = [data.draw(st.integers(0, d - 1)) for d in dims]
    limits = [data.draw(st.integers(s + 1, d)) for s, d in zip(starts, dims, strict=True)]
    strides = [data.draw(st.integers(1, 2)) for _ in dims]
    sliced = tuple((limit - start + stride - 1) // stride for start, limit, stride in zip(starts, limits, strides, strict=True))
    pads = [(data.draw(st.integers(-1, 2)), data.draw(st.integers(-1, 2)), data.draw(st.integers(0, 1))) for _ in dims]
    padded = tuple(lo + hi + d + max(d - 1, 0) * interior for (lo, hi, interior), d in zip(pads, dims, strict=True))
    if min(padded) < 0:
        pads = [(0, 0, 0)] * rank
        padded = dims_t
    slice_spec = ", ".join(f"[{s}:{lim}:{st_}]" for s, lim, st_ in zip(starts, limits, strides, strict=True))
    pad_spec = "x".join(f"{lo}_{hi}_{interior}" for lo, hi, interior in pads)
    size = [data.draw(st.integers(1, d)) for d in dims]
    text = f"""HloModule t
ENTRY e {{
  x = {shape_text('s32', dims_t)} parameter(0)
  i = s32[] parameter(1)
  t = {shape_text('s32', transposed)} transpose(x), dimensions={{{','.join(map(str, perm))}}}
  s = {shape_text('s32', sliced)} slice(x), slice={{{slice_spec}}}
  z = s32[] constant(-7)
  p = {shape_text('s32', padded)} pad(x, z), padding={pad_spec}
  r = {shape_text('s32', dims_t)} reverse(x), dimensions={{0}}
  c = {shape_text('s32', (dims[0] * 2,) + dims_t[1:])} concatenate(x, r), dimensions={{0}}
  b = {shape_text('s32', (3,) + dims_t)} broadcast(x), dimensions={{{','.join(str(d + 1) for d in range(rank))}}}
  ds = {shape_text('s32', tuple(size))} dynamic-slice(x, {', '.join(['i'] * rank)}), dynamic_slice_sizes={{{','.join(map(str, size))}}}
  du = {shape_text('s32', dims_t)} dynamic-update-slice(x, ds, {', '.join(['i'] * rank)})
  io = {shape_text('f32', dims_t)} iota(), iota_dimension={rank - 1}
  ROOT o = ({shape_text('s32', transposed)}, {shape_text('s32', sliced)}, {shape_text('s32', padded)}, {shape_text('s32', (dims[0] * 2,) + dims_t[1:])}, {shape_text('s32', (3,) + dims_t)}, {shape_text('s32', dims_t)}, {shape_text('f32', dims_t)}) tuple(t, s, p, c, b, du, io)
}}
"""
    check(text, values(rng, "s32", dims_t), np.int32(data.draw(st.integers(-3, 8))))


@SETTINGS
@given(st.integers(1, 40), st.sampled_from(["LT", "GT", "LE"]), st.sampled_from(["s32", "u8", "s64", "u64"]), st.integers(0, 10**6))
def test_sort_gather_scatter(n: int, direction: str, index_type: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, "f32", (3, n))
    index_numpy = {"s32": np.int32, "u8": np.uint8, "s64": np.int64, "u64": np.uint64}[index_type]
    ids = rng.integers(-2 if index_type[0] == "s" else 0, n + 2, size=(5,)).astype(index_numpy)
    if index_type == "u64":
        ids[0] = np.iinfo(np.uint64).max  # beyond the int64 range: clamped and skipped
    updates = values(rng, "f32", (5, 3))
    text = f"""HloModule t
cmp {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction={direction}, type=TOTALORDER
}}
{ADD_F32}ENTRY e {{
  x = f32[3,{n}]{{1,0}} parameter(0)
  ids = {index_type}[5]{{0}} parameter(1)
  u = f32[5,3]{{1,0}} parameter(2)
  idx = s32[3,{n}]{{1,0}} iota(), iota_dimension=1
  s = (f32[3,{n}]{{1,0}}, s32[3,{n}]{{1,0}}) sort(x, idx), dimensions={{1}}, is_stable=true, to_apply=cmp
  xt = f32[{n},3]{{1,0}} transpose(x), dimensions={{1,0}}
  g = f32[5,3]{{1,0}} gather(xt, ids), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,3}}
  sc = f32[{n},3]{{1,0}} scatter(xt, ids, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
  s0 = f32[3,{n}]{{1,0}} get-tuple-element(s), index=0
  s1 = s32[3,{n}]{{1,0}} get-tuple-element(s), index=1
  ROOT o = (f32[3,{n}]{{1,0}}, s32[3,{n}]{{1,0}}, f32[5,3]{{1,0}}, f32[{n},3]{{1,0}}) tuple(s0, s1, g, sc)
}}
"""
    check(text, x, ids, updates)


PRED_BITCAST = """HloModule t, entry_computation_layout={(f32[2,3]{1,0})->(pred[2,3]{1,0}, pred[2,3]{1,0})}
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  zero = f32[] constant(0)
  zeros = f32[2,3]{1,0} broadcast(zero), dimensions={}
  positive = pred[2,3]{1,0} compare(x, zeros), direction=GT
  same = pred[2,3]{1,0} bitcast-convert(positive)
  ROOT out = (pred[2,3]{1,0}, pred[2,3]{1,0}) tuple(same, positive)
}
"""


def test_bitcast_convert_of_pred_to_pred_is_the_identity_and_to_another_type_refused() -> None:
    """As XLA has it; what a pred's bits are in memory is not in the numerics contract."""
    x = np.array([[1.0, -1.0, 0.0], [2.5, -0.0, np.nan]], dtype=np.float32)
    same, positive = evaluate(load_module(PRED_BITCAST), [x])
    assert same.dtype == np.bool_ and same.tolist() == positive.tolist() == [[True, False, False], [True, False, False]]
    check_against_reference(PRED_BITCAST, seed=7)  # the backend gives the same bytes, every target and thread count
    with pytest.raises(HloError, match="bitcast-convert pred to s8: a pred is bitcast only to pred"):
        load_program(PRED_BITCAST.replace("same = pred[2,3]{1,0} bitcast-convert", "same = s8[2,3]{1,0} bitcast-convert").replace("(pred[2,3]{1,0}, pred[2,3]{1,0}) tuple", "(s8[2,3]{1,0}, pred[2,3]{1,0}) tuple").replace("->(pred[2,3]{1,0}, pred", "->(s8[2,3]{1,0}, pred"))


def _pred_topk(k: int, largest: str) -> str:
    return (
        f"HloModule t, entry_computation_layout={{(pred[4,7]{{1,0}})->(pred[4,{k}]{{1,0}}, s32[4,{k}]{{1,0}})}}\n"
        "ENTRY e {\n"
        "  x = pred[4,7]{1,0} parameter(0)\n"
        f"  ROOT t = (pred[4,{k}]{{1,0}}, s32[4,{k}]{{1,0}}) topk(x), k={k}, largest={largest}\n"
        "}\n"
    )


def test_topk_of_pred_orders_false_before_true_and_keeps_equal_ones_in_place() -> None:
    """XLA's topk takes pred: true is greater, and equal values keep their order."""
    x = np.array([[False, True, False, True, True, False, False]] * 4)
    values, indices = evaluate(load_module(_pred_topk(3, "true")), [x])
    assert values[0].tolist() == [True, True, True] and indices[0].tolist() == [1, 3, 4]
    values, indices = evaluate(load_module(_pred_topk(7, "false")), [x])
    assert values[0].tolist() == [False] * 4 + [True] * 3 and indices[0].tolist() == [0, 2, 5, 6, 1, 3, 4]
    for k, largest in ((1, "true"), (3, "false"), (7, "true")):
        check_against_reference(_pred_topk(k, largest), seed=k)  # the same bytes, every runnable target and thread count
    for cpu in COMPILE_ONLY:
        check_without_running(_pred_topk(3, "true"), cpu)

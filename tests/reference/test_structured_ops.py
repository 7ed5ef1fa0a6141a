"""Reductions, dot, convolution, sort, gather, scatter and reduce-window against scalar
oracles that follow the contract's definitions step by step."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.hlo_fragments import ADD_F32
from tests.reference.oracle import FORMATS, mpfr, run, to_format

ORDER_REVEALING = """
r {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  k = s32[] constant(31)
  m = s32[] multiply(a, k)
  ROOT s = s32[] add(m, b)
}
"""


def _wrap32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def spec_reduce(xs: list, init, reducer):
    """The contract's reduction order, written out on a Python list."""
    if not xs:
        return init

    def tree(values: list):
        while len(values) > 1:
            paired = [reducer(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
            if len(values) % 2:
                paired.append(values[-1])
            values = paired
        return values[0]

    block_results = []
    for start in range(0, len(xs), 4096):
        block = xs[start : start + 4096]
        lanes = []
        for lane in range(min(16, len(block))):
            acc = block[lane]
            for j in range(lane + 16, len(block), 16):
                acc = reducer(acc, block[j])
            lanes.append(acc)
        block_results.append(tree(lanes))
    return reducer(init, tree(block_results))


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 33, 255, 4096, 4097, 8192 + 33])
def test_reduce_follows_the_pinned_lane_and_block_order(n: int) -> None:
    text = f"""HloModule t
{ORDER_REVEALING}
ENTRY e {{
  x = s32[2,{n}]{{1,0}} parameter(0)
  i = s32[] constant(7)
  ROOT y = s32[2]{{0}} reduce(x, i), dimensions={{1}}, to_apply=r
}}
"""
    x = np.random.default_rng(n).integers(-1000, 1000, size=(2, n), dtype=np.int32)
    (out,) = run(text, x)
    for row in range(2):
        expected = spec_reduce(x[row].tolist(), 7, lambda a, b: _wrap32(a * 31 + b))
        assert out[row] == expected


def test_reduce_over_several_dimensions_uses_row_major_logical_order() -> None:
    text = f"""HloModule t
{ORDER_REVEALING}
ENTRY e {{
  x = s32[3,4,5]{{0,1,2}} parameter(0)
  i = s32[] constant(0)
  ROOT y = s32[4]{{0}} reduce(x, i), dimensions={{2,0}}, to_apply=r
}}
"""
    x = np.random.default_rng(1).integers(-50, 50, size=(3, 4, 5), dtype=np.int32)
    (out,) = run(text, x)
    for j in range(4):
        sequence = [int(x[i, j, k]) for i in range(3) for k in range(5)]  # dims 0 then 2
        assert out[j] == spec_reduce(sequence, 0, lambda a, b: _wrap32(a * 31 + b))


def test_float_sum_matches_the_spec_bit_for_bit() -> None:
    text = "HloModule t\n" + ADD_F32 + """ENTRY e {
  x = f32[5000]{0} parameter(0)
  z = f32[] constant(-0)
  ROOT y = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
"""
    x = (np.random.default_rng(2).standard_normal(5000) * 10.0 ** np.random.default_rng(3).integers(-8, 8, 5000)).astype(np.float32)
    (out,) = run(text, x)
    expected = spec_reduce([np.float32(v) for v in x], np.float32(-0.0), lambda a, b: np.float32(a + b))
    assert out.tobytes() == np.float32(expected).tobytes()


def test_variadic_argmax_reduce() -> None:
    text = """HloModule t
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[3,40]{1,0} parameter(0)
  idx = s32[3,40]{1,0} iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3]{0}, s32[3]{0}) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=argmax
}
"""
    x = np.random.default_rng(4).standard_normal((3, 40)).astype(np.float32)
    x[1, 7] = x[1, 30] = 50.0  # a tie: the first index wins
    values, indices = run(text, x)
    assert indices.tolist() == [int(np.argmax(x[0])), 7, int(np.argmax(x[2]))]
    assert values.tolist() == x.max(axis=1).tolist()


def _fma_chain(a: np.ndarray, b: np.ndarray) -> np.float32:
    with gmpy2.context(FORMATS["f32"][1]):
        acc = gmpy2.mpfr(0)
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            acc = gmpy2.fma(mpfr(x), mpfr(y), acc)
        return to_format(acc, "f32")


def test_dot_is_an_fma_chain_in_contraction_order() -> None:
    text = """HloModule t
ENTRY e {
  a = f32[2,3,17]{2,1,0} parameter(0)
  b = f32[2,17,4]{2,1,0} parameter(1)
  ROOT d = f32[2,3,4]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 3, 17)) * 1e3).astype(np.float32)
    b = (rng.standard_normal((2, 17, 4)) * 1e-3).astype(np.float32)
    a[0, 0, 3] = 1e-40  # a subnormal operand
    b[1, 5, 2] = np.inf
    (out,) = run(text, a, b)
    for batch, i, j in np.ndindex(2, 3, 4):
        assert out[batch, i, j].tobytes() == _fma_chain(a[batch, i], b[batch, :, j]).tobytes()


def test_dot_with_two_contracting_dimensions_and_bf16_result() -> None:
    text = """HloModule t
ENTRY e {
  a = bf16[3,4,5]{2,1,0} parameter(0)
  b = bf16[5,4,2]{2,1,0} parameter(1)
  ROOT d = bf16[3,2]{1,0} dot(a, b), lhs_contracting_dims={2,1}, rhs_contracting_dims={0,1}
}
"""
    import ml_dtypes

    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 4, 5)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((5, 4, 2)).astype(ml_dtypes.bfloat16)
    (out,) = run(text, a, b)
    for i, j in np.ndindex(3, 2):
        # Contraction index runs over (dim 2, dim 1) of a, i.e. k over 5 (major) then 4.
        lhs = np.array([a[i, m, k] for k in range(5) for m in range(4)]).astype(np.float32)
        rhs = np.array([b[k, m, j] for k in range(5) for m in range(4)]).astype(np.float32)
        expected = _fma_chain(lhs, rhs).astype(ml_dtypes.bfloat16)
        assert out[i, j].tobytes() == np.array(expected, dtype=ml_dtypes.bfloat16).tobytes()


def _conv_oracle(x, w, stride, pad, lhs_dilate, rhs_dilate, groups):
    """NHWC input, HWIO kernel; window positions row-major, then input features."""
    batch, height, width, channels = x.shape
    kh, kw, group_in, out_features = w.shape
    dh = (height - 1) * lhs_dilate[0] + 1 + pad[0][0] + pad[0][1]
    dw = (width - 1) * lhs_dilate[1] + 1 + pad[1][0] + pad[1][1]
    padded = np.zeros((batch, dh, dw, channels), np.float32)
    for i in range(height):
        for j in range(width):
            padded[:, pad[0][0] + i * lhs_dilate[0], pad[1][0] + j * lhs_dilate[1], :] = x[:, i, j, :]
    eh, ew = (kh - 1) * rhs_dilate[0] + 1, (kw - 1) * rhs_dilate[1] + 1
    oh, ow = (dh - eh) // stride[0] + 1, (dw - ew) // stride[1] + 1
    out = np.zeros((batch, oh, ow, out_features), np.float32)
    per_group = out_features // groups
    for n, oy, ox, o in np.ndindex(batch, oh, ow, out_features):
        g = o // per_group
        xs, ws = [], []
        for ky, kx in np.ndindex(kh, kw):
            for c in range(group_in):
                xs.append(padded[n, oy * stride[0] + ky * rhs_dilate[0], ox * stride[1] + kx * rhs_dilate[1], g * group_in + c])
                ws.append(w[ky, kx, c, o])
        out[n, oy, ox, o] = _fma_chain(np.array(xs, np.float32), np.array(ws, np.float32))
    return out


@pytest.mark.parametrize(
    ("stride", "pad", "lhs_dilate", "rhs_dilate", "groups"),
    [((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1), ((2, 1), ((1, 2), (0, 1)), (1, 1), (2, 1), 2), ((1, 2), ((1, 1), (2, 0)), (2, 1), (1, 1), 4)],
)
def test_convolution_matches_the_oracle_bit_for_bit(stride, pad, lhs_dilate, rhs_dilate, groups) -> None:
    rng = np.random.default_rng(sum(stride) + groups)
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4 // groups, 4)).astype(np.float32)
    expected = _conv_oracle(x, w, stride, pad, lhs_dilate, rhs_dilate, groups)
    window = (
        f"size=3x2 stride={stride[0]}x{stride[1]} pad={pad[0][0]}_{pad[0][1]}x{pad[1][0]}_{pad[1][1]} "
        f"lhs_dilate={lhs_dilate[0]}x{lhs_dilate[1]} rhs_dilate={rhs_dilate[0]}x{rhs_dilate[1]}"
    )
    out_dims = ",".join(str(d) for d in expected.shape)
    text = f"""HloModule t
ENTRY e {{
  x = f32[2,5,6,4]{{3,2,1,0}} parameter(0)
  w = f32[3,2,{4 // groups},4]{{3,2,1,0}} parameter(1)
  ROOT c = f32[{out_dims}]{{3,2,1,0}} convolution(x, w), window={{{window}}}, dim_labels=b01f_01io->b01f, feature_group_count={groups}
}}
"""
    (out,) = run(text, x, w)
    assert out.tobytes() == expected.tobytes()


def _comparator_module(n: int, direction: str, kind: str = "") -> str:
    type_attr = f", type={kind}" if kind else ""
    return f"""HloModule t
cmp {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction={direction}{type_attr}
}}
ENTRY e {{
  x = f32[3,{n}]{{1,0}} parameter(0)
  idx = s32[3,{n}]{{1,0}} iota(), iota_dimension=1
  ROOT s = (f32[3,{n}]{{1,0}}, s32[3,{n}]{{1,0}}) sort(x, idx), dimensions={{1}}, is_stable=true, to_apply=cmp
}}
"""


def spec_merge_sort(keys: list, less) -> list[int]:
    """The contract's bottom-up merge sort on positions, with an arbitrary comparator."""
    order = list(range(len(keys)))
    width = 1
    while width < len(order):
        merged = []
        for start in range(0, len(order), 2 * width):
            left = order[start : start + width]
            right = order[start + width : start + 2 * width]
            i = j = 0
            while i < len(left) or j < len(right):
                if j < len(right) and (i >= len(left) or less(keys[right[j]], keys[left[i]])):
                    merged.append(right[j])
                    j += 1
                else:
                    merged.append(left[i])
                    i += 1
        order = merged
        width *= 2
    return order


def _total_key(value: np.float32) -> int:
    bits = int(np.array([value], np.float32).view(np.int32)[0])
    return bits ^ 0x7FFFFFFF if bits < 0 else bits


@pytest.mark.parametrize("n", [1, 2, 7, 33, 100])
def test_sort_is_stable_and_follows_the_pinned_merge_sort(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.integers(-3, 4, size=(3, n)).astype(np.float32)
    x[0, ::5] = np.nan
    x[1, ::3] = -0.0
    keys_sorted, positions = run(_comparator_module(n, "LT", "TOTALORDER"), x)
    for row in range(3):
        expected = sorted(range(n), key=lambda k: _total_key(x[row, k]))  # Python's sort is stable
        assert positions[row].tolist() == expected
        assert keys_sorted[row].tobytes() == x[row, expected].tobytes()
    # A comparator that is not a strict weak order (LE) still has one defined result.
    _, positions = run(_comparator_module(n, "LE"), x)
    for row in range(3):
        with np.errstate(invalid="ignore"):
            expected = spec_merge_sort(x[row].tolist(), lambda a, b: a <= b)
        assert positions[row].tolist() == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=60))
def test_sort_property_matches_a_stable_sort(values: list[int]) -> None:
    n = len(values)
    x = np.array([values] * 3, dtype=np.float32)
    keys_sorted, positions = run(_comparator_module(n, "LT"), x)
    expected = sorted(range(n), key=lambda k: values[k])
    assert positions[0].tolist() == expected


def test_gather_clamps_and_scatter_skips_out_of_bounds_windows() -> None:
    text = "HloModule t\n" + ADD_F32 + """ENTRY e {
  table = f32[6,3]{1,0} parameter(0)
  ids = s32[5]{0} parameter(1)
  upd = f32[5,3]{1,0} parameter(2)
  g = f32[5,3]{1,0} gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  s = f32[6,3]{1,0} scatter(table, ids, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT t = (f32[5,3]{1,0}, f32[6,3]{1,0}) tuple(g, s)
}
"""
    table = np.arange(18, dtype=np.float32).reshape(6, 3)
    ids = np.array([2, -4, 9, 2, 5], dtype=np.int32)
    upd = np.array([[1e8, 1, 1], [5, 5, 5], [7, 7, 7], [-1e8, 2, 2], [0.5, 0.5, 0.5]], dtype=np.float32)
    gathered, scattered = run(text, table, ids, upd)
    assert gathered.tolist() == [table[2].tolist(), table[0].tolist(), table[5].tolist(), table[2].tolist(), table[5].tolist()]
    expected = table.copy()
    for index, row in zip(ids.tolist(), upd, strict=True):  # update order, skipping windows outside
        if 0 <= index < 6:
            expected[index] = (expected[index] + row).astype(np.float32)
    assert scattered.tobytes() == expected.tobytes()


def test_reduce_window_pads_with_init_and_folds_in_row_major_order() -> None:
    text = f"""HloModule t
{ORDER_REVEALING}
ENTRY e {{
  x = s32[5,4]{{1,0}} parameter(0)
  i = s32[] constant(3)
  ROOT y = s32[3,3]{{1,0}} reduce-window(x, i), window={{size=2x3 stride=2x1 pad=1_0x1_0}}, to_apply=r
}}
"""
    x = np.random.default_rng(9).integers(-20, 20, size=(5, 4), dtype=np.int32)
    (out,) = run(text, x)
    padded = np.full((6, 5), 3, dtype=np.int64)
    padded[1:, 1:] = x
    for oy, ox in np.ndindex(3, 3):
        acc = 3
        for ky, kx in np.ndindex(2, 3):
            acc = _wrap32(acc * 31 + int(padded[oy * 2 + ky, ox + kx]))
        assert out[oy, ox] == acc


def test_while_and_conditional() -> None:
    text = """HloModule t
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  two = f32[] constant(2)
  j = s32[] add(i, one)
  y = f32[] multiply(x, two)
  ROOT t = (s32[], f32[]) tuple(j, y)
}
neg {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ident {
  a = f32[] parameter(0)
  ROOT c = f32[] copy(a)
}
ENTRY e {
  x = f32[] parameter(0)
  b = s32[] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[]) tuple(zero, x)
  w = (s32[], f32[]) while(init), condition=cond, body=body
  r = f32[] get-tuple-element(w), index=1
  ROOT c = f32[] conditional(b, r, r), branch_computations={neg, ident}
}
"""
    for branch, expected in [(0, -3072.0), (1, 3072.0), (7, 3072.0), (-1, 3072.0)]:
        (out,) = run(text, np.float32(3.0), np.int32(branch))
        assert out == expected


def _select_ge(dtype: str) -> str:
    """The select computation of a max pooling's gradient: keep the first greatest."""
    return f"ge {{\n  a = {dtype}[] parameter(0)\n  b = {dtype}[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}}\n"


def test_select_and_scatter_selects_the_first_maximum_and_skips_padding() -> None:
    """3x3 windows, stride 2, one row of padding below and a column on each side. Each
    source element goes to the first greatest element of its window (ties keep the earlier
    position under GE) and adds to what is there; two windows choose (2,2). The values
    were worked out by hand and agree with XLA:CPU's."""
    text = "HloModule t\n" + _select_ge("f32") + ADD_F32 + """ENTRY e {
  x = f32[4,5] parameter(0)
  s = f32[2,3] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4,5] select-and-scatter(x, s, z), window={size=3x3 stride=2x2 pad=0_1x1_1}, select=ge, scatter=add
}
"""
    x = np.array([[1, 5, 3, 5, 2], [7, 7, 0, 1, 9], [2, 2, 8, 8, 1], [0, 3, 3, 4, 4]], np.float32)
    source = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    (out,) = run(text, x, source)
    expected = np.zeros((4, 5), np.float32)
    expected[1, 0], expected[2, 2], expected[1, 4], expected[3, 1], expected[2, 3] = 1, 2 + 5, 3, 4, 6
    assert out.tobytes() == expected.tobytes()


def test_select_and_scatter_applies_in_source_order() -> None:
    """Overlapping windows that all select one element, with a scatter that does not
    commute (10 * the element there + the source element: XLA:CPU passes the element there
    first): source order, one after another, gives the digits in order."""
    text = "HloModule t\n" + _select_ge("s32") + """sub {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ten = s32[] constant(10)
  m = s32[] multiply(a, ten)
  ROOT s = s32[] add(m, b)
}
ENTRY e {
  x = s32[5] parameter(0)
  s = s32[3] parameter(1)
  z = s32[] constant(100)
  ROOT r = s32[5] select-and-scatter(x, s, z), window={size=3 stride=1}, select=ge, scatter=sub
}
"""
    (out,) = run(text, np.array([0, 1, 9, 1, 0], np.int32), np.array([1, 2, 4], np.int32))
    assert out.tolist() == [100, 100, 100124, 100, 100]


def test_topk_ranks_by_total_order_and_breaks_ties_by_position() -> None:
    """NaN above +inf, -NaN below -inf, +0 above -0, equal values in index order: the
    values and positions XLA:CPU gives for the same rows."""
    text = """HloModule t
ENTRY e {
  x = f32[3,9] parameter(0)
  g = (f32[3,4], s32[3,4]) topk(x), k=4, largest=true
  l = (f32[3,4], s32[3,4]) topk(x), k=4, largest=false
  g1 = s32[3,4] get-tuple-element(g), index=1
  l1 = s32[3,4] get-tuple-element(l), index=1
  ROOT t = (s32[3,4], s32[3,4]) tuple(g1, l1)
}
"""
    x = np.array([[1, 5, 5, np.nan, -np.nan, -0.0, 0.0, np.inf, 2], [3, 3, -0.0, 3, 3, 3, 3, 3, 3], [-1, -2, -np.inf, 0, -0.0, 0, 7, 7, -7]], np.float32)
    greatest, least = run(text, x)
    assert greatest.tolist() == [[3, 7, 1, 2], [0, 1, 3, 4], [6, 7, 3, 5]]
    assert least.tolist() == [[4, 5, 6, 0], [2, 0, 1, 3], [2, 8, 1, 0]]


def test_dot_and_convolution_of_pred_are_an_or_of_ands_on_every_target() -> None:
    from compiler.hlo import HloVerifyError, load_module
    from compiler.reference import evaluate
    from harness.targets import run_everywhere

    text = """HloModule m
ENTRY e {
  a = pred[5,300] parameter(0)
  b = pred[300,7] parameter(1)
  d = pred[5,7] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = pred[1,9,9,2] parameter(2)
  k = pred[3,3,2,4] parameter(3)
  c = pred[1,7,7,4] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f
  ROOT r = (pred[5,7], pred[1,7,7,4]) tuple(d, c)
}
"""
    rng = np.random.default_rng(0)
    arrays = [rng.random((5, 300)) < 0.005, rng.random((300, 7)) < 0.01, rng.random((1, 9, 9, 2)) < 0.1, rng.random((3, 3, 2, 4)) < 0.1]
    dot, conv = evaluate(load_module(text), arrays)
    assert np.array_equal(dot, (arrays[0].astype(np.int64) @ arrays[1].astype(np.int64)) > 0)
    x, k = arrays[2].astype(np.int64)[0], arrays[3].astype(np.int64)
    model = np.zeros((7, 7, 4), np.int64)
    for i in range(7):
        for j in range(7):
            model[i, j] = np.einsum("abf,abfo->o", x[i : i + 3, j : j + 3], k)
    assert np.array_equal(conv[0], model > 0)
    run_everywhere(text, arrays)
    with pytest.raises(HloVerifyError, match="pred result takes pred operands"):
        load_module(text.replace("b = pred[300,7]", "b = f32[300,7]"))
    from compiler.hlo import HloUnsupportedError

    with pytest.raises(HloUnsupportedError, match="give it a floating-point result"):
        load_module("HloModule m\nENTRY e {\n  a = bf16[2,2] parameter(0)\n  ROOT d = s32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")

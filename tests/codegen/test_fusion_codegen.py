"""Loop fusion kernels against the reference evaluator, bit for bit: random values with NaN,
±inf, ±0, subnormals and extreme integers, on every target of the host's architecture that it
runs (the others compiled and checked without running) and 1, 2 and 4 threads, for fusions
formed by the pass and fusions written in the HLO text."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.fusion import uncanonical_values
from compiler.config import load_config
from compiler.driver import optimized_plan
from compiler.program import load_program
from harness.hlo_fragments import ADD_F32, scalar_binary
from harness.targets import DEFAULT, NATIVE, run_everywhere
from tests.codegen.test_op_families import shape_text, values

TARGETS = list(NATIVE)


# Long enough that 2 and 4 threads split the loop (vector and scalar tail included).
LONG = 40_000 + 13


@pytest.mark.parametrize("dtype", ["f32", "f64", "s32"])
def test_vector_chain_with_scalars_and_converts(dtype: str) -> None:
    """Same-shape chain: the vector path, with a broadcast scalar parameter, a scalar
    constant, compare/select/clamp and a round trip through f16/bf16."""
    rng = np.random.default_rng(len(dtype) + ord(dtype[0]))
    v = shape_text(dtype, (LONG,))
    p = shape_text("pred", (LONG,))
    narrow = "f16" if dtype != "s32" else "s64"
    text = f"""HloModule t
ENTRY e {{
  x = {v} parameter(0)
  y = {v} parameter(1)
  s = {dtype}[] parameter(2)
  k = {dtype}[] constant(3)
  sb = {v} broadcast(s), dimensions={{}}
  a = {v} multiply(x, sb)
  b = {v} add(a, y)
  c = {p} compare(b, x), direction=LT
  d = {v} select(c, b, y)
  m = {v} clamp(k, d, sb)
  n = {shape_text(narrow, (LONG,))} convert(m)
  w = {v} convert(n)
  ROOT r = {v} maximum(w, x)
}}
"""
    kernels = run_everywhere(text, [values(rng, dtype, (LONG,)), values(rng, dtype, (LONG,)), values(rng, dtype, ())])
    assert len(kernels) == 1  # one kernel for the whole chain


def test_index_mapping_fusion_random_shapes() -> None:
    """transpose, broadcast, slice, concatenate, pad, reverse, iota, convert and select in
    one fusion (the scalar path), on several random shapes."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        a, b = (int(d) for d in rng.integers(2, 7, size=2))
        c = int(rng.integers(40, 90))
        f32 = lambda *dims: shape_text("f32", dims)  # noqa: E731
        text = f"""HloModule t
ENTRY e {{
  x = {f32(a, b)} parameter(0)
  y = {shape_text('s32', (a, c, b))} parameter(1)
  q = {shape_text('pred', (b, a, c))} parameter(2)
  t = {f32(b, a)} transpose(x), dimensions={{1,0}}
  tb = {f32(b, a, c)} broadcast(t), dimensions={{0,1}}
  yt = {shape_text('s32', (b, a, c))} transpose(y), dimensions={{2,0,1}}
  yc = {f32(b, a, c)} convert(yt)
  s = {f32(b, a, c)} select(q, tb, yc)
  r = {f32(b, a, c)} reverse(s), dimensions={{2}}
  io = {f32(b, a, c)} iota(), iota_dimension=2
  m = {f32(b, a, c)} multiply(r, io)
  sl = {f32(b, a, c - 3)} slice(m), slice={{[0:{b}], [0:{a}], [1:{c - 2}]}}
  cc = {f32(b, a, 2 * c - 3)} concatenate(sl, s), dimensions={{2}}
  z = f32[] constant(-0)
  pd = {f32(b + 2, a, 2 * c - 2)} pad(cc, z), padding=1_1x0_0_0x0_1_0
  ROOT n = {shape_text("bf16", (b + 2, a, 2 * c - 2))} convert(pd)
}}
"""
        arrays = [values(rng, "f32", (a, b)), values(rng, "s32", (a, c, b)), values(rng, "pred", (b, a, c))]
        targets = TARGETS if seed == 0 else [DEFAULT]
        kernels = run_everywhere(text, arrays, targets)
        assert len(kernels) == 1


def test_fusions_written_in_the_text() -> None:
    """kLoop fusions as XLA writes them: a rank-0 parameter, an array constant, a shared
    producer inside the fusion, and a kLoop fusion holding a reduce (lowered op by op)."""
    n = 5000
    text = "HloModule t\n" + ADD_F32 + f"""fused_ew {{
  p0 = f32[{n}]{{0}} parameter(0)
  p1 = f32[] parameter(1)
  c = f32[4]{{0}} constant({{1, -0, 2.5, inf}})
  cb = f32[{n // 4},4]{{1,0}} broadcast(c), dimensions={{1}}
  cr = f32[{n}]{{0}} reshape(cb)
  b1 = f32[{n}]{{0}} broadcast(p1), dimensions={{}}
  e = f32[{n}]{{0}} exponential(p0)
  m = f32[{n}]{{0}} multiply(e, cr)
  ROOT s = f32[{n}]{{0}} subtract(m, e)
}}
fused_reduce {{
  p0 = f32[{n}]{{0}} parameter(0)
  z = f32[] constant(0)
  ab = f32[{n}]{{0}} abs(p0)
  ROOT r = f32[] reduce(ab, z), dimensions={{0}}, to_apply=add
}}
ENTRY e {{
  x = f32[{n}]{{0}} parameter(0)
  y = f32[] parameter(1)
  f = f32[{n}]{{0}} fusion(x, y), kind=kLoop, calls=fused_ew
  g = f32[] fusion(f), kind=kLoop, calls=fused_reduce
  ROOT t = (f32[{n}]{{0}}, f32[]) tuple(f, g)
}}
"""
    rng = np.random.default_rng(7)
    run_everywhere(text, [values(rng, "f32", (n,)), values(rng, "f32", ())])


def test_in_place_output_over_an_input_of_the_fusion() -> None:
    """A chain whose operand dies in it may share the operand's memory; a parameter also
    read at a fixed position (through a rank-0 slice) must not."""
    text = f"""HloModule t
ENTRY e {{
  x = f32[{LONG}]{{0}} parameter(0)
  a = f32[{LONG}]{{0}} negate(x)
  b = f32[{LONG}]{{0}} multiply(a, a)
  first = f32[1]{{0}} slice(b), slice={{[0:1]}}
  s = f32[] reshape(first)
  sb = f32[{LONG}]{{0}} broadcast(s), dimensions={{}}
  c = f32[{LONG}]{{0}} add(b, sb)
  d = f32[{LONG}]{{0}} sqrt(c)
  ROOT r = f32[{LONG}]{{0}} subtract(d, sb)
}}
"""
    rng = np.random.default_rng(11)
    run_everywhere(text, [values(rng, "f32", (LONG,))], [DEFAULT])


@pytest.mark.parametrize("dtype", ["f32", "f64", "s32"])
def test_input_fusions_written_in_the_text(dtype: str) -> None:
    """kInput fusions: a reduce over a generated chain, with long rows (two kernels, block
    partials), reduced leading dimensions through a transpose (lanes generated one by one),
    and a variadic argmax over a generated iota; the pinned reduction order is kept."""
    rows, long_row, cols = 3, 9000 + 5, 37
    rng = np.random.default_rng(sum(map(ord, dtype)))
    text = "HloModule t\n" + scalar_binary("add", dtype, "add") + f"""argmax {{
  a = {dtype}[] parameter(0)
  i = s32[] parameter(1)
  b = {dtype}[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  v = {dtype}[] select(gt, a, b)
  k = s32[] select(gt, i, j)
  ROOT t = ({dtype}[], s32[]) tuple(v, k)
}}
long_rows {{
  x = {shape_text(dtype, (rows, long_row))} parameter(0)
  s = {dtype}[] parameter(1)
  sb = {shape_text(dtype, (rows, long_row))} broadcast(s), dimensions={{}}
  m = {shape_text(dtype, (rows, long_row))} multiply(x, sb)
  a = {shape_text(dtype, (rows, long_row))} abs(m)
  z = {dtype}[] constant(0)
  ROOT r = {shape_text(dtype, (rows,))} reduce(a, z), dimensions={{1}}, to_apply=add
}}
leading {{
  x = {shape_text(dtype, (cols, rows * 11))} parameter(0)
  t = {shape_text(dtype, (rows * 11, cols))} transpose(x), dimensions={{1,0}}
  n = {shape_text(dtype, (rows * 11, cols))} negate(t)
  z = {dtype}[] constant(1)
  ROOT r = {shape_text(dtype, (cols,))} reduce(n, z), dimensions={{0}}, to_apply=add
}}
arg {{
  x = {shape_text(dtype, (cols, rows * 11))} parameter(0)
  y = {shape_text(dtype, (cols, rows * 11))} parameter(1)
  d = {shape_text(dtype, (cols, rows * 11))} subtract(x, y)
  io = s32[{cols},{rows * 11}]{{1,0}} iota(), iota_dimension=1
  lo = {dtype}[] parameter(2)
  zero = s32[] constant(0)
  ROOT r = ({shape_text(dtype, (cols,))}, s32[{cols}]{{0}}) reduce(d, io, lo, zero), dimensions={{1}}, to_apply=argmax
}}
ENTRY e {{
  x = {shape_text(dtype, (rows, long_row))} parameter(0)
  s = {dtype}[] parameter(1)
  w = {shape_text(dtype, (cols, rows * 11))} parameter(2)
  v = {shape_text(dtype, (cols, rows * 11))} parameter(3)
  f = {shape_text(dtype, (rows,))} fusion(x, s), kind=kInput, calls=long_rows
  g = {shape_text(dtype, (cols,))} fusion(w), kind=kInput, calls=leading
  h = ({shape_text(dtype, (cols,))}, s32[{cols}]{{0}}) fusion(w, v, s), kind=kInput, calls=arg
  h0 = {shape_text(dtype, (cols,))} get-tuple-element(h), index=0
  h1 = s32[{cols}]{{0}} get-tuple-element(h), index=1
  ROOT o = ({shape_text(dtype, (rows,))}, {shape_text(dtype, (cols,))}, {shape_text(dtype, (cols,))}, s32[{cols}]{{0}}) tuple(f, g, h0, h1)
}}
"""
    arrays = [values(rng, dtype, (rows, long_row)), values(rng, dtype, ()), values(rng, dtype, (cols, rows * 11)), values(rng, dtype, (cols, rows * 11))]
    kernels = run_everywhere(text, arrays, TARGETS if dtype == "f32" else [DEFAULT])
    # Two kernels for the long rows, one for each short reduction: no elementwise kernel.
    assert len(kernels) == 4


def test_multi_output_fusions() -> None:
    """A kLoop fusion with a tuple root written in the text (scalar path, through a
    transpose and a pad) and sibling fusions merged by the pipeline (vector path)."""
    a, b = 61, 53
    text = f"""HloModule t
fused {{
  x = f32[{a},{b}]{{1,0}} parameter(0)
  t = f32[{b},{a}]{{1,0}} transpose(x), dimensions={{1,0}}
  z = f32[] constant(0)
  pd = f32[{b + 1},{a}]{{1,0}} pad(t, z), padding=0_1x0_0
  n = f32[{b + 1},{a}]{{1,0}} negate(pd)
  c = s32[{b + 1},{a}]{{1,0}} convert(pd)
  ROOT r = (f32[{b + 1},{a}]{{1,0}}, s32[{b + 1},{a}]{{1,0}}) tuple(n, c)
}}
ENTRY e {{
  x = f32[{a},{b}]{{1,0}} parameter(0)
  y = f32[{LONG}]{{0}} parameter(1)
  w = f32[{LONG}]{{0}} parameter(2)
  f = (f32[{b + 1},{a}]{{1,0}}, s32[{b + 1},{a}]{{1,0}}) fusion(x), kind=kLoop, calls=fused
  f0 = f32[{b + 1},{a}]{{1,0}} get-tuple-element(f), index=0
  f1 = s32[{b + 1},{a}]{{1,0}} get-tuple-element(f), index=1
  p = f32[{LONG}]{{0}} multiply(y, w)
  q = f32[{LONG}]{{0}} negate(p)
  u = f32[{LONG}]{{0}} subtract(y, w)
  v = f32[{LONG}]{{0}} abs(u)
  ROOT o = (f32[{b + 1},{a}]{{1,0}}, s32[{b + 1},{a}]{{1,0}}, f32[{LONG}]{{0}}, f32[{LONG}]{{0}}) tuple(f0, f1, q, v)
}}
"""
    rng = np.random.default_rng(5)
    kernels = run_everywhere(text, [values(rng, "f32", (a, b)), values(rng, "f32", (LONG,)), values(rng, "f32", (LONG,))])
    assert len(kernels) == 2


@pytest.mark.parametrize("dtype", ["f32", "f64", "s32"])
def test_dot_epilogue_fusions(dtype: str) -> None:
    """kOutput fusions formed by the pipeline: bias (a broadcast row: the scalar epilogue),
    activation and residual after a dot whose rows and columns do not fill the row blocks
    and panels, and a batched dot with a same-shape epilogue (the vector epilogue)."""
    m, k, n = 1001, 256, 41
    rng = np.random.default_rng(sum(map(ord, dtype)) + 1)
    s = lambda *dims: shape_text(dtype, dims)  # noqa: E731
    text = f"""HloModule t
ENTRY e {{
  x = {s(m, k)} parameter(0)
  w = {s(k, n)} parameter(1)
  b = {s(n)} parameter(2)
  r = {s(m, n)} parameter(3)
  y = {s(3, 5, 7)} parameter(4)
  d = {s(m, n)} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = {s(m, n)} broadcast(b), dimensions={{1}}
  a = {s(m, n)} add(d, bb)
  z = {dtype}[] constant(0)
  zb = {s(m, n)} broadcast(z), dimensions={{}}
  act = {s(m, n)} maximum(a, zb)
  o = {s(m, n)} subtract(act, r)
  e = {s(3, 5, 5)} dot(y, y), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
  en = {s(3, 5, 5)} negate(e)
  em = {s(3, 5, 5)} multiply(en, e)
  ROOT t = ({s(m, n)}, {s(3, 5, 5)}) tuple(o, em)
}}
"""
    arrays = [values(rng, dtype, (m, k)), values(rng, dtype, (k, n)), values(rng, dtype, (n,)), values(rng, dtype, (m, n)), values(rng, dtype, (3, 5, 7))]
    kernels = run_everywhere(text, arrays, TARGETS if dtype == "f32" else [DEFAULT])
    # Only the dots' kernels (packing, the gemm): no separate elementwise kernel.
    assert kernels and all(name.startswith("dot") for name in kernels), kernels


def _loop_modes(text: str, target: str = DEFAULT) -> list[str]:
    """The loop mode of every kLoop fusion the default pipeline forms."""
    from compiler.codegen.elementwise import vector_width
    from compiler.codegen.fusion import loop_mode, results_of
    from compiler.driver import optimize

    config = load_config().with_target(cpu=target)
    module = optimize(load_program(text), config)
    modes = []
    for instruction in module.entry.instructions:
        if instruction.opcode == "fusion" and instruction.attrs.get("kind") == "kLoop":
            computation = instruction.attrs["calls"]
            modes.append(loop_mode(computation, results_of(computation), vector_width(config)))  # type: ignore[arg-type]
    return modes


@pytest.mark.parametrize("length", [7, 16, 37, 64])
def test_row_path_fusions(length: int) -> None:
    """Index maps that keep rows of the last dimension run a vector per row chunk: bias rows,
    per-row values (softmax), transposes keeping the last dimension, slices, reverse, pad and
    concatenate on other dimensions, iota, and reshapes keeping the row length; rows shorter
    than, equal to and longer than the vector, with a scalar tail."""
    rng = np.random.default_rng(length)
    a, b, n = 3, 5, length
    f = lambda *dims: shape_text("f32", dims)  # noqa: E731
    text = f"""HloModule t
r {{
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT m = f32[] maximum(p, q)
}}
ENTRY e {{
  x = {f(a, b, n)} parameter(0)
  bias = {f(n)} parameter(1)
  y = {f(b, a, n)} parameter(2)
  bb = {f(a, b, n)} broadcast(bias), dimensions={{2}}
  xb = {f(a, b, n)} add(x, bb)
  init = f32[] constant(-inf)
  mx = {f(a, b)} reduce(x, init), dimensions={{2}}, to_apply=r
  mb = {f(a, b, n)} broadcast(mx), dimensions={{0,1}}
  sh = {f(a, b, n)} subtract(xb, mb)
  ex = {f(a, b, n)} exponential(sh)
  yt = {f(a, b, n)} transpose(y), dimensions={{1,0,2}}
  rv = {f(a, b, n)} reverse(yt), dimensions={{0}}
  io = {f(a, b, n)} iota(), iota_dimension=2
  i0 = {f(a, b, n)} iota(), iota_dimension=1
  s1 = {f(a, b, n)} multiply(ex, rv)
  s2 = {f(a, b, n)} add(s1, io)
  s3 = {f(a, b, n)} subtract(s2, i0)
  sl = {f(2, b, n)} slice(s3), slice={{[0:3:2], [0:{b}], [0:{n}]}}
  z = f32[] constant(-0)
  pd = {f(5, b, n)} pad(sl, z), padding=1_1_1x0_0x0_0
  cc = {f(8, b, n)} concatenate(pd, s3), dimensions={{0}}
  ROOT rs = {f(8 * b, n)} reshape(cc)
}}
"""
    arrays = [values(rng, "f32", (a, b, n)), values(rng, "f32", (n,)), values(rng, "f32", (b, a, n))]
    run_everywhere(text, arrays)
    modes = _loop_modes(text)
    if length >= 8:
        assert "row" in modes, modes


@pytest.mark.parametrize("rows,length", [(4, 32), (6, 64)])
def test_row_path_through_reshapes_of_whole_vectors(rows: int, length: int) -> None:
    """A reshape that changes the row length keeps the row path when both lengths are
    multiples of the vector width (an aligned chunk never crosses an operand row)."""
    rng = np.random.default_rng(rows)
    text = f"""HloModule t
ENTRY e {{
  x = f32[{rows},2,{length // 2}] parameter(0)
  c = f32[{rows}] parameter(1)
  xr = f32[{rows},{length}] reshape(x)
  cb = f32[{rows},{length}] broadcast(c), dimensions={{0}}
  ROOT m = f32[{rows},{length}] multiply(xr, cb)
}}
"""
    run_everywhere(text, [values(rng, "f32", (rows, 2, length // 2)), values(rng, "f32", (rows,))])
    assert _loop_modes(text) == ["row"]


@pytest.mark.parametrize("length,reduced", [(32, "2"), (48, "1,2"), (40, "2")])
def test_row_path_in_reduction_input_fusions(length: int, reduced: str) -> None:
    """A softmax denominator: the reduce generates exp(x - max) through a per-row broadcast,
    16 lanes at a time when rows are multiples of 16 (else lane by lane), in the contract's
    order either way."""
    rng = np.random.default_rng(length)
    a, b = 3, 5
    kept = "3" if reduced == "1,2" else "3,5"
    text = f"""HloModule t
mx {{
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT m = f32[] maximum(p, q)
}}
sum {{
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}}
ENTRY e {{
  x = f32[{a},{b},{length}] parameter(0)
  init = f32[] constant(-inf)
  m = f32[{a},{b}] reduce(x, init), dimensions={{2}}, to_apply=mx
  mb = f32[{a},{b},{length}] broadcast(m), dimensions={{0,1}}
  d = f32[{a},{b},{length}] subtract(x, mb)
  ex = f32[{a},{b},{length}] exponential(d)
  zero = f32[] constant(0)
  ROOT s = f32[{kept}] reduce(ex, zero), dimensions={{{reduced}}}, to_apply=sum
}}
"""
    # Mostly finite rows (NaN or inf in a row makes its whole sum NaN), specials in one row.
    x = rng.standard_normal((a, b, length)).astype(np.float32)
    x[0, 0] = values(rng, "f32", (length,))
    run_everywhere(text, [x])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_nans_left_as_made_inside_a_fusion_are_canonical_wherever_bits_are_seen(dtype: str) -> None:
    """Inside a fusion an f32/f64 add, subtract, multiply, divide, negate, abs, sqrt or
    select whose users only test NaN-ness keeps the NaN its IEEE instruction made (x86 makes
    inf - inf the negative 0xFFC00000...). Every place that sees bits gets the canonical NaN:
    the stored results, a bitcast-convert, a TOTALORDER compare, a convert, the math library
    (exp) and a per-row value broadcast along rows (computed once per row on the row path)."""
    rng = np.random.default_rng(7)
    rows, n = 6, 40
    v, p = shape_text(dtype, (rows, n)), shape_text("pred", (rows, n))
    bits = "s32" if dtype == "f32" else "s64"
    outputs = f"({v}, {v}, {shape_text(bits, (rows, n))}, {p}, {shape_text('bf16', (rows, n))}, {v})"
    text = f"""HloModule t
fused {{
  x = {v} parameter(0)
  y = {v} parameter(1)
  r = {shape_text(dtype, (rows,))} parameter(2)
  inf = {dtype}[] constant(inf)
  binf = {v} broadcast(inf), dimensions={{}}
  i = {v} subtract(binf, binf)
  a = {v} multiply(x, i)
  b = {v} add(a, y)
  q = {v} divide(b, x)
  s = {v} sqrt(q)
  ng = {v} negate(s)
  ab = {v} abs(ng)
  c = {p} compare(ab, y), direction=NE
  sel = {v} select(c, ng, y)
  mx = {v} maximum(sel, x)
  rr = {shape_text(dtype, (rows,))} subtract(r, r)
  rn = {shape_text(dtype, (rows,))} negate(rr)
  rb = {v} broadcast(rn), dimensions={{0}}
  w = {v} add(mx, rb)
  b2 = {v} subtract(a, y)
  bc = {shape_text(bits, (rows, n))} bitcast-convert(b2)
  n2 = {v} negate(q)
  e = {v} exponential(n2)
  n3 = {v} multiply(s, y)
  t = {p} compare(n3, y), direction=LT, type=TOTALORDER
  h = {shape_text("bf16", (rows, n))} convert(ab)
  ROOT out = {outputs} tuple(w, e, bc, t, h, sel)
}}
ENTRY e {{
  x = {v} parameter(0)
  y = {v} parameter(1)
  r = {shape_text(dtype, (rows,))} parameter(2)
  ROOT f = {outputs} fusion(x, y, r), kind=kLoop, calls=fused
}}
"""
    x, y = values(rng, dtype, (rows, n)), values(rng, dtype, (rows, n))
    r = values(rng, dtype, (rows,))
    r[::2] = np.inf  # inf - inf: a NaN made per row, broadcast along it
    run_everywhere(text, [x, y, r])
    optimized, _ = optimized_plan(load_program(text), load_config())
    fusions = [i.attrs["calls"] for c in optimized.computations for i in c.instructions if i.opcode == "fusion"]
    deferred = sorted(i.opcode for f in fusions for i in f.instructions if id(i) in uncanonical_values(f))  # type: ignore[union-attr,arg-type]
    # Left as made: i, a, b, q, s, ng and rr. Canonical where made: b2 (it feeds a
    # bitcast-convert), n2 (exp), n3 (a TOTALORDER compare), ab (a convert), rn (a broadcast),
    # mx (stored, as w and sel are).
    assert deferred == ["add", "divide", "multiply", "negate", "sqrt", "subtract", "subtract"], deferred

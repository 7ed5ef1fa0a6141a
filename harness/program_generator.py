"""Random valid HLO modules for the differential fuzzer of the compiler
(tests/codegen/test_random_programs.py samples it; tools/fuzz_backend.py runs campaigns).

`programs()` is a hypothesis strategy: a module mixes elementwise ops of every element type,
compares and selects, conversions and bitcasts, the index-mapping ops (broadcast, reshape,
transpose, reverse, slice, concatenate, pad, iota), reduces and reduce-windows, dots and
convolutions, dynamic slices and updates, sorts, while loops and conditionals, over shapes of
rank 0 to 5 with sizes 0 and 1 among them, and dense layers (a dot with a bias and activation
epilogue). Its inputs mix NaN, infinities, -0, subnormals and
the extreme integers into random values. Hypothesis shrinks a failing module to a small one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

FLOATS = ("f16", "bf16", "f32", "f64")
SIGNED = ("s8", "s32", "s64")
UNSIGNED = ("u8", "u32")
INTEGERS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTEGERS
DTYPES = (*NUMERIC, "pred")
NUMPY = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "s8": np.dtype(np.int8),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u32": np.dtype(np.uint32),
    "pred": np.dtype(np.bool_),
}
# Types of one width, between which bitcast-convert is elementwise.
SAME_WIDTH = (("f16", "bf16"), ("f32", "s32", "u32"), ("f64", "s64"), ("s8", "u8"))

FLOAT_UNARY = ["negate", "abs", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt", "rsqrt", "cbrt", "erf", "sine", "cosine"]
INTEGER_UNARY = {"signed": ["negate", "abs", "sign", "not"], "unsigned": ["not"], "pred": ["not"]}
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2"]
INTEGER_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic"]
PRED_BINARY = ["and", "or", "xor"]
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
# Reduction computations per kind of element type, with their init values.
REDUCERS = {
    "float": [("add", "0"), ("multiply", "1"), ("maximum", "-inf"), ("minimum", "inf")],
    "integer": [("add", "0"), ("multiply", "1"), ("maximum", None), ("minimum", None), ("xor", "0")],
    "pred": [("and", "true"), ("or", "false")],
}


@dataclass(frozen=True)
class Sizes:
    """The sizes an array's dimensions are drawn from, and the most elements it may have."""

    choices: tuple[int, ...]
    max_elements: int


# Small arrays, sizes 0 and 1 among them: the reference evaluator checks every module.
SMALL = Sizes((0, 1, 1, 2, 2, 3, 3, 4, 5, 7, 8), 192)
# Arrays large enough that kernels split their work among threads (tools/contention_campaign.py),
# with sizes that end vectors, panels and blocks in partial ones.
LARGE = Sizes((1, 2, 3, 5, 8, 13, 16, 31, 64, 100, 128, 257), 1 << 17)


@dataclass(frozen=True)
class Value:
    """An array value of the entry computation."""

    name: str
    dtype: str
    dims: tuple[int, ...]

    @property
    def shape(self) -> str:
        return shape_text(self.dtype, self.dims)


def shape_text(dtype: str, dims: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


def kind_of(dtype: str) -> str:
    return "float" if dtype in FLOATS else "pred" if dtype == "pred" else "integer"


def literal(dtype: str, value: float | int | str) -> str:
    """A scalar constant's literal text."""
    if dtype == "pred":
        return "true" if value in (True, 1, "true") else "false"
    return str(value)


@dataclass
class ModuleBuilder:
    """The entry computation being drawn, and the helper computations it calls."""

    lines: list[str] = field(default_factory=list)
    parameters: list[Value] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    computations: dict[str, str] = field(default_factory=dict)
    sizes: Sizes = SMALL
    _count: int = 0

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}.{self._count}"

    def add(self, dtype: str, dims: tuple[int, ...], text: str, prefix: str = "v", keep: bool = True) -> Value:
        """An array instruction; `keep`: later ops may use its value."""
        value = Value(self.line(prefix, shape_text(dtype, tuple(dims)), text), dtype, tuple(dims))
        if keep:
            self.values.append(value)
        return value

    def line(self, prefix: str, shape: str, text: str) -> str:
        """An instruction of any shape (a tuple's too); returns its name."""
        name = self.fresh(prefix)
        self.lines.append(f"  {name} = {shape} {text}")
        return name

    def parameter(self, dtype: str, dims: tuple[int, ...], keep: bool = True) -> Value:
        value = self.add(dtype, dims, f"parameter({len(self.parameters)})", "p", keep)
        self.parameters.append(value)
        return value

    def constant(self, dtype: str, value: float | int | str) -> Value:
        return self.add(dtype, (), f"constant({literal(dtype, value)})", "c", keep=False)

    def scalar_computation(self, opcode: str, dtype: str) -> str:
        """A computation (x, y) -> opcode(x, y) on scalars of `dtype`, defined once."""
        name = f"{opcode}_{dtype}"
        if name not in self.computations:
            self.computations[name] = (
                f"{name} {{\n  x = {dtype}[] parameter(0)\n  y = {dtype}[] parameter(1)\n"
                f"  ROOT r = {dtype}[] {opcode}(x, y)\n}}\n"
            )
        return name

    def comparator(self, dtype: str, direction: str, total: bool) -> str:
        name = f"compare_{dtype}_{direction}{'_total' if total else ''}"
        if name not in self.computations:
            order = ", type=TOTALORDER" if total else ""
            self.computations[name] = (
                f"{name} {{\n  x = {dtype}[] parameter(0)\n  y = {dtype}[] parameter(1)\n"
                f"  ROOT r = pred[] compare(x, y), direction={direction}{order}\n}}\n"
            )
        return name

    def used(self, value: Value) -> bool:
        """Whether an instruction of the entry takes `value` as an operand."""
        pattern = re.compile(rf"[(, ]{re.escape(value.name)}[,)]")
        return any(pattern.search(line.split("=", 1)[1]) for line in self.lines)

    def instruction_count(self) -> int:
        return len(self.lines)

    def text(self, results: list[Value]) -> str:
        shapes = ", ".join(v.shape for v in results)
        names = ", ".join(v.name for v in results)
        entry = "\n".join([*self.lines, f"  ROOT out = ({shapes}) tuple({names})"])
        helpers = "\n".join(self.computations[name] for name in self.computations)
        return f"HloModule fuzz\n\n{helpers}\nENTRY main {{\n{entry}\n}}\n"


Draw = Callable


def _dims(draw: Draw, b: ModuleBuilder, rank: int | None = None) -> tuple[int, ...]:
    rank = draw(st.integers(0, 5)) if rank is None else rank
    dims = tuple(draw(st.sampled_from(b.sizes.choices)) for _ in range(rank))
    while math.prod(dims) > b.sizes.max_elements:
        dims = tuple(max(d // 2, 1) for d in dims)
    return dims


def _pick(draw: Draw, b: ModuleBuilder, accept: Callable[[Value], bool] = lambda v: True) -> Value | None:
    choices = [v for v in b.values if accept(v)]
    return draw(st.sampled_from(choices)) if choices else None


def _partner(draw: Draw, b: ModuleBuilder, value: Value, dtype: str | None = None) -> Value:
    """Another value of `value`'s shape (and `dtype`, by default its own): an existing one, or
    a new parameter."""
    dtype = dtype or value.dtype
    same = [v for v in b.values if v.dtype == dtype and v.dims == value.dims]
    if same and draw(st.integers(0, 3)) > 0:
        return draw(st.sampled_from(same))
    return b.parameter(dtype, value.dims)


def _subset(draw: Draw, rank: int) -> list[int]:
    return sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank))) if rank else []


# --- the ops -----------------------------------------------------------------------------
def unary(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    if v.dtype in FLOATS:
        opcode = draw(st.sampled_from([*FLOAT_UNARY, "is-finite"]))
        dtype = "pred" if opcode == "is-finite" else v.dtype
    else:
        opcode = draw(st.sampled_from(INTEGER_UNARY["pred" if v.dtype == "pred" else "signed" if v.dtype in SIGNED else "unsigned"]))
        dtype = v.dtype
    return b.add(dtype, v.dims, f"{opcode}({v.name})")


def binary(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    ops = FLOAT_BINARY if v.dtype in FLOATS else PRED_BINARY if v.dtype == "pred" else INTEGER_BINARY
    w = _partner(draw, b, v)
    return b.add(v.dtype, v.dims, f"{draw(st.sampled_from(ops))}({v.name}, {w.name})")


def compare(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    w = _partner(draw, b, v)
    direction = draw(st.sampled_from(DIRECTIONS if v.dtype != "pred" else ("EQ", "NE")))
    order = ", type=TOTALORDER" if v.dtype in FLOATS and draw(st.booleans()) else ""
    return b.add("pred", v.dims, f"compare({v.name}, {w.name}), direction={direction}{order}")


def select(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    predicate = _partner(draw, b, v, "pred")
    w = _partner(draw, b, v)
    return b.add(v.dtype, v.dims, f"select({predicate.name}, {v.name}, {w.name})")


def clamp(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: v.dtype != "pred")
    if v is None:
        return None
    if draw(st.booleans()):
        low, high = b.constant(v.dtype, draw(st.sampled_from([0, 1, 2]))), b.constant(v.dtype, draw(st.sampled_from([3, 5, 100])))
    else:
        low, high = _partner(draw, b, v), _partner(draw, b, v)
    return b.add(v.dtype, v.dims, f"clamp({low.name}, {v.name}, {high.name})")


def convert(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    return b.add(draw(st.sampled_from(DTYPES)), v.dims, f"convert({v.name})")


def bitcast_convert(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: v.dtype != "pred")
    if v is None:
        return None
    group = next(g for g in SAME_WIDTH if v.dtype in g)
    return b.add(draw(st.sampled_from(group)), v.dims, f"bitcast-convert({v.name})")


def broadcast(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: v.dims and len(v.dims) < 5 or not v.dims)
    if v is None:
        return None
    extra = _dims(draw, b, draw(st.integers(1, 5 - len(v.dims))))
    rank = len(v.dims) + len(extra)
    kept = sorted(draw(st.permutations(range(rank)))[: len(v.dims)])
    dims = list(extra)
    for position, size in zip(kept, v.dims, strict=True):
        dims.insert(position, size)
    if math.prod(dims) > b.sizes.max_elements * 2:
        return None
    return b.add(v.dtype, tuple(dims), f"broadcast({v.name}), dimensions={{{','.join(map(str, kept))}}}")


def reshape(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b)
    if v is None:
        return None
    count = math.prod(v.dims)
    dims: list[int] = []
    remaining = count
    for _ in range(draw(st.integers(0, 4))):
        factors = [f for f in range(1, remaining + 1) if remaining % f == 0] if remaining else [0, 1, 3]
        size = draw(st.sampled_from(factors))
        dims.append(size)
        if size:
            remaining //= size
    if count and remaining != 1 or not count and 0 not in dims:
        dims.append(remaining if count else 0)
    return b.add(v.dtype, tuple(dims), f"reshape({v.name})")


def transpose(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 2)
    if v is None:
        return None
    order = draw(st.permutations(range(len(v.dims))))
    return b.add(v.dtype, tuple(v.dims[i] for i in order), f"transpose({v.name}), dimensions={{{','.join(map(str, order))}}}")


def reverse(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    axes = _subset(draw, len(v.dims))
    return b.add(v.dtype, v.dims, f"reverse({v.name}), dimensions={{{','.join(map(str, axes))}}}")


def slice_(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    parts, dims = [], []
    for size in v.dims:
        start = draw(st.integers(0, size))
        limit = draw(st.integers(start, size))
        stride = draw(st.integers(1, 3))
        parts.append(f"[{start}:{limit}:{stride}]")
        dims.append(-(-(limit - start) // stride))
    return b.add(v.dtype, tuple(dims), f"slice({v.name}), slice={{{', '.join(parts)}}}")


def concatenate(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    axis = draw(st.integers(0, len(v.dims) - 1))
    others = [w for w in b.values if w.dtype == v.dtype and len(w.dims) == len(v.dims) and all(a == c for i, (a, c) in enumerate(zip(w.dims, v.dims, strict=True)) if i != axis)]
    operands = [v, *draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))]
    dims = list(v.dims)
    dims[axis] = sum(w.dims[axis] for w in operands)
    if math.prod(dims) > b.sizes.max_elements * 2:
        return None
    return b.add(v.dtype, tuple(dims), f"concatenate({', '.join(w.name for w in operands)}), dimensions={{{axis}}}")


def pad(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    padding = b.constant(v.dtype, _pad_value(draw, v.dtype))
    parts, dims = [], []
    for size in v.dims:
        interior = draw(st.integers(0, 2)) if size > 1 else 0
        stretched = size + max(size - 1, 0) * interior
        low = draw(st.integers(-min(stretched, 2), 2))
        high = draw(st.integers(-min(stretched + low, 2), 2)) if stretched + low > 0 else draw(st.integers(max(-(stretched + low), 0), 2))
        parts.append(f"{low}_{high}" + (f"_{interior}" if interior else ""))
        dims.append(stretched + low + high)
    if min(dims) < 0 or math.prod(dims) > b.sizes.max_elements * 2:
        return None
    return b.add(v.dtype, tuple(dims), f"pad({v.name}, {padding.name}), padding={'x'.join(parts)}")


def _pad_value(draw: Draw, dtype: str) -> float | int | str:
    if dtype == "pred":
        return draw(st.sampled_from(["true", "false"]))
    if dtype in FLOATS:
        return draw(st.sampled_from(["0", "-0", "1.5", "nan", "-inf"]))
    return draw(st.sampled_from([0, 1, 7]))


def iota(draw: Draw, b: ModuleBuilder) -> Value | None:
    dims = _dims(draw, b, draw(st.integers(1, 4)))
    dtype = draw(st.sampled_from(NUMERIC))
    return b.add(dtype, dims, f"iota(), iota_dimension={draw(st.integers(0, len(dims) - 1))}")


def reduce(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    opcode, init = draw(st.sampled_from(REDUCERS[kind_of(v.dtype)]))
    if init is None:
        info = np.iinfo(NUMPY[v.dtype])
        init = str(info.min if opcode == "maximum" else info.max)
    axes = _subset(draw, len(v.dims)) or [0]
    start = b.constant(v.dtype, init)
    dims = tuple(d for i, d in enumerate(v.dims) if i not in axes)
    to_apply = b.scalar_computation(opcode, v.dtype)
    return b.add(v.dtype, dims, f"reduce({v.name}, {start.name}), dimensions={{{','.join(map(str, axes))}}}, to_apply={to_apply}")


def reduce_window(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1 and v.dtype != "pred")
    if v is None:
        return None
    opcode, init = draw(st.sampled_from([r for r in REDUCERS[kind_of(v.dtype)] if r[1] is not None and r[0] != "xor"]))
    sizes, strides, pads, dims = [], [], [], []
    for size in v.dims:
        low, high = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        window = draw(st.integers(1, max(min(size + low + high, 3), 1)))
        stride = draw(st.integers(1, 2))
        extent = size + low + high - window
        if extent < 0:
            return None
        sizes.append(window)
        strides.append(stride)
        pads.append(f"{low}_{high}")
        dims.append(extent // stride + 1)
    start = b.constant(v.dtype, init)
    window_text = f"size={'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))} pad={'x'.join(pads)}"
    to_apply = b.scalar_computation(opcode, v.dtype)
    return b.add(v.dtype, tuple(dims), f"reduce-window({v.name}, {start.name}), window={{{window_text}}}, to_apply={to_apply}")


def dot(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: 1 <= len(v.dims) <= 3 and v.dtype in ("f32", "f64", "bf16", "f16", "s32"))
    if v is None:
        return None
    rank = len(v.dims)
    batch = draw(st.integers(0, rank - 1))
    contracting = draw(st.integers(batch, rank - 1))
    free = draw(st.sampled_from(b.sizes.choices[1:]))
    rhs_dims = (*v.dims[:batch], v.dims[contracting], free)
    rhs = b.parameter(v.dtype, rhs_dims)
    lhs_free = [d for i, d in enumerate(v.dims) if i >= batch and i != contracting]
    dims = (*v.dims[:batch], *lhs_free, free)
    batch_dims = ",".join(map(str, range(batch)))
    return b.add(
        v.dtype,
        dims,
        f"dot({v.name}, {rhs.name}), lhs_batch_dims={{{batch_dims}}}, lhs_contracting_dims={{{contracting}}}, "
        f"rhs_batch_dims={{{batch_dims}}}, rhs_contracting_dims={{{batch}}}",
    )


def dense(draw: Draw, b: ModuleBuilder) -> Value | None:
    """A dense layer as JAX emits it: a dot, a bias broadcast along the last dimension and
    an activation, which the passes make one output fusion (the epilogue runs inside the
    gemm's work items)."""
    v = _pick(draw, b, lambda v: 1 <= len(v.dims) <= 3 and v.dims[-1] > 0 and v.dtype in ("f32", "f64"))
    if v is None or draw(st.booleans()):
        v = b.parameter(draw(st.sampled_from(("f32", "f64"))), _dims(draw, b, draw(st.integers(1, 3))), keep=False)
    free = draw(st.sampled_from(b.sizes.choices[1:]))
    dims = (*v.dims[:-1], free)
    if math.prod(dims) > b.sizes.max_elements * 2 or v.dims[-1] * free > b.sizes.max_elements * 2:
        return None
    weights = b.parameter(v.dtype, (v.dims[-1], free), keep=False)
    bias = b.parameter(v.dtype, (free,), keep=False)
    product = b.add(v.dtype, dims, f"dot({v.name}, {weights.name}), lhs_contracting_dims={{{len(v.dims) - 1}}}, rhs_contracting_dims={{0}}", keep=False)
    spread = b.add(v.dtype, dims, f"broadcast({bias.name}), dimensions={{{len(dims) - 1}}}", keep=False)
    biased = b.add(v.dtype, dims, f"add({product.name}, {spread.name})", keep=False)
    return b.add(v.dtype, dims, f"{draw(st.sampled_from(['tanh', 'logistic', 'erf', 'exponential-minus-one']))}({biased.name})")


def convolution(draw: Draw, b: ModuleBuilder) -> Value | None:
    dtype = draw(st.sampled_from(("f32", "f64", "bf16")))
    spatial = draw(st.integers(1, 2))
    batch, features, outputs = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 6)) for _ in range(spatial)]
    windows = [draw(st.integers(1, min(s, 3))) for s in sizes]
    strides = [draw(st.integers(1, 2)) for _ in range(spatial)]
    pads = [(draw(st.integers(0, 1)), draw(st.integers(0, 1))) for _ in range(spatial)]
    lhs = b.parameter(dtype, (batch, *sizes, features), keep=False)
    rhs = b.parameter(dtype, (*windows, features, outputs), keep=False)
    out = [(s + lo + hi - w) // st_ + 1 for s, w, st_, (lo, hi) in zip(sizes, windows, strides, pads, strict=True)]
    letters = "01"[:spatial]
    window = f"size={'x'.join(map(str, windows))} stride={'x'.join(map(str, strides))} pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)}"
    return b.add(dtype, (batch, *out, outputs), f"convolution({lhs.name}, {rhs.name}), window={{{window}}}, dim_labels=b{letters}f_{letters}io->b{letters}f")


def dynamic_slice(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    sizes = [draw(st.integers(0, d)) for d in v.dims]
    indices = [b.parameter("s32", (), keep=False) for _ in v.dims]
    names = ", ".join(i.name for i in indices)
    return b.add(v.dtype, tuple(sizes), f"dynamic-slice({v.name}, {names}), dynamic_slice_sizes={{{','.join(map(str, sizes))}}}")


def dynamic_update_slice(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    sizes = tuple(draw(st.integers(0, d)) for d in v.dims)
    update = _pick(draw, b, lambda w: w.dtype == v.dtype and w.dims == sizes) or b.parameter(v.dtype, sizes)
    indices = [b.parameter("s32", (), keep=False) for _ in v.dims]
    names = ", ".join(i.name for i in indices)
    return b.add(v.dtype, v.dims, f"dynamic-update-slice({v.name}, {update.name}, {names})")


def sort(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: len(v.dims) >= 1)
    if v is None:
        return None
    axis = draw(st.integers(0, len(v.dims) - 1))
    direction = draw(st.sampled_from(("LT", "GT") if v.dtype != "pred" else ("LT",)))
    comparator = b.comparator(v.dtype, direction, v.dtype in FLOATS and draw(st.booleans()))
    stable = ", is_stable=true" if draw(st.booleans()) else ""
    return b.add(v.dtype, v.dims, f"sort({v.name}), dimensions={{{axis}}}{stable}, to_apply={comparator}")


def while_loop(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: v.dtype != "pred")
    if v is None:
        return None
    trips = draw(st.integers(0, 3))
    opcode = draw(st.sampled_from(["add", "multiply", "maximum", "subtract"]))
    name = b.fresh("loop").replace(".", "_")
    state = f"(s32[], {v.shape})"
    b.computations[f"{name}_cond"] = (
        f"{name}_cond {{\n  s = {state} parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        f"  n = s32[] constant({trips})\n  ROOT less = pred[] compare(i, n), direction=LT\n}}\n"
    )
    b.computations[f"{name}_body"] = (
        f"{name}_body {{\n  s = {state} parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        f"  x = {v.shape} get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
        f"  next = s32[] add(i, one)\n  y = {v.shape} {opcode}(x, x)\n  ROOT t = {state} tuple(next, y)\n}}\n"
    )
    zero = b.constant("s32", 0)
    start = b.line("t", state, f"tuple({zero.name}, {v.name})")
    loop = b.line("w", state, f"while({start}), condition={name}_cond, body={name}_body")
    return b.add(v.dtype, v.dims, f"get-tuple-element({loop}), index=1")


def conditional(draw: Draw, b: ModuleBuilder) -> Value | None:
    v = _pick(draw, b, lambda v: v.dtype in FLOATS or v.dtype in SIGNED)
    if v is None:
        return None
    name = b.fresh("branch").replace(".", "_")
    for suffix, opcode in (("a", "negate"), ("b", "abs")):
        b.computations[f"{name}_{suffix}"] = f"{name}_{suffix} {{\n  x = {v.shape} parameter(0)\n  ROOT y = {v.shape} {opcode}(x)\n}}\n"
    predicate = b.parameter("pred", (), keep=False)
    return b.add(
        v.dtype, v.dims, f"conditional({predicate.name}, {v.name}, {v.name}), true_computation={name}_a, false_computation={name}_b"
    )


OPS: tuple[tuple[Callable[[Draw, ModuleBuilder], Value | None], int], ...] = (
    (unary, 6),
    (binary, 6),
    (compare, 2),
    (select, 2),
    (clamp, 1),
    (convert, 3),
    (bitcast_convert, 1),
    (broadcast, 2),
    (reshape, 2),
    (transpose, 2),
    (reverse, 1),
    (slice_, 2),
    (concatenate, 1),
    (pad, 1),
    (iota, 1),
    (reduce, 3),
    (reduce_window, 1),
    (dot, 2),
    (dense, 1),
    (convolution, 1),
    (dynamic_slice, 1),
    (dynamic_update_slice, 1),
    (sort, 1),
    (while_loop, 1),
    (conditional, 1),
)
_WEIGHTED = tuple(op for op, weight in OPS for _ in range(weight))


@st.composite
def programs(draw: Draw, min_instructions: int = 20, max_instructions: int = 40, sizes: Sizes = SMALL, every_sink: bool = False) -> str:
    """The HLO text of a random valid module of at least `min_instructions` instructions,
    its arrays of `sizes`. Its results are the last value computed and up to two others;
    with `every_sink`, also every computed value no other instruction uses, so that nothing
    drawn is dead code."""
    b = ModuleBuilder(sizes=sizes)
    for _ in range(draw(st.integers(1, 3))):
        b.parameter(draw(st.sampled_from(DTYPES)), _dims(draw, b))
    target = draw(st.integers(min_instructions, max_instructions))
    attempts = 0
    while b.instruction_count() < target and attempts < 4 * max_instructions:
        attempts += 1
        draw(st.sampled_from(_WEIGHTED))(draw, b)
    computed = [v for v in b.values if v not in b.parameters] or b.values
    results = [computed[-1], *draw(st.lists(st.sampled_from(computed), max_size=2, unique=True))]
    if every_sink:
        results += [v for v in computed if not b.used(v)]
    return b.text(list(dict.fromkeys(results)))


def inputs(text_parameters: list[tuple[str, tuple[int, ...]]], seed: int) -> list[np.ndarray]:
    """Arguments for parameters given as (element type, dims): random values with NaN, the
    infinities, -0, subnormals and the extreme integers mixed in. s32 scalars (the fuzzer's
    dynamic-slice indices) are small, negative and past the end too."""
    rng = np.random.default_rng(seed)
    return [_array(rng, dtype, dims) for dtype, dims in text_parameters]


def _array(rng: np.random.Generator, dtype: str, dims: tuple[int, ...]) -> np.ndarray:
    size = math.prod(dims)
    numpy_type = NUMPY[dtype]
    if dtype == "pred":
        return (rng.random(size) < 0.5).reshape(dims)
    if dtype in FLOATS:
        info = ml_dtypes.finfo(numpy_type)
        base = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, float(info.smallest_subnormal), -float(info.smallest_subnormal) * 3, float(info.max), -float(info.max), 0.5, -2.5, 1.0])
        mask = rng.random(size) < 0.25
        base[mask] = rng.choice(specials, int(mask.sum()))
        return base.astype(numpy_type).reshape(dims)
    if dtype == "s32" and not dims:
        return np.array(rng.choice([-3, -1, 0, 1, 2, 3, 7, 1 << 30]), dtype=numpy_type)
    info = np.iinfo(numpy_type)
    out = rng.integers(info.min, info.max, size=size, dtype=numpy_type, endpoint=True)
    mask = rng.random(size) < 0.3
    small = np.array([0, 1, 2, 3, info.min, info.max, info.max - 1] + ([-1, -2] if info.min < 0 else []), dtype=numpy_type)
    out[mask] = rng.choice(small, int(mask.sum()))
    return out.reshape(dims)

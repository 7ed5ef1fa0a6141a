"""The math library of the numerics contract as LLVM IR: the second backend of the algorithm DSL.

The pinned algorithms of compiler.numerics.mathlib are written once against the DSL of
compiler.numerics.mathlib.dsl. `IROps` executes them by emitting instructions: each DSL
operation becomes the LLVM instruction with exactly its meaning (fadd, fmul, fdiv, fcmp,
select, llvm.sqrt, llvm.roundeven, bitcast, integer add/and/ashr, ...), in the order the
Python code evaluates them, without fast-math flags, fma or any call. The lanes are a
scalar (`double`, `i64`, `i1`) or vectors (`<W x double>`, ...).

Only exact operations are free in their implementation: integer <-> binary64 conversions
use the exact 2**52 + 2**51 trick (the DSL restricts them to magnitudes below 2**51; this
avoids LLVM's poison for out-of-range fptosi in lanes whose value is discarded), table
indices are clamped to the table (a discarded lane can never read out of bounds), and a DSL
`branch` is an if/else for scalars, while for vectors it evaluates each path on all lanes,
with the other lanes' arguments replaced by safe values, only when at least one lane needs
it, then selects per lane. Every function ends by replacing NaN results with the canonical
NaN in the integer domain, since LLVM may change the payload or sign of a NaN that a
floating-point operation produces.

The binary32 exp, expm1, tanh, logistic and erf first take the fast path of
compiler.numerics.mathlib.fast_f32 (a cheaper binary64 approximation, rounded to binary32
where that is provably the correctly rounded result) and call the exact path, an out-of-line
function of the same module, only for a vector with a lane it cannot decide.

`math_function` is the API for the code generator; `define_array_kernel` builds a loop over
arrays around it (tests, tools and benchmarks).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any

import llvmlite.ir as ir

from compiler.codegen.kernel import KernelModule
from compiler.codegen.kernel_library import LibraryUse
from compiler.codegen.llvm_ir import (
    DOUBLE,
    FLOAT,
    I1,
    I32,
    I64,
    call_intrinsic,
    counted_loop,
    gather,
    vector_of,
)
from compiler.config import CompilerConfig
from compiler.numerics.mathlib import UNARY_FUNCTIONS
from compiler.numerics.mathlib.correctly_rounded import near_f32_boundary
from compiler.numerics.mathlib.dsl import Table
from compiler.numerics.mathlib.f32_exceptions import F32_EXCEPTIONS
from compiler.numerics.mathlib.fast_f32 import FAST_F32
from compiler.numerics.mathlib.pinned_f64 import BINARY_ALGORITHMS, UNARY_ALGORITHMS
from core.dtypes import F32, F64

__all__ = [
    "BINARY_FUNCTIONS",
    "IROps",
    "define_array_kernel",
    "function_name",
    "math_function",
]

BINARY_FUNCTIONS = ("power", "atan2")

F64_NAN_BITS = F64.float_layout.canonical_nan
F64_INF_BITS = 0x7FF0000000000000
F64_ABS_MASK = 0x7FFFFFFFFFFFFFFF
F32_NAN_BITS = F32.float_layout.canonical_nan
F32_INF_BITS = 0x7F800000
F32_ABS_MASK = 0x7FFFFFFF
# x + MAGIC is exact and puts an integer-valued |x| < 2**51 in the low fraction bits.
_MAGIC = 2.0**52 + 2.0**51
_MAGIC_BITS = 0x4338000000000000

# The functions are marked alwaysinline: then a kernel has no call at all, and measured with
# 256-bit vectors (f64, 4 lanes) inlining is as fast or faster (log 4.8 vs 5.8 ns per element,
# power 13.9 vs 15.0, exp and sin equal).
ALWAYS_INLINE = True



# --------------------------------------------------------------------------- values


class _Value:
    """An IR value of the DSL: `ops` emits, `v` is the llvmlite value."""

    __slots__ = ("ops", "v")
    __hash__ = None  # type: ignore[assignment]  # == builds an instruction

    def __init__(self, ops: IROps, v: ir.Value) -> None:
        self.ops = ops
        self.v = v


class _Ordered(_Value):
    """The comparison operators of the DSL, each one `_cmp` (defined per value kind)."""

    def _cmp(self, op: str, o: Any) -> MaskValue:
        raise NotImplementedError

    def __lt__(self, o: Any) -> MaskValue:
        return self._cmp("<", o)

    def __le__(self, o: Any) -> MaskValue:
        return self._cmp("<=", o)

    def __gt__(self, o: Any) -> MaskValue:
        return self._cmp(">", o)

    def __ge__(self, o: Any) -> MaskValue:
        return self._cmp(">=", o)

    def __eq__(self, o: Any) -> MaskValue:  # type: ignore[override]
        return self._cmp("==", o)

    def __ne__(self, o: Any) -> MaskValue:  # type: ignore[override]
        return self._cmp("!=", o)


class FloatValue(_Ordered):
    """binary64 lanes; every operator is one IEEE operation."""

    def _bin(self, op: str, a: Any, b: Any) -> FloatValue:
        o = self.ops
        return FloatValue(o, getattr(o.b, op)(o.lift_f(a), o.lift_f(b)))

    def __add__(self, o: Any) -> FloatValue:
        return self._bin("fadd", self, o)

    def __radd__(self, o: Any) -> FloatValue:
        return self._bin("fadd", o, self)

    def __sub__(self, o: Any) -> FloatValue:
        return self._bin("fsub", self, o)

    def __rsub__(self, o: Any) -> FloatValue:
        return self._bin("fsub", o, self)

    def __mul__(self, o: Any) -> FloatValue:
        return self._bin("fmul", self, o)

    def __rmul__(self, o: Any) -> FloatValue:
        return self._bin("fmul", o, self)

    def __truediv__(self, o: Any) -> FloatValue:
        return self._bin("fdiv", self, o)

    def __rtruediv__(self, o: Any) -> FloatValue:
        return self._bin("fdiv", o, self)

    def __neg__(self) -> FloatValue:
        return FloatValue(self.ops, self.ops.b.fneg(self.v))

    def _cmp(self, op: str, o: Any) -> MaskValue:
        ops = self.ops
        if op == "!=":  # numpy's != is true on NaN: unordered-or-not-equal
            return MaskValue(ops, ops.b.fcmp_unordered("!=", self.v, ops.lift_f(o)))
        return MaskValue(ops, ops.b.fcmp_ordered(op, self.v, ops.lift_f(o)))



class IntValue(_Ordered):
    """int64 lanes; arithmetic wraps (no nsw/nuw flags, so never poison)."""

    def _bin(self, op: str, a: Any, b: Any) -> IntValue:
        o = self.ops
        return IntValue(o, getattr(o.b, op)(o.lift_i(a), o.lift_i(b)))

    def __add__(self, o: Any) -> IntValue:
        return self._bin("add", self, o)

    def __radd__(self, o: Any) -> IntValue:
        return self._bin("add", o, self)

    def __sub__(self, o: Any) -> IntValue:
        return self._bin("sub", self, o)

    def __rsub__(self, o: Any) -> IntValue:
        return self._bin("sub", o, self)

    def __mul__(self, o: Any) -> IntValue:
        return self._bin("mul", self, o)

    def __rmul__(self, o: Any) -> IntValue:
        return self._bin("mul", o, self)

    def __and__(self, o: Any) -> IntValue:
        return self._bin("and_", self, o)

    def __rand__(self, o: Any) -> IntValue:
        return self._bin("and_", o, self)

    def __or__(self, o: Any) -> IntValue:
        return self._bin("or_", self, o)

    def __ror__(self, o: Any) -> IntValue:
        return self._bin("or_", o, self)

    def __xor__(self, o: Any) -> IntValue:
        return self._bin("xor", self, o)

    def __rxor__(self, o: Any) -> IntValue:
        return self._bin("xor", o, self)

    def __neg__(self) -> IntValue:
        return self._bin("sub", 0, self)

    def _shift(self, op: str, amount: Any) -> IntValue:
        # A shift by 64 or more is poison in LLVM: only constant amounts are allowed.
        if not isinstance(amount, int) or not 0 <= amount < 64:
            raise ValueError(f"shift amount must be a constant in [0, 63], not {amount!r}")
        return self._bin(op, self, amount)

    def __rshift__(self, amount: Any) -> IntValue:
        return self._shift("ashr", amount)

    def __lshift__(self, amount: Any) -> IntValue:
        return self._shift("shl", amount)

    def __floordiv__(self, d: Any) -> IntValue:
        """Floor division by a positive constant: truncating sdiv, minus 1 where the
        remainder is negative."""
        if not isinstance(d, int) or d <= 0:
            raise ValueError(f"// needs a positive constant divisor, not {d!r}")
        o = self.ops
        q = o.b.sdiv(self.v, o.lift_i(d))
        r = o.b.sub(self.v, o.b.mul(q, o.lift_i(d)))
        below = o.b.icmp_signed("<", r, o.lift_i(0))
        return IntValue(o, o.b.add(q, o.b.sext(below, o.t_i64)))

    def _cmp(self, op: str, o: Any) -> MaskValue:
        ops = self.ops
        return MaskValue(ops, ops.b.icmp_signed(op, self.v, ops.lift_i(o)))



class MaskValue(_Value):
    """Boolean lanes (i1)."""

    def _bin(self, op: str, o: MaskValue) -> MaskValue:
        return MaskValue(self.ops, getattr(self.ops.b, op)(self.v, o.v))

    def __and__(self, o: MaskValue) -> MaskValue:
        return self._bin("and_", o)

    def __or__(self, o: MaskValue) -> MaskValue:
        return self._bin("or_", o)

    def __xor__(self, o: MaskValue) -> MaskValue:
        return self._bin("xor", o)

    def __invert__(self) -> MaskValue:
        return MaskValue(self.ops, self.ops.b.not_(self.v))

    def __eq__(self, o: MaskValue) -> MaskValue:  # type: ignore[override]
        return MaskValue(self.ops, self.ops.b.icmp_unsigned("==", self.v, o.v))


# --------------------------------------------------------------------------- operations


class IROps:
    """The DSL's operations, emitting LLVM IR through `builder` for `width` lanes.

    Constant tables become internal constant globals of the builder's module, shared by
    every function of the module that uses them.
    """

    def __init__(self, builder: ir.IRBuilder, width: int) -> None:
        self.b = builder
        self.width = width
        self.t_f64 = vector_of(DOUBLE, width)
        self.t_i64 = vector_of(I64, width)
        self.t_i1 = vector_of(I1, width)

    @property
    def module(self) -> ir.Module:
        return self.b.module

    # ---------------------------------------------------------------- constants, lifting

    def _splat(self, lane: ir.Type, value: float | int) -> ir.Constant:
        t = vector_of(lane, self.width)
        return ir.Constant(t, value if self.width == 1 else [value] * self.width)

    def lift_f(self, x: Any) -> ir.Value:
        """The llvmlite value of a float value or Python constant."""
        if isinstance(x, FloatValue):
            return x.v
        if isinstance(x, (float, int)) and not isinstance(x, bool):
            return self._splat(DOUBLE, float(x))
        raise TypeError(f"expected a float value, got {x!r}")

    def lift_i(self, x: Any) -> ir.Value:
        """The llvmlite value of an int value or Python int constant."""
        if isinstance(x, IntValue):
            return x.v
        if isinstance(x, int) and not isinstance(x, bool):
            if not -(2**63) <= x < 2**63:
                raise ValueError(f"integer constant {x} is out of int64 range")
            return self._splat(I64, x)
        raise TypeError(f"expected an int value, got {x!r}")

    def _wrap_like(self, sample: Any, v: ir.Value) -> FloatValue | IntValue:
        return FloatValue(self, v) if isinstance(sample, FloatValue) else IntValue(self, v)

    def _call_f(self, name: str, *args: Any) -> FloatValue:
        return FloatValue(self, call_intrinsic(self.b, name, *[self.lift_f(a) for a in args]))

    # ---------------------------------------------------------------- DSL operations

    def where(self, c: MaskValue, a: Any, b: Any) -> FloatValue | IntValue:
        """a where c else b (a select: bits move unchanged)."""
        is_float = any(isinstance(v, (FloatValue, float)) for v in (a, b))
        lift = self.lift_f if is_float else self.lift_i
        v = self.b.select(c.v, lift(a), lift(b))
        return FloatValue(self, v) if is_float else IntValue(self, v)

    def abs(self, x: FloatValue) -> FloatValue:
        return self._call_f("llvm.fabs", x)

    def copysign(self, x: Any, s: Any) -> FloatValue:
        return self._call_f("llvm.copysign", x, s)

    def sqrt(self, x: FloatValue) -> FloatValue:
        return self._call_f("llvm.sqrt", x)

    def rint(self, x: FloatValue) -> FloatValue:
        # roundeven: ties to even whatever the dynamic rounding mode (one roundsd/vroundpd).
        return self._call_f("llvm.roundeven", x)

    def floor(self, x: FloatValue) -> FloatValue:
        return self._call_f("llvm.floor", x)

    def minimum(self, a: Any, b: Any) -> FloatValue | IntValue:
        return self.where(a < b if isinstance(a, _Value) else b > a, a, b)

    def maximum(self, a: Any, b: Any) -> FloatValue | IntValue:
        return self.where(a > b if isinstance(a, _Value) else b < a, a, b)

    def isnan(self, x: FloatValue) -> MaskValue:
        return MaskValue(self, self.b.fcmp_unordered("uno", x.v, x.v))

    def isfinite(self, x: FloatValue) -> MaskValue:
        return self.abs(x) < float("inf")

    def isinf(self, x: FloatValue) -> MaskValue:
        return self.abs(x) == float("inf")

    def signbit(self, x: FloatValue) -> MaskValue:
        return self.bits(x) < 0

    def bits(self, x: FloatValue) -> IntValue:
        return IntValue(self, self.b.bitcast(x.v, self.t_i64))

    def from_bits(self, i: IntValue) -> FloatValue:
        return FloatValue(self, self.b.bitcast(i.v, self.t_f64))

    def to_int(self, x: FloatValue) -> IntValue:
        """Exact for integer-valued |x| < 2**51; any other lane gets some integer, never
        poison."""
        return self.bits(x + _MAGIC) - _MAGIC_BITS

    def to_float(self, i: IntValue) -> FloatValue:
        """Exact for |i| < 2**51."""
        return self.from_bits(i + _MAGIC_BITS) - _MAGIC

    def table(self, t: Table, i: IntValue) -> FloatValue | IntValue:
        """t.values[i], with i clamped (unsigned) to the table: in-range indices, the only
        ones the algorithms use for their results, are unchanged."""
        g = self._global(t)
        elem = DOUBLE if t.is_float else I64
        last = len(t) - 1
        idx = self.b.select(
            self.b.icmp_unsigned(">", i.v, self.lift_i(last)), self.lift_i(last), i.v
        )
        zero = ir.Constant(I64, 0)
        if self.width == 1:
            ptr = self.b.gep(g, [zero, idx], inbounds=True, source_etype=g.value_type)
            v = self.b.load(ptr, typ=elem)
        else:
            v = gather(self.b, g, idx, elem)
        if t.is_float:
            return FloatValue(self, v)
        if min(t.values) >= 0:
            # An exact no-op on the entries that tells LLVM their high bits are zero (the
            # 26-bit limbs of 2/pi then multiply with one 32x32->64 instruction).
            v = self.b.and_(v, self.lift_i((1 << max(t.values).bit_length()) - 1))
        return IntValue(self, v)

    def _global(self, t: Table) -> ir.GlobalVariable:
        name = f"vxla.math.table.{t.name}"
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        elem = DOUBLE if t.is_float else I64
        arr = ir.ArrayType(elem, len(t))
        g = ir.GlobalVariable(self.module, arr, name)
        g.linkage = "internal"
        g.global_constant = True
        g.unnamed_addr = True
        g.align = 64
        g.initializer = ir.Constant(arr, list(t.values))
        return g

    def any_lane(self, c: MaskValue) -> ir.Value:
        """An i1: whether any lane of c is true."""
        if self.width == 1:
            return c.v
        packed = self.b.bitcast(c.v, ir.IntType(self.width))
        return self.b.icmp_unsigned("!=", packed, ir.Constant(ir.IntType(self.width), 0))

    def branch(
        self,
        c: MaskValue,
        if_true: Callable[..., Any],
        if_false: Callable[..., Any],
        args: tuple[Any, ...],
        safe_true: tuple[float | int, ...],
        safe_false: tuple[float | int, ...],
    ) -> Any:
        """Scalar: an if/else. Vectors: each path is evaluated (on all lanes, the other
        lanes' arguments replaced by the safe constants) only if some lane takes it, and
        the results are selected per lane."""
        if self.width == 1:
            return self._scalar_branch(c, if_true, if_false, args)
        outs = []
        for fn, active, safe in ((if_true, c, safe_true), (if_false, ~c, safe_false)):
            before = self.b.block
            with self.b.if_then(self.any_lane(active)):
                path_args = tuple(
                    self.where(active, a, s) for a, s in zip(args, safe, strict=True)
                )
                got = fn(*path_args)
                inside = self.b.block
            zero = _zeros_like(got)
            outs.append(self._merge(got, inside, zero, before))
        single = not isinstance(outs[0], tuple)
        got_t, got_f = ((outs[0],), (outs[1],)) if single else outs
        result = tuple(self.where(c, t, f) for t, f in zip(got_t, got_f, strict=True))
        return result[0] if single else result

    def _scalar_branch(
        self, c: MaskValue, if_true: Callable[..., Any], if_false: Callable[..., Any],
        args: tuple[Any, ...]
    ) -> Any:
        with self.b.if_else(c.v) as (then, otherwise):
            with then:
                got_t = if_true(*args)
                block_t = self.b.block
            with otherwise:
                got_f = if_false(*args)
                block_f = self.b.block
        return self._merge(got_t, block_t, got_f, block_f)

    def _merge(self, a: Any, block_a: ir.Block, b: Any, block_b: ir.Block) -> Any:
        """Phi nodes joining the value (or tuple of values) a from block_a and b from
        block_b."""
        single = not isinstance(a, tuple)
        pairs = zip((a,) if single else a, (b,) if single else b, strict=True)
        merged = []
        for va, vb in pairs:
            phi = self.b.phi(va.v.type)
            phi.add_incoming(va.v, block_a)
            phi.add_incoming(vb.v if isinstance(vb, _Value) else vb, block_b)
            merged.append(self._wrap_like(va, phi))
        return merged[0] if single else tuple(merged)


def _zeros_like(got: Any) -> Any:
    """Zero constants of the types of a path's result (the value where the path did not
    run; never selected)."""
    if isinstance(got, tuple):
        return tuple(ir.Constant(v.v.type, None) for v in got)
    return ir.Constant(got.v.type, None)


# --------------------------------------------------------------------------- functions


def function_name(name: str, dtype: str, width: int) -> str:
    """The symbol of a math function: vxla.math.<name>.<dtype>.w<width>."""
    return f"vxla.math.{name}.{dtype}.w{width}"


def _canonical_f64(b: ir.IRBuilder, y: ir.Value, width: int) -> ir.Value:
    """y with every NaN replaced by the canonical NaN, decided on the bits (so no later
    pass can change a payload or sign)."""
    t_i = vector_of(I64, width)

    def c(v: int) -> ir.Constant:
        return ir.Constant(t_i, v if width == 1 else [v] * width)

    bits = b.bitcast(y, t_i)
    nan = b.icmp_signed(">", b.and_(bits, c(F64_ABS_MASK)), c(F64_INF_BITS))
    return b.bitcast(b.select(nan, c(F64_NAN_BITS), bits), vector_of(DOUBLE, width))


def _canonical_f32_bits(b: ir.IRBuilder, bits: ir.Value, width: int) -> ir.Value:
    t_i = vector_of(I32, width)

    def c(v: int) -> ir.Constant:
        return ir.Constant(t_i, v if width == 1 else [v] * width)

    nan = b.icmp_signed(">", b.and_(bits, c(F32_ABS_MASK)), c(F32_INF_BITS))
    return b.select(nan, c(F32_NAN_BITS), bits)


def _new_function(module: ir.Module, fname: str, ty: ir.Type, arity: int) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=fname)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    if ALWAYS_INLINE:
        fn.attributes.add("alwaysinline")
    return fn


def _define_f64(module: ir.Module, name: str, width: int, fname: str) -> ir.Function:
    ty = vector_of(DOUBLE, width)
    arity = 2 if name in BINARY_FUNCTIONS else 1
    fn = _new_function(module, fname, ty, arity)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ops = IROps(b, width)
    args = [FloatValue(ops, a) for a in fn.args]
    algorithm = BINARY_ALGORITHMS[name] if arity == 2 else UNARY_ALGORITHMS[name]
    y = algorithm(ops, *args)
    b.ret(_canonical_f64(b, ops.lift_f(y), width))
    return fn


def _define_f32(
    module: ir.Module, name: str, width: int, fname: str, config: CompilerConfig, declare_exact: DeclareExact | None = None
) -> ir.Function:
    """The binary32 function: the fast path where the function has one (fast_f32.py), with
    the exact path on the lanes it cannot decide; otherwise the exact path alone. The exact
    path is a function of this module, or with `declare_exact` one of the exact library's
    (`exact_library`), declared here."""
    if name not in FAST_F32:
        return _define_f32_exact(module, name, width, fname, config)
    ty = vector_of(FLOAT, width)
    if declare_exact is not None:
        exact = declare_exact(exact_library(config, name, width), f"{fname}.exact", ir.FunctionType(ty, [ty]))
    else:
        exact = _out_of_line_exact(module, name, width, f"{fname}.exact", config)
    t_i32 = vector_of(I32, width)
    fn = _new_function(module, fname, ty, 1)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ops = IROps(b, width)
    wide = FloatValue(ops, b.fpext(fn.args[0], vector_of(DOUBLE, width)))
    value, usable = FAST_F32[name](ops, wide)
    value = ops.lift_f(value)
    fast_bits = _canonical_f32_bits(b, b.bitcast(b.fptrunc(value, ty), t_i32), width)
    undecided = ~usable | near_f32_boundary(ops, FloatValue(ops, value))
    before = b.block
    with b.if_then(ops.any_lane(undecided), likely=False):
        exact_bits = b.bitcast(b.call(exact, [fn.args[0]]), t_i32)
        patched = b.select(undecided.v, exact_bits, fast_bits)
        inside = b.block
    bits = b.phi(t_i32)
    bits.add_incoming(patched, inside)
    bits.add_incoming(fast_bits, before)
    b.ret(b.bitcast(bits, ty))
    return fn


def _out_of_line_exact(module: ir.Module, name: str, width: int, fname: str, config: CompilerConfig) -> ir.Function:
    """The exact path of a function with a fast path: it runs rarely (about one 8-lane vector
    of normal inputs in 2,000, docs/numerics.md), so kept out of line it costs no code size
    or compile time in every kernel that uses it."""
    exact = _define_f32_exact(module, name, width, fname, config)
    exact.attributes.discard("alwaysinline")
    exact.attributes.add("noinline")
    exact.attributes.add("cold")
    return exact


def exact_library(config: CompilerConfig, name: str, width: int) -> LibraryUse:
    """The exact path of binary32 `name` at `width` lanes as a kernel library
    (kernel_library.py): the same function, exported, compiled once per target and shared by
    every program (with its binary64 evaluation, most of the function's IR)."""
    return LibraryUse(f"math.{name}.f32.w{width}.exact", partial(_exact_library_ir, config, name, width))


def exact_libraries(config: CompilerConfig, widths: tuple[int, ...]) -> list[LibraryUse]:
    """The exact library of every binary32 function with a fast path, at each of `widths`."""
    return [exact_library(config, name, width) for name in sorted(FAST_F32) for width in widths]


@cache
def _exact_library_ir(config: CompilerConfig, name: str, width: int) -> str:
    kernels = KernelModule(config)
    exact = _out_of_line_exact(kernels.module, name, width, f"{function_name(name, 'f32', width)}.exact", config)
    exact.linkage = ""
    return kernels.ir_text()


# Declares a library's function in the module being built (KernelModule.use_library).
DeclareExact = Callable[[LibraryUse, str, ir.FunctionType], ir.Function]


def _define_f32_exact(
    module: ir.Module, name: str, width: int, fname: str, config: CompilerConfig
) -> ir.Function:
    """RN32(pinned_f64(x)), patched where that double rounding is not correctly rounded
    (unary functions; power and atan2 are defined as the plain double rounding)."""
    ty = vector_of(FLOAT, width)
    t_f64 = vector_of(DOUBLE, width)
    t_i32 = vector_of(I32, width)
    arity = 2 if name in BINARY_FUNCTIONS else 1
    if arity == 1 and name not in F32_EXCEPTIONS:
        raise LookupError(f"no binary32 exception table for {name}: run "
                          "tools/find_f32_exceptions.py")
    exceptions = () if arity == 2 else F32_EXCEPTIONS[name]
    f64 = math_function(module, name, "f64", width, config)
    fn = _new_function(module, fname, ty, arity)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    wide = b.call(f64, [b.fpext(a, t_f64) for a in fn.args])
    bits = _canonical_f32_bits(b, b.bitcast(b.fptrunc(wide, ty), t_i32), width)
    if exceptions:
        bits = _patch_exceptions(b, width, wide, fn.args[0], bits, exceptions)
    b.ret(b.bitcast(bits, ty))
    return fn


def _patch_exceptions(
    b: ir.IRBuilder, width: int, wide: ir.Value, x: ir.Value, bits: ir.Value,
    exceptions: tuple[tuple[int, int], ...]
) -> ir.Value:
    """bits with the table's output wherever x is a listed input.

    Every listed input's binary64 value lies near a binary32 rounding boundary, so the
    table is compared (entry by entry, branch-free) only when some lane's value `wide` is
    near one (rarely: about one value in 2**14).
    """
    ops = IROps(b, width)
    near = near_f32_boundary(ops, FloatValue(ops, wide))
    before = b.block
    with b.if_then(ops.any_lane(near), likely=False):
        x_bits = b.bitcast(x, vector_of(I32, width))
        patched = bits
        for x_in, y_out in exceptions:
            hit = b.icmp_unsigned("==", x_bits, _i32_splat(x_in, width))
            patched = b.select(hit, _i32_splat(y_out, width), patched)
        inside = b.block
    merged = b.phi(bits.type)
    merged.add_incoming(patched, inside)
    merged.add_incoming(bits, before)
    return merged


def _i32_splat(v: int, width: int) -> ir.Constant:
    # Bit patterns above 2**31 - 1 are written as the equal negative int32.
    s = v - (1 << 32) if v >= 1 << 31 else v
    return ir.Constant(vector_of(I32, width), s if width == 1 else [s] * width)


def math_function(
    module: ir.Module, name: str, dtype: str, width: int, config: CompilerConfig, declare_exact: DeclareExact | None = None
) -> ir.Function:
    """The internal function vxla.math.<name>.<dtype>.w<width> of `module` (defined once).

    It takes one argument (two: power(x, y), atan2(y, x)) of type float/double
    or <width x float/double> and returns the contract's exact result for every lane, NaN
    canonical; it calls nothing (no libm, no other symbol) but, with `declare_exact` (a CPU
    target's kernels), its exact path in the exact library (`exact_library`). `config` is the compilation
    target: the IR is the same for every vector width today (LLVM selects the instructions,
    e.g. gathers for table lookups where the target has them), and the parameter lets a
    target-specific choice be made without changing callers.
    """
    if name not in UNARY_FUNCTIONS and name not in BINARY_FUNCTIONS:
        raise ValueError(f"unknown math function {name!r}")
    if dtype not in ("f32", "f64"):
        raise ValueError(f"dtype must be 'f32' or 'f64', not {dtype!r}")
    if width < 1:
        raise ValueError("width must be at least 1")
    fname = function_name(name, dtype, width)
    existing = module.globals.get(fname)
    if existing is not None:
        return existing
    if dtype == "f64":
        return _define_f64(module, name, width, fname)
    return _define_f32(module, name, width, fname, config, declare_exact)


# --------------------------------------------------------------------------- array kernels


def define_array_kernel(
    module: ir.Module,
    kernel_name: str,
    name: str,
    dtype: str,
    width: int,
    config: CompilerConfig,
) -> ir.Function:
    """An external function `void kernel_name(in0, [in1,] out, i64 n)` over arrays.

    out[k] = name(in0[k] [, in1[k]]) for k < n: a loop of `width`-lane vectors, then a
    scalar loop over the tail. Pointers are to float (f32) or double (f64) elements.
    """
    elem = FLOAT if dtype == "f32" else DOUBLE
    arity = 2 if name in BINARY_FUNCTIONS else 1
    vec_fn = math_function(module, name, dtype, width, config)
    one_fn = math_function(module, name, dtype, 1, config)
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [I64]),
                     name=kernel_name)
    fn.attributes.add("nounwind")
    *ins, out, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec_end = b.mul(b.sdiv(n, ir.Constant(I64, width)), ir.Constant(I64, width))
    with counted_loop(b, ir.Constant(I64, 0), vec_end, width, "vector") as i:
        _apply(b, vec_fn, ins, out, i, vector_of(elem, width), elem)
    with counted_loop(b, vec_end, n, 1, "tail") as i:
        _apply(b, one_fn, ins, out, i, elem, elem)
    b.ret_void()
    return fn


def _apply(b: ir.IRBuilder, fn: ir.Function, ins: list, out: ir.Value, i: ir.Value,
           ty: ir.Type, elem: ir.Type) -> None:
    align = 4 if elem == FLOAT else 8  # element alignment: vectors may start anywhere
    args = [b.load(b.gep(p, [i], source_etype=elem), typ=ty, align=align) for p in ins]
    b.store(b.call(fn, args), b.gep(out, [i], source_etype=elem), align=align)



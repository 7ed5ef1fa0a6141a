"""The elementwise primitives of the numerics contract (docs/numerics.md, sections 1-2) as LLVM IR.

Every function here emits, with an `llvmlite.ir.IRBuilder`, code whose results are bit-identical
to the reference implementations in `compiler/numerics/` (floats, convert). Each works on scalar
values and on vector values (`<W x T>`, any W) alike.

Storage types in IR: pred = i8 (0 or 1), sN/uN = iN (s4/u4 = i8, sign- or zero-extended), f16 and bf16 = i16 (raw bits), f32 = float,
f64 = double.

Rules the emitted code follows, because each one would otherwise break bit-reproducibility or
self-containment of the object file:
- no fast-math flags on any instruction;
- no calls to anything outside the module: no libm (`frem` is an `fmod` call, `llvm.fma`
  without FMA hardware is an `fma` call) and no compiler-rt (`fpext half`/`fptrunc to half`
  without F16C are `__extendhfsf2`/`__truncsfhf2` calls, i128 division is `__udivti3`), so f16
  conversions are integer code, fmod is integer long division with 64-bit `urem`, and fma is
  emulated exactly unless `config.has_fma`;
- NaNs are made canonical in the integer domain, after the floating-point work, because LLVM may
  change the sign and payload of a NaN produced by a floating-point instruction and may fold a
  floating-point select;
- helper functions defined in the module are `internal` and `alwaysinline`, so that no `call`
  remains after optimization.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from compiler.codegen.llvm_ir import (
    DOUBLE,
    FLOAT,
    I1,
    I8,
    I16,
    I32,
    I64,
    I128,
    call_intrinsic,
    constant,
    intrinsic_suffix,
    shaped_like,
    storage_type,
)
from compiler.config import CompilerConfig
from compiler.numerics.floats import float8_overflow_bound
from core.dtypes import BF16, F16, F32, F64, U8, DType, FloatLayout

Value = ir.Value
Builder = ir.IRBuilder



# --- type and constant helpers ---------------------------------------------------------------


def _int(like: Value, bits: int, value: int) -> ir.Constant:
    """An iN constant shaped like `like` (scalar or vector)."""
    return constant(shaped_like(like.type, ir.IntType(bits)), value)


def _flt(like: Value, element: ir.Type, value: float) -> ir.Constant:
    return constant(shaped_like(like.type, element), value)


def _helper(
    builder: Builder, name: str, args: list[Value], body: Callable[[Builder, list[Value]], Value]
) -> Value:
    """Calls the internal, always-inlined function `name` of the module (returning the type of
    its first argument), defining it on first use with `body(builder, parameters)`. The name
    must encode every type involved."""
    module = builder.module
    function = module.globals.get(name)
    if function is None:
        arg_types = [a.type for a in args]
        function = ir.Function(module, ir.FunctionType(arg_types[0], arg_types), name)
        function.linkage = "internal"
        function.attributes.add("alwaysinline")
        function.attributes.add("nounwind")
        helper_builder = ir.IRBuilder(function.append_basic_block("entry"))
        helper_builder.ret(body(helper_builder, list(function.args)))
    return builder.call(function, args)


def _umin(builder: Builder, a: Value, b: Value) -> Value:
    return builder.select(builder.icmp_unsigned("<", a, b), a, b)


def _smax(builder: Builder, a: Value, b: Value) -> Value:
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def _smin(builder: Builder, a: Value, b: Value) -> Value:
    return builder.select(builder.icmp_signed("<", a, b), a, b)


def _ctlz(builder: Builder, value: Value) -> Value:
    """Leading zeros, defined (the width) for zero."""
    return call_intrinsic(builder, "llvm.ctlz", value, constant(I1, 0))


def _any(builder: Builder, mask: Value) -> Value:
    """An i1 that is true when any lane of `mask` is (the mask itself for scalars)."""
    if isinstance(mask.type, ir.VectorType):
        packed = builder.bitcast(mask, ir.IntType(mask.type.count))
        return builder.icmp_unsigned("!=", packed, ir.Constant(packed.type, 0))
    return mask


# --- bits -----------------------------------------------------------------------------------


def _to_bits(builder: Builder, value: Value, dtype: DType) -> Value:
    """The raw bits of a float value as an integer of the same width."""
    if dtype in (F16, BF16) or dtype.is_float8:
        return value
    return builder.bitcast(value, shaped_like(value.type, ir.IntType(dtype.bits)))


def _from_bits(builder: Builder, bits: Value, dtype: DType) -> Value:
    if dtype in (F16, BF16) or dtype.is_float8:
        return bits
    return builder.bitcast(bits, shaped_like(bits.type, storage_type(dtype)))


def _is_nan_bits(builder: Builder, bits: Value, layout: FloatLayout) -> Value:
    magnitude = builder.and_(bits, _int(bits, layout.bits, layout.abs_mask))
    return builder.icmp_unsigned(">", magnitude, _int(bits, layout.bits, layout.inf_bits))


def _canonicalize_bits(builder: Builder, bits: Value, layout: FloatLayout) -> Value:
    nan = _is_nan_bits(builder, bits, layout)
    return builder.select(nan, _int(bits, layout.bits, layout.canonical_nan), bits)


def canonicalize_nan(builder: Builder, value: Value, dtype: DType) -> Value:
    """`value` with every NaN replaced by the canonical quiet NaN of `dtype` (f16/bf16 as i16
    bits, f32, f64). The test and the select are integer operations, so that no optimization
    can touch the NaN's bits afterwards."""
    layout = dtype.float_layout
    bits = _canonicalize_bits(builder, _to_bits(builder, value, dtype), layout)
    return _from_bits(builder, bits, dtype)


def reduce_precision(builder: Builder, value: Value, dtype: DType, exponent_bits: int, mantissa_bits: int) -> Value:
    """XLA's reduce-precision on the bits, as compiler.numerics.floats.reduce_precision
    defines it: the mantissa rounded nearest-even, then overflow to infinity and underflow
    (subnormals too) to zero, sign kept; a NaN gives the canonical NaN."""
    layout = dtype.float_layout
    width = layout.bits
    bits = _to_bits(builder, value, dtype)
    magnitude = builder.and_(bits, _int(bits, width, layout.abs_mask))
    is_nan = builder.icmp_unsigned(">", magnitude, _int(bits, width, layout.inf_bits))
    if mantissa_bits < layout.mantissa_bits:
        shift = layout.mantissa_bits - mantissa_bits
        last_kept = builder.and_(builder.lshr(bits, _int(bits, width, shift)), _int(bits, width, 1))
        bias = builder.add(last_kept, _int(bits, width, (1 << (shift - 1)) - 1))
        bits = builder.and_(builder.add(bits, bias), _int(bits, width, ~((1 << shift) - 1) & ((1 << width) - 1)))
    source_exponent_bits = width - 1 - layout.mantissa_bits
    if exponent_bits < source_exponent_bits:
        source_bias = (1 << (source_exponent_bits - 1)) - 1
        narrow_bias = (1 << (exponent_bits - 1)) - 1
        exponent = builder.and_(bits, _int(bits, width, layout.inf_bits))
        sign = builder.and_(bits, _int(bits, width, layout.sign_mask))
        overflows = builder.icmp_unsigned(">", exponent, _int(bits, width, (source_bias + narrow_bias) << layout.mantissa_bits))
        underflows = builder.icmp_unsigned("<=", exponent, _int(bits, width, (source_bias - narrow_bias) << layout.mantissa_bits))
        bits = builder.select(overflows, builder.or_(sign, _int(bits, width, layout.inf_bits)), bits)
        bits = builder.select(underflows, sign, bits)
    bits = builder.select(is_nan, _int(bits, width, layout.canonical_nan), bits)
    return _from_bits(builder, bits, dtype)


# --- f16 / bf16 <-> f32 ------------------------------------------------------------------------


def widen_to_f32(builder: Builder, value: Value, dtype: DType) -> Value:
    """f16/bf16 bits (i16) to float, exactly (NaN payloads move along); f32 is returned as is."""
    if dtype is F32:
        return value
    wide = builder.zext(value, shaped_like(value.type, I32))
    if dtype.is_float8:
        return _float8_to_f32(builder, wide, dtype.float_layout)
    if dtype is BF16:
        # bf16 is the top half of a binary32.
        return builder.bitcast(builder.shl(wide, _int(wide, 32, 16)), shaped_like(value.type, FLOAT))
    if dtype is not F16:
        raise ValueError(f"cannot widen {dtype.name} to f32")
    # Integer code: `fpext half` is a compiler-rt call on CPUs without F16C.
    sign = builder.shl(builder.and_(wide, _int(wide, 32, 0x8000)), _int(wide, 32, 16))
    magnitude = builder.and_(wide, _int(wide, 32, 0x7FFF))
    moved = builder.shl(magnitude, _int(wide, 32, 13))
    # Normal: rebias the exponent from 15 to 127.
    normal = builder.add(moved, _int(wide, 32, (127 - 15) << 23))
    # Inf and NaN: all-ones exponent, fraction (payload) kept.
    special = builder.or_(moved, _int(wide, 32, 0x7F800000))
    # Subnormal: the fraction counts units of 2^-24; both steps are exact in binary32.
    float_type = shaped_like(value.type, FLOAT)
    scaled = builder.fmul(builder.uitofp(magnitude, float_type), _flt(wide, FLOAT, 2.0**-24))
    subnormal = builder.bitcast(scaled, wide.type)
    is_special = builder.icmp_unsigned(">=", magnitude, _int(wide, 32, 0x7C00))
    is_subnormal = builder.icmp_unsigned("<", magnitude, _int(wide, 32, 0x0400))
    bits = builder.select(is_special, special, builder.select(is_subnormal, subnormal, normal))
    return builder.bitcast(builder.or_(bits, sign), float_type)


def round_f32_to(builder: Builder, value: Value, dtype: DType) -> Value:
    """float to f16/bf16 bits (i16), nearest-even, overflow to infinity, canonical NaN; for f32
    the value itself with a canonical NaN."""
    if dtype is F32:
        return canonicalize_nan(builder, value, F32)
    bits = builder.bitcast(value, shaped_like(value.type, I32))
    if dtype is BF16:
        return _f32_bits_to_bf16(builder, bits)
    if dtype is F16:
        return _f32_bits_to_f16(builder, bits)
    if dtype.is_float8:
        return _f32_bits_to_float8(builder, bits, dtype.float_layout)
    raise ValueError(f"cannot round f32 to {dtype.name}")


def _float8_to_f32(builder: Builder, codes: Value, layout: FloatLayout) -> Value:
    """8-bit float codes (zero-extended to i32) to float, exactly; NaN to the canonical NaN
    (floats.float8_to_f32)."""
    m, bias = layout.mantissa_bits, layout.bias
    sign = builder.shl(builder.and_(codes, _int(codes, 32, 0x80)), _int(codes, 32, 24))
    magnitude = builder.and_(codes, _int(codes, 32, 0x7F))
    normal = builder.add(builder.shl(magnitude, _int(codes, 32, 23 - m)), _int(codes, 32, (127 - bias) << 23))
    float_type = shaped_like(codes.type, FLOAT)
    fraction = builder.and_(magnitude, _int(codes, 32, (1 << m) - 1))
    subnormal = builder.bitcast(builder.fmul(builder.uitofp(fraction, float_type), _flt(codes, FLOAT, 2.0 ** (1 - bias - m))), codes.type)
    is_subnormal = builder.icmp_unsigned("<", magnitude, _int(codes, 32, 1 << m))
    bits = builder.or_(builder.select(is_subnormal, subnormal, normal), sign)
    if layout.specials == "ieee":
        infinite = builder.icmp_unsigned("==", magnitude, _int(codes, 32, layout.inf_bits))
        bits = builder.select(infinite, builder.or_(sign, _int(codes, 32, 0x7F800000)), bits)
        nan = builder.icmp_unsigned(">", magnitude, _int(codes, 32, layout.inf_bits))
    elif layout.specials == "fn":
        nan = builder.icmp_unsigned("==", magnitude, _int(codes, 32, 0x7F))
    else:
        nan = builder.icmp_unsigned("==", codes, _int(codes, 32, 0x80))
    bits = builder.select(nan, _int(codes, 32, F32.float_layout.canonical_nan), bits)
    return builder.bitcast(bits, float_type)


def _f32_bits_to_float8(builder: Builder, bits: Value, layout: FloatLayout) -> Value:
    """f32 bits to an 8-bit float code (i8), nearest-even, as floats.f32_to_float8."""
    m, bias = layout.mantissa_bits, layout.bias
    shift = 23 - m
    sign = builder.and_(builder.lshr(bits, _int(bits, 32, 24)), _int(bits, 32, 0x80))
    magnitude = builder.and_(bits, _int(bits, 32, 0x7FFFFFFF))
    odd = builder.and_(builder.lshr(magnitude, _int(bits, 32, shift)), _int(bits, 32, 1))
    rebiased = builder.add(magnitude, _int(bits, 32, (((bias - 127) << 23) + (1 << (shift - 1)) - 1) & 0xFFFFFFFF))
    normal = builder.lshr(builder.add(rebiased, odd), _int(bits, 32, shift))
    float_type = shaped_like(bits.type, FLOAT)
    offset = 2.0 ** (24 - bias - m)
    offset_bits = int(np.float32(offset).view(np.uint32))
    shifted = builder.fadd(builder.bitcast(magnitude, float_type), _flt(bits, FLOAT, offset))
    subnormal = builder.sub(builder.bitcast(shifted, bits.type), _int(bits, 32, offset_bits))
    tiny = builder.icmp_unsigned("<", magnitude, _int(bits, 32, int(np.float32(2.0 ** (1 - bias)).view(np.uint32))))
    bound, midpoint_overflows = float8_overflow_bound(layout)
    overflow = builder.icmp_unsigned(">=" if midpoint_overflows else ">", magnitude, _int(bits, 32, bound))
    code = builder.select(tiny, subnormal, normal)
    if layout.specials == "ieee":
        code = builder.or_(builder.select(overflow, _int(bits, 32, layout.inf_bits), code), sign)
    else:
        code = builder.select(overflow, _int(bits, 32, layout.canonical_nan), code)
        has_sign = builder.not_(overflow)
        if layout.specials == "fnuz":
            has_sign = builder.and_(has_sign, builder.icmp_unsigned("!=", code, _int(bits, 32, 0)))
        code = builder.select(has_sign, builder.or_(code, sign), code)
    nan = builder.icmp_unsigned(">", magnitude, _int(bits, 32, 0x7F800000))
    code = builder.select(nan, _int(bits, 32, layout.canonical_nan), code)
    return builder.trunc(code, shaped_like(bits.type, I8))


def _f32_bits_to_bf16(builder: Builder, bits: Value) -> Value:
    # Nearest-even on the low 16 bits; a carry moves into the exponent, up to infinity.
    lsb = builder.and_(builder.lshr(bits, _int(bits, 32, 16)), _int(bits, 32, 1))
    biased = builder.add(builder.add(bits, _int(bits, 32, 0x7FFF)), lsb)
    rounded = builder.trunc(builder.lshr(biased, _int(bits, 32, 16)), shaped_like(bits.type, I16))
    nan = _is_nan_bits(builder, bits, F32.float_layout)
    return builder.select(nan, _int(rounded, 16, BF16.float_layout.canonical_nan), rounded)


def _f32_bits_to_f16(builder: Builder, bits: Value) -> Value:
    # Integer code: `fptrunc to half` is a compiler-rt call on CPUs without F16C.
    sign = builder.and_(builder.lshr(bits, _int(bits, 32, 16)), _int(bits, 32, 0x8000))
    magnitude = builder.and_(bits, _int(bits, 32, 0x7FFFFFFF))
    # Normal results: rebias the exponent (127 -> 15) and round the 13 dropped bits to
    # nearest-even; a carry moves into the exponent.
    odd = builder.and_(builder.lshr(magnitude, _int(bits, 32, 13)), _int(bits, 32, 1))
    rebiased = builder.add(magnitude, _int(bits, 32, ((15 - 127) << 23) + 0xFFF))
    normal = builder.lshr(builder.add(rebiased, odd), _int(bits, 32, 13))
    # Subnormal results (|x| < 2^-14): adding 0.5 puts the binary32 ulp at 2^-24, the f16
    # subnormal spacing, so the hardware's nearest-even addition does the rounding.
    float_type = shaped_like(bits.type, FLOAT)
    shifted = builder.fadd(builder.bitcast(magnitude, float_type), _flt(bits, FLOAT, 0.5))
    subnormal = builder.sub(builder.bitcast(shifted, bits.type), _int(bits, 32, 0x3F000000))
    # 65520 (0x477FF000) and above round to infinity (65504 is odd, so the tie goes up).
    overflow = builder.icmp_unsigned(">=", magnitude, _int(bits, 32, 0x477FF000))
    tiny = builder.icmp_unsigned("<", magnitude, _int(bits, 32, 0x38800000))
    finite = builder.select(
        tiny, subnormal, builder.select(overflow, _int(bits, 32, 0x7C00), normal)
    )
    result = builder.or_(finite, sign)
    nan = builder.icmp_unsigned(">", magnitude, _int(bits, 32, 0x7F800000))
    result = builder.select(nan, _int(bits, 32, F16.float_layout.canonical_nan), result)
    return builder.trunc(result, shaped_like(bits.type, I16))


# --- round to odd -----------------------------------------------------------------------------


def _round_to_odd_sum(builder: Builder, total: Value, error: Value) -> Value:
    """The double `total` (a nearest-even sum) moved to the round-to-odd result, given the exact
    rounding error `error` of the sum: an inexact even result steps one ulp towards the error."""
    bits = builder.bitcast(total, shaped_like(total.type, I64))
    error_bits = builder.bitcast(error, bits.type)
    f64 = F64.float_layout
    finite = builder.icmp_unsigned(
        "<", builder.and_(bits, _int(bits, 64, f64.abs_mask)), _int(bits, 64, f64.inf_bits)
    )
    inexact = builder.fcmp_ordered("!=", error, _flt(error, DOUBLE, 0.0))
    even = builder.icmp_unsigned("==", builder.and_(bits, _int(bits, 64, 1)), _int(bits, 64, 0))
    # Same signs: the exact value is further from zero, so the magnitude (the bits) grows.
    same_sign = builder.icmp_signed(">=", builder.xor(bits, error_bits), _int(bits, 64, 0))
    step = builder.select(same_sign, _int(bits, 64, 1), _int(bits, 64, -1))
    adjust = builder.and_(builder.and_(finite, inexact), even)
    bits = builder.select(adjust, builder.add(bits, step), bits)
    return builder.bitcast(bits, total.type)


def _two_sum(builder: Builder, a: Value, b: Value) -> tuple[Value, Value]:
    """Knuth's TwoSum: (a + b rounded, its exact error), six operations, no branches."""
    total = builder.fadd(a, b)
    virtual_b = builder.fsub(total, a)
    virtual_a = builder.fsub(total, virtual_b)
    error = builder.fadd(builder.fsub(a, virtual_a), builder.fsub(b, virtual_b))
    return total, error


def _f64_to_f32_round_to_odd(builder: Builder, value: Value) -> Value:
    """double to float with round-to-odd (as floats.round_to_odd_f32): a later nearest-even
    rounding to f16/bf16 is then one correct rounding of the double."""
    float_type = shaped_like(value.type, FLOAT)
    nearest = builder.fptrunc(value, float_type)
    widened = builder.fpext(nearest, value.type)
    inexact = builder.fcmp_ordered("!=", widened, value)  # false for NaN
    bits = builder.bitcast(nearest, shaped_like(value.type, I32))
    even = builder.icmp_unsigned("==", builder.and_(bits, _int(bits, 32, 1)), _int(bits, 32, 0))
    # Step towards the value; an overflow to infinity steps back to the largest float.
    value_abs = call_intrinsic(builder, "llvm.fabs", value)
    widened_abs = call_intrinsic(builder, "llvm.fabs", widened)
    grows = builder.fcmp_ordered(">", value_abs, widened_abs)
    step = builder.select(grows, _int(bits, 32, 1), _int(bits, 32, -1))
    bits = builder.select(builder.and_(inexact, even), builder.add(bits, step), bits)
    return builder.bitcast(bits, float_type)


def _round_from_f64(builder: Builder, value: Value, target: DType) -> Value:
    """double to a float type with one nearest-even rounding, canonical NaN."""
    if target is F64:
        return canonicalize_nan(builder, value, F64)
    if target is F32:
        return canonicalize_nan(builder, builder.fptrunc(value, shaped_like(value.type, FLOAT)), F32)
    return round_f32_to(builder, _f64_to_f32_round_to_odd(builder, value), target)


# --- fma --------------------------------------------------------------------------------------


def fma(
    builder: Builder,
    a: Value,
    b: Value,
    c: Value,
    dtype: DType,
    config: CompilerConfig,
    canonicalize: bool = True,
) -> Value:
    """IEEE fusedMultiplyAdd a*b+c on f32 or f64 values, one rounding, canonical NaN.

    `llvm.fma` when the target has FMA instructions; otherwise an exact emulation (LLVM would
    call libm's fma), which gives the same bits. A chain of fmas may pass canonicalize=False
    for its steps and canonicalize once at the end: a NaN stays NaN along the chain, so only
    the last step's NaN bits can reach a result."""
    if dtype not in (F32, F64):
        raise ValueError(f"fma is defined on f32 and f64, not {dtype.name}")
    if config.has_fma:
        result = call_intrinsic(builder, "llvm.fma", a, b, c)
    elif dtype is F32:
        result = _fma_f32_emulated(builder, a, b, c)
    else:
        name = f"vxla.fma_f64_emulated.{intrinsic_suffix(a.type)}"
        result = _helper(builder, name, [a, b, c], lambda h, p: _fma_f64_emulated(h, *p))
    return canonicalize_nan(builder, result, dtype) if canonicalize else result


def _fma_f32_emulated(builder: Builder, a: Value, b: Value, c: Value) -> Value:
    """floats.fma_f32: the product is exact in binary64, the sum is rounded to odd there, and
    binary64 has more than 2*24+2 bits, so the final rounding to binary32 is the correct one."""
    double_type = shaped_like(a.type, DOUBLE)
    a64, b64, c64 = (builder.fpext(v, double_type) for v in (a, b, c))
    product = builder.fmul(a64, b64)
    total, error = _two_sum(builder, product, c64)
    return builder.fptrunc(_round_to_odd_sum(builder, total, error), a.type)


def _unpack_f64(builder: Builder, bits: Value) -> tuple[Value, Value]:
    """A finite binary64 (bits) as (m, e) with value = m * 2^e, m normalized into [2^52, 2^53)
    for every non-zero value (subnormals too); m = 0 for zeros. e is an i32."""
    f64 = F64.float_layout
    magnitude = builder.and_(bits, _int(bits, 64, f64.abs_mask))
    biased = builder.lshr(magnitude, _int(bits, 64, 52))
    fraction = builder.and_(magnitude, _int(bits, 64, f64.mantissa_mask))
    is_subnormal = builder.icmp_unsigned("==", biased, _int(bits, 64, 0))
    raw = builder.select(is_subnormal, fraction, builder.or_(fraction, _int(bits, 64, 1 << 52)))
    exponent = builder.select(is_subnormal, _int(bits, 64, 1), biased)
    shift = builder.sub(_ctlz(builder, raw), _int(bits, 64, 11))  # 0 for normal numbers
    shift = _umin(builder, shift, _int(bits, 64, 63))  # a zero gives 53; keep shifts defined
    significand = builder.shl(raw, shift)
    exponent = builder.sub(builder.sub(exponent, _int(bits, 64, 1075)), shift)
    return significand, builder.trunc(exponent, shaped_like(bits.type, I32))


def _fma_f64_emulated(builder: Builder, a: Value, b: Value, c: Value) -> Value:
    """Exact binary64 fma from integer arithmetic: the 106-bit product of the significands and
    the addend are aligned in 128 bits (the smaller one shifted right with a sticky bit), added,
    and the sum rounded once to nearest-even on the binary64 grid (subnormals included).

    Non-finite operands and zero factors take the plain IEEE path a*b + c, which is exact there
    (the product is an exact zero, infinite or NaN), except that a finite product with an
    infinite addend gives the addend (a*b could overflow to the opposite infinity)."""
    i64_type = shaped_like(a.type, I64)
    i128_type = shaped_like(a.type, I128)
    a_bits, b_bits, c_bits = (builder.bitcast(v, i64_type) for v in (a, b, c))
    f64 = F64.float_layout

    def magnitude(bits: Value) -> Value:
        return builder.and_(bits, _int(bits, 64, f64.abs_mask))

    def is_finite(bits: Value) -> Value:
        return builder.icmp_unsigned("<", magnitude(bits), _int(bits, 64, f64.inf_bits))

    def is_zero(bits: Value) -> Value:
        return builder.icmp_unsigned("==", magnitude(bits), _int(bits, 64, 0))

    # Special operands.
    factors_finite = builder.and_(is_finite(a_bits), is_finite(b_bits))
    all_finite = builder.and_(factors_finite, is_finite(c_bits))
    zero_factor = builder.or_(is_zero(a_bits), is_zero(b_bits))
    simple = builder.or_(builder.not_(all_finite), zero_factor)
    plain = builder.bitcast(builder.fadd(builder.fmul(a, b), c), i64_type)
    addend_wins = builder.and_(factors_finite, builder.not_(is_finite(c_bits)))
    plain = builder.select(addend_wins, c_bits, plain)

    # Significands (value = m * 2^e) and signs.
    ma, ea = _unpack_f64(builder, a_bits)
    mb, eb = _unpack_f64(builder, b_bits)
    mc, ec = _unpack_f64(builder, c_bits)
    product_sign = builder.lshr(builder.xor(a_bits, b_bits), _int(a_bits, 64, 63))
    addend_sign = builder.lshr(c_bits, _int(a_bits, 64, 63))

    # Both terms as 128-bit integers with their top bit at 124 or 125 (room for a carry), and
    # the exponent X of their least significant bit: product in [2^124, 2^126), addend in
    # [2^125, 2^126). A zero addend gets a tiny exponent so that it is always the smaller term.
    product = builder.mul(builder.zext(ma, i128_type), builder.zext(mb, i128_type))
    product = builder.shl(product, _int(product, 128, 20))
    product_x = builder.sub(builder.add(ea, eb), _int(ea, 32, 20))
    addend = builder.shl(builder.zext(mc, i128_type), _int(product, 128, 73))
    addend_x = builder.sub(ec, _int(ec, 32, 73))
    addend_x = builder.select(is_zero(c_bits), _int(ec, 32, -10000), addend_x)

    # Align: keep the term with the larger X, shift the other right by the difference with a
    # sticky bit. Bits are only lost when the difference exceeds 20; the larger term then
    # dominates (it is at least 2^124, the shifted one below 2^105), so the sum keeps at least
    # 70 bits below the rounding position and the sticky bit cannot change the rounding.
    product_larger = builder.icmp_signed(">=", product_x, addend_x)
    big = builder.select(product_larger, product, addend)
    small = builder.select(product_larger, addend, product)
    x = builder.select(product_larger, product_x, addend_x)
    big_sign = builder.select(product_larger, product_sign, addend_sign)
    distance = builder.sub(x, builder.select(product_larger, addend_x, product_x))
    # small < 2^127, so a shift by 127 already leaves only the sticky bit.
    distance = builder.zext(_umin(builder, distance, _int(distance, 32, 127)), i128_type)
    lost_mask = builder.sub(builder.shl(_int(small, 128, 1), distance), _int(small, 128, 1))
    lost = builder.icmp_unsigned("!=", builder.and_(small, lost_mask), _int(small, 128, 0))
    small = builder.or_(builder.lshr(small, distance), builder.zext(lost, i128_type))

    # Add or subtract magnitudes; a negative difference (only when nothing was lost) flips.
    subtract = builder.icmp_unsigned("!=", product_sign, addend_sign)
    difference = builder.sub(big, small)
    negative = builder.and_(subtract, builder.icmp_signed("<", difference, _int(small, 128, 0)))
    difference = builder.select(negative, builder.neg(difference), difference)
    total = builder.select(subtract, difference, builder.add(big, small))
    sign = builder.xor(big_sign, builder.zext(negative, i64_type))

    bits = _round_i128_to_f64(builder, total, x)
    bits = builder.or_(bits, builder.shl(sign, _int(sign, 64, 63)))
    # An exact zero sum is +0 under nearest-even.
    is_zero_total = builder.icmp_unsigned("==", total, _int(total, 128, 0))
    bits = builder.select(is_zero_total, _int(bits, 64, 0), bits)
    bits = builder.select(simple, plain, bits)
    return builder.bitcast(bits, a.type)


def _round_i128_to_f64(builder: Builder, total: Value, x: Value) -> Value:
    """The binary64 bits (sign clear) nearest, ties to even, to total * 2^x, for a non-zero
    128-bit `total` below 2^127 and an i32 exponent `x`; overflow gives infinity."""
    i64_type = shaped_like(total.type, I64)
    top = builder.sub(_int(x, 32, 127), builder.trunc(_ctlz(builder, total), x.type))
    t = builder.add(x, top)  # exponent of the leading bit
    # Exponent of the result's least significant bit: 52 below the leading bit, but not below
    # the subnormal grid.
    lsb = _smax(builder, builder.sub(t, _int(x, 32, 52)), _int(x, 32, -1074))
    shift = builder.sub(lsb, x)

    # shift > 0: drop `shift` bits with nearest-even; at 128 or more everything is below half
    # an ulp (total < 2^127) and the result is zero.
    right = builder.zext(
        _smin(builder, _smax(builder, shift, _int(x, 32, 1)), _int(x, 32, 127)), total.type
    )
    one = _int(total, 128, 1)
    kept = builder.lshr(total, right)
    dropped = builder.and_(total, builder.sub(builder.shl(one, right), one))
    half = builder.shl(one, builder.sub(right, one))
    above = builder.icmp_unsigned(">", dropped, half)
    tie = builder.icmp_unsigned("==", dropped, half)
    odd = builder.icmp_unsigned("!=", builder.and_(kept, one), _int(total, 128, 0))
    round_up = builder.or_(above, builder.and_(tie, odd))
    kept = builder.add(kept, builder.zext(round_up, total.type))
    vanishes = builder.icmp_signed(">", shift, _int(x, 32, 127))
    kept = builder.select(vanishes, _int(total, 128, 0), kept)
    # shift <= 0: the value is exact and needs at most 52 more bits.
    left = builder.zext(
        _smin(builder, builder.neg(_smin(builder, shift, _int(x, 32, 0))), _int(x, 32, 127)),
        total.type,
    )
    exact = builder.shl(total, left)
    significand = builder.trunc(
        builder.select(builder.icmp_signed(">", shift, _int(x, 32, 0)), kept, exact), i64_type
    )

    # The significand includes the implicit bit (or is below 2^52 for subnormals), so adding
    # it to the exponent field minus one builds the number; a rounding carry to 2^53 moves into
    # the exponent, up to infinity.
    field = _smin(
        builder,
        _smax(builder, builder.add(t, _int(x, 32, 1022)), _int(x, 32, 0)),
        _int(x, 32, 2046),
    )
    bits = builder.add(
        builder.shl(builder.zext(field, i64_type), _int(significand, 64, 52)), significand
    )
    overflow = builder.icmp_signed(">", t, _int(x, 32, 1023))
    return builder.select(overflow, _int(bits, 64, F64.float_layout.inf_bits), bits)


# --- fmod -------------------------------------------------------------------------------------


def fmod(builder: Builder, a: Value, b: Value, dtype: DType) -> Value:
    """IEEE fmod(a, b) on f32 or f64 values: the exact remainder of truncating division, with
    the sign of a; NaN (canonical) for NaN operands, an infinite a or a zero b; a itself when
    |a| < |b| (so fmod(x, inf) = x).

    Integer long division on the significands: (m_a * 2^(e_a - e_b)) mod m_b, taking 11 (f64)
    or 40 (f32) exponent bits per 64-bit `urem` step, in a loop bounded by the exponent
    difference (at most 186 steps for f64, 7 for f32). The loop lives in an internal,
    always-inlined helper function, so the caller's builder stays in its block."""
    if dtype not in (F32, F64):
        raise ValueError(f"fmod is defined on f32 and f64, not {dtype.name}")
    name = f"vxla.fmod.{intrinsic_suffix(a.type)}"
    return _helper(builder, name, [a, b], lambda h, p: _fmod_body(h, p[0], p[1], dtype))


def _fmod_body(builder: Builder, a: Value, b: Value, dtype: DType) -> Value:
    layout = dtype.float_layout
    mantissa = layout.mantissa_bits
    i64_type = shaped_like(a.type, I64)
    # Work in 64 bits for both widths.
    a_bits = (
        builder.zext(_to_bits(builder, a, dtype), i64_type)
        if dtype is F32
        else _to_bits(builder, a, dtype)
    )
    b_bits = (
        builder.zext(_to_bits(builder, b, dtype), i64_type)
        if dtype is F32
        else _to_bits(builder, b, dtype)
    )

    def c64(value: int) -> ir.Constant:
        return _int(a_bits, 64, value)

    sign = builder.and_(a_bits, c64(layout.sign_mask))
    a_abs = builder.and_(a_bits, c64(layout.abs_mask))
    b_abs = builder.and_(b_bits, c64(layout.abs_mask))
    inf = c64(layout.inf_bits)
    nan_result = builder.or_(
        builder.or_(
            builder.icmp_unsigned(">=", a_abs, inf), builder.icmp_unsigned(">", b_abs, inf)
        ),
        builder.icmp_unsigned("==", b_abs, c64(0)),
    )
    keep_a = builder.icmp_unsigned("<", a_abs, b_abs)  # includes a = 0 and b = inf
    general = builder.not_(builder.or_(nan_result, keep_a))

    def unpack(magnitude: Value) -> tuple[Value, Value]:
        biased = builder.lshr(magnitude, c64(mantissa))
        fraction = builder.and_(magnitude, c64(layout.mantissa_mask))
        subnormal = builder.icmp_unsigned("==", biased, c64(0))
        significand = builder.select(subnormal, fraction, builder.or_(fraction, c64(1 << mantissa)))
        return significand, builder.select(subnormal, c64(1), biased)

    ma, ea = unpack(a_abs)
    mb, eb = unpack(b_abs)
    # Lanes outside the general case get a divisor of 1 and no steps (urem by 0 is undefined).
    divisor = builder.select(general, mb, c64(1))
    steps_left = builder.select(general, builder.sub(ea, eb), c64(0))
    remainder = builder.urem(ma, divisor)

    # r < m_b < 2^(mantissa+1), so r << chunk stays below 2^64.
    chunk = c64(63 - mantissa)
    entry = builder.block
    loop = builder.append_basic_block("fmod.loop")
    done = builder.append_basic_block("fmod.done")
    builder.branch(loop)
    builder.position_at_end(loop)
    r_phi = builder.phi(i64_type)
    left_phi = builder.phi(i64_type)
    r_phi.add_incoming(remainder, entry)
    left_phi.add_incoming(steps_left, entry)
    step = _umin(builder, left_phi, chunk)
    r_next = builder.urem(builder.shl(r_phi, step), divisor)
    left_next = builder.sub(left_phi, step)
    r_phi.add_incoming(r_next, loop)
    left_phi.add_incoming(left_next, loop)
    more = _any(builder, builder.icmp_unsigned("!=", left_next, c64(0)))
    builder.cbranch(more, loop, done)
    builder.position_at_end(done)

    # The remainder is r * 2^(e_b - bias - mantissa): normalize r to the implicit bit, or write
    # it as a subnormal when the exponent would drop below 1.
    r = r_next
    shift = builder.sub(_ctlz(builder, r), c64(63 - mantissa))  # >= 0 since r < 2^(mantissa+1)
    shift = _umin(builder, shift, c64(63))
    exponent = builder.sub(eb, shift)
    normal = builder.icmp_signed(">=", exponent, c64(1))
    normal_bits = builder.add(
        builder.shl(builder.sub(exponent, c64(1)), c64(mantissa)), builder.shl(r, shift)
    )
    subnormal_bits = builder.shl(r, _umin(builder, builder.sub(eb, c64(1)), c64(63)))
    bits = builder.select(normal, normal_bits, subnormal_bits)
    bits = builder.select(builder.icmp_unsigned("==", r, c64(0)), c64(0), bits)
    bits = builder.or_(bits, sign)
    bits = builder.select(keep_a, a_bits, bits)
    bits = builder.select(nan_result, c64(layout.canonical_nan), bits)
    if dtype is F32:
        bits = builder.trunc(bits, shaped_like(a.type, I32))
    return _from_bits(builder, bits, dtype)


# --- maximum / minimum ------------------------------------------------------------------------


def float_min_max(builder: Builder, a: Value, b: Value, dtype: DType, is_max: bool) -> Value:
    """The contract's maximum (is_max) or minimum of f32/f64 values (f16/bf16 bits work too):
    the canonical NaN if either operand is NaN, otherwise the larger (smaller) value with
    -0 < +0. Decided on the bits, ordered like IEEE totalOrder, so no float select is left to
    be folded."""
    layout = dtype.float_layout
    if dtype in (F32, F64):
        return _float_min_max_ordered(builder, a, b, dtype, is_max)
    a_bits = _to_bits(builder, a, dtype)
    b_bits = _to_bits(builder, b, dtype)

    def order_key(bits: Value) -> Value:
        # Negative numbers: flip the magnitude bits, so larger magnitudes order lower.
        negative = builder.icmp_signed("<", bits, _int(bits, layout.bits, 0))
        flipped = builder.xor(bits, _int(bits, layout.bits, layout.abs_mask))
        return builder.select(negative, flipped, bits)

    a_greater = builder.icmp_signed(">", order_key(a_bits), order_key(b_bits))
    if is_max:
        bits = builder.select(a_greater, a_bits, b_bits)
    else:
        bits = builder.select(a_greater, b_bits, a_bits)
    nan = builder.or_(_is_nan_bits(builder, a_bits, layout), _is_nan_bits(builder, b_bits, layout))
    bits = builder.select(nan, _int(bits, layout.bits, layout.canonical_nan), bits)
    return _from_bits(builder, bits, dtype)


def _float_min_max_ordered(builder: Builder, a: Value, b: Value, dtype: DType, is_max: bool) -> Value:
    """f32/f64 maximum/minimum with fewer steps: an ordered comparison picks the larger
    (smaller) value; equal values (so also -0 and +0) combine their bits with and (max) or or
    (min), which keeps equal values and puts +0 above -0; NaN gives the canonical NaN. Every
    select is on integer bits, so no float select is left for LLVM to fold."""
    layout = dtype.float_layout
    a_bits = _to_bits(builder, a, dtype)
    b_bits = _to_bits(builder, b, dtype)
    wins = builder.fcmp_ordered(">" if is_max else "<", a, b)
    equal = builder.fcmp_ordered("==", a, b)
    tie = builder.and_(a_bits, b_bits) if is_max else builder.or_(a_bits, b_bits)
    bits = builder.select(equal, tie, builder.select(wins, a_bits, b_bits))
    unordered = builder.fcmp_unordered("uno", a, b)
    bits = builder.select(unordered, _int(bits, layout.bits, layout.canonical_nan), bits)
    return _from_bits(builder, bits, dtype)


# --- complex values -------------------------------------------------------------------------
# A c64 (c128) element is held as an i64 (i128): the real part's bits low, the imaginary
# part's high, the element's memory order on the little-endian targets vxla pins.


def _component_type(dtype: DType) -> ir.Type:
    return FLOAT if dtype.component.bits == 32 else DOUBLE


def complex_parts(builder: Builder, value: Value, dtype: DType) -> tuple[Value, Value]:
    """The real and imaginary parts of held complex values, as float or double values."""
    half = dtype.component.bits
    half_int = shaped_like(value.type, ir.IntType(half))
    float_type = shaped_like(value.type, _component_type(dtype))
    low = builder.trunc(value, half_int)
    high = builder.trunc(builder.lshr(value, constant(value.type, half)), half_int)
    return builder.bitcast(low, float_type), builder.bitcast(high, float_type)


def make_complex(builder: Builder, real: Value, imag: Value, dtype: DType) -> Value:
    """Held complex values from their parts, each NaN made canonical."""
    component = dtype.component
    half_int = shaped_like(real.type, ir.IntType(component.bits))
    held = shaped_like(real.type, storage_type(dtype))
    low = builder.bitcast(canonicalize_nan(builder, real, component), half_int)
    high = builder.bitcast(canonicalize_nan(builder, imag, component), half_int)
    shifted = builder.shl(builder.zext(high, held), constant(held, component.bits))
    return builder.or_(builder.zext(low, held), shifted)



# --- convert ----------------------------------------------------------------------------------


def convert(
    builder: Builder, value: Value, source: DType, target: DType, config: CompilerConfig
) -> Value:
    """The contract's `convert` from `source` to `target` (compiler/numerics/convert.py):

    - float -> float: one nearest-even rounding, canonical NaN (f64 -> f16/bf16 through a
      round-to-odd binary32, so still one rounding);
    - integer -> float: one nearest-even rounding of the exact integer;
    - float -> integer: truncation, saturation at the bounds, NaN -> 0;
    - integer -> integer: two's complement wrap; pred -> number: 0/1; number -> pred: x != 0.

    The same type returns `value` unchanged. The code is the same for every target (`config` is
    accepted for symmetry with the other primitives)."""
    del config  # nothing here depends on the target
    return _convert(builder, value, source, target)


def _convert(builder: Builder, value: Value, source: DType, target: DType) -> Value:
    if source == target:
        return value
    if source.is_float8:  # exact in binary32 (a NaN becomes the canonical one)
        value, source = widen_to_f32(builder, value, source), F32
        if target == F32:
            return value
    if target.is_complex:
        if source.is_complex:
            real, imag = (_convert(builder, part, source.component, target.component) for part in complex_parts(builder, value, source))
        else:
            real = _convert(builder, value, source, target.component)
            imag = constant(real.type, 0.0)
        return make_complex(builder, real, imag, target)
    if source.is_sub_byte:
        source = source.holder  # the held value is exact
    if target.is_sub_byte and not source.is_float:
        return hold_sub_byte(builder, _convert(builder, value, source, target.holder), target)
    if target.is_pred:
        return builder.zext(_is_nonzero(builder, value, source), shaped_like(value.type, ir.IntType(8)))
    if source.is_pred:
        source = U8  # stored as 0 or 1 in an i8
    if target.is_float:
        if source.is_float:
            return _float_to_float(builder, value, source, target)
        # Round to odd in binary64 unless binary64 is the target, so that the rounding into
        # the target is the only one.
        return _round_from_f64(
            builder, _integer_to_f64(builder, value, source, target is not F64), target
        )
    if source.is_float:
        return _float_to_integer(builder, _float_to_f64(builder, value, source), target)
    return _integer_to_integer(builder, value, source, target)


def hold_sub_byte(builder: Builder, value: Value, dtype: DType) -> Value:
    """An s4 or u4 value computed in its i8 holder reduced to its type: the low 4 bits, sign-
    or zero-extended. Any other type's value is returned as it is."""
    if not dtype.is_sub_byte:
        return value
    narrow = builder.trunc(value, shaped_like(value.type, ir.IntType(dtype.bits)))
    return (builder.sext if dtype.is_signed else builder.zext)(narrow, value.type)


def _is_nonzero(builder: Builder, value: Value, dtype: DType) -> Value:
    if dtype.is_float:
        # On the bits without the sign: both zeros are false, NaN is true.
        bits = _to_bits(builder, value, dtype)
        magnitude = builder.and_(bits, _int(bits, dtype.bits, dtype.float_layout.abs_mask))
        return builder.icmp_unsigned("!=", magnitude, _int(bits, dtype.bits, 0))
    return builder.icmp_unsigned("!=", value, constant(value.type, 0))


def _float_to_f64(builder: Builder, value: Value, dtype: DType) -> Value:
    """Exact widening of any float type to double (a NaN stays a NaN; callers canonicalize)."""
    if dtype is F64:
        return value
    return builder.fpext(widen_to_f32(builder, value, dtype), shaped_like(value.type, DOUBLE))


def _float_to_float(builder: Builder, value: Value, source: DType, target: DType) -> Value:
    if _exact_in_f32(source) and _exact_in_f32(target):
        # Exact in binary32, then one rounding.
        return round_f32_to(builder, widen_to_f32(builder, value, source), target)
    return _round_from_f64(builder, _float_to_f64(builder, value, source), target)


def _exact_in_f32(dtype: DType) -> bool:
    return dtype in (F16, BF16, F32) or dtype.is_float8


def _integer_to_f64(builder: Builder, value: Value, source: DType, round_to_odd: bool) -> Value:
    """An integer as a double, rounded to nearest-even or to odd. Up to 32 bits the conversion
    is exact; 64-bit integers are split into 32-bit halves (each exact in binary64), whose sum
    is rounded once, with TwoSum giving the error for the round-to-odd step."""
    double_type = shaped_like(value.type, DOUBLE)
    if source.bits < 64:
        if source.is_signed:
            return builder.sitofp(value, double_type)
        return builder.uitofp(value, double_type)
    high = (builder.ashr if source.is_signed else builder.lshr)(value, _int(value, 64, 32))
    low = builder.and_(value, _int(value, 64, 0xFFFFFFFF))
    # Both halves are below 2^32 in magnitude: sitofp is exact and needs no unsigned lowering.
    high_f = builder.fmul(builder.sitofp(high, double_type), _flt(value, DOUBLE, 2.0**32))
    low_f = builder.sitofp(low, double_type)
    total, error = _two_sum(builder, high_f, low_f)
    if round_to_odd:
        return _round_to_odd_sum(builder, total, error)
    return total


def _float_to_integer(builder: Builder, value: Value, target: DType) -> Value:
    """A double to an integer type: truncate towards zero, saturate, NaN -> 0 (every comparison
    with NaN is false, so a NaN takes none of the branches)."""
    bits = target.bits
    int_type = shaped_like(value.type, storage_type(target))
    i64_type = shaped_like(value.type, I64)
    truncated = call_intrinsic(builder, "llvm.trunc", value)
    low_int, high_int = target.integer_bounds
    low, high = float(low_int), float(high_int + 1)
    above = builder.fcmp_ordered(">=", truncated, _flt(value, DOUBLE, high))
    below = builder.fcmp_ordered("<", truncated, _flt(value, DOUBLE, low))
    in_range = builder.fcmp_ordered("<", truncated, _flt(value, DOUBLE, high))
    in_range = builder.and_(
        in_range, builder.fcmp_ordered(">=", truncated, _flt(value, DOUBLE, low))
    )
    safe = builder.select(in_range, truncated, _flt(value, DOUBLE, 0.0))
    if target.is_unsigned and bits == 64:
        # [2^63, 2^64) does not fit fptosi: subtract 2^63 (exact) and put the top bit back.
        upper = builder.fcmp_ordered(">=", safe, _flt(value, DOUBLE, 2.0**63))
        lowered = builder.select(upper, builder.fsub(safe, _flt(value, DOUBLE, 2.0**63)), safe)
        converted = builder.fptosi(lowered, i64_type)
        top = builder.select(upper, _int(converted, 64, 1 << 63), _int(converted, 64, 0))
        converted = builder.or_(converted, top)
    else:
        converted = builder.fptosi(safe, i64_type)
    if target.storage_bits < 64:
        converted = builder.trunc(converted, int_type)
    result = builder.select(above, constant(int_type, high_int), converted)
    return builder.select(below, constant(int_type, low_int), result)


def _integer_to_integer(builder: Builder, value: Value, source: DType, target: DType) -> Value:
    int_type = shaped_like(value.type, ir.IntType(target.bits))
    if target.bits < source.bits:
        return builder.trunc(value, int_type)
    if target.bits == source.bits:
        return value
    if source.is_signed:
        return builder.sext(value, int_type)
    return builder.zext(value, int_type)

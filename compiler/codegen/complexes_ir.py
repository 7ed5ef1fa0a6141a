"""The complex arithmetic of compiler/numerics/complexes.py as LLVM IR, bit for bit.

A c64 element is held as an i64 and a c128 element as an i128: the real part's bits in the
low half, the imaginary part's in the high half, which is the element's memory order on the
little-endian targets vxla pins. So every op that only moves elements moves them as integers,
and the arithmetic here takes the parts out, computes on them with plain IEEE instructions
(no fast-math flags, so no contraction into fma), and puts them back with each NaN made
canonical in the integer domain.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen.llvm_ir import call_intrinsic, constant
from core.dtypes import DType

Value = ir.Value
Builder = ir.IRBuilder


def binary(builder: Builder, opcode: str, a: Value, b: Value, dtype: DType) -> Value:
    """add, subtract, multiply or divide of held complex values."""
    (ar, ai), (br, bi) = nir.complex_parts(builder, a, dtype), nir.complex_parts(builder, b, dtype)
    fmul, fadd, fsub = builder.fmul, builder.fadd, builder.fsub
    if opcode == "add":
        return nir.make_complex(builder, fadd(ar, br), fadd(ai, bi), dtype)
    if opcode == "subtract":
        return nir.make_complex(builder, fsub(ar, br), fsub(ai, bi), dtype)
    if opcode == "multiply":
        return nir.make_complex(builder, fsub(fmul(ar, br), fmul(ai, bi)), fadd(fmul(ar, bi), fmul(ai, br)), dtype)
    if opcode == "divide":
        return _divide(builder, ar, ai, br, bi, dtype)
    raise NotImplementedError(f"complex {opcode}")


def _divide(builder: Builder, ar: Value, ai: Value, br: Value, bi: Value, dtype: DType) -> Value:
    """Smith's algorithm with XLA:CPU's three repairs (complexes.divide)."""
    b = builder
    fmul, fadd, fsub, fdiv = b.fmul, b.fadd, b.fsub, b.fdiv
    zero, one, inf = (constant(ar.type, v) for v in (0.0, 1.0, float("inf")))

    def fabs(x: Value) -> Value:
        return call_intrinsic(b, "llvm.fabs", x)

    def copysign(magnitude: Value, sign: Value) -> Value:
        return call_intrinsic(b, "llvm.copysign", magnitude, sign)

    r_by_imag = fdiv(br, bi)
    d_by_imag = fadd(bi, fmul(r_by_imag, br))
    r_by_real = fdiv(bi, br)
    d_by_real = fadd(br, fmul(r_by_real, bi))
    by_imag = b.fcmp_ordered("<", fabs(br), fabs(bi))
    real = b.select(by_imag, fdiv(fadd(fmul(r_by_imag, ar), ai), d_by_imag), fdiv(fadd(fmul(r_by_real, ai), ar), d_by_real))
    imag = b.select(by_imag, fdiv(fsub(fmul(r_by_imag, ai), ar), d_by_imag), fdiv(fsub(ai, fmul(r_by_real, ar)), d_by_real))

    def finite(x: Value) -> Value:
        return b.fcmp_ordered("!=", fabs(x), inf)

    def is_inf(x: Value) -> Value:
        return b.fcmp_ordered("==", fabs(x), inf)

    def unit(x: Value, infinite: Value) -> Value:
        return copysign(b.select(infinite, one, zero), x)

    def not_nan(x: Value) -> Value:
        return b.fcmp_ordered("ord", x, zero)

    zero_denominator = b.and_(b.and_(b.fcmp_ordered("==", br, zero), b.fcmp_ordered("==", bi, zero)), b.or_(not_nan(ar), not_nan(ai)))
    scale = copysign(inf, br)
    ar_inf, ai_inf, br_inf, bi_inf = (is_inf(x) for x in (ar, ai, br, bi))
    infinite_numerator = b.and_(b.or_(ar_inf, ai_inf), b.and_(finite(br), finite(bi)))
    sar, sai = unit(ar, ar_inf), unit(ai, ai_inf)
    infinite_denominator = b.and_(b.or_(br_inf, bi_inf), b.and_(finite(ar), finite(ai)))
    sbr, sbi = unit(br, br_inf), unit(bi, bi_inf)
    repairs = [
        (zero_denominator, fmul(scale, ar), fmul(scale, ai)),
        (infinite_numerator, fmul(inf, fadd(fmul(sar, br), fmul(sai, bi))), fmul(inf, fsub(fmul(sai, br), fmul(sar, bi)))),
        (infinite_denominator, fmul(zero, fadd(fmul(ar, sbr), fmul(ai, sbi))), fmul(zero, fsub(fmul(ai, sbr), fmul(ar, sbi)))),
    ]
    repaired_real, repaired_imag = real, imag
    for case, case_real, case_imag in reversed(repairs):
        repaired_real = b.select(case, case_real, repaired_real)
        repaired_imag = b.select(case, case_imag, repaired_imag)
    both_nan = b.and_(b.fcmp_unordered("uno", real, zero), b.fcmp_unordered("uno", imag, zero))
    return nir.make_complex(b, b.select(both_nan, repaired_real, real), b.select(both_nan, repaired_imag, imag), dtype)


def negate(builder: Builder, a: Value, dtype: DType) -> Value:
    real, imag = nir.complex_parts(builder, a, dtype)
    return nir.make_complex(builder, builder.fneg(real), builder.fneg(imag), dtype)


def absolute(builder: Builder, a: Value, dtype: DType) -> Value:
    """hi * sqrt(1 + (lo/hi)^2), or lo where that is NaN (complexes.absolute)."""
    component = dtype.component
    real, imag = nir.complex_parts(builder, a, dtype)
    magnitude_r, magnitude_i = call_intrinsic(builder, "llvm.fabs", real), call_intrinsic(builder, "llvm.fabs", imag)
    high = nir.float_min_max(builder, magnitude_r, magnitude_i, component, True)
    low = nir.float_min_max(builder, magnitude_r, magnitude_i, component, False)
    ratio = builder.fdiv(low, high)
    one = constant(ratio.type, 1.0)
    result = builder.fmul(high, call_intrinsic(builder, "llvm.sqrt", builder.fadd(one, builder.fmul(ratio, ratio))))
    chosen = builder.select(builder.fcmp_unordered("uno", result, result), low, result)
    return nir.canonicalize_nan(builder, chosen, component)


def sign(builder: Builder, a: Value, dtype: DType) -> Value:
    """a / |a| part by part, 0 + 0i where |a| = 0 (complexes.sign)."""
    component = dtype.component
    real, imag = nir.complex_parts(builder, a, dtype)
    magnitude = absolute(builder, a, dtype)
    zero = constant(magnitude.type, 0.0)
    is_zero = builder.fcmp_ordered("==", magnitude, zero)
    divisor = builder.select(is_zero, constant(magnitude.type, 1.0), magnitude)

    def part(x: Value) -> Value:
        return builder.select(is_zero, zero, nir.canonicalize_nan(builder, builder.fdiv(x, divisor), component))

    return nir.make_complex(builder, part(real), part(imag), dtype)


def equal(builder: Builder, a: Value, b: Value, dtype: DType) -> Value:
    """i1 values: both parts equal."""
    (ar, ai), (br, bi) = nir.complex_parts(builder, a, dtype), nir.complex_parts(builder, b, dtype)
    return builder.and_(builder.fcmp_ordered("==", ar, br), builder.fcmp_ordered("==", ai, bi))

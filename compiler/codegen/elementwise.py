"""Elementwise ops: the per-element IR of every elementwise opcode, elementwise kernels (a
vector loop over the output plus a scalar tail), and scalar computations (reducers,
comparators, map and scatter computations) emitted inline on lanes of any width.

Mirror of compiler/reference/elementwise.py; the numerics come from numerics_ir (the
contract's primitives) and mathlib_ir (the math functions).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from attest.digests import canonical_tensor_bytes
from compiler.codegen import complexes_ir as cir
from compiler.codegen import mathlib_ir
from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.data_movement import emit_byte_copy
from compiler.codegen.kernel import Kernel
from compiler.codegen.llvm_ir import (
    I8,
    I64,
    call_intrinsic,
    constant,
    splat,
    storage_type,
    vector_of,
    width_of,
)
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo import stochastic_convert
from compiler.hlo.errors import HloUnsupportedError
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import COMPUTED_PER_ELEMENT
from compiler.numerics.mathlib import UNARY_OPCODES
from core.dtypes import BF16, C64, C128, F16, F32, F64, DType

NARROW = (F16, BF16)

# Canonical NaNs inside a fused element expression. The contract makes every NaN result the
# canonical one, and its bits are looked at only where a value is stored or an op reads a
# NaN's bits. The emitters of these ops on f32/f64 operands only ask whether an operand is
# NaN (IEEE arithmetic gives a NaN for any NaN operand; the compares and min/max test
# unordered; select and the sign and rounding ops pass a NaN on to their own
# canonicalization), so their operands may hold any NaN encoding (a TOTALORDER compare reads
# the bits and is the exception)...
NAN_BLIND_OPERANDS = frozenset({
    "add", "subtract", "multiply", "divide", "negate", "abs", "sqrt", "floor", "ceil", "round-nearest-even",
    "round-nearest-afz", "sign", "maximum", "minimum", "clamp", "is-finite", "select", "compare",
})  # fmt: skip
# ...and these ops' f32/f64 results may be left as their IEEE instruction made them, when
# every user is NaN-blind (the fusion emitter decides: compiler/codegen/fusion.py): the
# and, compare and select of the canonicalization are saved; the bits wherever bits are seen
# are the same.
DEFERRED_CANONICAL_NAN = frozenset({"add", "subtract", "multiply", "divide", "negate", "abs", "sqrt", "select"})





def vector_width(config) -> int:
    """Lanes per loop iteration: a full register of f32 on the target (results never depend
    on it)."""
    return config.vector_bits // 32


class ElementEmitter:
    """Emits the per-element IR of elementwise instructions on lane values (scalars or
    vectors, in storage types: pred as i8, f16/bf16 as i16 bits)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.builder = kernel.builder
        self.config = kernel.config

    # --- helpers --------------------------------------------------------------------------
    def _intrinsic(self, name: str, value: ir.Value) -> ir.Value:
        return call_intrinsic(self.builder, f"llvm.{name}", value)

    def _to_bool(self, pred: ir.Value) -> ir.Value:
        return self.builder.icmp_unsigned("!=", pred, constant(pred.type, 0))

    def _from_bool(self, flag: ir.Value) -> ir.Value:
        return self.builder.zext(flag, vector_of(I8, width_of(flag)))

    def _float_math(self, dtype: DType, function, *values: ir.Value, canonical: bool = True) -> ir.Value:
        """Applies an f32/f64 computation (its NaN made canonical unless `canonical` is
        false); narrow types go through f32 and round once."""
        if dtype in NARROW:
            widened = [nir.widen_to_f32(self.builder, v, dtype) for v in values]
            return nir.round_f32_to(self.builder, function(F32, *widened), dtype)
        value = function(dtype, *values)
        return nir.canonicalize_nan(self.builder, value, dtype) if canonical else value

    def _math_call(self, name: str, dtype: DType, *values: ir.Value) -> ir.Value:
        width = width_of(values[0])
        owner = self.kernel.owner
        declare_exact = owner.use_library if self.config.architecture.links_libraries else None
        function = mathlib_ir.math_function(owner.module, name, dtype.name, width, self.config, declare_exact)
        return self.builder.call(function, list(values))

    # --- the ops --------------------------------------------------------------------------
    def emit(self, instruction: Instruction, operands: list[ir.Value], canonical: bool = True) -> ir.Value:
        """The value of `instruction` given its operands' lane values (an s4 or u4 result
        computed in its i8 holder and reduced to its 4 bits, as the reference does).
        `canonical=False`: an op of DEFERRED_CANONICAL_NAN may leave its NaN as made."""
        return nir.hold_sub_byte(self.builder, self._emit(instruction, operands, canonical), instruction.shape.dtype)  # type: ignore[union-attr]

    def _emit(self, instruction: Instruction, operands: list[ir.Value], canonical: bool = True) -> ir.Value:
        opcode = instruction.opcode
        result_type = instruction.shape.dtype  # type: ignore[union-attr]
        operand_type = instruction.operands[0].shape.dtype if instruction.operands else result_type  # type: ignore[union-attr]
        b = self.builder
        if opcode in UNARY_OPCODES:
            return self._float_math(operand_type, lambda t, x: self._math_call(UNARY_OPCODES[opcode], t, x), operands[0])
        if opcode in ("power", "atan2") and operand_type.is_float:
            return self._float_math(operand_type, lambda t, x, y: self._math_call(opcode, t, x, y), *operands)
        if opcode == "convert":
            return nir.convert(b, operands[0], operand_type, result_type, self.config)
        if opcode == "bitcast-convert":
            return b.bitcast(operands[0], vector_of(storage_type(result_type), width_of(operands[0])))
        if opcode == "compare":
            return self._compare(instruction, operand_type, *operands)
        if opcode == "select":
            pred, on_true, on_false = operands
            return b.select(self._to_bool(pred), on_true, on_false)
        if opcode == "clamp":
            low, x, high = operands
            return self._min_max(result_type, high, self._min_max(result_type, low, x, True), False)
        if opcode in ("maximum", "minimum"):
            return self._min_max(result_type, operands[0], operands[1], opcode == "maximum")
        if opcode in ("real", "imag") and not operand_type.is_complex:  # x, and +0 (as XLA)
            return operands[0] if opcode == "real" else constant(operands[0].type, 0.0)
        if operand_type.is_complex or result_type.is_complex:
            return self._complex_op(opcode, operand_type, operands)
        if opcode == "reduce-precision":
            exponent_bits, mantissa_bits = instruction.attrs["exponent_bits"], instruction.attrs["mantissa_bits"]
            return nir.reduce_precision(b, operands[0], result_type, exponent_bits, mantissa_bits)  # type: ignore[arg-type]
        if result_type.is_float:
            return self._float_op(opcode, operand_type, operands, canonical)
        if result_type.is_pred and opcode != "is-finite" or operand_type.is_pred:
            return self._pred_op(opcode, operands)
        if opcode == "is-finite":
            return self._is_finite(operand_type, operands[0])
        return self._integer_op(opcode, result_type, operands)

    def _complex_op(self, opcode: str, dtype: DType, operands: list[ir.Value]) -> ir.Value:
        """The complex ops (dtype is the operand type; for `complex` its float parts)."""
        b = self.builder
        if opcode == "complex":
            return nir.make_complex(b, operands[0], operands[1], C64 if dtype is F32 else C128)
        if opcode in ("real", "imag"):
            return nir.complex_parts(b, operands[0], dtype)[opcode == "imag"]
        if opcode == "negate":
            return cir.negate(b, operands[0], dtype)
        if opcode == "abs":
            return cir.absolute(b, operands[0], dtype)
        if opcode == "sign":
            return cir.sign(b, operands[0], dtype)
        return cir.binary(b, opcode, operands[0], operands[1], dtype)

    def _float_op(self, opcode: str, dtype: DType, operands: list[ir.Value], canonical: bool = True) -> ir.Value:
        b = self.builder
        binary = {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul, "divide": b.fdiv}
        canonical = canonical or opcode not in DEFERRED_CANONICAL_NAN
        if opcode in binary:
            return self._float_math(dtype, lambda t, x, y: binary[opcode](x, y), *operands, canonical=canonical)
        if opcode == "remainder":
            return self._float_math(dtype, lambda t, x, y: nir.fmod(b, x, y, t), *operands)
        if opcode == "negate":
            return self._float_math(dtype, lambda t, x: b.fneg(x), operands[0], canonical=canonical)
        if opcode == "abs":
            return self._float_math(dtype, lambda t, x: self._intrinsic("fabs", x), operands[0], canonical=canonical)
        if opcode == "sqrt":
            return self._float_math(dtype, lambda t, x: self._intrinsic("sqrt", x), operands[0], canonical=canonical)
        if opcode == "floor":
            return self._float_math(dtype, lambda t, x: self._intrinsic("floor", x), operands[0])
        if opcode == "ceil":
            return self._float_math(dtype, lambda t, x: self._intrinsic("ceil", x), operands[0])
        if opcode == "round-nearest-even":
            return self._float_math(dtype, lambda t, x: self._intrinsic("roundeven", x), operands[0])
        if opcode == "round-nearest-afz":
            return self._float_math(dtype, self._round_half_away, operands[0])
        if opcode == "sign":
            return self._float_math(dtype, self._float_sign, operands[0])
        raise NotImplementedError(f"float {opcode}")

    def _round_half_away(self, dtype: DType, x: ir.Value) -> ir.Value:
        b = self.builder
        truncated = self._intrinsic("trunc", x)
        distance = self._intrinsic("fabs", b.fsub(x, truncated))
        one = self._copysign(constant(x.type, 1.0), x)
        away = b.fcmp_ordered(">=", distance, constant(x.type, 0.5))
        return b.select(away, b.fadd(truncated, one), truncated)

    def _copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        return call_intrinsic(self.builder, "llvm.copysign", magnitude, sign)

    def _float_sign(self, dtype: DType, x: ir.Value) -> ir.Value:
        b = self.builder
        keep = b.fcmp_unordered("==", x, constant(x.type, 0.0))  # zero or NaN: itself
        return b.select(keep, x, self._copysign(constant(x.type, 1.0), x))

    def _min_max(self, dtype: DType, a: ir.Value, c: ir.Value, is_max: bool) -> ir.Value:
        b = self.builder
        if dtype.is_float:
            if dtype in NARROW:
                wide = nir.float_min_max(b, nir.widen_to_f32(b, a, dtype), nir.widen_to_f32(b, c, dtype), F32, is_max)
                return nir.round_f32_to(b, wide, dtype)
            return nir.float_min_max(b, a, c, dtype, is_max)
        if dtype.is_pred:
            return b.or_(a, c) if is_max else b.and_(a, c)
        compare = b.icmp_signed if dtype.is_signed else b.icmp_unsigned
        return b.select(compare(">=" if is_max else "<=", a, c), a, c)

    def _compare(self, instruction: Instruction, dtype: DType, a: ir.Value, c: ir.Value) -> ir.Value:
        b = self.builder
        direction = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}[str(instruction.attrs["direction"])]
        kind = instruction.attrs.get("type")
        if dtype.is_complex:  # EQ or NE only (the verifier's rule)
            same = cir.equal(b, a, c, dtype)
            return self._from_bool(same if direction == "==" else b.not_(same))
        if dtype.is_float and kind == "TOTALORDER":
            return self._from_bool(b.icmp_signed(direction, self._total_key(a, dtype), self._total_key(c, dtype)))
        if dtype.is_float:
            if dtype in NARROW:
                a, c = nir.widen_to_f32(b, a, dtype), nir.widen_to_f32(b, c, dtype)
            flag = b.fcmp_unordered("!=", a, c) if direction == "!=" else b.fcmp_ordered(direction, a, c)
            return self._from_bool(flag)
        compare = b.icmp_signed if dtype.is_signed else b.icmp_unsigned
        return self._from_bool(compare(direction, a, c))

    def strictly_ordered(self, a: ir.Value, c: ir.Value, dtype: DType) -> ir.Value:
        """a < c (i1) in topk's order: the IEEE totalOrder for floats, integer order else."""
        b = self.builder
        if dtype.is_float:
            return b.icmp_signed("<", self._total_key(a, dtype), self._total_key(c, dtype))
        return (b.icmp_signed if dtype.is_signed else b.icmp_unsigned)("<", a, c)

    def _total_key(self, value: ir.Value, dtype: DType) -> ir.Value:
        b = self.builder
        width = width_of(value)
        int_type = vector_of(ir.IntType(dtype.bits), width)
        bits = value if dtype in NARROW else b.bitcast(value, int_type)
        magnitude = constant(int_type, (1 << (dtype.bits - 1)) - 1)
        negative = b.icmp_signed("<", bits, constant(int_type, 0))
        return b.select(negative, b.xor(bits, magnitude), bits)

    def _is_finite(self, dtype: DType, x: ir.Value) -> ir.Value:
        b = self.builder
        if dtype in NARROW:
            x = nir.widen_to_f32(b, x, dtype)
        magnitude = self._intrinsic("fabs", x)
        return self._from_bool(b.fcmp_ordered("<", magnitude, constant(x.type, float("inf"))))

    def _pred_op(self, opcode: str, operands: list[ir.Value]) -> ir.Value:
        b = self.builder
        if opcode in ("and", "multiply", "minimum"):
            return b.and_(operands[0], operands[1])
        if opcode in ("or", "add", "maximum"):
            return b.or_(operands[0], operands[1])
        if opcode == "xor":
            return b.xor(operands[0], operands[1])
        if opcode == "not":
            return b.xor(operands[0], constant(operands[0].type, 1))
        raise NotImplementedError(f"pred {opcode}")

    def _integer_op(self, opcode: str, dtype: DType, operands: list[ir.Value]) -> ir.Value:
        b = self.builder
        x = operands[0]
        zero = constant(x.type, 0)
        if opcode == "add":
            return b.add(x, operands[1])
        if opcode == "subtract":
            return b.sub(x, operands[1])
        if opcode == "multiply":
            return b.mul(x, operands[1])
        if opcode == "and":
            return b.and_(x, operands[1])
        if opcode == "or":
            return b.or_(x, operands[1])
        if opcode == "xor":
            return b.xor(x, operands[1])
        if opcode == "not":
            return b.xor(x, constant(x.type, -1))
        if opcode in ("popcnt", "count-leading-zeros"):
            return self._bit_count(opcode, dtype, x)
        if opcode == "negate":
            return b.sub(zero, x)
        if opcode == "abs":
            return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x) if dtype.is_signed else x
        if opcode == "sign":
            if dtype.is_unsigned:
                return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
            positive = b.zext(b.icmp_signed(">", x, zero), x.type)
            negative = b.zext(b.icmp_signed("<", x, zero), x.type)
            return b.sub(positive, negative)
        if opcode in ("divide", "remainder"):
            return self._divide(opcode, dtype, x, operands[1])
        if opcode.startswith("shift"):
            return self._shift(opcode, dtype, x, operands[1])
        if opcode == "power":
            return self._integer_power(dtype, x, operands[1])
        raise NotImplementedError(f"integer {opcode}")

    def _bit_count(self, opcode: str, dtype: DType, x: ir.Value) -> ir.Value:
        """popcnt or count-leading-zeros of the type's own bits (an s4 or u4 holder's upper
        four bits masked off; their four leading zeros not counted)."""
        b = self.builder
        if dtype.is_sub_byte:
            x = b.and_(x, constant(x.type, (1 << dtype.bits) - 1))
        if opcode == "popcnt":
            return call_intrinsic(b, "llvm.ctpop", x)
        zeros = call_intrinsic(b, "llvm.ctlz", x, constant(ir.IntType(1), 0))
        return b.sub(zeros, constant(x.type, dtype.storage_bits - dtype.bits)) if dtype.is_sub_byte else zeros

    def _divide(self, opcode: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.builder
        zero, one = constant(x.type, 0), constant(x.type, 1)
        by_zero = b.icmp_unsigned("==", y, zero)
        if dtype.is_signed:
            minimum = constant(x.type, -(1 << (dtype.bits - 1)))
            overflow = b.and_(b.icmp_signed("==", x, minimum), b.icmp_signed("==", y, constant(x.type, -1)))
            safe = b.select(b.or_(by_zero, overflow), one, y)
            if opcode == "divide":
                quotient = b.select(overflow, minimum, b.sdiv(x, safe))
                return b.select(by_zero, constant(x.type, -1), quotient)
            remainder = b.select(overflow, zero, b.srem(x, safe))
            return b.select(by_zero, x, remainder)
        safe = b.select(by_zero, one, y)
        if opcode == "divide":
            return b.select(by_zero, constant(x.type, -1), b.udiv(x, safe))
        return b.select(by_zero, x, b.urem(x, safe))

    def _shift(self, opcode: str, dtype: DType, x: ir.Value, amount: ir.Value) -> ir.Value:
        b = self.builder
        too_far = b.icmp_unsigned(">=", amount, constant(x.type, dtype.bits))
        if opcode == "shift-right-arithmetic":
            clamped = b.select(too_far, constant(x.type, dtype.bits - 1), amount)
            return b.ashr(x, clamped)
        clamped = b.select(too_far, constant(x.type, 0), amount)
        if opcode == "shift-right-logical" and dtype.is_sub_byte:
            x = b.and_(x, constant(x.type, (1 << dtype.bits) - 1))  # shift in zeros at bit 3
        shifted = b.shl(x, clamped) if opcode == "shift-left" else b.lshr(x, clamped)
        return b.select(too_far, constant(x.type, 0), shifted)

    def _integer_power(self, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.builder
        one = constant(x.type, 1)
        result, base, exponent = one, x, y
        for _ in range(dtype.bits):
            odd = b.icmp_unsigned("==", b.and_(exponent, one), one)
            result = b.select(odd, b.mul(result, base), result)
            base = b.mul(base, base)
            exponent = b.lshr(exponent, one)
        if dtype.is_signed:
            negative = b.icmp_signed("<", y, constant(x.type, 0))
            x_is_one = b.icmp_signed("==", x, one)
            result = b.select(negative, b.select(x_is_one, one, constant(x.type, 0)), result)
        return result

    # --- scalar computations --------------------------------------------------------------
    def emit_computation(self, computation: Computation, arguments: list[ir.Value]) -> list[ir.Value]:
        """Inlines a computation of scalars on lane values; returns its (flattened) results."""
        return _flatten(self._emit_structured(computation, arguments))

    def _emit_structured(self, computation: Computation, arguments: list) -> object:
        values: dict[int, object] = {}
        for instruction in computation.post_order():
            opcode = instruction.opcode
            operands = [values[id(op)] for op in instruction.operands]
            if opcode == "parameter":
                value: object = arguments[instruction.parameter_number]  # type: ignore[index]
            elif opcode == "constant":
                value = self._splat_literal(instruction, _max_width(arguments))
            elif opcode == "tuple":
                value = tuple(operands)
            elif opcode == "get-tuple-element":
                value = operands[0][instruction.attrs["index"]]  # type: ignore[index]
            elif opcode == "copy":
                value = operands[0]
            elif opcode == "call":
                callee = instruction.attrs["to_apply"]
                assert isinstance(callee, Computation)
                value = self._emit_structured(callee, operands)
            elif opcode in COMPUTED_PER_ELEMENT:
                value = self.emit(instruction, self._broadcast_operands(operands))  # type: ignore[arg-type]
            else:
                raise HloUnsupportedError(f"{opcode} inside a scalar computation is not supported", instruction.location, instruction.name)
            values[id(instruction)] = value
        return values[id(computation.root)]

    def _broadcast_operands(self, operands: list[ir.Value]) -> list[ir.Value]:
        width = max(width_of(v) for v in operands)
        return [self.splat(v, width) for v in operands]

    def splat(self, value: ir.Value, width: int) -> ir.Value:
        """`value` in every one of `width` lanes (unchanged if already a vector)."""
        if width == 1 or isinstance(value.type, ir.VectorType):
            return value
        return splat(self.builder, value, width)

    def _splat_literal(self, instruction: Instruction, width: int) -> ir.Value:
        return constant(vector_of(storage_type(instruction.array_shape.dtype), width), literal_scalar(instruction))


def literal_scalar(instruction: Instruction):
    """The Python value of a scalar literal as its IR storage constant expects it."""
    dtype = instruction.array_shape.dtype
    if dtype.is_complex:  # held as one integer: the real part's bits low, the imaginary part's high
        return int.from_bytes(canonical_tensor_bytes(np.asarray(instruction.literal).reshape(-1)[:1]), "little")
    data = np.frombuffer(canonical_tensor_bytes(np.asarray(instruction.literal)), dtype=_bits_numpy(dtype))
    raw = int(data.reshape(-1)[0])
    if dtype is F32:
        return float(np.array([raw], np.uint32).view(np.float32)[0])
    if dtype is F64:
        return float(np.array([raw], np.uint64).view(np.float64)[0])
    if dtype in NARROW or dtype.is_unsigned or dtype.is_pred:
        return raw
    return int(np.array([raw], _bits_numpy(dtype)).view(dtype.numpy)[0])


def _bits_numpy(dtype: DType):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[dtype.storage_bits]


def _max_width(arguments: list) -> int:
    widths = [width_of(a) for a in _flatten(tuple(arguments))]
    return max(widths, default=1)


def _flatten(value) -> list[ir.Value]:
    if isinstance(value, tuple):
        out: list[ir.Value] = []
        for element in value:
            out.extend(_flatten(element))
        return out
    return [value]


# --- kernels ---------------------------------------------------------------------------------


def emit_elementwise(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """out[i] = f(operands[i]...) over the output's elements, W lanes at a time."""
    shape = instruction.array_shape
    output = lowering.new_buffer(shape)
    count = shape.element_count
    if count == 0:
        return output
    width = vector_width(lowering.config)
    dtypes = [op.array_shape.dtype for op in instruction.operands]
    scalar_operand = [op.array_shape.rank == 0 and shape.rank > 0 for op in instruction.operands]
    with lowering.kernels.kernel(instruction.opcode) as kernel:
        emitter = ElementEmitter(kernel)
        b = kernel.builder
        bases = [kernel.buffer(ref) for ref in operands]  # type: ignore[arg-type]
        out_base = kernel.buffer(output)
        scalars = [kernel.load(base, dtype, I64(0)) if is_scalar else None for base, dtype, is_scalar in zip(bases, dtypes, scalar_operand, strict=True)]
        span = b.sub(kernel.end, kernel.begin)
        vector_end = b.add(kernel.begin, b.mul(b.udiv(span, I64(width)), I64(width)))

        def body(index: ir.Value, lane_count: int) -> None:
            values = []
            for base, dtype, scalar in zip(bases, dtypes, scalars, strict=True):
                values.append(emitter.splat(scalar, lane_count) if scalar is not None else kernel.load(base, dtype, index, lane_count))
            kernel.store(emitter.emit(instruction, values), out_base, shape.dtype, index)

        with kernel.loop(kernel.begin, vector_end, width, "v") as index:
            body(index, width)
        with kernel.loop(vector_end, kernel.end, 1, "s") as index:
            body(index, 1)
    steps.append(P.KernelStep(kernel.name, count, grain=16384, instruction=instruction.name))
    # Each element is read before it is written at the same position: an operand of the same
    # size may share the output's memory when this is its last use.
    for ref, scalar in zip(operands, scalar_operand, strict=True):
        if not scalar and isinstance(ref, int) and lowering.buffer(ref).nbytes == shape.byte_size:
            lowering.in_place.append((output, ref))
    return output


def emit_map(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """map: the computation applied to each element (inlined, one lane at a time)."""
    shape = instruction.array_shape
    output = lowering.new_buffer(shape)
    if shape.element_count == 0:
        return output
    computation = instruction.attrs["to_apply"]
    assert isinstance(computation, Computation)
    with lowering.kernels.kernel("map") as kernel:
        emitter = ElementEmitter(kernel)
        bases = [kernel.buffer(ref) for ref in operands]  # type: ignore[arg-type]
        out_base = kernel.buffer(output)
        with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
            values = [kernel.load(base, op.array_shape.dtype, index) for base, op in zip(bases, instruction.operands, strict=True)]
            (result,) = emitter.emit_computation(computation, values)
            kernel.store(result, out_base, shape.dtype, index)
    steps.append(P.KernelStep(kernel.name, shape.element_count, grain=4096, instruction=instruction.name))
    return output


def _copy(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """A copy is its operand's value: values are never written twice, so it shares them."""
    return operands[0]


def _bitcast_convert(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    if instruction.operands[0].array_shape.dtype.bits == instruction.array_shape.dtype.bits:
        return emit_elementwise(lowering, instruction, operands, steps)
    # Between widths the little-endian bytes are already in place, row-major.
    return emit_byte_copy(lowering, instruction, operands, steps)


def _stochastic_convert(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """XLA's decomposition (compiler/hlo/stochastic_convert.py) lowered in its place."""
    inner, result = lowering.lower_computation(stochastic_convert.expansion(instruction), operands)
    steps.extend(inner)
    return result


EMITTERS = family_table(
    "elementwise", globals(),
    shared={**dict.fromkeys(sorted(COMPUTED_PER_ELEMENT - {"bitcast-convert"}), emit_elementwise), "map": emit_map},
)


"""The shape verifier: infers every instruction's shape from its operands and attributes,
and rejects a module whose declared shapes, operand counts, called computations or opcodes
are inconsistent or outside the numerics contract."""

from __future__ import annotations

from collections.abc import Callable

from compiler.hlo import attributes as attr
from compiler.hlo.errors import HloUnsupportedError, HloVerifyError
from compiler.hlo.ir import Computation, CycleError, Instruction, Module
from compiler.hlo.opcodes import COMPLEX_OPCODES, FLOAT8_OPCODES, SUPPORTED, UNSUPPORTED_REASONS
from compiler.hlo.scan import ScanForm, results_of, stacked, without
from compiler.hlo.shape import ArrayShape, Shape, TupleShape, flatten, tuple_depth
from compiler.numerics import linalg, random_bits
from compiler.numerics.fft import FFT_TYPES
from core.dtypes import BF16, C64, C128, F16, F32, F64, PRED, S32, U64, DType

MAX_CALL_DEPTH = 64


class _Fail(Exception):
    """Raised by shape rules; turned into an HloVerifyError naming the instruction."""


class _Unsupported(_Fail):
    """Raised by shape rules for a well-formed use the contract leaves out; turned into an
    HloUnsupportedError naming the instruction."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise _Fail(message)


def _array(instruction: Instruction, index: int) -> ArrayShape:
    _check(index < len(instruction.operands), f"missing operand {index}")
    shape = instruction.operands[index].shape
    _check(isinstance(shape, ArrayShape), f"operand {index} must be an array, not a tuple")
    assert isinstance(shape, ArrayShape)
    return shape


def _operand_count(instruction: Instruction, expected: int | tuple[int, int | None]) -> None:
    count = len(instruction.operands)
    if isinstance(expected, int):
        _check(count == expected, f"{instruction.opcode} takes {expected} operands, got {count}")
        return
    low, high = expected
    _check(count >= low, f"{instruction.opcode} takes at least {low} operands, got {count}")
    if high is not None:
        _check(count <= high, f"{instruction.opcode} takes at most {high} operands, got {count}")


def _attr(instruction: Instruction, key: str, default: object = None) -> object:
    if key in instruction.attrs:
        return instruction.attrs[key]
    _check(default is not None, f"{instruction.opcode} needs attribute {key}=")
    return default


def _int_list(instruction: Instruction, key: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    value = _attr(instruction, key, default)
    _check(isinstance(value, tuple) and all(isinstance(v, int) for v in value), f"{key} must be a list of integers")
    assert isinstance(value, tuple)
    return value


def _computation(instruction: Instruction, key: str) -> Computation:
    value = instruction.attrs.get(key)
    _check(isinstance(value, Computation), f"{instruction.opcode} needs {key}=%computation")
    assert isinstance(value, Computation)
    return value


def _dims_in_range(dims: tuple[int, ...], rank: int, what: str) -> None:
    _check(len(set(dims)) == len(dims), f"{what} {list(dims)} has a repeated dimension")
    _check(all(0 <= d < rank for d in dims), f"{what} {list(dims)} out of range for rank {rank}")


def _numeric(dtype: DType, opcode: str) -> None:
    _check(not dtype.is_pred, f"{opcode} is not defined on pred")


def _float(dtype: DType, opcode: str) -> None:
    _check(dtype.is_float, f"{opcode} needs a floating-point operand, got {dtype.name}")


def _integral(dtype: DType, opcode: str) -> None:
    _check(dtype.is_integer, f"{opcode} needs an integer operand, got {dtype.name}")


def _complex_or_real(dtype: DType, opcode: str) -> None:
    _check(dtype.is_complex or dtype.is_float, f"{opcode} needs a complex or floating-point operand, got {dtype.name}")


def _complex_parts(dtype: DType, opcode: str) -> None:
    _check(dtype in (F32, F64), f"complex is made of f32 or f64 parts, not {dtype.name}")


def _bitwise(dtype: DType, opcode: str) -> None:
    _check(dtype.is_integer or dtype.is_pred, f"{opcode} needs a pred or integer operand, got {dtype.name}")


# --- elementwise -----------------------------------------------------------------------------

_UNARY_TYPE_RULES: dict[str, Callable[[DType, str], None]] = {
    "negate": _numeric,
    "abs": _numeric,
    "sign": _numeric,
    "not": _bitwise,
    "copy": lambda dtype, opcode: None,
    "real": _complex_or_real,
    "imag": _complex_or_real,
    "reduce-precision": _float,
    "popcnt": _integral,
    "count-leading-zeros": _integral,
}
for _op in ("floor", "ceil", "round-nearest-even", "round-nearest-afz", "exponential",
            "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt", "rsqrt",
            "cbrt", "erf", "sine", "cosine", "is-finite"):  # fmt: skip
    _UNARY_TYPE_RULES[_op] = _float

_BINARY_TYPE_RULES: dict[str, Callable[[DType, str], None]] = {
    "add": lambda dtype, opcode: None,  # on pred: or (as XLA's evaluator)
    "subtract": _numeric,
    "multiply": lambda dtype, opcode: None,  # on pred: and
    "divide": _numeric,
    "remainder": _numeric,
    "power": _numeric,
    "maximum": lambda dtype, opcode: None,
    "minimum": lambda dtype, opcode: None,
    "atan2": _float,
    "and": _bitwise,
    "or": _bitwise,
    "xor": _bitwise,
    "shift-left": _integral,
    "shift-right-logical": _integral,
    "shift-right-arithmetic": _integral,
    "compare": lambda dtype, opcode: None,
    "complex": _complex_parts,
}


def _unary(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    if instruction.opcode == "copy" and not isinstance(instruction.operands[0].shape, ArrayShape):
        return instruction.operands[0].shape  # a tuple's copy is the tuple
    operand = _array(instruction, 0)
    _UNARY_TYPE_RULES[instruction.opcode](operand.dtype, instruction.opcode)
    if instruction.opcode == "reduce-precision":
        exponent_bits, mantissa_bits = _attr(instruction, "exponent_bits"), _attr(instruction, "mantissa_bits")
        _check(isinstance(exponent_bits, int) and exponent_bits >= 1, "reduce-precision needs exponent_bits >= 1")
        _check(isinstance(mantissa_bits, int) and mantissa_bits >= 0, "reduce-precision needs mantissa_bits >= 0")
    if instruction.opcode == "is-finite":
        return ArrayShape.of(PRED, operand.dims)
    if instruction.opcode in ("abs", "real", "imag") and operand.dtype.is_complex:
        return ArrayShape.of(operand.dtype.component, operand.dims)
    return ArrayShape.of(operand.dtype, operand.dims)


def _binary(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    lhs, rhs = _array(instruction, 0), _array(instruction, 1)
    _check(lhs.dtype == rhs.dtype, f"operand types differ: {lhs.dtype.name} and {rhs.dtype.name}")
    _check(lhs.dims == rhs.dims, f"operand dimensions differ: {list(lhs.dims)} and {list(rhs.dims)}")
    _BINARY_TYPE_RULES[instruction.opcode](lhs.dtype, instruction.opcode)
    if instruction.opcode == "compare":
        direction = _attr(instruction, "direction")
        _check(direction in attr.COMPARISON_DIRECTIONS, f"unknown comparison direction {direction}")
        kind = instruction.attrs.get("type")
        if kind is not None:
            _check(kind in attr.COMPARISON_TYPES, f"unknown comparison type {kind}")
            allowed = {"FLOAT": lhs.dtype.is_float, "TOTALORDER": lhs.dtype.is_float,
                       "SIGNED": lhs.dtype.is_signed or lhs.dtype.is_pred,
                       "UNSIGNED": lhs.dtype.is_unsigned or lhs.dtype.is_pred}  # fmt: skip
            _check(allowed[kind], f"comparison type {kind} does not apply to {lhs.dtype.name}")
        _check(not lhs.dtype.is_complex or direction in ("EQ", "NE"), f"complex numbers are not ordered: compare {direction} of {lhs.dtype.name}")
        return ArrayShape.of(PRED, lhs.dims)
    if instruction.opcode == "complex":
        return ArrayShape.of(C64 if lhs.dtype is F32 else C128, lhs.dims)
    return ArrayShape.of(lhs.dtype, lhs.dims)


def _convert(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    declared = instruction.shape
    _check(isinstance(declared, ArrayShape), "convert produces an array")
    assert isinstance(declared, ArrayShape)
    _check(not operand.dtype.is_complex or declared.dtype.is_complex,
           f"convert {operand.dtype.name} to {declared.dtype.name} would drop the imaginary part; take real() first")  # fmt: skip
    return ArrayShape.of(declared.dtype, operand.dims)


def _bitcast_convert(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    declared = instruction.shape
    _check(isinstance(declared, ArrayShape), "bitcast-convert produces an array")
    assert isinstance(declared, ArrayShape)
    _check(not operand.dtype.is_pred and not declared.dtype.is_pred, "bitcast-convert of pred")
    src, dst = operand.dtype.bits, declared.dtype.bits
    _check(src == dst or not (operand.dtype.is_sub_byte or declared.dtype.is_sub_byte),
           f"bitcast-convert {operand.dtype.name} to {declared.dtype.name} packs 4-bit elements, which vxla holds one "
           "per byte; this is not in the numerics contract (convert the values instead)")  # fmt: skip
    if src == dst:
        return ArrayShape.of(declared.dtype, operand.dims)
    if src > dst:
        return ArrayShape.of(declared.dtype, operand.dims + (src // dst,))
    _check(operand.rank >= 1 and operand.dims[-1] == dst // src,
           f"bitcast-convert {operand.dtype.name} to {declared.dtype.name} needs a minor dimension of {dst // src}")  # fmt: skip
    return ArrayShape.of(declared.dtype, operand.dims[:-1])


def _stochastic_convert(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    operand, random = _array(instruction, 0), _array(instruction, 1)
    _float(operand.dtype, "stochastic-convert")
    _check(operand.dtype.is_float and not operand.dtype.is_float8, f"stochastic-convert takes f16, bf16, f32 or f64, not {operand.dtype.name}")
    _check(random.dtype.is_unsigned and random.dtype.bits == operand.dtype.bits,
           f"stochastic-convert's random bits must be unsigned of the operand's width ({operand.dtype.bits}), not {random.dtype.name}")  # fmt: skip
    _check(random.dims == operand.dims, "stochastic-convert's random bits must have the operand's dimensions")
    declared = instruction.shape
    _check(isinstance(declared, ArrayShape) and declared.dtype.is_signed and not declared.dtype.is_sub_byte,
           "stochastic-convert gives s8, s16, s32 or s64 (XLA defines no other)")  # fmt: skip
    assert isinstance(declared, ArrayShape)
    return ArrayShape.of(declared.dtype, operand.dims)


def _select(instruction: Instruction) -> Shape:
    _operand_count(instruction, 3)
    pred, on_true, on_false = (_array(instruction, i) for i in range(3))
    _check(pred.dtype == PRED, f"select predicate must be pred, got {pred.dtype.name}")
    _check(on_true.same_logical(on_false), f"select branches differ: {on_true} and {on_false}")
    _check(pred.dims in (on_true.dims, ()), "select predicate dimensions differ from the branches'")
    return ArrayShape.of(on_true.dtype, on_true.dims)


def _clamp(instruction: Instruction) -> Shape:
    _operand_count(instruction, 3)
    low, operand, high = (_array(instruction, i) for i in range(3))
    for bound in (low, high):
        _check(bound.dtype == operand.dtype, "clamp bounds must have the operand's type")
        _check(bound.dims in (operand.dims, ()), "clamp bounds must be scalars or match the operand")
    _numeric(operand.dtype, "clamp")
    return ArrayShape.of(operand.dtype, operand.dims)


# --- data movement ---------------------------------------------------------------------------


def _declared_array(instruction: Instruction) -> ArrayShape:
    _check(isinstance(instruction.shape, ArrayShape), f"{instruction.opcode} produces an array")
    assert isinstance(instruction.shape, ArrayShape)
    return instruction.shape


def _result_type_shape(instruction: Instruction, operand: ArrayShape) -> ArrayShape:
    """The written shape, whose element type the op takes; when the shape is left out (XLA
    lets it be), the operand's element type."""
    if instruction.shape is None:
        return ArrayShape.of(operand.dtype, ())
    return _declared_array(instruction)


def _broadcast(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    declared = _declared_array(instruction)
    dims = _int_list(instruction, "dimensions", ())
    _check(len(dims) == operand.rank, f"broadcast dimensions {list(dims)} do not match operand rank {operand.rank}")
    _dims_in_range(dims, declared.rank, "broadcast dimensions")
    for index, target in enumerate(dims):
        _check(operand.dims[index] == declared.dims[target],
               f"broadcast operand dimension {index} has size {operand.dims[index]}, result dimension {target} has {declared.dims[target]}")  # fmt: skip
    return ArrayShape.of(operand.dtype, declared.dims)


def _reshape(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    declared = _declared_array(instruction)
    _check(operand.element_count == declared.element_count,
           f"reshape from {operand.element_count} to {declared.element_count} elements")  # fmt: skip
    return ArrayShape.of(operand.dtype, declared.dims)


def _bitcast(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    declared = _declared_array(instruction)
    _check(operand.byte_size == declared.byte_size, f"bitcast from {operand} to {declared} changes the byte size")
    _check(operand.dtype.bits == declared.dtype.bits, "bitcast may not change the element width")
    return ArrayShape.of(declared.dtype, declared.dims)


def _transpose(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    perm = _int_list(instruction, "dimensions")
    _check(sorted(perm) == list(range(operand.rank)), f"transpose dimensions {list(perm)} are not a permutation")
    return ArrayShape.of(operand.dtype, tuple(operand.dims[p] for p in perm))


def _reverse(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    _dims_in_range(_int_list(instruction, "dimensions"), operand.rank, "reverse dimensions")
    return ArrayShape.of(operand.dtype, operand.dims)


def _slice(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    spec = _attr(instruction, "slice")
    _check(isinstance(spec, tuple) and len(spec) == operand.rank, "slice needs one [start:limit:stride] per dimension")
    assert isinstance(spec, tuple)
    dims = []
    for size, d in zip(operand.dims, spec, strict=True):
        _check(isinstance(d, attr.SliceDim), "bad slice")
        _check(0 <= d.start <= d.limit <= size and d.stride >= 1, f"slice [{d.start}:{d.limit}:{d.stride}] out of bounds for size {size}")  # fmt: skip
        dims.append((d.limit - d.start + d.stride - 1) // d.stride)
    return ArrayShape.of(operand.dtype, tuple(dims))


def _index_scalars(instruction: Instruction, first: int, count: int) -> None:
    _operand_count(instruction, first + count)
    types = set()
    for index in range(first, first + count):
        shape = _array(instruction, index)
        _check(shape.rank == 0 and shape.dtype.is_integer, f"operand {index} must be an integer scalar index")
        types.add(shape.dtype.name)
    _check(len(types) <= 1, "start indices must all have the same type")


def _dynamic_slice(instruction: Instruction) -> Shape:
    operand = _array(instruction, 0)
    _index_scalars(instruction, 1, operand.rank)
    sizes = _int_list(instruction, "dynamic_slice_sizes")
    _check(len(sizes) == operand.rank, "dynamic_slice_sizes needs one size per dimension")
    for size, limit in zip(sizes, operand.dims, strict=True):
        _check(0 <= size <= limit, f"slice size {size} exceeds dimension size {limit}")
    return ArrayShape.of(operand.dtype, sizes)


def _dynamic_update_slice(instruction: Instruction) -> Shape:
    operand, update = _array(instruction, 0), _array(instruction, 1)
    _index_scalars(instruction, 2, operand.rank)
    _check(update.dtype == operand.dtype, "update must have the operand's type")
    _check(update.rank == operand.rank and all(u <= o for u, o in zip(update.dims, operand.dims, strict=True)),
           f"update {list(update.dims)} does not fit operand {list(operand.dims)}")  # fmt: skip
    return ArrayShape.of(operand.dtype, operand.dims)


def _concatenate(instruction: Instruction) -> Shape:
    _operand_count(instruction, (1, None))
    shapes = [_array(instruction, i) for i in range(len(instruction.operands))]
    dims = _int_list(instruction, "dimensions")
    _check(len(dims) == 1, "concatenate needs exactly one dimension")
    axis = dims[0]
    first = shapes[0]
    _check(0 <= axis < first.rank, f"concatenate dimension {axis} out of range")
    total = 0
    for shape in shapes:
        _check(shape.dtype == first.dtype and shape.rank == first.rank, "concatenate operands differ in type or rank")
        _check(all(a == b for i, (a, b) in enumerate(zip(shape.dims, first.dims, strict=True)) if i != axis),
               "concatenate operands differ outside the concatenated dimension")  # fmt: skip
        total += shape.dims[axis]
    return ArrayShape.of(first.dtype, first.dims[:axis] + (total,) + first.dims[axis + 1 :])


def _pad(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    operand, value = _array(instruction, 0), _array(instruction, 1)
    _check(value.rank == 0 and value.dtype == operand.dtype, "padding value must be a scalar of the operand's type")
    config = _attr(instruction, "padding", ())
    _check(isinstance(config, tuple) and len(config) == operand.rank, "padding needs one low_high[_interior] per dimension")
    assert isinstance(config, tuple)
    dims = []
    for size, p in zip(operand.dims, config, strict=True):
        _check(p.interior >= 0, "interior padding must be non-negative")
        out = p.low + p.high + size + max(size - 1, 0) * p.interior
        _check(out >= 0, "negative padding removes more than the dimension holds")
        dims.append(out)
    return ArrayShape.of(operand.dtype, tuple(dims))


def _iota(instruction: Instruction) -> Shape:
    _operand_count(instruction, 0)
    declared = _declared_array(instruction)
    dimension = _attr(instruction, "iota_dimension")
    _check(isinstance(dimension, int) and 0 <= dimension < declared.rank, "iota_dimension out of range")
    _numeric(declared.dtype, "iota")
    return ArrayShape.of(declared.dtype, declared.dims)


# --- computations ----------------------------------------------------------------------------


def _scalar_computation(computation: Computation, arg_types: list[DType], result_types: list[DType], role: str) -> None:
    params = computation.parameters
    _check(len(params) == len(arg_types), f"{role} %{computation.name} takes {len(params)} parameters, expected {len(arg_types)}")  # fmt: skip
    for param, dtype in zip(params, arg_types, strict=True):
        _check(isinstance(param.shape, ArrayShape) and param.shape.rank == 0 and param.shape.dtype == dtype,
               f"{role} %{computation.name} parameter {param.parameter_number} must be {dtype.name}[]")  # fmt: skip
    root = computation.root.shape
    results = flatten(root) if isinstance(root, TupleShape) else [root]
    _check(len(results) == len(result_types) and (isinstance(root, ArrayShape) == (len(result_types) == 1) or isinstance(root, TupleShape)),
           f"{role} %{computation.name} returns {root}, expected {len(result_types)} scalars")  # fmt: skip
    for shape, dtype in zip(results, result_types, strict=True):
        _check(shape.rank == 0 and shape.dtype == dtype, f"{role} %{computation.name} returns {root}")


def _reducer_types(instruction: Instruction) -> tuple[list[ArrayShape], list[DType]]:
    count = len(instruction.operands)
    _check(count >= 2 and count % 2 == 0, f"{instruction.opcode} takes inputs then as many init values")
    half = count // 2
    inputs = [_array(instruction, i) for i in range(half)]
    inits = [_array(instruction, half + i) for i in range(half)]
    for shape, init in zip(inputs, inits, strict=True):
        _check(init.rank == 0 and init.dtype == shape.dtype, "init values must be scalars of the inputs' types")
        _check(shape.dims == inputs[0].dims, "all inputs must have the same dimensions")
    types = [s.dtype for s in inputs]
    _scalar_computation(_computation(instruction, "to_apply"), types + types, types, "reducer")
    return inputs, types


def _tuple_or_single(shapes: list[ArrayShape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def _reduce(instruction: Instruction) -> Shape:
    inputs, types = _reducer_types(instruction)
    dims = _int_list(instruction, "dimensions")
    _dims_in_range(dims, inputs[0].rank, "reduce dimensions")
    kept = tuple(d for i, d in enumerate(inputs[0].dims) if i not in dims)
    return _tuple_or_single([ArrayShape.of(t, kept) for t in types])


def window_output_size(size: int, w: attr.WindowDim) -> int:
    """Number of window positions along one dimension (XLA's windowed output size)."""
    dilated = (size - 1) * w.base_dilation + 1 if size > 0 else 0
    padded = dilated + w.pad_low + w.pad_high
    extent = (w.size - 1) * w.window_dilation + 1
    if padded < extent:
        return 0
    return (padded - extent) // w.stride + 1


def _check_window(window: object, rank: int) -> attr.Window:
    _check(isinstance(window, attr.Window), "needs window={...}")
    assert isinstance(window, attr.Window)
    _check(len(window.dims) == rank, f"window has {len(window.dims)} dimensions, expected {rank}")
    for w in window.dims:
        _check(w.size >= 1 and w.stride >= 1 and w.base_dilation >= 1 and w.window_dilation >= 1,
               "window sizes, strides and dilations must be positive")  # fmt: skip
    return window


def _reduce_window(instruction: Instruction) -> Shape:
    inputs, types = _reducer_types(instruction)
    window = _check_window(_attr(instruction, "window"), inputs[0].rank)
    _check(not any(w.reversal for w in window.dims), "reduce-window does not take rhs_reversal")
    dims = tuple(window_output_size(s, w) for s, w in zip(inputs[0].dims, window.dims, strict=True))
    return _tuple_or_single([ArrayShape.of(t, dims) for t in types])


def _select_and_scatter(instruction: Instruction) -> Shape:
    _operand_count(instruction, 3)
    operand, source, init = _array(instruction, 0), _array(instruction, 1), _array(instruction, 2)
    dtype = operand.dtype
    _check(source.dtype == dtype and init.dtype == dtype and init.rank == 0, "select-and-scatter source and init value must have the operand's type (init a scalar)")
    window = _check_window(_attr(instruction, "window"), operand.rank)
    _check(not any(w.reversal or w.base_dilation > 1 or w.window_dilation > 1 for w in window.dims), "select-and-scatter takes no dilation or reversal")
    positions = tuple(window_output_size(s, w) for s, w in zip(operand.dims, window.dims, strict=True))
    _check(source.dims == positions, f"select-and-scatter source has dimensions {list(source.dims)}, the window has {list(positions)} positions")
    _scalar_computation(_computation(instruction, "select"), [dtype, dtype], [PRED], "select")
    _scalar_computation(_computation(instruction, "scatter"), [dtype, dtype], [dtype], "scatter")
    return operand


def _same_pred_use(lhs: DType, rhs: DType, result: DType, opcode: str) -> None:
    """A dot or convolution with a pred result has pred operands (an or of ands, §6); pred
    operands of a numeric one are 0 and 1. Floating-point operands with an integer result
    are refused: XLA computes that product in a float type and converts it, which the
    contract's conversion of the operands would not match."""
    if result.is_pred:
        _check(lhs.is_pred and rhs.is_pred, f"{opcode} with a pred result takes pred operands, not {lhs.name} and {rhs.name}")
    if result.is_integer and (lhs.is_float or rhs.is_float):
        raise _Unsupported(
            f"{opcode} of {lhs.name} and {rhs.name} with an {result.name} result is not in the numerics contract: "
            f"give it a floating-point result and convert that to {result.name}"
        )


def _dot(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    lhs, rhs = _array(instruction, 0), _array(instruction, 1)
    declared = _result_type_shape(instruction, lhs)
    lb, rb = _int_list(instruction, "lhs_batch_dims", ()), _int_list(instruction, "rhs_batch_dims", ())
    lc, rc = _int_list(instruction, "lhs_contracting_dims", ()), _int_list(instruction, "rhs_contracting_dims", ())
    _dims_in_range(lb + lc, lhs.rank, "lhs batch and contracting dimensions")
    _dims_in_range(rb + rc, rhs.rank, "rhs batch and contracting dimensions")
    _check(len(lb) == len(rb) and len(lc) == len(rc), "dot batch/contracting dimension lists differ in length")
    for a, b in zip(lb + lc, rb + rc, strict=True):
        _check(lhs.dims[a] == rhs.dims[b], f"dot dimension sizes differ: lhs {a} is {lhs.dims[a]}, rhs {b} is {rhs.dims[b]}")  # fmt: skip
    _same_pred_use(lhs.dtype, rhs.dtype, declared.dtype, "dot")
    # Operands are converted to the accumulation type (§6): integer and floating-point
    # operands mix as XLA's operand upcasting mixes them, by `convert` (§2).
    if declared.dtype.is_complex:  # real or complex operands, converted to the result type
        _check(not (lhs.dtype.is_integer or rhs.dtype.is_integer), "dot mixes integer and complex types")
    else:
        _check(not (lhs.dtype.is_complex or rhs.dtype.is_complex), f"a dot of complex operands makes a complex result, not {declared.dtype.name}")
    batch = tuple(lhs.dims[d] for d in lb)
    lhs_free = tuple(s for i, s in enumerate(lhs.dims) if i not in lb + lc)
    rhs_free = tuple(s for i, s in enumerate(rhs.dims) if i not in rb + rc)
    return ArrayShape.of(declared.dtype, batch + lhs_free + rhs_free)


def _fft(instruction: Instruction) -> Shape:
    """XLA's shape rule; an fft whose operand or lengths hold zero elements has an empty
    result (nothing to transform), the one case where FFT and IFFT lengths may differ from
    the dimensions."""
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    fft_type = _attr(instruction, "fft_type")
    _check(fft_type in FFT_TYPES, f"fft_type must be one of {', '.join(FFT_TYPES)}, not {fft_type}")
    lengths = _int_list(instruction, "fft_length")
    _check(1 <= len(lengths) <= 3 and len(lengths) <= operand.rank, f"fft_length {list(lengths)} must name 1 to 3 of the operand's {operand.rank} dimensions")
    _check(all(n >= 0 for n in lengths), f"fft_length {list(lengths)} has a negative length")
    leading, last = operand.dims[: operand.rank - len(lengths)], operand.dims[operand.rank - len(lengths) :]
    if fft_type == "RFFT":
        _check(operand.dtype in (F32, F64), f"RFFT takes f32 or f64, not {operand.dtype.name}")
        _check(last == lengths, f"RFFT of dimensions {list(last)} with fft_length {list(lengths)}")
        kept = lengths[-1] // 2 + 1 if lengths[-1] else 0
        return ArrayShape.of(C64 if operand.dtype is F32 else C128, (*leading, *lengths[:-1], kept))
    _check(operand.dtype.is_complex, f"{fft_type} takes a complex operand, not {operand.dtype.name}")
    if fft_type == "IRFFT":
        _check(last[:-1] == lengths[:-1], f"IRFFT of dimensions {list(last)} with fft_length {list(lengths)}")
        _check(last[-1] == lengths[-1] // 2 + 1 or (last[-1] == 0 and lengths[-1] == 0),
               f"IRFFT of dimensions {list(last)} with fft_length {list(lengths)} (the last one holds n/2+1 values)")  # fmt: skip
        return ArrayShape.of(operand.dtype.component, (*leading, *lengths))
    _check(last == lengths or operand.element_count == 0, f"{fft_type} of dimensions {list(last)} with fft_length {list(lengths)}")
    return operand


def _convolution(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    lhs, rhs = _array(instruction, 0), _array(instruction, 1)
    declared = _result_type_shape(instruction, lhs)
    labels = _attr(instruction, "dim_labels")
    _check(isinstance(labels, attr.ConvDimLabels), "convolution needs dim_labels=")
    assert isinstance(labels, attr.ConvDimLabels)
    rank = labels.num_spatial + 2
    _check(lhs.rank == rank and rhs.rank == rank, f"dim_labels describe rank {rank}, operands have {lhs.rank} and {rhs.rank}")  # fmt: skip
    window = _check_window(_attr(instruction, "window", attr.Window(())) if labels.num_spatial else attr.Window(()), labels.num_spatial)  # fmt: skip
    groups = _attr(instruction, "feature_group_count", 1)
    batch_groups = _attr(instruction, "batch_group_count", 1)
    assert isinstance(groups, int) and isinstance(batch_groups, int)
    _check(groups >= 1 and batch_groups >= 1, "group counts must be positive")
    _check(groups == 1 or batch_groups == 1, "feature_group_count and batch_group_count cannot both exceed 1")
    _same_pred_use(lhs.dtype, rhs.dtype, declared.dtype, "convolution")
    in_features = lhs.dims[labels.input_feature]
    kernel_in, kernel_out = rhs.dims[labels.kernel_input_feature], rhs.dims[labels.kernel_output_feature]
    batch = lhs.dims[labels.input_batch]
    _check(in_features == kernel_in * groups, f"input features {in_features} != kernel input features {kernel_in} x feature_group_count {groups}")  # fmt: skip
    _check(kernel_out % groups == 0, "kernel output features must divide by feature_group_count")
    _check(batch % batch_groups == 0 and kernel_out % batch_groups == 0, "batch_group_count must divide the batch and the output features")  # fmt: skip
    for w, k in zip(window.dims, labels.kernel_spatial, strict=True):
        _check(w.size == rhs.dims[k], f"window size {w.size} differs from kernel spatial size {rhs.dims[k]}")
    out = [0] * rank
    out[labels.output_batch] = batch // batch_groups
    out[labels.output_feature] = kernel_out
    for i, w in enumerate(window.dims):
        out[labels.output_spatial[i]] = window_output_size(lhs.dims[labels.input_spatial[i]], w)
    return ArrayShape.of(declared.dtype, tuple(out))


def _gather(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    operand, indices = _array(instruction, 0), _array(instruction, 1)
    _check(indices.dtype.is_integer, "gather indices must be integers")
    offset_dims = _int_list(instruction, "offset_dims", ())
    collapsed = _int_list(instruction, "collapsed_slice_dims", ())
    start_map = _int_list(instruction, "start_index_map")
    operand_batching = _int_list(instruction, "operand_batching_dims", ())
    indices_batching = _int_list(instruction, "start_indices_batching_dims", ())
    index_vector_dim = _attr(instruction, "index_vector_dim")
    slice_sizes = _int_list(instruction, "slice_sizes")
    assert isinstance(index_vector_dim, int)
    _check(0 <= index_vector_dim <= indices.rank, "index_vector_dim out of range")
    index_dims = indices.dims + (1,) if index_vector_dim == indices.rank else indices.dims
    _check(index_dims[index_vector_dim] == len(start_map), "start_index_map length differs from the index vector size")
    _check(len(slice_sizes) == operand.rank, "slice_sizes needs one size per operand dimension")
    _dims_in_range(start_map, operand.rank, "start_index_map")
    _dims_in_range(collapsed + operand_batching, operand.rank, "collapsed and batching dimensions")
    _check(len(operand_batching) == len(indices_batching), "batching dimension lists differ in length")
    for d in collapsed + operand_batching:
        _check(slice_sizes[d] <= 1, f"collapsed dimension {d} must have slice size 1")
    for size, limit in zip(slice_sizes, operand.dims, strict=True):
        _check(0 <= size <= limit, f"slice size {size} exceeds operand dimension {limit}")
    offset_sizes = [s for i, s in enumerate(slice_sizes) if i not in collapsed + operand_batching]
    batch_sizes = [s for i, s in enumerate(index_dims) if i != index_vector_dim]
    rank = len(offset_sizes) + len(batch_sizes)
    _check(len(offset_dims) == len(offset_sizes), "offset_dims count differs from the uncollapsed slice dimensions")
    _dims_in_range(offset_dims, rank, "offset_dims")
    _check(list(offset_dims) == sorted(offset_dims), "offset_dims must be sorted")
    out = []
    offsets, batches = iter(offset_sizes), iter(batch_sizes)
    for position in range(rank):
        out.append(next(offsets) if position in offset_dims else next(batches))
    return ArrayShape.of(operand.dtype, tuple(out))


def _scatter(instruction: Instruction) -> Shape:
    count = len(instruction.operands)
    _check(count >= 3 and count % 2 == 1, "scatter takes operands, indices, then as many updates")
    n = (count - 1) // 2
    operands = [_array(instruction, i) for i in range(n)]
    indices = _array(instruction, n)
    updates = [_array(instruction, n + 1 + i) for i in range(n)]
    _check(indices.dtype.is_integer, "scatter indices must be integers")
    window_dims = _int_list(instruction, "update_window_dims", ())
    inserted = _int_list(instruction, "inserted_window_dims", ())
    to_operand = _int_list(instruction, "scatter_dims_to_operand_dims")
    input_batching = _int_list(instruction, "input_batching_dims", ())
    index_vector_dim = _attr(instruction, "index_vector_dim")
    assert isinstance(index_vector_dim, int)
    first = operands[0]
    for shape in operands:
        _check(shape.dims == first.dims, "scatter operands differ in dimensions")
    _check(0 <= index_vector_dim <= indices.rank, "index_vector_dim out of range")
    index_dims = indices.dims + (1,) if index_vector_dim == indices.rank else indices.dims
    _check(index_dims[index_vector_dim] == len(to_operand), "scatter_dims_to_operand_dims length differs from the index vector size")  # fmt: skip
    _dims_in_range(to_operand, first.rank, "scatter_dims_to_operand_dims")
    _dims_in_range(inserted + input_batching, first.rank, "inserted and batching dimensions")
    scatter_rank = len(index_dims) - 1
    for update, operand in zip(updates, operands, strict=True):
        _check(update.dtype == operand.dtype, "updates must have the operands' types")
        _check(update.rank == scatter_rank + len(window_dims), f"updates have rank {update.rank}, expected {scatter_rank + len(window_dims)}")  # fmt: skip
        _check(len(window_dims) + len(inserted) + len(input_batching) == first.rank, "window, inserted and batching dimensions must cover the operand")  # fmt: skip
    _dims_in_range(window_dims, updates[0].rank, "update_window_dims")
    types = [s.dtype for s in operands]
    _scalar_computation(_computation(instruction, "to_apply"), types + types, types, "scatter combiner")
    return _tuple_or_single([ArrayShape.of(s.dtype, s.dims) for s in operands])


def _sort(instruction: Instruction) -> Shape:
    _operand_count(instruction, (1, None))
    shapes = [_array(instruction, i) for i in range(len(instruction.operands))]
    for shape in shapes:
        _check(shape.dims == shapes[0].dims, "sort operands differ in dimensions")
    dims = _int_list(instruction, "dimensions")
    _check(len(dims) == 1, "sort needs one dimension")
    _dims_in_range(dims, shapes[0].rank, "sort dimension")
    types = [s.dtype for s in shapes]
    comparator_types = [t for t in types for _ in range(2)]
    _scalar_computation(_computation(instruction, "to_apply"), comparator_types, [PRED], "comparator")
    return _tuple_or_single([ArrayShape.of(s.dtype, s.dims) for s in shapes])


def _map(instruction: Instruction) -> Shape:
    _operand_count(instruction, (1, None))
    shapes = [_array(instruction, i) for i in range(len(instruction.operands))]
    for shape in shapes:
        _check(shape.dims == shapes[0].dims, "map operands differ in dimensions")
    dims = _int_list(instruction, "dimensions", tuple(range(shapes[0].rank)))
    _check(list(dims) == list(range(shapes[0].rank)), "map must apply over all dimensions in order")
    computation = _computation(instruction, "to_apply")
    root = computation.root.shape
    _check(isinstance(root, ArrayShape) and root.rank == 0, "map computation must return a scalar")
    assert isinstance(root, ArrayShape)
    _scalar_computation(computation, [s.dtype for s in shapes], [root.dtype], "map computation")
    return ArrayShape.of(root.dtype, shapes[0].dims)


def _check_arguments(computation: Computation, shapes: list[Shape], role: str) -> None:
    params = computation.parameters
    _check(len(params) == len(shapes), f"{role} %{computation.name} takes {len(params)} parameters, given {len(shapes)}")  # fmt: skip
    for param, shape in zip(params, shapes, strict=True):
        _check(param.shape.same_logical(shape), f"{role} %{computation.name} parameter {param.parameter_number} is {param.shape}, given {shape}")  # fmt: skip


def _call(instruction: Instruction) -> Shape:
    key = "calls" if instruction.opcode == "fusion" else "to_apply"
    if instruction.opcode == "call" and "to_apply" not in instruction.attrs and "calls" in instruction.attrs:
        key = "calls"
    computation = _computation(instruction, key)
    _check_arguments(computation, [o.shape for o in instruction.operands], "called computation")
    return computation.root.shape


def _while(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    state = instruction.operands[0].shape
    condition, body = _computation(instruction, "condition"), _computation(instruction, "body")
    _check_arguments(condition, [state], "while condition")
    _check_arguments(body, [state], "while body")
    cond_root = condition.root.shape
    _check(isinstance(cond_root, ArrayShape) and cond_root.dtype == PRED and cond_root.rank == 0, "while condition must return pred[]")  # fmt: skip
    _check(body.root.shape.same_logical(state), f"while body returns {body.root.shape}, the loop state is {state}")
    return state


def _scan(instruction: Instruction) -> Shape:
    """XLA's scan: inputs then `num_carries` carries; `to_apply` takes one slice of each
    input (the scanned dimension dropped) and the carries, and returns the step's outputs
    and the new carries; the result stacks the outputs along the dimension, then the final
    carries (a single value is not a tuple)."""
    carries = _attr(instruction, "num_carries", 0)
    _check(isinstance(carries, int) and 0 <= carries <= len(instruction.operands), "scan needs num_carries between 0 and its operand count")
    form = ScanForm.of(instruction)
    computation = _computation(instruction, "to_apply")
    inputs = [_array(instruction, n) for n in range(form.inputs)]
    dimensions = _int_list(instruction, "dimensions")
    _check(len(dimensions) == 1, "scan scans one dimension (dimensions={d})")
    _check(all(0 <= form.dimension < x.rank and x.dims[form.dimension] == form.length for x in inputs),
           f"scan inputs must all have dimension {form.dimension} of size {form.length}")  # fmt: skip
    elements: list[Shape] = [ArrayShape.of(x.dtype, without(x.dims, form.dimension)) for x in inputs]
    carried = [operand.shape for operand in instruction.operands[form.inputs :]]
    _check_arguments(computation, [*elements, *carried], "scan computation")
    results = results_of(computation)
    _check(len(results) >= form.carries, "scan computation returns fewer values than num_carries")
    outputs, new_carries = results[: len(results) - form.carries], results[len(results) - form.carries :]
    _check(all(a.same_logical(b) for a, b in zip(new_carries, carried, strict=True)), "scan computation's carries do not have the carries' shapes")
    _check(all(isinstance(o, ArrayShape) and o.rank >= form.dimension for o in outputs), "scan outputs must be arrays")
    shapes: list[Shape] = [stacked(o, form.dimension, form.length) for o in outputs]  # type: ignore[arg-type]
    shapes += carried
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def _conditional(instruction: Instruction) -> Shape:
    _operand_count(instruction, (2, None))
    selector = _array(instruction, 0)
    if "branch_computations" in instruction.attrs:
        branches = instruction.attrs["branch_computations"]
        _check(isinstance(branches, tuple) and len(branches) >= 1, "branch_computations is empty")
        _check(selector.rank == 0 and selector.dtype == S32, "conditional branch index must be s32[]")
    else:
        branches = (_computation(instruction, "true_computation"), _computation(instruction, "false_computation"))
        _check(selector.rank == 0 and selector.dtype == PRED, "conditional predicate must be pred[]")
    assert isinstance(branches, tuple)
    _operand_count(instruction, 1 + len(branches))
    result: Shape | None = None
    for index, branch in enumerate(branches):
        _check(isinstance(branch, Computation), "conditional branch is not a computation")
        _check_arguments(branch, [instruction.operands[1 + index].shape], "conditional branch")
        if result is None:
            result = branch.root.shape
        _check(branch.root.shape.same_logical(result), "conditional branches return different shapes")
    assert result is not None
    return result


def _tuple(instruction: Instruction) -> Shape:
    return TupleShape(tuple(o.shape for o in instruction.operands))


def _get_tuple_element(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    shape = instruction.operands[0].shape
    _check(isinstance(shape, TupleShape), "get-tuple-element of a non-tuple")
    assert isinstance(shape, TupleShape)
    index = _attr(instruction, "index")
    _check(isinstance(index, int) and 0 <= index < len(shape.elements), f"tuple index {index} out of range")
    assert isinstance(index, int)
    return shape.elements[index]


def _opt_barrier(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    return instruction.operands[0].shape


def _topk(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    k = _attr(instruction, "k")
    _check(operand.rank >= 1, "topk needs an operand of rank 1 or more")
    _check(isinstance(k, int) and 0 <= k <= operand.dims[-1], f"topk k={k} must be between 0 and the last dimension's size {operand.dims[-1]}")
    _numeric(operand.dtype, "topk")
    largest = instruction.attrs.get("largest", True)
    _check(isinstance(largest, bool), "topk largest must be true or false")
    assert isinstance(k, int)
    dims = (*operand.dims[:-1], k)
    return TupleShape((ArrayShape.of(operand.dtype, dims), ArrayShape.of(S32, dims)))


def _rng_bit_generator(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    state = _array(instruction, 0)
    algorithm = _attr(instruction, "algorithm")
    _check(algorithm in random_bits.ALGORITHMS, f"rng-bit-generator algorithm {algorithm} is not one of {', '.join(random_bits.ALGORITHMS)}")
    sizes = (2,) if random_bits.resolved(str(algorithm)) == random_bits.THREEFRY else (2, 3)
    _check(state.dtype == U64 and state.rank == 1 and state.dims[0] in sizes, f"rng-bit-generator {algorithm} takes a u64[{' or '.join(map(str, sizes))}] state, not {state}")
    declared = instruction.shape
    _check(isinstance(declared, TupleShape) and len(declared.elements) == 2 and isinstance(declared.elements[1], ArrayShape),
           "rng-bit-generator returns a tuple (new state, bits)")  # fmt: skip
    assert isinstance(declared, TupleShape)
    bits = declared.elements[1]
    assert isinstance(bits, ArrayShape)
    _check(bits.dtype.is_integer and bits.dtype.bits in random_bits.ELEMENT_BITS, f"rng-bit-generator fills integer arrays of 8 to 64 bits, not {bits.dtype.name}")
    return TupleShape((state, bits))


# --- batch_norm --------------------------------------------------------------------------------

# Operand roles: which operands have the operand's shape ("x") and which are per feature.
_BATCH_NORM_OPERANDS = {
    "batch-norm-training": ("x", "feature", "feature"),
    "batch-norm-inference": ("x", "feature", "feature", "feature", "feature"),
    "batch-norm-grad": ("x", "feature", "feature", "feature", "x"),
}


def _batch_norm(instruction: Instruction) -> Shape:
    roles = _BATCH_NORM_OPERANDS[instruction.opcode]
    _operand_count(instruction, len(roles))
    operand = _array(instruction, 0)
    _check(operand.dtype.is_float, f"{instruction.opcode} needs floating-point operands, got {operand.dtype.name}")
    feature = _attr(instruction, "feature_index")
    _check(isinstance(feature, int) and 0 <= feature < operand.rank, f"feature_index {feature} is not a dimension of {operand}")
    _check(isinstance(_attr(instruction, "epsilon"), float), "epsilon must be a number")
    assert isinstance(feature, int)
    per_feature = ArrayShape.of(operand.dtype, (operand.dims[feature],))
    for index, role in enumerate(roles):
        shape = _array(instruction, index)
        expected = operand if role == "x" else per_feature
        _check(shape.dtype == expected.dtype and shape.dims == expected.dims,
               f"operand {index} of {instruction.opcode} must be {expected.str_without_layout()}, not {shape.str_without_layout()}")  # fmt: skip
    if instruction.opcode == "batch-norm-inference":
        return ArrayShape.of(operand.dtype, operand.dims)
    return TupleShape((ArrayShape.of(operand.dtype, operand.dims), per_feature, per_feature))


# --- linalg --------------------------------------------------------------------------------------


def _square_matrices(shape: ArrayShape, opcode: str) -> int:
    _check(shape.dtype in (F16, BF16, F32, F64), f"{opcode} works on f16, bf16, f32 or f64 matrices, not {shape.dtype.name}")
    _check(shape.rank >= 2 and shape.dims[-1] == shape.dims[-2], f"{opcode} needs square matrices in the last two dimensions, not {shape}")
    return shape.dims[-1]


def _cholesky(instruction: Instruction) -> Shape:
    _operand_count(instruction, 1)
    operand = _array(instruction, 0)
    _square_matrices(operand, "cholesky")
    return ArrayShape.of(operand.dtype, operand.dims)


def _triangular_solve(instruction: Instruction) -> Shape:
    _operand_count(instruction, 2)
    a, b = _array(instruction, 0), _array(instruction, 1)
    m = _square_matrices(a, "triangular-solve")
    transpose = instruction.attrs.get("transpose_a", "NO_TRANSPOSE")
    _check(transpose in linalg.TRANSPOSES, f"transpose_a={transpose} is not one of {', '.join(linalg.TRANSPOSES)}")
    _check(b.dtype == a.dtype and b.rank == a.rank and b.dims[:-2] == a.dims[:-2], f"triangular-solve's b {b} does not match a {a}")
    left = bool(instruction.attrs.get("left_side", False))
    solved = b.dims[-2] if left else b.dims[-1]
    _check(solved == m, f"triangular-solve with left_side={str(left).lower()} needs b's {'rows' if left else 'columns'} to number {m}, not {solved}")
    return ArrayShape.of(b.dtype, b.dims)


def _leaf(instruction: Instruction) -> Shape:
    _operand_count(instruction, 0)
    return instruction.shape


ShapeRule = Callable[[Instruction], Shape]

# The shape rules by op family (compiler/hlo/opcodes.py FAMILIES), as the reference evaluator
# and the backend group their modules.
RULES_BY_FAMILY: dict[str, dict[str, ShapeRule]] = {
    "batch_norm": {opcode: _batch_norm for opcode in _BATCH_NORM_OPERANDS},
    "linalg": {"cholesky": _cholesky, "triangular-solve": _triangular_solve},
    "elementwise": {
        **{op: _unary for op in _UNARY_TYPE_RULES},
        **{op: _binary for op in _BINARY_TYPE_RULES},
        "convert": _convert,
        "bitcast-convert": _bitcast_convert,
        "select": _select,
        "clamp": _clamp,
        "map": _map,
        "stochastic-convert": _stochastic_convert,
    },
    "data_movement": {
        "broadcast": _broadcast,
        "reshape": _reshape,
        "bitcast": _bitcast,
        "transpose": _transpose,
        "reverse": _reverse,
        "slice": _slice,
        "dynamic-slice": _dynamic_slice,
        "dynamic-update-slice": _dynamic_update_slice,
        "concatenate": _concatenate,
        "pad": _pad,
        "iota": _iota,
    },
    "reductions": {"reduce": _reduce, "reduce-window": _reduce_window, "select-and-scatter": _select_and_scatter},
    "dot_conv": {"dot": _dot, "convolution": _convolution},
    "control_flow": {
        "parameter": _leaf,
        "constant": _leaf,
        "tuple": _tuple,
        "get-tuple-element": _get_tuple_element,
        "opt-barrier": _opt_barrier,
        "call": _call,
        "fusion": _call,
        "while": _while,
        "conditional": _conditional,
        "scan": _scan,
    },
    "sort_gather_scatter": {"gather": _gather, "scatter": _scatter, "sort": _sort, "topk": _topk},
    "random_bits": {"rng-bit-generator": _rng_bit_generator},
    "fft": {"fft": _fft},
}
_RULES: dict[str, ShapeRule] = {opcode: rule for rules in RULES_BY_FAMILY.values() for opcode, rule in rules.items()}


def infer_shape(instruction: Instruction) -> Shape:
    """The shape `instruction` must have, from its operands and attributes."""
    try:
        return _RULES[instruction.opcode](instruction)
    except _Unsupported as failure:
        raise HloUnsupportedError(str(failure), instruction.location, instruction.name) from None
    except _Fail as failure:
        raise HloVerifyError(str(failure), instruction.location, instruction.name) from None


def _check_float8_use(instruction: Instruction) -> None:
    """8-bit floats are converted, moved and multiplied in dots, nothing else (§1)."""
    results = [element.dtype for element in flatten(instruction.shape)]
    operands = [element.dtype for operand in instruction.operands for element in flatten(operand.shape)]
    narrow = [dtype.name for dtype in (*results, *operands) if dtype.is_float8]
    if not narrow:
        return
    if instruction.opcode not in FLOAT8_OPCODES:
        raise HloUnsupportedError(
            f"{instruction.opcode} of {narrow[0]} values is not in the numerics contract: convert them to f16, bf16 or f32 "
            "first (8-bit floats are converted, moved and multiplied in dots)",
            instruction.location,
            instruction.name,
        )
    if instruction.opcode == "dot" and any(dtype.is_float8 for dtype in results):
        raise HloUnsupportedError(f"a dot with a {results[0].name} result is not in the numerics contract: give it a wider result type", instruction.location, instruction.name)  # fmt: skip


def _verify_instruction(instruction: Instruction) -> None:
    if instruction.opcode not in SUPPORTED:
        reason = UNSUPPORTED_REASONS.get(instruction.opcode, "not supported")
        raise HloUnsupportedError(f"opcode {instruction.opcode} is not supported: {reason}", instruction.location, instruction.name)  # fmt: skip
    if instruction.opcode not in COMPLEX_OPCODES:
        for shape in [instruction.shape, *(operand.shape for operand in instruction.operands)]:
            complex_types = [element.dtype.name for element in flatten(shape) if element.dtype.is_complex]
            if complex_types:
                raise HloUnsupportedError(f"{instruction.opcode} of {complex_types[0]} values is not in the numerics contract", instruction.location, instruction.name)  # fmt: skip
    _check_float8_use(instruction)
    inferred = infer_shape(instruction)
    if not inferred.same_logical(instruction.shape):
        raise HloVerifyError(
            f"declared shape {instruction.shape.str_without_layout()} does not match the shape "
            f"{inferred.str_without_layout()} inferred from its operands",
            instruction.location,
            instruction.name,
        )


def _verify_parameters(computation: Computation) -> None:
    numbers = sorted(p.parameter_number for p in computation.instructions if p.opcode == "parameter")
    if numbers != list(range(len(numbers))):
        raise HloVerifyError(
            f"computation %{computation.name} has parameter numbers {numbers}, expected 0..{len(numbers) - 1}",
            computation.location,
        )


def _verify_call_graph(module: Module) -> None:
    """Rejects recursion and call chains deeper than MAX_CALL_DEPTH."""
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done

    def visit(computation: Computation, depth: int) -> None:
        if depth > MAX_CALL_DEPTH:
            raise HloUnsupportedError(f"computations nested deeper than {MAX_CALL_DEPTH}", computation.location)
        state[id(computation)] = 1
        for instruction in computation.instructions:
            for callee in instruction.called_computations():
                mark = state.get(id(callee))
                if mark == 1:
                    raise HloVerifyError(f"computation %{callee.name} calls itself", instruction.location, instruction.name)  # fmt: skip
                if mark is None:
                    visit(callee, depth + 1)
        state[id(computation)] = 2

    for computation in module.computations:
        if id(computation) not in state:
            visit(computation, 0)


def verify_module(module: Module) -> None:
    """Checks the whole module; raises HloVerifyError or HloUnsupportedError on the first
    problem, naming the instruction and its location."""
    _verify_call_graph(module)
    for computation in module.computations:
        _verify_parameters(computation)
        try:
            computation.post_order()
        except CycleError as cycle:
            raise HloVerifyError("instruction depends on itself", cycle.instruction.location, cycle.instruction.name) from None  # fmt: skip
        for instruction in computation.instructions:
            if tuple_depth(instruction.shape) > 64:
                raise HloUnsupportedError("tuple nesting deeper than 64", instruction.location, instruction.name)
            _verify_instruction(instruction)
    if module.entry_layout is not None:
        params, result = module.entry_layout
        entry_params = module.entry.parameters
        if len(params) != len(entry_params):
            raise HloVerifyError(
                f"entry_computation_layout lists {len(params)} parameters, the entry computation has {len(entry_params)}"
            )
        for param, shape in zip(entry_params, params, strict=True):
            if not param.shape.same_logical(shape):
                raise HloVerifyError(f"entry_computation_layout gives parameter {param.parameter_number} shape {shape}, the parameter is {param.shape}", param.location, param.name)  # fmt: skip
        if not module.entry.root.shape.same_logical(result):
            raise HloVerifyError(f"entry_computation_layout gives result {result}, the root is {module.entry.root.shape}")

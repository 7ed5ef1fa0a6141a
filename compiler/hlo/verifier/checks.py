"""The checks the shape rules of several op families share: operands, attributes, called
computations, windows, and the operand type classes the registry names (Opcode.operand_types)."""

from __future__ import annotations

from collections.abc import Callable

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import OPCODES
from compiler.hlo.shape import ArrayShape, Shape, TupleShape, flatten
from core.dtypes import F32, F64, DType

ShapeRule = Callable[[Instruction], Shape]


class Fail(Exception):
    """Raised by shape rules; turned into an HloVerifyError naming the instruction."""


class Unsupported(Fail):
    """Raised by shape rules for a well-formed use the contract leaves out; turned into an
    HloUnsupportedError naming the instruction."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Fail(message)


def array(instruction: Instruction, index: int) -> ArrayShape:
    check(index < len(instruction.operands), f"missing operand {index}")
    shape = instruction.operands[index].shape
    check(isinstance(shape, ArrayShape), f"operand {index} must be an array, not a tuple")
    assert isinstance(shape, ArrayShape)
    return shape


def operand_count(instruction: Instruction, expected: int | tuple[int, int | None]) -> None:
    count = len(instruction.operands)
    if isinstance(expected, int):
        check(count == expected, f"{instruction.opcode} takes {expected} operands, got {count}")
        return
    low, high = expected
    check(count >= low, f"{instruction.opcode} takes at least {low} operands, got {count}")
    if high is not None:
        check(count <= high, f"{instruction.opcode} takes at most {high} operands, got {count}")


def attribute(instruction: Instruction, key: str, default: object = None) -> object:
    if key in instruction.attrs:
        return instruction.attrs[key]
    check(default is not None, f"{instruction.opcode} needs attribute {key}=")
    return default


def int_list(instruction: Instruction, key: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    value = attribute(instruction, key, default)
    check(isinstance(value, tuple) and all(isinstance(v, int) for v in value), f"{key} must be a list of integers")
    assert isinstance(value, tuple)
    return value


def called_computation(instruction: Instruction, key: str) -> Computation:
    value = instruction.attrs.get(key)
    check(isinstance(value, Computation), f"{instruction.opcode} needs {key}=%computation")
    assert isinstance(value, Computation)
    return value


def dims_in_range(dims: tuple[int, ...], rank: int, what: str) -> None:
    check(len(set(dims)) == len(dims), f"{what} {list(dims)} has a repeated dimension")
    check(all(0 <= d < rank for d in dims), f"{what} {list(dims)} out of range for rank {rank}")


def declared_array(instruction: Instruction) -> ArrayShape:
    check(isinstance(instruction.shape, ArrayShape), f"{instruction.opcode} produces an array")
    assert isinstance(instruction.shape, ArrayShape)
    return instruction.shape


def operand_and_declared(instruction: Instruction) -> tuple[ArrayShape, ArrayShape]:
    """The one array operand and the declared array result of an op that reshapes or
    retypes its operand."""
    operand_count(instruction, 1)
    return array(instruction, 0), declared_array(instruction)


def tuple_or_single(shapes: list[ArrayShape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


# --- operand types ---------------------------------------------------------------------------


def _any(dtype: DType, opcode: str) -> None:
    pass


def _numeric(dtype: DType, opcode: str) -> None:
    check(not dtype.is_pred, f"{opcode} is not defined on pred")


def _float(dtype: DType, opcode: str) -> None:
    check(dtype.is_float, f"{opcode} needs a floating-point operand, got {dtype.name}")


def _integer(dtype: DType, opcode: str) -> None:
    check(dtype.is_integer, f"{opcode} needs an integer operand, got {dtype.name}")


def _pred_or_integer(dtype: DType, opcode: str) -> None:
    check(dtype.is_integer or dtype.is_pred, f"{opcode} needs a pred or integer operand, got {dtype.name}")


def _complex_or_float(dtype: DType, opcode: str) -> None:
    check(dtype.is_complex or dtype.is_float, f"{opcode} needs a complex or floating-point operand, got {dtype.name}")


def _complex_parts(dtype: DType, opcode: str) -> None:
    check(dtype in (F32, F64), f"complex is made of f32 or f64 parts, not {dtype.name}")


# The check of each operand type class of the registry (compiler/hlo/opcodes.py OPERAND_TYPES).
OPERAND_TYPE_CHECKS: dict[str, Callable[[DType, str], None]] = {
    "any": _any,
    "numeric": _numeric,
    "float": _float,
    "integer": _integer,
    "pred_or_integer": _pred_or_integer,
    "complex_or_float": _complex_or_float,
    "complex_parts": _complex_parts,
}


def operand_types(dtype: DType, opcode: str) -> None:
    """Rejects an element type outside the class the registry gives `opcode`."""
    OPERAND_TYPE_CHECKS[OPCODES[opcode].operand_types](dtype, opcode)


# --- called computations ---------------------------------------------------------------------


def scalar_computation(computation: Computation, arg_types: list[DType], result_types: list[DType], role: str) -> None:
    params = computation.parameters
    check(len(params) == len(arg_types), f"{role} %{computation.name} takes {len(params)} parameters, expected {len(arg_types)}")  # fmt: skip
    for param, dtype in zip(params, arg_types, strict=True):
        check(isinstance(param.shape, ArrayShape) and param.shape.rank == 0 and param.shape.dtype == dtype,
              f"{role} %{computation.name} parameter {param.parameter_number} must be {dtype.name}[]")  # fmt: skip
    root = computation.root.shape
    results = flatten(root) if isinstance(root, TupleShape) else [root]
    check(len(results) == len(result_types) and (isinstance(root, ArrayShape) == (len(result_types) == 1) or isinstance(root, TupleShape)),
          f"{role} %{computation.name} returns {root}, expected {len(result_types)} scalars")  # fmt: skip
    for shape, dtype in zip(results, result_types, strict=True):
        check(shape.rank == 0 and shape.dtype == dtype, f"{role} %{computation.name} returns {root}")


# --- windows ---------------------------------------------------------------------------------


def window_output_size(size: int, w: attr.WindowDim) -> int:
    """Number of window positions along one dimension (XLA's windowed output size)."""
    dilated = (size - 1) * w.base_dilation + 1 if size > 0 else 0
    padded = dilated + w.pad_low + w.pad_high
    extent = (w.size - 1) * w.window_dilation + 1
    if padded < extent:
        return 0
    return (padded - extent) // w.stride + 1


def check_window(window: object, rank: int) -> attr.Window:
    check(isinstance(window, attr.Window), "needs window={...}")
    assert isinstance(window, attr.Window)
    check(len(window.dims) == rank, f"window has {len(window.dims)} dimensions, expected {rank}")
    for w in window.dims:
        check(w.size >= 1 and w.stride >= 1 and w.base_dilation >= 1 and w.window_dilation >= 1,
              "window sizes, strides and dilations must be positive")  # fmt: skip
    return window

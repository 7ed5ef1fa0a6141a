"""The shape verifier: infers every instruction's shape from its operands and attributes,
and rejects a module whose declared shapes, operand counts, called computations or opcodes
are inconsistent or outside the numerics contract.

The shape rules are grouped by op family (compiler/hlo/opcodes.py FAMILIES), one module per
family as in compiler/reference/ and compiler/codegen/, over the checks they share
(checks.py); this module holds the entry points and the checks of a whole instruction or
module."""

from __future__ import annotations

from types import ModuleType

from compiler.hlo.errors import HloUnsupportedError, HloVerifyError
from compiler.hlo.ir import Computation, CycleError, Instruction, Module
from compiler.hlo.opcodes import (
    COMPLEX_OPCODES,
    FAMILIES,
    FLOAT8_OPCODES,
    OPCODES,
    SUPPORTED,
    family_modules,
    unsupported_error,
)
from compiler.hlo.shape import Shape, flatten, tuple_depth
from compiler.hlo.verifier import (
    batch_norm,
    control_flow,
    data_movement,
    dot_conv,
    elementwise,
    fft,
    linalg,
    random_bits,
    reductions,
    sort_gather_scatter,
)
from compiler.hlo.verifier.checks import Fail, ShapeRule, Unsupported, window_output_size

MAX_CALL_DEPTH = 64

# The module of each op family, whose RULES give the shapes of that family's opcodes.
FAMILY_MODULES: dict[str, ModuleType] = family_modules(batch_norm, control_flow, data_movement, dot_conv, elementwise, fft, linalg, random_bits, reductions, sort_gather_scatter)
# The shape rules by op family, in the registry's order of the families.
RULES_BY_FAMILY: dict[str, dict[str, ShapeRule]] = {name: FAMILY_MODULES[name].RULES for name in FAMILIES}
_RULES: dict[str, ShapeRule] = {opcode: rule for rules in RULES_BY_FAMILY.values() for opcode, rule in rules.items()}


def infer_shape(instruction: Instruction) -> Shape:
    """The shape `instruction` must have, from its operands and attributes."""
    try:
        return _RULES[instruction.opcode](instruction)
    except Unsupported as failure:
        raise HloUnsupportedError(str(failure), instruction.location, instruction.name) from None
    except Fail as failure:
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
    if not OPCODES[instruction.opcode].float8_results and any(dtype.is_float8 for dtype in results):
        raise HloUnsupportedError(f"a {instruction.opcode} with a {results[0].name} result is not in the numerics contract: give it a wider result type", instruction.location, instruction.name)  # fmt: skip


def _verify_instruction(instruction: Instruction) -> None:
    if instruction.opcode not in SUPPORTED:
        raise unsupported_error(instruction)
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


__all__ = ["FAMILY_MODULES", "MAX_CALL_DEPTH", "RULES_BY_FAMILY", "infer_shape", "verify_module", "window_output_size"]

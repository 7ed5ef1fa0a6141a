"""Fusibility: which instructions the fusion passes may put in one kernel, and how a fused
computation reads its values (at the output's own position or elsewhere). The passes decide
with these and compiler/codegen/fusion.py relies on the same answers when it emits.
"""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import COMPUTED_PER_ELEMENT, INDEX_MAPPING
from compiler.hlo.shape import ArrayShape


def _shape(instruction: Instruction) -> ArrayShape:
    return instruction.array_shape


def is_fusible(instruction: Instruction) -> bool:
    """Whether the loop fusion codegen can compute `instruction` per output element."""
    if not isinstance(instruction.shape, ArrayShape):
        return False
    if any(not isinstance(op.shape, ArrayShape) for op in instruction.operands):
        return False
    opcode = instruction.opcode
    if opcode == "bitcast-convert":
        # Only between equal widths is it elementwise (otherwise it changes the shape).
        return instruction.operands[0].array_shape.dtype.bits == instruction.array_shape.dtype.bits
    if opcode in COMPUTED_PER_ELEMENT or opcode in INDEX_MAPPING:
        return True
    return opcode == "constant" and instruction.array_shape.rank == 0


def is_duplicable(instruction: Instruction) -> bool:
    """Cheap producers copied into every group that reads them (see compiler/passes/loop_fusion.py)."""
    opcode = instruction.opcode
    if opcode == "constant":
        return isinstance(instruction.shape, ArrayShape) and instruction.array_shape.rank == 0
    if opcode == "iota":
        return True
    if opcode == "broadcast":
        operand = instruction.operands[0]
        return isinstance(operand.shape, ArrayShape) and operand.array_shape.rank == 0 and operand.opcode in ("constant", "parameter")
    return False


def read_at_own_position(computation: Computation, target: Instruction) -> bool:
    """Whether the root reads `target` only at the root's own flat index (through
    same-shape elementwise ops and reshapes), never moved, broadcast or as a scalar."""
    pending: list[tuple[Instruction, bool]] = [(computation.root, True)]
    seen: set[tuple[int, bool]] = set()
    while pending:
        instruction, same = pending.pop()
        if (id(instruction), same) in seen:
            continue
        seen.add((id(instruction), same))
        if instruction is target:
            if not same:
                return False
            continue
        keeps = instruction.opcode in COMPUTED_PER_ELEMENT or instruction.opcode == "reshape"
        for operand in instruction.operands:
            moved = not keeps or (instruction.opcode != "reshape" and _shape(operand).dims != _shape(instruction).dims)
            pending.append((operand, same and not moved))
    return True


def flat_identity(computation: Computation, root: Instruction | None = None, opaque: Instruction | None = None) -> tuple[bool, list[int]]:
    """Whether every value the root reads at a non-scalar position is read at the root's own
    flat index (the vector path needs this), and the parameters read only that way: their
    element at a position is read just before the output's element there is written, so
    they may share the output's memory. A parameter also read at a fixed position (under a
    rank-0 value) may not: a later element would read what an earlier one wrote."""
    identity = True
    at_position: list[int] = []
    elsewhere: set[int] = set()
    pending: list[tuple[Instruction, bool]] = [(root or computation.root, True)]
    seen: set[tuple[int, bool]] = set()
    while pending:
        instruction, positional = pending.pop()
        positional = positional and _shape(instruction).rank > 0
        if (id(instruction), positional) in seen:
            continue
        seen.add((id(instruction), positional))
        opcode = instruction.opcode
        if instruction is opaque:
            continue  # a stored value, read at the position like a parameter
        if opcode == "parameter":
            number = instruction.parameter_number
            if not positional:
                elsewhere.add(number)  # type: ignore[arg-type]
            elif number not in at_position:
                at_position.append(number)  # type: ignore[arg-type]
            continue
        scalar_broadcast = opcode == "broadcast" and _shape(instruction.operands[0]).rank == 0
        if positional and opcode in INDEX_MAPPING and opcode != "reshape" and not scalar_broadcast:
            identity = False
        pending.extend((operand, positional) for operand in instruction.operands)
    safe = [n for n in sorted(at_position) if n not in elsewhere] if identity else []
    return identity, safe

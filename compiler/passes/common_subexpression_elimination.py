"""Common subexpression elimination.

Two instructions of one computation are merged when they have the same opcode, the same
shape (layout included), the same operands (by identity, after earlier merges), the same
attributes (compared in their canonical printed form, called computations by identity) and,
for constants, the same element type, dimensions and literal bytes. Every supported op is a
pure function of its operands under the numerics contract (random number generation and
other side effects are rejected by the frontend), so the merged value is bit-identical.

Called computations are deduplicated first: two computations (other than the entry) with the
same canonical text, their own callees already merged, are one computation; callers are
pointed at the first in the module's reachable order (callees before callers), so reduces
over equal reducers (JAX emits one reducer per reduce) can merge too.

Determinism: instructions are visited in the computation's post order (a depth-first order
from the root, independent of names and of the text order of independent instructions); the
first one visited with a given key is kept. Keys are tuples of strings and integers, never
object ids.
"""

from __future__ import annotations

from compiler.hlo.attributes import format_attribute
from compiler.hlo.editing import remove_unreachable_computations
from compiler.hlo.ir import COMPUTATION_ATTRIBUTES, Computation, Instruction, Module
from compiler.hlo.opcodes import NEVER_MERGED
from compiler.hlo.printer import CanonicalPrinter
from compiler.passes.base import SimplePass
from compiler.passes.forwarding import Forwarding


class _BodyPrinter(CanonicalPrinter):
    """Prints a computation's body with each callee named after its representative."""

    def __init__(self, module: Module, representative: dict[int, Computation]) -> None:
        super().__init__(module)
        self.representative = representative

    def computation_name(self, computation: Computation) -> str:
        return super().computation_name(self.representative.get(id(computation), computation))

    def body(self, computation: Computation) -> str:
        return "\n".join(self.print_computation(computation)[1:])  # without the name line


def _retarget(value: object, representative: dict[int, Computation]) -> object:
    if isinstance(value, Computation):
        return representative.get(id(value), value)
    if isinstance(value, tuple):
        return tuple(_retarget(v, representative) for v in value)
    return value


def merge_identical_computations(module: Module) -> bool:
    """Points every caller of a computation at the first one with the same canonical text;
    the duplicates become unreachable and are dropped. True if any caller changed."""
    representative: dict[int, Computation] = {}
    printer = _BodyPrinter(module, representative)
    first_with_body: dict[str, Computation] = {}
    for computation in module.reachable_computations():
        if computation is module.entry:
            continue
        body = printer.body(computation)
        if body in first_with_body:
            representative[id(computation)] = first_with_body[body]
        else:
            first_with_body[body] = computation
    if not representative:
        return False
    for computation in module.computations:
        for instruction in computation.instructions:
            for key in COMPUTATION_ATTRIBUTES:
                if key in instruction.attrs:
                    instruction.attrs = {
                        **instruction.attrs,
                        key: _retarget(instruction.attrs[key], representative),
                    }
    remove_unreachable_computations(module)
    return True


class _Keyer:
    """Builds merge keys for one module's instructions."""

    def __init__(self, module: Module) -> None:
        # Called computations compared by identity, named by their position in the module.
        self.computation_numbers = {id(c): n for n, c in enumerate(module.computations)}

    def computation_name(self, computation: Computation) -> str:
        return f"c{self.computation_numbers[id(computation)]}"

    def key(self, instruction: Instruction, operand_numbers: list[int]) -> tuple:
        attributes = tuple(
            (name, format_attribute(instruction.attrs[name], self.computation_name))
            for name in sorted(instruction.attrs)
        )
        literal: tuple = ()
        if instruction.literal is not None:
            literal = (
                str(instruction.literal.dtype),
                instruction.literal.shape,
                instruction.literal.tobytes(),
            )
        return (
            instruction.opcode,
            str(instruction.shape),
            tuple(operand_numbers),
            attributes,
            literal,
        )


def eliminate_common_subexpressions(computation: Computation, keyer: _Keyer) -> bool:
    """Merges duplicates in one computation; the duplicates are removed. True if any was."""
    order = computation.post_order()
    number: dict[int, int] = {}  # instruction id -> position of its representative in `order`
    representatives: dict[tuple, int] = {}
    merged: list[Instruction] = []
    forwarding = Forwarding(computation)
    for position, instruction in enumerate(order):
        forwarding.visit(instruction)
        operand_numbers = [number[id(op)] for op in instruction.operands]
        if instruction.opcode in NEVER_MERGED:
            number[id(instruction)] = position
            continue
        key = keyer.key(instruction, operand_numbers)
        if key in representatives:
            forwarding.replace(instruction, order[representatives[key]])
            number[id(instruction)] = representatives[key]
            merged.append(instruction)
        else:
            representatives[key] = position
            number[id(instruction)] = position
    forwarding.finish()
    if merged:
        gone = {id(i) for i in merged}
        computation.instructions = [i for i in computation.instructions if id(i) not in gone]
    return bool(merged)


class CommonSubexpressionElimination(SimplePass, name="common-subexpression-elimination", version=3):
    """Merges identical pure instructions within each computation."""

    def run(self, module: Module) -> bool:
        """Merges duplicates in every computation; returns whether any were merged."""
        changed = merge_identical_computations(module)
        keyer = _Keyer(module)
        for computation in module.computations:
            changed |= eliminate_common_subexpressions(computation, keyer)
        return changed

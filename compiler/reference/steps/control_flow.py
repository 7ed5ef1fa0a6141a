"""Element steps through the value plumbing and calls (compiler/reference/control_flow.py):
parameters come from the scope, a constant's element is a CONST step, a fusion or call
evaluates its computation's root at the same element with its operands as parameters, and
tuples carry one handle per part. while, conditional and scan are not covered (UNCOVERED
says why)."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Instruction
from compiler.reference.control_flow import callee
from compiler.reference.scalar import to_bits

from . import ElementEvaluator, Handle, Scope, indexing
from .record import Uncovered

Index = tuple[int, ...]


def _parameter(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    return scope.parameter(instruction.parameter_number, index)


def _constant(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    """A scalar literal is a CONST; an array literal's element is a LOAD from it (the graph
    commitment holds its digest)."""
    literal = instruction.literal
    assert literal is not None
    dtype = instruction.array_shape.dtype
    if literal.ndim == 0:
        return ev.recorder.const(dtype, to_bits(np.asarray(literal).reshape(1), dtype))
    flat = indexing.flat(ev.recorder, index, literal.shape)
    return ev.recorder.load_literal(literal, flat, dtype)


def _call(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    inner = ev.scope(lambda number, at: ev.operand(instruction, number, at, scope))
    return ev.element(callee(instruction).root, index, inner)


def _tuple(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    return tuple(
        ev.operand(instruction, number, index, scope) for number in range(len(instruction.operands))
    )


def _get_tuple_element(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    whole = ev.operand(instruction, 0, index, scope)
    if not isinstance(whole, tuple):
        raise Uncovered(instruction.opcode, "of a value that is not a tuple")
    return whole[int(instruction.attrs["index"])]  # type: ignore[arg-type]


def output_element(
    ev: ElementEvaluator, instruction: Instruction, output: int, index: Index, scope: Scope
) -> Handle:
    """Element `index` of output `output` of a tuple-shaped instruction: of a fusion or call
    whose root is a tuple, that part's instruction alone; otherwise the part of the whole
    (a variadic reduction's parts share their dimensions)."""
    if instruction.opcode in ("fusion", "call"):
        root = callee(instruction).root
        if root.opcode == "tuple" and all(not isinstance(o.shape, tuple) for o in root.operands):
            inner = ev.scope(lambda number, at: ev.operand(instruction, number, at, scope))
            return ev.element(root.operands[output], index, inner)
    shapes = instruction.shape.elements  # type: ignore[union-attr]
    if len({getattr(s, "dims", None) for s in shapes}) > 1:
        raise Uncovered(
            instruction.opcode, "a tuple result whose parts differ in dimensions (not yet)"
        )
    whole = ev.element(instruction, index, scope)
    if not isinstance(whole, tuple):
        raise Uncovered(instruction.opcode, "a tuple result without a handle per part")
    return whole[output]


RULES = {
    "parameter": _parameter,
    "constant": _constant,
    "fusion": _call,
    "call": _call,
    "opt-barrier": lambda ev, instruction, index, scope: ev.operand(instruction, 0, index, scope),
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
}

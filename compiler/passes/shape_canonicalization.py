"""Shape canonicalization: collapses chains of reshape, transpose and broadcast.

- `reshape(reshape(x))` -> `reshape(x)`: a reshape is defined on row-major logical order,
  so two reshapes are one;
- `reshape(x)` to x's dimensions -> `x`;
- `transpose(transpose(x, p), q)` -> `transpose(x, r)` with `r[i] = p[q[i]]`;
- `transpose(x, identity)` -> `x`;
- `broadcast(broadcast(x, d), e)` -> `broadcast(x, f)` with `f[j] = e[d[j]]`;
- `broadcast(x)` to x's dimensions with dimensions `0..rank-1` -> `x`.

All of these only move elements (numerics contract section 4), so the results are
bit-identical. Layouts: every op here is defined on logical indices, and a layout matters
only to a `bitcast` reading the value (and to the entry's declared signature). A rewrite
that keeps an instruction (changing only its operand) keeps its shape, layout included, so
it is always safe; a rewrite that replaces an instruction by its operand happens only when
the two shapes are equal including the layout, so no user sees a different layout.
"""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.passes.base import ComputationPass
from compiler.passes.forwarding import Forwarding


def _dims(instruction: Instruction) -> tuple[int, ...]:
    value = instruction.attrs.get("dimensions", ())
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)


def canonicalize(instruction: Instruction) -> Instruction | None | bool:
    """Rewrites `instruction` in place (returns True), names the value to replace it with
    (returns that instruction), or returns None when nothing applies."""
    opcode = instruction.opcode
    if opcode not in ("reshape", "transpose", "broadcast"):
        return None
    operand = instruction.operands[0]
    if opcode == "reshape":
        if operand.opcode == "reshape":
            instruction.operands = [operand.operands[0]]
            return True
        if operand.shape == instruction.shape:
            return operand
        return None
    if opcode == "transpose":
        perm = _dims(instruction)
        if operand.opcode == "transpose":
            inner = _dims(operand)
            instruction.operands = [operand.operands[0]]
            instruction.attrs = {**instruction.attrs, "dimensions": tuple(inner[p] for p in perm)}
            return True
        if perm == tuple(range(len(perm))) and operand.shape == instruction.shape:
            return operand
        return None
    dims = _dims(instruction)
    if operand.opcode == "broadcast":
        inner = _dims(operand)
        instruction.operands = [operand.operands[0]]
        instruction.attrs = {**instruction.attrs, "dimensions": tuple(dims[d] for d in inner)}
        return True
    if dims == tuple(range(len(dims))) and operand.shape == instruction.shape:
        return operand
    return None


def canonicalize_shapes(computation: Computation) -> bool:
    """Applies the rules in post order until none applies to the instruction."""
    changed = False
    forwarding = Forwarding(computation)
    for instruction in computation.post_order():
        forwarding.visit(instruction)
        while True:
            outcome = canonicalize(instruction)
            if outcome is None:
                break
            changed = True
            if isinstance(outcome, Instruction):
                forwarding.replace(instruction, outcome)
                break
    return forwarding.finish() or changed


class ShapeCanonicalization(ComputationPass, name="shape-canonicalization", version=2):
    """Collapses reshape, transpose and broadcast chains; dead inner ops are left to dead code
    elimination."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        return canonicalize_shapes(computation)

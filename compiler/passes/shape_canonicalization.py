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
from compiler.passes.forwarding import rewrite_in_post_order


def _dims(instruction: Instruction) -> tuple[int, ...]:
    value = instruction.attrs.get("dimensions", ())
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)


def _composed(opcode: str, outer: tuple[int, ...], inner: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions of one transpose or broadcast that does what `outer` applied to the
    result of `inner` does."""
    if opcode == "transpose":
        return tuple(inner[p] for p in outer)
    return tuple(outer[d] for d in inner)


def canonicalize(instruction: Instruction) -> Instruction | bool:
    """Rewrites `instruction` in place (returns True), names the value to replace it with
    (returns that instruction), or returns False when nothing applies (rewrite_in_post_order's
    protocol). A reshape, transpose or broadcast of the same op becomes one op; one that
    changes nothing is its operand."""
    opcode = instruction.opcode
    if opcode not in ("reshape", "transpose", "broadcast"):
        return False
    operand = instruction.operands[0]
    dims = _dims(instruction)
    if operand.opcode == opcode:
        instruction.operands = [operand.operands[0]]
        if opcode != "reshape":
            instruction.attrs = {**instruction.attrs, "dimensions": _composed(opcode, dims, _dims(operand))}
        return True
    identity = opcode == "reshape" or dims == tuple(range(len(dims)))
    if identity and operand.shape == instruction.shape:
        return operand
    return False


def canonicalize_shapes(computation: Computation) -> bool:
    """Applies the rules in post order until none applies to the instruction."""
    return rewrite_in_post_order(computation, canonicalize)


class ShapeCanonicalization(ComputationPass, name="shape-canonicalization", version=2):
    """Collapses reshape, transpose and broadcast chains; dead inner ops are left to dead code
    elimination."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        return canonicalize_shapes(computation)

"""Transpose folding: a dot reads a transposed operand's source directly.

`dot(a, transpose(w, p))` becomes `dot(a, w)` with the dimension numbers carried through p
(dimension i of the transpose is dimension p[i] of w). The dot's value is defined per output
element over the operands' logical elements, so the result is the same bit for bit; the
transpose's copy (and, for a weight stored out x in, the rearrangement of the copy) goes.

Only where the code generator reads the folded operand as cheaply as the transposed one: an
lhs that is then (batch, free, contracting) in memory order, an rhs that is then (batch,
contracting, free) or (batch, free, contracting) (compiler/codegen/dot_conv.py packs both
with one pass), and only where the free dimensions keep their relative order (the result's
dimensions follow it).
"""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import CONTRACTIONS
from compiler.passes.base import ComputationPass

_DIMS = {0: ("lhs_batch_dims", "lhs_contracting_dims"), 1: ("rhs_batch_dims", "rhs_contracting_dims")}


def _folded_dims(dot: Instruction, side: int, permutation: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The batch and contracting dims of operand `side` on the transpose's source, or None
    where folding would change the result's order or make the operand costly to read."""
    batch_key, contracting_key = _DIMS[side]
    batch: tuple[int, ...] = dot.attrs.get(batch_key, ())  # type: ignore[assignment]
    contracting: tuple[int, ...] = dot.attrs.get(contracting_key, ())  # type: ignore[assignment]
    rank = len(permutation)
    free = [d for d in range(rank) if d not in batch + contracting]
    new_batch = tuple(permutation[d] for d in batch)
    new_contracting = tuple(permutation[d] for d in contracting)
    new_free = [permutation[d] for d in free]
    if new_free != sorted(new_free):
        return None
    orders = [list(new_batch) + new_free + list(new_contracting)]
    if side == 1:
        orders.append(list(new_batch) + list(new_contracting) + new_free)
    if list(range(rank)) not in orders:
        return None
    return new_batch, new_contracting


def fold_transposes(computation: Computation) -> bool:
    """Folds the transposed operands of every dot of `computation`; the transposes that
    lose their last user are left to dead code elimination."""
    changed = False
    for instruction in computation.instructions:
        if instruction.opcode not in CONTRACTIONS:
            continue
        for side in (0, 1):
            operand = instruction.operands[side]
            if operand.opcode != "transpose":
                continue
            permutation: tuple[int, ...] = operand.attrs["dimensions"]  # type: ignore[assignment]
            folded = _folded_dims(instruction, side, permutation)
            if folded is None:
                continue
            batch_key, contracting_key = _DIMS[side]
            instruction.operands[side] = operand.operands[0]
            if folded[0] or batch_key in instruction.attrs:
                instruction.attrs[batch_key] = folded[0]
            instruction.attrs[contracting_key] = folded[1]
            changed = True
    return changed


class TransposeFolding(ComputationPass, name="transpose-folding", version=1):
    """Dots read transposed operands from the transposes' sources."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        return fold_transposes(computation)

"""Dot orientation: a dot computes the transposed product where its operands suit the gemm
better swapped.

The gemm (compiler/codegen/dot_conv.py) keeps the rhs's free dimension in vector lanes and
packs the rhs into panels, while it reads the lhs where it is. Two kinds of dot do better
swapped:
- a narrow one: an rhs with fewer free elements than one vector holds (a recurrent cell's
  `W @ h.T` with a batch of 8) fills a fraction of each vector and computes the rest for
  nothing, while the lhs's many rows would fill them all;
- a heavy one: an rhs stored (free, contracting) that is much larger than the lhs (a language
  model's head against its tied embedding, 8192 x 768, for 128 tokens) is copied into panels
  on every run, 25 MB each way, where the swapped dot packs the small side and transposes a
  result that is smaller than the rhs.

Such a dot becomes `transpose(dot(rhs, lhs))`: the same
chains with the operands of every product swapped. fma(a, b, c) = fma(b, a, c) exactly (the
product is exact before the one rounding, and every NaN is the canonical one), integer
products commute, and the contraction runs in the same order, so every bit is the same. The
transpose usually meets another one (shape canonicalization merges them) or is cheap: the
narrow side makes it small.

Complex dots stay: their chains take the operands' parts in a pinned order, which swapping
would change. Only where the codegen reads the swapped operands as cheaply: both
(batch, free, contracting) in memory order, batch dimensions leading.
"""

from __future__ import annotations

import math

from compiler.hlo.editing import NameAllocator, insert_before, replace_instruction
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import CONTRACTIONS
from compiler.hlo.shape import ArrayShape
from compiler.passes.base import SimplePass

# Free elements of the rhs below which a dot is narrow: the f32 lanes of a 512-bit vector,
# the widest any pinned target has. (A pass decides for every target alike: the optimized
# graph, and its graph_hash, are the same everywhere.)
NARROW = 16
# Free elements of the lhs from which the swapped dot fills its vectors.
TALL = 64


def better_swapped(m: int, k: int, n: int) -> bool:
    """Whether a dot of (m x k) by (k x n), both operands stored (free, contracting), is
    better computed swapped: narrow, or heavy (the rhs's packing, k*n elements, is more than
    the swapped one's, k*m, plus the result's transpose, read and written). A swapped dot is
    neither, so no dot swaps back."""
    narrow = n < NARROW and m >= TALL
    heavy = m >= NARROW and k * n > k * m + 2 * m * n
    return narrow or heavy

_SWAPPED = {
    "lhs_batch_dims": "rhs_batch_dims",
    "rhs_batch_dims": "lhs_batch_dims",
    "lhs_contracting_dims": "rhs_contracting_dims",
    "rhs_contracting_dims": "lhs_contracting_dims",
}


def _free_dims(operand: Instruction, batch: tuple[int, ...], contracting: tuple[int, ...]) -> list[int] | None:
    """The operand's free dimensions, or None unless it is (batch, free, contracting) in
    memory order with its batch dimensions leading."""
    rank = len(operand.array_shape.dims)
    free = [d for d in range(rank) if d not in batch + contracting]
    if list(batch) + free + list(contracting) != list(range(rank)):
        return None
    return free


def reoriented(dot: Instruction, names: NameAllocator) -> tuple[Instruction, Instruction] | None:
    """(the swapped dot, the transpose of it that has `dot`'s value), or None where the dot
    stays as it is."""
    lhs, rhs = dot.operands
    if any(i.array_shape.dtype.is_complex for i in (dot, lhs, rhs)):
        return None
    lb, rb = dot.attrs.get("lhs_batch_dims", ()), dot.attrs.get("rhs_batch_dims", ())
    lc, rc = dot.attrs.get("lhs_contracting_dims", ()), dot.attrs.get("rhs_contracting_dims", ())
    assert isinstance(lb, tuple) and isinstance(rb, tuple) and isinstance(lc, tuple) and isinstance(rc, tuple)
    lhs_free, rhs_free = _free_dims(lhs, lb, lc), _free_dims(rhs, rb, rc)
    if lhs_free is None or rhs_free is None:
        return None
    m = math.prod(lhs.array_shape.dims[d] for d in lhs_free)
    n = math.prod(rhs.array_shape.dims[d] for d in rhs_free)
    k = math.prod(lhs.array_shape.dims[d] for d in lc)
    if not better_swapped(m, k, n):
        return None
    result = dot.array_shape
    batch = len(lb)
    dims = result.dims[:batch] + tuple(rhs.array_shape.dims[d] for d in rhs_free) + tuple(lhs.array_shape.dims[d] for d in lhs_free)
    attrs = {_SWAPPED.get(key, key): value for key, value in dot.attrs.items()}
    swapped = Instruction(names.fresh(dot.name), dot.opcode, ArrayShape.of(result.dtype, dims), [rhs, lhs], attrs, location=dot.location)
    # Result dimension i is the swapped dot's permutation[i]: batch, then the lhs's free
    # dimensions (last in the swapped dot), then the rhs's.
    lhs_rank, rhs_rank = len(lhs_free), len(rhs_free)
    permutation = tuple(range(batch)) + tuple(batch + rhs_rank + i for i in range(lhs_rank)) + tuple(batch + i for i in range(rhs_rank))
    transpose = Instruction(names.fresh("transpose"), "transpose", dot.shape, [swapped], {"dimensions": permutation}, location=dot.location)
    return swapped, transpose


def reorient_dots(computation: Computation, names: NameAllocator) -> bool:
    changed = False
    for instruction in list(computation.instructions):
        if instruction.opcode not in CONTRACTIONS:
            continue
        rewrite = reoriented(instruction, names)
        if rewrite is None:
            continue
        swapped, transpose = rewrite
        replace_instruction(computation, instruction, transpose)
        insert_before(computation, swapped, transpose)
        changed = True
    return changed


# versions: 2: heavy dots too
class DotOrientation(SimplePass, name="dot-orientation", version=2):
    """Narrow and heavy dots compute the transposed product."""

    def run(self, module: Module) -> bool:
        names = NameAllocator(module)
        return any([reorient_dots(computation, names) for computation in module.computations])

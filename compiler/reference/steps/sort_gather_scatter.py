"""Element steps of gather (compiler/reference/sort_gather_scatter.py `_gather`). An output
element is one operand element: the output coordinate splits into batch coordinates (the
positions not in offset_dims), which pick a start index vector from the indices operand, and
offset coordinates, which step within the slice. Each start index is loaded, widened to s64
and clamped to [0, dim - slice size] (a u64 index is first capped at the limit in u64, as the
reference caps it before clipping); an operand batching dimension starts at its batch
coordinate. The index loads are ordinary LOADs of the indices operand, so a dispute about a
gathered element can narrow to the index step as well as to the element itself. sort and
scatter have no element steps (steps/__init__.py UNCOVERED)."""

from __future__ import annotations

from compiler.hlo.ir import Instruction
from compiler.reference.scalar import Op
from core.dtypes import S64, U64

from . import ElementEvaluator, Handle, Scope, Uncovered, indexing

Coords = tuple[int, ...]


def _gather(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    rec = ev.recorder
    attrs = instruction.attrs
    offset_dims = tuple(attrs.get("offset_dims", ()))  # type: ignore[arg-type]
    collapsed = tuple(attrs.get("collapsed_slice_dims", ()))  # type: ignore[arg-type]
    start_map = tuple(attrs["start_index_map"])  # type: ignore[arg-type]
    operand_batching = tuple(attrs.get("operand_batching_dims", ()))  # type: ignore[arg-type]
    indices_batching = tuple(attrs.get("start_indices_batching_dims", ()))  # type: ignore[arg-type]
    slice_sizes = tuple(attrs["slice_sizes"])  # type: ignore[arg-type]
    vector_dim = attrs["index_vector_dim"]
    assert isinstance(vector_dim, int)
    operand_dims = instruction.operands[0].array_shape.dims
    if 0 in operand_dims:
        raise Uncovered("gather", "an operand with no elements (the result is zeros)")
    indices_rank = instruction.operands[1].array_shape.rank
    batch = [c for position, c in enumerate(index) if position not in offset_dims]
    offsets = [index[position] for position in offset_dims]
    removed = set(collapsed) | set(operand_batching)
    kept = [d for d in range(len(operand_dims)) if d not in removed]

    def start_index(k: int) -> int:
        """Element k of the index vector at the batch coordinates, as s64."""
        coords = list(batch)
        if vector_dim < indices_rank:
            coords.insert(vector_dim, indexing.const(rec, k))
        loaded = ev.operand(instruction, 1, tuple(coords), scope)
        assert isinstance(loaded, int)
        if rec.dtype(loaded) == U64:  # capped in u64 (the reference caps u64 at 2^62 first)
            return rec.op(Op.CONVERT, rec.op(Op.MIN, loaded, rec.const(U64, 1 << 62)), to=S64)
        return loaded if rec.dtype(loaded) == S64 else rec.op(Op.CONVERT, loaded, to=S64)

    starts: dict[int, int] = {d: start_index(k) for k, d in enumerate(start_map)}
    for d, j in zip(operand_batching, indices_batching, strict=True):
        starts[d] = batch[j if j < vector_dim else j - 1]
    coords = []
    for d, (dim, size) in enumerate(zip(operand_dims, slice_sizes, strict=True)):
        start = starts.get(d)
        if start is None:
            clamped = indexing.const(rec, 0)
        else:
            low = rec.op(Op.MAX, start, indexing.const(rec, 0))
            clamped = rec.op(Op.MIN, low, indexing.const(rec, dim - size))
        coords.append(rec.op(Op.ADD, clamped, offsets[kept.index(d)]) if d in kept else clamped)
    return ev.operand(instruction, 0, tuple(coords), scope)


RULES = {"gather": _gather}

__all__ = ["RULES"]

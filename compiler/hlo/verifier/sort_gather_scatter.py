"""The shape rules of sort, topk, gather and scatter."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from compiler.hlo.verifier.checks import (
    ShapeRule,
    array,
    attribute,
    called_computation,
    check,
    dims_in_range,
    int_list,
    operand_count,
    operand_types,
    scalar_computation,
    tuple_or_single,
)
from core.dtypes import PRED, S32


def _gather(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    operand, indices = array(instruction, 0), array(instruction, 1)
    check(indices.dtype.is_integer, "gather indices must be integers")
    offset_dims = int_list(instruction, "offset_dims", ())
    collapsed = int_list(instruction, "collapsed_slice_dims", ())
    start_map = int_list(instruction, "start_index_map")
    operand_batching = int_list(instruction, "operand_batching_dims", ())
    indices_batching = int_list(instruction, "start_indices_batching_dims", ())
    index_vector_dim = attribute(instruction, "index_vector_dim")
    slice_sizes = int_list(instruction, "slice_sizes")
    assert isinstance(index_vector_dim, int)
    check(0 <= index_vector_dim <= indices.rank, "index_vector_dim out of range")
    index_dims = indices.dims + (1,) if index_vector_dim == indices.rank else indices.dims
    check(index_dims[index_vector_dim] == len(start_map), "start_index_map length differs from the index vector size")
    check(len(slice_sizes) == operand.rank, "slice_sizes needs one size per operand dimension")
    dims_in_range(start_map, operand.rank, "start_index_map")
    dims_in_range(collapsed + operand_batching, operand.rank, "collapsed and batching dimensions")
    check(len(operand_batching) == len(indices_batching), "batching dimension lists differ in length")
    for d in collapsed + operand_batching:
        check(slice_sizes[d] <= 1, f"collapsed dimension {d} must have slice size 1")
    for size, limit in zip(slice_sizes, operand.dims, strict=True):
        check(0 <= size <= limit, f"slice size {size} exceeds operand dimension {limit}")
    offset_sizes = [s for i, s in enumerate(slice_sizes) if i not in collapsed + operand_batching]
    batch_sizes = [s for i, s in enumerate(index_dims) if i != index_vector_dim]
    rank = len(offset_sizes) + len(batch_sizes)
    check(len(offset_dims) == len(offset_sizes), "offset_dims count differs from the uncollapsed slice dimensions")
    dims_in_range(offset_dims, rank, "offset_dims")
    check(list(offset_dims) == sorted(offset_dims), "offset_dims must be sorted")
    out = []
    offsets, batches = iter(offset_sizes), iter(batch_sizes)
    for position in range(rank):
        out.append(next(offsets) if position in offset_dims else next(batches))
    return ArrayShape.of(operand.dtype, tuple(out))


def _scatter(instruction: Instruction) -> Shape:
    count = len(instruction.operands)
    check(count >= 3 and count % 2 == 1, "scatter takes operands, indices, then as many updates")
    n = (count - 1) // 2
    operands = [array(instruction, i) for i in range(n)]
    indices = array(instruction, n)
    updates = [array(instruction, n + 1 + i) for i in range(n)]
    check(indices.dtype.is_integer, "scatter indices must be integers")
    window_dims = int_list(instruction, "update_window_dims", ())
    inserted = int_list(instruction, "inserted_window_dims", ())
    to_operand = int_list(instruction, "scatter_dims_to_operand_dims")
    input_batching = int_list(instruction, "input_batching_dims", ())
    index_vector_dim = attribute(instruction, "index_vector_dim")
    assert isinstance(index_vector_dim, int)
    first = operands[0]
    for shape in operands:
        check(shape.dims == first.dims, "scatter operands differ in dimensions")
    check(0 <= index_vector_dim <= indices.rank, "index_vector_dim out of range")
    index_dims = indices.dims + (1,) if index_vector_dim == indices.rank else indices.dims
    check(index_dims[index_vector_dim] == len(to_operand), "scatter_dims_to_operand_dims length differs from the index vector size")  # fmt: skip
    dims_in_range(to_operand, first.rank, "scatter_dims_to_operand_dims")
    dims_in_range(inserted + input_batching, first.rank, "inserted and batching dimensions")
    scatter_rank = len(index_dims) - 1
    for update, operand in zip(updates, operands, strict=True):
        check(update.dtype == operand.dtype, "updates must have the operands' types")
        check(update.rank == scatter_rank + len(window_dims), f"updates have rank {update.rank}, expected {scatter_rank + len(window_dims)}")  # fmt: skip
        check(len(window_dims) + len(inserted) + len(input_batching) == first.rank, "window, inserted and batching dimensions must cover the operand")  # fmt: skip
    dims_in_range(window_dims, updates[0].rank, "update_window_dims")
    types = [s.dtype for s in operands]
    scalar_computation(called_computation(instruction, "to_apply"), types + types, types, "scatter combiner")
    return tuple_or_single([ArrayShape.of(s.dtype, s.dims) for s in operands])


def _sort(instruction: Instruction) -> Shape:
    operand_count(instruction, (1, None))
    shapes = [array(instruction, i) for i in range(len(instruction.operands))]
    for shape in shapes:
        check(shape.dims == shapes[0].dims, "sort operands differ in dimensions")
    dims = int_list(instruction, "dimensions")
    check(len(dims) == 1, "sort needs one dimension")
    dims_in_range(dims, shapes[0].rank, "sort dimension")
    types = [s.dtype for s in shapes]
    comparator_types = [t for t in types for _ in range(2)]
    scalar_computation(called_computation(instruction, "to_apply"), comparator_types, [PRED], "comparator")
    return tuple_or_single([ArrayShape.of(s.dtype, s.dims) for s in shapes])


def _topk(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    k = attribute(instruction, "k")
    check(operand.rank >= 1, "topk needs an operand of rank 1 or more")
    check(isinstance(k, int) and 0 <= k <= operand.dims[-1], f"topk k={k} must be between 0 and the last dimension's size {operand.dims[-1]}")
    operand_types(operand.dtype, "topk")
    largest = instruction.attrs.get("largest", True)
    check(isinstance(largest, bool), "topk largest must be true or false")
    assert isinstance(k, int)
    dims = (*operand.dims[:-1], k)
    return TupleShape((ArrayShape.of(operand.dtype, dims), ArrayShape.of(S32, dims)))


RULES: dict[str, ShapeRule] = family_table("sort_gather_scatter", globals())

"""A cheap, deterministic estimate of a module's arithmetic, computed from the HLO alone
(before any pass or compilation), for admission limits.

Every instruction of every reachable computation counts once (a while body once: its trip
count is bounded separately, at run time). An instruction counts the multiply-adds it needs,
two operations each, where it has a contraction (dot, convolution), the elements it folds
where it reduces (reduce, reduce-window, select-and-scatter), the comparator steps of its
merge passes where it sorts, and otherwise one operation per output element. It is an
estimate of work for refusing oversized jobs, not a performance model.
"""

from __future__ import annotations

from math import prod

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.shape import ArrayShape, flatten


def _elements(instruction: Instruction) -> int:
    return sum(s.element_count for s in flatten(instruction.shape))


def _window_size(instruction: Instruction) -> int:
    window = instruction.attrs.get("window")
    return prod(d.size for d in window.dims) if isinstance(window, attr.Window) else 1


def _operand_dims(instruction: Instruction, index: int) -> tuple[int, ...]:
    shape = instruction.operands[index].shape
    return shape.dims if isinstance(shape, ArrayShape) else ()


def instruction_flops(instruction: Instruction) -> int:
    """The estimated operations of one instruction (see the module docstring)."""
    out = _elements(instruction)
    opcode = instruction.opcode
    if opcode == "dot":
        contracting = instruction.attrs.get("lhs_contracting_dims", ())
        lhs = _operand_dims(instruction, 0)
        return 2 * out * prod(lhs[d] for d in contracting)  # type: ignore[attr-defined]
    if opcode == "convolution":
        labels = instruction.attrs.get("dim_labels")
        kernel = _operand_dims(instruction, 1)
        features = kernel[labels.kernel_input_feature] if isinstance(labels, attr.ConvDimLabels) else 1
        return 2 * out * features * _window_size(instruction)
    if opcode == "reduce":
        inputs = instruction.operands[: len(instruction.operands) // 2]
        return max(out, sum(prod(_operand_dims(instruction, i)) for i in range(len(inputs))))
    if opcode.startswith("batch-norm-"):
        # Its expansion (compiler/hlo/batch_norm.py): about a dozen ops per operand element.
        return 12 * prod(_operand_dims(instruction, 0))
    if opcode == "reduce-window":
        return out * _window_size(instruction)
    if opcode == "select-and-scatter":
        return 2 * prod(_operand_dims(instruction, 0)) * _window_size(instruction)
    if opcode == "sort":
        # Merge passes over every element, each step one comparator evaluation.
        dims = _operand_dims(instruction, 0)
        axis = instruction.attrs.get("dimensions", (0,))[0] if dims else 0  # type: ignore[index]
        passes = max(1, (dims[axis] - 1).bit_length()) if dims else 1
        comparator = instruction.attrs.get("to_apply")
        steps = len(comparator.instructions) if isinstance(comparator, Computation) else 1
        return prod(dims) * passes * steps
    return max(out, 1)


def estimate_flops(module: Module) -> int:
    """The estimated operations of `module`: the sum over every instruction of every
    reachable computation, each counted once."""
    return sum(
        instruction_flops(instruction)
        for computation in module.reachable_computations()
        for instruction in computation.post_order()
    )

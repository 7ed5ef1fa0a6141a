"""scan as the numerics contract defines it (docs/numerics.md §8): `to_apply` applied along
one dimension in order (or in reverse), carrying values from step to step, each step's
outputs stacked along that dimension. The reference evaluator runs the steps directly; the
backend lowers `expansion`, the same steps as a while loop of dynamic slices, a call and
dynamic update slices, which computes nothing of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from core.dtypes import PRED, S64


@dataclass(frozen=True)
class ScanForm:
    """A scan's parts: its inputs (the operands scanned), carries, the scanned dimension,
    the direction and the number of steps."""

    inputs: int
    carries: int
    dimension: int
    reverse: bool
    length: int

    @staticmethod
    def of(instruction: Instruction) -> ScanForm:
        carries = int(instruction.attrs.get("num_carries", 0))  # type: ignore[arg-type]
        dimensions = instruction.attrs.get("dimensions", ())
        dimension = int(dimensions[0]) if isinstance(dimensions, tuple) and dimensions else 0
        inputs = len(instruction.operands) - carries
        length = instruction.operands[0].array_shape.dims[dimension] if inputs > 0 else 0
        return ScanForm(inputs, carries, dimension, bool(instruction.attrs.get("is_reverse", False)), length)

    def step_index(self, step: int) -> int:
        return self.length - 1 - step if self.reverse else step


def results_of(computation: Computation) -> list[Shape]:
    """The values `to_apply` returns: its root's tuple elements, or its root."""
    root = computation.root.shape
    return list(root.elements) if isinstance(root, TupleShape) else [root]


def without(dims: tuple[int, ...], dimension: int) -> tuple[int, ...]:
    return dims[:dimension] + dims[dimension + 1 :]


def stacked(element: ArrayShape, dimension: int, length: int) -> ArrayShape:
    return ArrayShape.of(element.dtype, (*element.dims[:dimension], length, *element.dims[dimension:]))


class _Builder:
    """Instructions of one computation under construction, with fresh names."""

    def __init__(self) -> None:
        self.instructions: list[Instruction] = []

    def add(self, opcode: str, shape: Shape, operands: list[Instruction] | None = None, **attrs: object) -> Instruction:
        instruction = Instruction(f"{opcode}.{len(self.instructions)}", opcode, shape, list(operands or []), dict(attrs))
        self.instructions.append(instruction)
        return instruction

    def parameter(self, number: int, shape: Shape) -> Instruction:
        instruction = Instruction(f"param.{number}", "parameter", shape, parameter_number=number)
        self.instructions.append(instruction)
        return instruction

    def constant(self, value: object, shape: ArrayShape) -> Instruction:
        instruction = self.add("constant", shape)
        instruction.literal = np.array(value, shape.dtype.numpy)
        return instruction

    def element(self, value: Instruction, index: int) -> Instruction:
        assert isinstance(value.shape, TupleShape)
        return self.add("get-tuple-element", value.shape.elements[index], [value], index=index)

    def done(self, name: str, root: Instruction) -> Computation:
        return Computation(name, self.instructions, root)


def expansion(instruction: Instruction) -> Computation:
    """The computation that is `instruction` (parameters: its operands; root: its shape)."""
    form = ScanForm.of(instruction)
    body_computation = instruction.attrs["to_apply"]
    assert isinstance(body_computation, Computation)
    operands = [operand.shape for operand in instruction.operands]
    results = results_of(body_computation)
    outputs = [stacked(shape, form.dimension, form.length) for shape in results[: len(results) - form.carries]]  # type: ignore[arg-type]
    state = TupleShape((ArrayShape.of(S64, ()), *operands, *outputs))
    index = ArrayShape.of(S64, ())

    condition = _Builder()
    counter = condition.element(condition.parameter(0, state), 0)
    limit = condition.constant(form.length, index)
    condition_computation = condition.done("scan_condition", condition.add("compare", ArrayShape.of(PRED, ()), [counter, limit], direction="LT"))

    body = _Builder()
    loop = body.parameter(0, state)
    step = body.element(loop, 0)
    position = body.add("subtract", index, [body.constant(form.length - 1, index), step]) if form.reverse else step
    zero = body.constant(0, index)
    arguments: list[Instruction] = []
    for number in range(form.inputs):
        scanned = body.element(loop, 1 + number)
        dims = scanned.array_shape.dims
        starts = [position if axis == form.dimension else zero for axis in range(len(dims))]
        sizes = tuple(1 if axis == form.dimension else size for axis, size in enumerate(dims))
        window = body.add("dynamic-slice", ArrayShape.of(scanned.array_shape.dtype, sizes), [scanned, *starts], dynamic_slice_sizes=sizes)
        arguments.append(body.add("reshape", ArrayShape.of(scanned.array_shape.dtype, without(dims, form.dimension)), [window]))
    arguments += [body.element(loop, 1 + form.inputs + number) for number in range(form.carries)]
    applied = body.add("call", body_computation.root.shape, arguments, to_apply=body_computation)
    values = [body.element(applied, n) for n in range(len(results))] if isinstance(applied.shape, TupleShape) else [applied]
    updated: list[Instruction] = []
    for number, value in enumerate(values[: len(outputs)]):
        accumulated = body.element(loop, 1 + form.inputs + form.carries + number)
        dims = accumulated.array_shape.dims
        slab = body.add("reshape", ArrayShape.of(value.array_shape.dtype, stacked(value.array_shape, form.dimension, 1).dims), [value])
        starts = [position if axis == form.dimension else zero for axis in range(len(dims))]
        updated.append(body.add("dynamic-update-slice", accumulated.shape, [accumulated, slab, *starts]))
    next_step = body.add("add", index, [step, body.constant(1, index)])
    inputs = [body.element(loop, 1 + number) for number in range(form.inputs)]
    root = body.add("tuple", state, [next_step, *inputs, *values[len(outputs) :], *updated])
    body_result = body.done("scan_body", root)

    entry = _Builder()
    parameters = [entry.parameter(number, shape) for number, shape in enumerate(operands)]
    initial = [entry.add("broadcast", shape, [entry.constant(0, ArrayShape.of(shape.dtype, ()))], dimensions=()) for shape in outputs]
    start = entry.add("tuple", state, [entry.constant(0, index), *parameters, *initial])
    loop_result = entry.add("while", state, [start], condition=condition_computation, body=body_result)
    finals = [entry.element(loop_result, 1 + form.inputs + form.carries + n) for n in range(len(outputs))]
    finals += [entry.element(loop_result, 1 + form.inputs + n) for n in range(form.carries)]
    result = entry.add("tuple", instruction.shape, finals) if isinstance(instruction.shape, TupleShape) else finals[0]
    return entry.done("scan", result)

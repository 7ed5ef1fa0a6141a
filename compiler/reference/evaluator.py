"""The reference evaluator: the executable form of the numerics contract.

Slow and plain on purpose. Each op family lives in its own module (elementwise, reductions,
data movement, dot/convolution, control flow, sort/gather/scatter), the same grouping as the
LLVM backend's codegen, so the two can be read side by side. Values are numpy arrays holding
the exact element type (bfloat16 through ml_dtypes); tuples are Python tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import ALIASING, opcodes_where
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from compiler.numerics import integers
from compiler.program import bind_arguments

Value = np.ndarray | tuple  # a tuple holds Values
Handler = Callable[["Evaluator", Instruction, list[Value]], Value]
InstructionObserver = Callable[[Instruction, Value], None]


@dataclass
class Evaluator:
    """Evaluates computations of one module.

    `observer`, when set, is called with every instruction of the entry computation and its
    value, in evaluation order (used for per-instruction digests).
    """

    handlers: dict[str, Handler]
    max_while_iterations: int | None = None
    observer: InstructionObserver | None = None
    _batchable_cache: dict[int, bool] = field(default_factory=dict)

    def evaluate_computation(
        self, computation: Computation, arguments: Sequence[Value], observe: bool = False
    ) -> Value:
        """The value of `computation`'s root given its parameter values."""
        values: dict[int, Value] = {}
        for instruction in computation.execution_order():
            if instruction.opcode == "parameter":
                value = arguments[instruction.parameter_number]
            else:
                value = self.evaluate_instruction(instruction, [values[id(op)] for op in instruction.operands])
            values[id(instruction)] = value
            if observe and self.observer is not None:
                self.observer(instruction, value)
        return values[id(computation.root)]

    def evaluate_instruction(self, instruction: Instruction, operands: list[Value]) -> Value:
        """The value of one instruction given its operands' values. Handlers compute s4 and
        u4 results in their 8-bit holders; this keeps the low 4 bits, once for every op."""
        value = self.handlers[instruction.opcode](self, instruction, operands)
        return _held_exactly(value, instruction.shape) if _has_sub_byte(instruction.shape) else value

    # --- scalar computations applied to whole arrays ----------------------------------------
    def is_batchable(self, computation: Computation) -> bool:
        """Whether every instruction of `computation` (and of what it calls) is elementwise, so
        evaluating it once on arrays equals evaluating it on each element."""
        key = id(computation)
        if key not in self._batchable_cache:
            self._batchable_cache[key] = all(
                instruction.opcode in BATCHABLE_OPCODES
                and all(self.is_batchable(c) for c in instruction.called_computations())
                and (instruction.opcode != "constant" or instruction.array_shape.rank == 0)
                for instruction in computation.instructions
            )
        return self._batchable_cache[key]

    def apply_scalar_computation(self, computation: Computation, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Applies a computation of scalars elementwise to equally shaped arrays; returns one
        array per result (a tuple root gives several)."""
        arguments = [np.asarray(a) for a in arguments]
        if self.is_batchable(computation):
            result = self.evaluate_computation(computation, arguments)
            flat = list(result) if isinstance(result, tuple) else [result]
            shape = np.broadcast_shapes(*(a.shape for a in arguments)) if arguments else ()
            return [np.broadcast_to(np.asarray(r), shape).copy() for r in flat]
        return self._apply_elementwise_slow(computation, arguments)

    def _apply_elementwise_slow(self, computation: Computation, arguments: list[np.ndarray]) -> list[np.ndarray]:
        shape = np.broadcast_shapes(*(a.shape for a in arguments)) if arguments else ()
        arguments = [np.broadcast_to(a, shape) for a in arguments]
        root = computation.root.shape
        result_shapes = list(root.elements) if isinstance(root, TupleShape) else [root]
        outputs = [np.empty(shape, dtype=s.dtype.numpy) for s in result_shapes if isinstance(s, ArrayShape)]
        for index in np.ndindex(*shape):
            scalars = [np.asarray(a[index]) for a in arguments]
            result = self.evaluate_computation(computation, scalars)
            flat = list(result) if isinstance(result, tuple) else [result]
            for out, value in zip(outputs, flat, strict=True):
                out[index] = value
        return outputs


# Opcodes whose evaluation on arrays is the evaluation on each element: the scalar ops and
# the value plumbing, and calls (whose callees `is_batchable` checks in turn).
BATCHABLE_OPCODES = opcodes_where(scalar_op=True) | ALIASING | {"call"}


def _has_sub_byte(shape: Shape) -> bool:
    if isinstance(shape, TupleShape):
        return any(_has_sub_byte(element) for element in shape.elements)
    return shape.dtype.is_sub_byte


def _held_exactly(value: Value, shape: Shape) -> Value:
    if isinstance(shape, TupleShape):
        assert isinstance(value, tuple)
        return tuple(_held_exactly(v, s) for v, s in zip(value, shape.elements, strict=True))
    return integers.wrap(value, shape.dtype) if shape.dtype.is_sub_byte else value


def flatten_value(value: Value) -> list[np.ndarray]:
    """The arrays of a (nested) tuple value, depth first, left to right."""
    if isinstance(value, tuple):
        out: list[np.ndarray] = []
        for element in value:
            out.extend(flatten_value(element))
        return out
    return [value]


def evaluate_module(
    module: Module,
    arguments: Sequence[np.ndarray],
    handlers: dict[str, Handler],
    max_while_iterations: int | None = None,
    observer: InstructionObserver | None = None,
) -> Value:
    """Evaluates the entry computation on `arguments` (one array per parameter)."""
    checked = bind_arguments([p.shape for p in module.entry.parameters], arguments)
    evaluator = Evaluator(handlers, max_while_iterations=max_while_iterations, observer=observer)
    with np.errstate(all="ignore"):
        return evaluator.evaluate_computation(module.entry, checked, observe=True)

"""Control flow and value plumbing: constants, tuples, call/fusion, while and conditional
(parameters are bound by the evaluator itself)."""

from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.hlo.ir import Computation, Instruction
from compiler.reference.evaluator import Evaluator, Value


def _constant(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    assert instruction.literal is not None
    return instruction.literal


def _tuple(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return tuple(operands)


def _get_tuple_element(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    value = operands[0]
    assert isinstance(value, tuple)
    return value[instruction.attrs["index"]]  # type: ignore[index]


def _opt_barrier(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return operands[0]


def callee(instruction: Instruction) -> Computation:
    """The computation a call, fusion or map applies."""
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation)
    return callee


def _call(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return evaluator.evaluate_computation(callee(instruction), operands)


def _while(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    condition = instruction.attrs["condition"]
    body = instruction.attrs["body"]
    assert isinstance(condition, Computation) and isinstance(body, Computation)
    state = operands[0]
    iterations = 0
    while bool(np.asarray(evaluator.evaluate_computation(condition, [state]))):
        if evaluator.max_while_iterations is not None and iterations >= evaluator.max_while_iterations:
            raise ExecutionError(f"while loop %{instruction.name} ran past the limit of {evaluator.max_while_iterations} iterations")
        state = evaluator.evaluate_computation(body, [state])
        iterations += 1
    return state


def _conditional(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    selector = np.asarray(operands[0])
    if "branch_computations" in instruction.attrs:
        branches = instruction.attrs["branch_computations"]
        assert isinstance(branches, tuple)
        index = int(selector)
        if not 0 <= index < len(branches):
            index = len(branches) - 1  # an out-of-range index runs the last branch
    else:
        branches = (instruction.attrs["true_computation"], instruction.attrs["false_computation"])
        index = 0 if bool(selector) else 1
    branch = branches[index]
    assert isinstance(branch, Computation)
    return evaluator.evaluate_computation(branch, [operands[1 + index]])


HANDLERS = {
    "constant": _constant,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "opt-barrier": _opt_barrier,
    "call": _call,
    "fusion": _call,
    "while": _while,
    "conditional": _conditional,
}

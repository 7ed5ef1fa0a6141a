"""Control flow and structure: parameters, constants, tuples, call/fusion, while,
conditional and map."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Computation, Instruction
from compiler.reference.evaluator import EvaluationError, Evaluator, Value


def _constant(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    assert instruction.literal is not None
    return instruction.literal


def _tuple(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return tuple(operands)


def _get_tuple_element(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    value = operands[0]
    assert isinstance(value, tuple)
    return value[instruction.attrs["index"]]  # type: ignore[index]


def _callee(instruction: Instruction) -> Computation:
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation)
    return callee


def _call(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return evaluator.evaluate_computation(_callee(instruction), operands)


def _while(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    condition = instruction.attrs["condition"]
    body = instruction.attrs["body"]
    assert isinstance(condition, Computation) and isinstance(body, Computation)
    state = operands[0]
    iterations = 0
    while bool(np.asarray(evaluator.evaluate_computation(condition, [state]))):
        if evaluator.max_while_iterations is not None and iterations >= evaluator.max_while_iterations:
            raise EvaluationError(
                f"while loop ran past the limit of {evaluator.max_while_iterations} iterations",
                instruction.location,
                instruction.name,
            )
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


def _map(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    results = evaluator.apply_scalar_computation(_callee(instruction), [np.asarray(o) for o in operands])
    return results[0].astype(instruction.array_shape.dtype.numpy)


HANDLERS = {
    "constant": _constant,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "call": _call,
    "fusion": _call,
    "while": _while,
    "conditional": _conditional,
    "map": _map,
}

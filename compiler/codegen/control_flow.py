"""Control flow and value plumbing: constants, tuples, calls and fusions, while loops and
conditionals.

Tuples are trees of buffers and cost nothing; get-tuple-element reuses its operand's buffers
(values are never written twice, except a while loop's state, which the loop owns). `call`
and `fusion` are inlined, except loop fusions (kind=kLoop), which become one kernel,
reduction input fusions (kind=kInput), whose reduce computes its inputs as it reads them, and
dot epilogue fusions (kind=kOutput), computed inside the dot's kernel (fusion.py). While
loops and conditionals become runtime steps around the kernels of their computations.
"""

from __future__ import annotations

from compiler.codegen import fusion
from compiler.codegen import plan as P
from compiler.codegen.lower import Lowering, Ref, flatten_ref
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.scan import expansion as scan_expansion

_FUSION_EMITTERS = {"kLoop": fusion.emit_loop_fusion, "kInput": fusion.emit_input_fusion, "kOutput": fusion.emit_output_fusion}


def _constant(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    return lowering.constant(instruction)


def _tuple(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    return tuple(operands)


def _get_tuple_element(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    return operands[0][instruction.attrs["index"]]  # type: ignore[index]


def _opt_barrier(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    # The same buffers: the barrier orders nothing at run time (steps run in plan order).
    return operands[0]


def _call(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation)
    inner, result = lowering.lower_computation(callee, operands)
    steps.extend(inner)
    return result


def _fusion(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    emit = _FUSION_EMITTERS.get(str(instruction.attrs.get("kind")))
    fused = emit(lowering, instruction, operands, steps) if emit is not None else None
    return fused if fused is not None else _call(lowering, instruction, operands, steps)


def _while(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    condition = instruction.attrs["condition"]
    body = instruction.attrs["body"]
    assert isinstance(condition, Computation) and isinstance(body, Computation)
    state = lowering.new_buffers(instruction.shape)
    steps.append(lowering.copy_into(operands[0], state))
    condition_steps, predicate = lowering.lower_computation(condition, [state])
    with lowering.loop_body(_passed_through(body, state), steps):
        body_steps, body_result = lowering.lower_computation(body, [state])
    assert isinstance(predicate, int)
    steps.append(
        P.WhileStep(
            condition=tuple(condition_steps),
            predicate=predicate,
            body=tuple(body_steps),
            state=tuple(flatten_ref(state)),
            body_results=tuple(flatten_ref(body_result)),
            instruction=instruction.name,
        )
    )
    return state


def _passed_through(body: Computation, state: Ref) -> frozenset[int]:
    """The state buffers the body returns unchanged at their own position (a scan's weights):
    their values are the same in every iteration."""
    root = body.root
    if root.opcode != "tuple" or not isinstance(state, tuple) or len(root.operands) != len(state):
        return frozenset()
    kept = set()
    for position, element in enumerate(root.operands):
        buffer = state[position]
        if isinstance(buffer, int) and element.opcode == "get-tuple-element" and element.operands[0].opcode == "parameter" and element.attrs["index"] == position:
            kept.add(buffer)
    return frozenset(kept)


def _scan(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """The scan's expansion (compiler/hlo/scan.py), a while loop, lowered in its place."""
    inner, result = lowering.lower_computation(scan_expansion(instruction), operands)
    steps.extend(inner)
    return result


def _conditional(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    if "branch_computations" in instruction.attrs:
        branches = list(instruction.attrs["branch_computations"])  # type: ignore[arg-type]
    else:
        branches = [instruction.attrs["true_computation"], instruction.attrs["false_computation"]]
    output = lowering.new_buffers(instruction.shape)
    lowered: list[tuple[P.Step, ...]] = []
    for index, branch in enumerate(branches):
        assert isinstance(branch, Computation)
        branch_steps, result = lowering.lower_computation(branch, [operands[1 + index]])
        branch_steps.append(lowering.copy_into(result, output))
        lowered.append(tuple(branch_steps))
    selector = operands[0]
    assert isinstance(selector, int)
    is_pred = "branch_computations" not in instruction.attrs
    steps.append(P.ConditionalStep(selector, is_pred, tuple(lowered), instruction.name))
    return output


# Each opcode of the family lowered by the function named after it; `parameter` is bound by
# Lowering.lower_computation itself.
EMITTERS = family_table("control_flow", globals(), bound_elsewhere=("parameter",))

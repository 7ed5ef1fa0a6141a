"""The step referee on the in-process EVM with real instructions: a job of a small module (a
dot, then tanh), disputed down to one instruction by the game, then to one element and one
step of its program by the StepReferee, which evaluates that step itself. A lie at a step of
each kind (an operation, a table lookup, an operand load, a constant, the element index, the
result) loses, whoever tells it, with no committee."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.api import graph_commitment, load_config, load_program, optimize, trace_leaves
from compiler.reference.steps.record import StepKind
from harness.dispute_game import Party
from harness.step_referee import StepJob, lying, play_steps, step_env, step_job
from node.chain import Stage, Verdict

MODULE = """
HloModule dot_tanh
ENTRY e {
  x = f32[4,8] parameter(0)
  w = f32[8,3] parameter(1)
  a = f32[4,8] multiply(x, x)
  b = f32[8,3] negate(w)
  d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[4,3] tanh(d)
}
"""


@pytest.fixture(scope="module")
def job() -> StepJob:
    program = load_program(MODULE)
    module = optimize(program, load_config())
    rng = np.random.default_rng(4)
    inputs = [
        rng.standard_normal((4, 8)).astype(np.float32),
        rng.standard_normal((8, 3)).astype(np.float32),
    ]
    return step_job(module, inputs, graph_commitment(program, load_config()))


@pytest.fixture(scope="module")
def env():
    return step_env()


def _leaf(job: StepJob, opcode: str) -> int:
    return next(
        i
        for i, leaf in enumerate(trace_leaves(job.module))
        if leaf.opcode == opcode or opcode in str(leaf.called_computations())
    )


def _step(side, kind: StepKind, nth: int = 0) -> int:
    return [i for i, s in enumerate(side.trace.steps) if s.kind is kind][nth]


def _dispute(env, job: StepJob, index: int, element: int, liar: str, kind: StepKind, nth: int = 0):
    defender_account, challenger_account = env.nodes[0], env.nodes[1]
    honest_d = job.side(defender_account, index, element)
    honest_c = job.side(challenger_account, index, element)
    step = _step(honest_d, kind, nth) if kind is not None else honest_d.trace.result
    if liar == "defender":
        defender, challenger = lying(honest_d, defender_account, step), honest_c
    else:
        defender, challenger = honest_d, lying(honest_c, challenger_account, step)
    defender_exec = job.execution({index: defender.output} if liar == "defender" else None)
    challenger_exec = job.execution({index: challenger.output} if liar == "challenger" else None)
    graph = job.leaves()
    job_id = env.run_job(graph, [Party(defender_account, defender_exec)])
    dispute = env.challenge(job_id, 0, Party(challenger_account, challenger_exec))
    env.play(
        dispute,
        Party(defender_account, defender_exec),
        Party(challenger_account, challenger_exec),
        graph,
    )
    assert env.game.get_dispute(dispute).stage == Stage.REFEREE
    gas = play_steps(env, dispute, job, index, defender, challenger)
    return env.game.get_dispute(dispute), step, gas


@pytest.mark.parametrize(
    ("opcode", "liar", "kind", "nth"),
    [
        ("tanh", "defender", StepKind.OP, 40),
        ("tanh", "defender", StepKind.TABLE, 0),
        ("tanh", "challenger", StepKind.OP, 7),
        ("tanh", "defender", StepKind.LOAD, 0),
        ("dot", "defender", StepKind.LOAD, 5),
        ("dot", "challenger", StepKind.CONST, 0),
        ("dot", "defender", StepKind.ELEMENT, 0),
        ("dot", "defender", None, 0),
    ],
)
def test_a_lie_at_any_step_loses_to_the_contract_alone(
    env, job: StepJob, opcode: str, liar: str, kind, nth: int
) -> None:
    index = _leaf(job, opcode)
    dispute, step, gas = _dispute(env, job, index, 5, liar, kind, nth)
    assert dispute.stage == Stage.SETTLED
    assert dispute.verdict == (
        Verdict.DEFENDER_WRONG if liar == "defender" else Verdict.DEFENDER_RIGHT
    ), (step, gas)
    assert not dispute.by_timeout
    assert gas.get("resolve moves") == 1 or kind is StepKind.ELEMENT and liar == "defender"


def test_an_instruction_without_a_program_has_no_verdict(env, job: StepJob) -> None:
    """The multiply reads a job input directly, which a program cannot load yet: the
    challenger shows the record binds no program, and the dispute ends without a verdict
    (its slot no longer counts: fail closed)."""
    index = _leaf(job, "multiply")
    assert job.graph.records[index].program == "00" * 32
    defender_account, challenger_account = env.nodes[0], env.nodes[1]
    honest = job.execution()
    wrong_output = np.asarray(job.values[id(trace_leaves(job.module)[index])]) + np.float32(1)
    wrong = job.execution({index: wrong_output})
    graph = job.leaves()
    job_id = env.run_job(graph, [Party(defender_account, wrong)])
    dispute = env.challenge(job_id, 0, Party(challenger_account, honest))
    env.play(dispute, Party(defender_account, wrong), Party(challenger_account, honest), graph)
    side = job.side(
        challenger_account, _leaf(job, "dot"), 0
    )  # any side: Claim only reads the record
    play_steps(env, dispute, job, index, side, side)
    assert env.game.get_dispute(dispute).verdict == Verdict.NO_VERDICT

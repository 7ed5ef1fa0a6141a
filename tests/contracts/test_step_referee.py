"""The step referee on the in-process EVM with real instructions: a job of a small module (a
dot, then tanh), disputed down to one instruction by the game, then to a chunk of the output
where the parties differ, one element of it and one step of its program by the StepReferee,
which evaluates that step itself. A lie at a step of each kind (an operation, a table lookup,
an operand load, a constant, the element index, the result) loses, whoever tells it, with no
committee; what the machine cannot evaluate goes to the committee."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.api import (
    leaf_digest,
    operand_sources,
    trace_leaves,
)
from compiler.reference.steps.record import StepKind
from harness.dispute_game import Party
from harness.sampling import share_of
from harness.step_referee import (
    StepJob,
    dispute_with_lie,
    dot_tanh_job,
    fixture_job,
    play_steps,
    settle_with_steps,
    step_env,
)
from node.chain import Stage, Verdict
from node.chain.contracts import REVEAL_LOOKBACK_BLOCKS, StepStage
from node.chain.step_play import proof_argument
from tests.contracts.helpers import reverts


@pytest.fixture(scope="module")
def job() -> StepJob:
    return dot_tanh_job(4, 8, 3)


@pytest.fixture(scope="module")
def wide() -> StepJob:
    """A job whose 12 KiB tanh output is three chunks."""
    return dot_tanh_job(48, 8, 64, seed=9)


@pytest.fixture(scope="module")
def env():
    return step_env()


def _leaf(job: StepJob, opcode: str) -> int:
    return next(
        i
        for i, leaf in enumerate(trace_leaves(job.module))
        if leaf.opcode == opcode or opcode in str(leaf.called_computations())
    )


def _step(job: StepJob, index: int, element: int, kind: StepKind | None, nth: int) -> int:
    trace = job.side("0x" + "00" * 20, index).trace(element)
    return trace.result if kind is None else [i for i, s in enumerate(trace.steps) if s.kind is kind][nth]


def _dispute(env, job: StepJob, index: int, element: int, liar: str, kind: StepKind | None, nth: int = 0):
    step = _step(job, index, element, kind, nth)
    lie = (element, step)
    defender = job.side(env.nodes[0], index, lie if liar == "defender" else None)
    challenger = job.side(env.nodes[1], index, lie if liar == "challenger" else None)
    dispute, gas = settle_with_steps(env, job, index, defender, challenger)
    return env.game.get_dispute(dispute), step, gas


@pytest.mark.parametrize(
    ("opcode", "liar", "kind", "nth"),
    [
        ("tanh", "defender", StepKind.OP, 40),
        ("tanh", "defender", StepKind.TABLE, 0),
        ("tanh", "challenger", StepKind.OP, 7),
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


def test_an_instruction_without_a_program_goes_to_the_committee(env, job: StepJob) -> None:
    """The multiply reads a job input directly, which a program cannot load yet: the
    challenger shows the record binds no program, the step referee hands the instruction to
    the committee, whose members re-execute it and vote, and its ruling reaches the game."""
    index = _leaf(job, "multiply")
    assert job.graph.records[index].program == "00" * 32
    leaf = trace_leaves(job.module)[index]
    wrong_output = np.asarray(job.values[id(leaf)]) + np.float32(1)
    defender = job.side(env.nodes[0], index)
    defender.output_array, defender.lie = wrong_output, (0, 0)  # a wrong kernel's output
    challenger = job.side(env.nodes[1], index)
    dispute, gas = settle_with_steps(env, job, index, defender, challenger)
    assert gas.get("claimUncovered moves") == 1
    assert env.game.get_dispute(dispute).stage == Stage.REFEREE
    assert env.d.step_referee.get_case(dispute)["stage"] == StepStage.COMMITTEE
    panel = env.committee.get_panel(dispute)
    assert panel.members and not {env.nodes[0], env.nodes[1]} & set(panel.members)
    honest = bytes.fromhex(leaf_digest([np.asarray(job.values[id(leaf)])]))
    for member in panel.members:
        env.committee.vote(member, dispute, honest)
    env.committee.resolve(env.nodes[2], dispute)
    assert env.d.step_referee.get_case(dispute)["stage"] == StepStage.DONE
    settled = env.game.get_dispute(dispute)
    assert settled.stage == Stage.SETTLED
    assert settled.verdict == Verdict.DEFENDER_WRONG


# The last chunk (promoted alone) with a lying defender, a middle one with a lying challenger:
# one of the two in `make test` (each takes half a minute of py-evm), both in `make test-every`.
BISECTED = share_of([(2500, "defender"), (1100, "challenger")], 2, "bisecting the outputs chunks")


@pytest.mark.parametrize(("element", "liar"), BISECTED)
def test_the_element_is_located_by_bisecting_the_outputs_chunks(env, wide: StepJob, element: int, liar: str) -> None:
    """A 12 KiB output is three chunks: the parties bisect the chunk trees down to the chunk
    where they differ (the last one sits alone, promoted), the defender reveals it, and the
    challenger names the differing element from those bytes, with no off-chain help."""
    index = _leaf(wide, "tanh")
    dispute, step, gas = _dispute(env, wide, index, element, liar, StepKind.OP, 3)
    assert dispute.verdict == (Verdict.DEFENDER_WRONG if liar == "defender" else Verdict.DEFENDER_RIGHT)
    assert gas["revealChunk moves"] == 1 and gas["answerRoot moves"] == 1
    assert gas["claimElement moves"] == 1 and gas.get("resolve moves") == 1
    assert env.d.step_referee.get_case(env.game.dispute_count())["chunk"] == element * 4 // 4096


@pytest.mark.parametrize("liar", ["defender", "challenger"])
def test_a_liar_that_stops_answering_loses_by_timeout(env, job: StepJob, liar: str) -> None:
    index = _leaf(job, "tanh")
    dispute, gas = dispute_with_lie(env, job, index, 7, liar, None, silent=True)
    assert dispute.stage == Stage.SETTLED
    assert dispute.verdict == (Verdict.DEFENDER_WRONG if liar == "defender" else Verdict.DEFENDER_RIGHT)
    assert "timeout" in gas


def test_every_move_refuses_what_does_not_prove_out(env, job: StepJob) -> None:
    """Each move of the case against a party that posts what its commitments do not prove:
    a header not the program's, a chunk root or chunk not behind the digest, an element
    outside the located chunk, a ruling from anyone but the committee, a timeout while the
    committee has the case. Then the honest moves go through and the liar loses."""
    index = _leaf(job, "tanh")
    element = 5
    trace = job.side(env.nodes[0], index).trace(element)
    lie = (element, [i for i, s in enumerate(trace.steps) if s.kind is StepKind.OP][40])
    defender, challenger = job.side(env.nodes[0], index, lie), job.side(env.nodes[1], index)
    defender_exec = job.execution({index: defender.output_array})
    challenger_exec = job.execution()
    graph = job.leaves()
    job_id = env.run_job(graph, [Party(defender.account, defender_exec)])
    dispute = env.challenge(job_id, 0, Party(challenger.account, challenger_exec))
    env.play(dispute, Party(defender.account, defender_exec), Party(challenger.account, challenger_exec), graph)
    referee = env.d.step_referee
    program, output = challenger.program, challenger.output
    claim = (challenger.record_body, program.argument(), program.template(program.result))
    with reverts("BadHeader", caseId=dispute):
        referee.claim_program(challenger.account, dispute, *claim, output.header + b" ", output.root)
    with reverts("BadChunk", caseId=dispute):
        referee.claim_program(challenger.account, dispute, *claim, output.header, defender.output.root)
    with reverts("NotYourMove"):
        referee.claim_program(defender.account, dispute, *claim, output.header, output.root)
    referee.claim_program(challenger.account, dispute, *claim, output.header, output.root)
    with reverts("BadChunk", caseId=dispute):
        referee.answer_root(defender.account, dispute, output.header, output.root)  # not its digest's
    referee.answer_root(defender.account, dispute, defender.output.header, defender.output.root)
    assert referee.get_case(dispute)["stage"] == StepStage.REVEAL  # one chunk: nothing to bisect
    with reverts("BadChunk", caseId=dispute):
        referee.reveal_chunk(defender.account, dispute, output.chunks[0])  # the challenger's bytes
    with reverts("BadChunk", caseId=dispute):
        referee.reveal_chunk(defender.account, dispute, defender.output.chunks[0] + b"\0")
    referee.reveal_chunk(defender.account, dispute, defender.output.chunks[0])
    assert referee.revealed_chunk(dispute) == defender.output.chunks[0]
    assert output.first_difference(0, defender.output.chunks[0]) == element
    values = challenger.element(element)
    proof = (proof_argument(output.proof(element)), bytes.fromhex(values.tree.root), values.proof(program.result))
    with reverts("BadElement", caseId=dispute):  # not in the located chunk
        referee.claim_element(challenger.account, dispute, 2_000, *proof)
    with reverts("BadElement", caseId=dispute):  # the defender's element, not its own
        referee.claim_element(challenger.account, dispute, element, proof_argument(defender.output.proof(element)), *proof[1:])
    with reverts("NotFallback"):
        referee._send(challenger.account, "decide", dispute, 1)  # only the committee rules
    play_steps(env, dispute, defender, challenger)
    assert env.game.get_dispute(dispute).verdict == Verdict.DEFENDER_WRONG
    with reverts("WrongStage"):
        referee.timeout(env.nodes[2], dispute)
    # The revealed chunk is read back from the head: found past the first window of blocks,
    # and not before the block a caller says the case began at.
    head = env.w3.eth.block_number
    env.w3.provider.ethereum_tester.mine_blocks(REVEAL_LOOKBACK_BLOCKS + 10)
    assert referee.revealed_chunk(dispute) == defender.output.chunks[0]
    assert referee.revealed_chunk(dispute, from_block=head + 1) is None


def test_an_instruction_reading_a_job_input_is_decided_by_the_contract() -> None:
    """Committed on its inputs, the job's multiply (x * x, x an input) has an element
    program whose loads name the input's digest: a lie at the load loses to the contract."""
    env = step_env()  # its own chain: the module's defender has been slashed often enough
    job = dot_tanh_job(4, 8, 3, on_inputs=True)
    index = _leaf(job, "multiply")
    assert job.graph.records[index].program != "00" * 32
    dispute, step, gas = _dispute(env, job, index, 9, "defender", StepKind.LOAD)
    assert dispute.verdict == Verdict.DEFENDER_WRONG and gas.get("resolve moves") == 1


def test_an_operand_that_is_a_part_of_a_multi_output_fusion_is_decided_by_the_contract() -> None:
    """In the transformer block, an instruction reads one output of a multi-output fusion:
    its program's LOAD names the part, and resolving proves the parts' digests against the
    fusion's tuple digest, then the element against the part's. A lie at that load loses to
    the contract, and a tuple the parts do not hash to is refused."""
    job = fixture_job("transformer_block")
    leaves = trace_leaves(job.module)
    index, number, part = next(
        (i, source[1], source[2])
        for i, record in enumerate(job.graph.records[:-1])
        if record.program != "00" * 32
        for source in operand_sources(record.operands, record.trace_operands, leaves)
        if source and source[0] == "part"
    )
    element = 3
    trace = job.side("0x" + "00" * 20, index).trace(element)
    load = next(i for i, s in enumerate(trace.steps) if s.kind is StepKind.LOAD and s.source == ("part", number, part))
    env = step_env()
    defender = job.side(env.nodes[0], index, (element, load))
    challenger = job.side(env.nodes[1], index)
    defender_party = Party(defender.account, job.execution({index: defender.output_array}))
    challenger_party = Party(challenger.account, job.execution())
    graph = job.leaves()
    dispute = env.challenge(env.run_job(graph, [defender_party]), 0, challenger_party)
    env.play(dispute, defender_party, challenger_party, graph)
    play_steps(env, dispute, defender, challenger, until=StepStage.RESOLVE)
    referee = env.d.step_referee
    assert referee.get_case(dispute)["position"] == load
    opening = challenger.opening(element, load)
    assert len(opening.parts) > 1
    wrong = list(opening.parts)
    wrong[part - 1 if part else 1] = bytes(32)  # another part's digest changed: not the tuple's
    arguments = [challenger.element(element).proof(a) for a in opening.arguments]
    with reverts("BadLoad", caseId=dispute):
        referee.resolve(challenger.account, dispute, challenger.program.template(load), arguments, (wrong, proof_argument(opening.load)), (0, []))
    assert play_steps(env, dispute, defender, challenger).get("resolve moves") == 1
    settled = env.game.get_dispute(dispute)
    assert settled.verdict == Verdict.DEFENDER_WRONG and not settled.by_timeout


def test_a_gathered_elements_index_is_decided_by_the_contract() -> None:
    """An embedding lookup: the gather's element program loads the row index from the ids
    and then the table's element there. A lie at the index load loses to the contract."""
    job = fixture_job("embedding_gather")
    index = next(i for i, leaf in enumerate(trace_leaves(job.module)) if leaf.opcode == "gather")
    trace = job.side("0x" + "00" * 20, index).trace(5)
    [load] = [i for i, s in enumerate(trace.steps) if s.kind is StepKind.LOAD and s.dtype.name == "s32"]
    dispute, gas = dispute_with_lie(step_env(), job, index, 5, "defender", load)
    assert dispute.verdict == Verdict.DEFENDER_WRONG and not dispute.by_timeout
    assert gas.get("resolve moves") == 1

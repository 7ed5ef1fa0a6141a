"""One side of the step referee's game (contracts/src/StepReferee.sol, docs/disputes.md "Down
to one scalar operation"): the move a party makes from what it holds of the disputed
instruction, its own output tensor and, for an element, its values of the element program's
steps.

What a party holds comes from an `InstructionHolding` (node/step_protocol.py), which something
that can evaluate the instruction implements (node/step_holding.py: the reference's element
steps): the chain side only reads the holding, proves it and sends. Every move is a pure function of the
holding and the case as the chain shows it, so a node and a test harness make the same moves.
"""

from __future__ import annotations

from dataclasses import dataclass

from attest.tensor_proof import ElementProof
from node.chain.client import Sender, TxResult, _address
from node.chain.contracts import StepReferee, StepStage
from node.step_protocol import InstructionHolding, ProgramClaim, siblings

NO_LOAD = ([], (b"", 0, b"", []))
NO_ENTRY = (0, [])


def proof_argument(proof: ElementProof) -> tuple:
    """TensorProofs.ElementProof."""
    return (proof.header, proof.chunk_index, proof.chunk, siblings(proof.siblings))


@dataclass(frozen=True)
class StepMove:
    """The move due, by name (for logs and the record of sent actions), and its sending."""

    name: str
    tx: TxResult


def play_step_move(
    referee: StepReferee, sender: Sender, case_id: int, mine: InstructionHolding, from_block: int = 0
) -> StepMove | None:
    """Sends `sender`'s move in the case when it is `sender`'s turn (None when it is not).
    Honest play: every move comes from `mine`. `from_block`: where to look for the revealed
    chunk's log."""
    if referee.to_move(case_id) != _address(sender):
        return None
    case = referee.get_case(case_id)
    stage = case["stage"]
    program = mine.program
    if stage == StepStage.CLAIM and program is None:
        return StepMove("claimUncovered", referee.claim_uncovered(sender, case_id, mine.record_body))
    if program is None:
        raise ValueError(f"case {case_id} is at {stage.name} but this party holds no element program")
    if stage == StepStage.CLAIM:
        output = mine.output
        tx = referee.claim_program(
            sender, case_id, mine.record_body, program.argument(), program.template(program.result), output.header, output.root
        )
        return StepMove("claimProgram", tx)
    if stage == StepStage.ROOT:
        return StepMove("answerRoot", referee.answer_root(sender, case_id, mine.output.header, mine.output.root))
    if stage == StepStage.BISECT:
        tree = mine.output.levels if case["locating"] else mine.element(int(case["element"])).tree
        left, right = tree.children(int(case["level"]), int(case["position"]))
        name = "bisectChunks" if case["locating"] else "bisectSteps"
        return StepMove(name, referee.bisect(sender, case_id, bytes.fromhex(left), bytes.fromhex(right)))
    if stage == StepStage.REVEAL:
        return StepMove("revealChunk", referee.reveal_chunk(sender, case_id, mine.output.chunks[int(case["chunk"])]))
    if stage == StepStage.ELEMENT:
        chunk = int(case["chunk"])
        theirs = referee.revealed_chunk(case_id, from_block)
        if theirs is None:
            raise ValueError(f"case {case_id}: the defender's revealed chunk is not in the logs from block {from_block}")
        element = mine.output.first_difference(chunk, theirs)
        if element is None:
            raise ValueError(f"case {case_id}: the revealed chunk {chunk} equals this party's; no element to name")
        values = mine.element(element)
        tx = referee.claim_element(
            sender, case_id, element, proof_argument(mine.output.proof(element)), bytes.fromhex(values.tree.root), values.proof(program.result)
        )
        return StepMove("claimElement", tx)
    if stage == StepStage.ANSWER:
        element = int(case["element"])
        values = mine.element(element)
        tx = referee.answer_element(
            sender, case_id, proof_argument(mine.output.proof(element)), bytes.fromhex(values.tree.root), values.proof(program.result)
        )
        return StepMove("answerElement", tx)
    if stage == StepStage.RESOLVE:
        return StepMove("resolve", _resolve(referee, sender, case_id, case, mine, program))
    return None


def _resolve(
    referee: StepReferee, sender: Sender, case_id: int, case: dict, mine: InstructionHolding, program: ProgramClaim
) -> TxResult:
    element, step = int(case["element"]), int(case["position"])
    values = mine.element(element)
    opening = mine.opening(element, step)
    load = NO_LOAD if opening.load is None else (list(opening.parts), proof_argument(opening.load))
    entry = NO_ENTRY if opening.entry is None else (opening.entry[0], siblings(opening.entry[1]))
    return referee.resolve(
        sender, case_id, program.template(step), [values.proof(a) for a in opening.arguments], load, entry
    )


def step_case_summary(referee: StepReferee, case_id: int) -> dict[str, object] | None:
    """What a person is shown of a dispute's case with the step referee (the chain job API,
    `vxla job`, the demo): its stage, the located chunk, the element named, the step reached,
    and whether the committee has (or had) it; None before the game refers the instruction."""
    case = referee.get_case(case_id)
    stage = case["stage"]
    if stage == StepStage.NONE:
        return None
    named = int.from_bytes(bytes(case["challengerValues"]), "big") != 0
    located = named or (bool(case["locating"]) and int(case["level"]) == 0)  # the chunk bisection ended
    stepping = named and not case["locating"] and stage in (StepStage.BISECT, StepStage.RESOLVE, StepStage.DONE)
    return {
        "stage": stage.name.lower(),
        "chunk": int(case["chunk"]) if located else None,
        "element": int(case["element"]) if named else None,
        "step": int(case["position"]) if stepping and case["level"] == 0 else None,
        "committee": bool(case["handedOver"]),
    }


def step_case_words(case: dict[str, object] | None) -> str | None:
    """A dispute's case with the step referee (`step_case` of the chain job API), in words."""
    if not case:
        return None
    parts = [f"step referee: {case['stage']}"]
    if case.get("chunk") is not None and case.get("element") is None:
        parts.append(f"chunk {case['chunk']} located")
    if case.get("element") is not None:
        parts.append(f"element {case['element']}")
    if case.get("step") is not None:
        parts.append(f"step {case['step']} evaluated by the contract" if case["stage"] == "done" else f"at step {case['step']}")
    if case.get("committee"):
        parts.append("the committee rules (no element program, or a step the contract cannot decide)")
    return ", ".join(parts)

"""The step referee's game on the in-process EVM, with a real instruction: a job of a small
module whose graph commitment binds each leaf's element program, parties that hold the
element's steps (honest, or lying at one chosen step), and the moves each makes
(contracts/src/StepReferee.sol). Shared by tests/contracts/test_step_referee.py and
bench/step_gas.py.

A lie at step j: the liar's values are the honest ones before j, a wrong value at j, and a
wrong result (its output element) when j is not the result step; its output tensor holds that
element, so every digest it commits from that leaf on differs, as a real wrong kernel's would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from web3 import EthereumTesterProvider, Web3

from attest.commitment import TreeLevels
from attest.digests import canonical_tensor_bytes, tensor_digest
from attest.merkle import inclusion_proof
from attest.tensor_proof import element_proof
from compiler.api import (
    GraphCommitment,
    Module,
    StepTrace,
    element_steps,
    evaluate,
    leaf_digest,
    result_leaf_digest,
    trace_leaves,
)
from compiler.reference.steps import NO_PROGRAM, operand_sources
from compiler.reference.steps.program import decode_program_leaf, table_entry_proof, value_leaf
from compiler.reference.steps.record import StepKind
from harness.dispute_game import GameEnv, Party, deployed_env
from node.chain import Stage
from node.chain.disputes import Execution, GraphLeaves


@dataclass
class StepSide:
    """One party's holding of the disputed element: its account, its values of the program's
    steps and its output tensor of the leaf."""

    account: str
    trace: StepTrace
    values: list[int]
    output: np.ndarray

    @property
    def tree(self) -> TreeLevels:
        return TreeLevels([value_leaf(v) for v in self.values])


def element_proof_arg(array: np.ndarray, index: int) -> tuple:
    p = element_proof(array, index)
    return (p.header, p.chunk_index, p.chunk, [bytes.fromhex(s) for s in p.siblings])


def template_arg(trace: StepTrace, index: int) -> tuple:
    leaves = trace.program_leaves()
    return (leaves[index], [bytes.fromhex(s) for s in inclusion_proof(leaves, index).siblings])


def value_arg(values: Sequence[int], index: int) -> tuple:
    leaves = [value_leaf(v) for v in values]
    return (values[index], [bytes.fromhex(s) for s in inclusion_proof(leaves, index).siblings])


NO_LOAD = (b"", 0, b"", [])
NO_ENTRY = (0, [])


def lying(honest: StepSide, account: str, step: int) -> StepSide:
    """A side equal to `honest` before `step`, wrong at `step`, and with a wrong result."""
    values = list(honest.values)
    values[step] ^= 1
    result = honest.trace.result
    if step != result:
        values[result] ^= 1
    output = np.array(honest.output, copy=True)
    flat = output.reshape(-1)
    dtype = honest.trace.steps[result].result_dtype
    bits = values[result]
    flat[_element(honest)] = np.frombuffer(
        bits.to_bytes(dtype.storage_bits // 8, "little"), dtype=output.dtype
    )[0]
    return StepSide(account, honest.trace, values, output)


def _element(side: StepSide) -> int:
    return int(side.trace.steps[0].value) if side.trace.steps[0].kind is StepKind.ELEMENT else 0


@dataclass
class StepJob:
    """A real job: the optimized module, its graph commitment, the honest values of every
    entry instruction, and the inputs."""

    module: Module
    graph: GraphCommitment
    values: dict[int, object]

    def leaves(self) -> GraphLeaves:
        return GraphLeaves(tuple(self.graph.leaves()), self.graph.records[-1].leaf())

    def execution(self, replaced: dict[int, np.ndarray] | None = None) -> Execution:
        """The op-trace digests; a leaf in `replaced` holds that output, and every leaf after
        the first replaced one differs (a wrong kernel's later values)."""
        replaced = replaced or {}
        first = min(replaced, default=None)
        digests = []
        for i, leaf in enumerate(trace_leaves(self.module)):
            if i in replaced:
                digests.append(bytes.fromhex(tensor_digest(replaced[i])))
            elif first is not None and i > first:
                digests.append(bytes.fromhex(tensor_digest(np.full(1, i, np.int64))))
            else:
                digests.append(bytes.fromhex(leaf_digest(_flat(self.values[id(leaf)]))))
        outputs = _flat(self.values[id(self.module.entry.root)])
        result = (
            result_leaf_digest(outputs)
            if first is None
            else tensor_digest(np.full(1, -1, np.int64))
        )
        return Execution(tuple(digests), bytes.fromhex(result))

    def side(self, account: str, index: int, element: int) -> StepSide:
        leaf = trace_leaves(self.module)[index]
        record = self.graph.records[index]
        operands = [np.asarray(self.values[id(o)]) for o in leaf.operands]
        trace = element_steps(
            leaf, operands, element, sources=operand_sources(record.operands, record.trace_operands)
        )
        return StepSide(
            account, trace, [s.value for s in trace.steps], np.asarray(self.values[id(leaf)])
        )

    def trace_operands(self, index: int) -> list[np.ndarray]:
        """The values of the graph leaf's trace operands, in its order (what a LOAD names)."""
        leaves = trace_leaves(self.module)
        return [
            np.asarray(self.values[id(leaves[j])]) for j in self.graph.records[index].trace_operands
        ]


def _flat(value) -> list[np.ndarray]:
    return (
        [a for part in value for a in _flat(part)]
        if isinstance(value, tuple)
        else [np.asarray(value)]
    )


def step_job(module: Module, inputs: Sequence[np.ndarray], graph: GraphCommitment) -> StepJob:
    values: dict[int, object] = {}
    evaluate(
        module,
        inputs,
        observer=lambda instruction, value: values.__setitem__(id(instruction), value),
    )
    return StepJob(module, graph, values)


def step_env(w3: Web3 | None = None) -> GameEnv:
    """A fresh deployment with the StepReferee as the game's referee and 8 nodes, on `w3`
    (anvil) or a new in-process py-evm chain."""
    return deployed_env(w3 or Web3(EthereumTesterProvider()), step_referee=True)


def dispute_with_lie(
    env: GameEnv,
    job: StepJob,
    index: int,
    element: int,
    liar: str,
    step: int | None,
    silent: bool = False,
) -> tuple[object, dict[str, int]]:
    """A k = 1 job whose slot the defender holds and a challenger disputes, one of them
    (`liar`: "defender" or "challenger") lying about `element` of leaf `index` at `step`
    (None: the result step); with `silent`, the liar stops answering once the step referee
    has the case. Both play to the end (past the deadline when someone is silent). Returns
    the settled dispute and the gas of the moves (the game's and the referee's)."""
    defender_account, challenger_account = env.nodes[0], env.nodes[1]
    honest_d = job.side(defender_account, index, element)
    honest_c = job.side(challenger_account, index, element)
    at = honest_d.trace.result if step is None else step
    defender = lying(honest_d, defender_account, at) if liar == "defender" else honest_d
    challenger = lying(honest_c, challenger_account, at) if liar == "challenger" else honest_c
    defender_exec = job.execution({index: defender.output} if liar == "defender" else None)
    challenger_exec = job.execution({index: challenger.output} if liar == "challenger" else None)
    graph = job.leaves()
    job_id = env.run_job(graph, [Party(defender_account, defender_exec)])
    env.gas.clear()
    dispute = env.challenge(job_id, 0, Party(challenger_account, challenger_exec))
    env.play(
        dispute,
        Party(defender_account, defender_exec),
        Party(challenger_account, challenger_exec),
        graph,
    )
    gas = {name: sum(values) for name, values in env.gas.items()}
    gas["game moves"] = sum(len(values) for values in env.gas.values())
    silent_account = (
        (defender_account if liar == "defender" else challenger_account) if silent else None
    )
    gas.update(play_steps(env, dispute, job, index, defender, challenger, silent=silent_account))
    referee = env.d.step_referee
    assert referee is not None
    if silent and env.game.get_dispute(dispute).stage != Stage.SETTLED:
        env.travel_to(int(referee.get_case(dispute)["deadline"]))
        gas["timeout"] = referee.timeout(env.nodes[2], dispute).gas_used
    return env.game.get_dispute(dispute), gas


def play_steps(
    env: GameEnv,
    case: int,
    job: StepJob,
    index: int,
    defender: StepSide,
    challenger: StepSide,
    silent: str | None = None,
) -> dict[str, int]:
    """Both sides move in the step referee's case until it is decided (or `silent`'s turn
    comes). Returns the gas of each kind of move (summed)."""
    referee = env.d.step_referee
    assert referee is not None
    record = job.graph.records[index]
    element = _element(challenger)
    gas: dict[str, int] = {}

    def spend(name: str, result) -> None:
        gas[name] = gas.get(name, 0) + result.gas_used
        gas[f"{name} moves"] = gas.get(f"{name} moves", 0) + 1

    while True:
        case_state = referee.get_case(case)
        stage = Stage_of(case_state["stage"])
        if stage in ("None", "Done"):
            return gas
        mover = referee.to_move(case)
        if mover == silent:
            return gas
        side = defender if mover == defender.account else challenger
        trace = side.trace
        if stage == "Claim" and record.program == NO_PROGRAM:
            spend(
                "claimUncovered", referee.claim_uncovered(side.account, case, record.body_digest())
            )
        elif stage == "Claim":
            commitment = trace.commitment()
            program = (
                bytes.fromhex(commitment.root),
                commitment.steps,
                commitment.result,
                commitment.elements,
                bytes.fromhex(commitment.header),
            )
            spend("claimElement", referee.claim_element(
                side.account, case, record.body_digest(), program, element, element_proof_arg(side.output, element),
                template_arg(trace, trace.result), bytes.fromhex(side.tree.root), value_arg(side.values, trace.result),
            ))  # fmt: skip
        elif stage == "Answer":
            spend("answerElement", referee.answer_element(
                side.account, case, element_proof_arg(side.output, element), template_arg(trace, trace.result),
                bytes.fromhex(side.tree.root), value_arg(side.values, trace.result),
            ))  # fmt: skip
        elif stage == "Bisect":
            level, position = int(case_state["level"]), int(case_state["position"])
            left, right = side.tree.children(level, position)
            spend(
                "bisect",
                referee.bisect(side.account, case, bytes.fromhex(left), bytes.fromhex(right)),
            )
        elif stage == "Resolve":
            spend(
                "resolve",
                _resolve(
                    referee, case, job, index, defender, challenger, int(case_state["position"])
                ),
            )


def _resolve(
    referee,
    case: int,
    job: StepJob,
    index: int,
    defender: StepSide,
    challenger: StepSide,
    step: int,
):
    trace = challenger.trace
    leaves = trace.program_leaves()
    template = decode_program_leaf(leaves[step])
    arguments = [value_arg(challenger.values, a) for a in template.args]
    load, entry = NO_LOAD, NO_ENTRY
    if template.kind is StepKind.LOAD:
        source = (
            job.trace_operands(index)[template.number]
            if template.source == 1
            else trace.literals[template.number]
        )
        load = element_proof_arg(source, challenger.values[template.args[0]])
    elif template.kind is StepKind.TABLE:
        table = dict(trace.tables)[trace.steps[step].table]
        position = challenger.values[template.args[0]]
        value, siblings = table_entry_proof(table, position)
        entry = (int.from_bytes(value, "big"), [bytes.fromhex(s) for s in siblings])
    values = (defender.values[step], challenger.values[step])
    return referee.resolve(
        challenger.account, case, values, template_arg(trace, step), arguments, load, entry
    )


_STAGES = ("None", "Claim", "Answer", "Bisect", "Resolve", "Done")


def Stage_of(code: int) -> str:  # noqa: N802 - mirrors the contract's enum
    return _STAGES[int(code)]


def canonical_bits(array: np.ndarray, index: int) -> int:
    return int.from_bytes(
        canonical_tensor_bytes(np.asarray(array).reshape(-1)[index : index + 1]), "little"
    )


__all__ = [
    "Party",
    "Stage",
    "StepJob",
    "StepSide",
    "lying",
    "play_steps",
    "replace",
    "step_env",
    "step_job",
]

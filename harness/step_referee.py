"""The step referee's game on the in-process EVM, with a real instruction: a job of a small
module whose graph commitment binds each leaf's element program, parties that hold the
instruction (honest, or lying at one element and one chosen step), and the moves each makes
(node/chain/step_play.py, contracts/src/StepReferee.sol). Shared by
tests/contracts/test_step_referee.py, tools/step_campaign.py and bench/step_gas.py.

A lie at step j of element e: the liar's values of e are the honest ones before j, a wrong
value at j, and a wrong result (its output element) when j is not the result step; its output
tensor holds that element, so every digest it commits from that leaf on differs, as a real
wrong kernel's would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from web3 import Web3

from attest.digests import tensor_digest
from compiler.api import (
    GraphCommitment,
    Module,
    evaluate,
    flatten_value,
    graph_commitment,
    leaf_digest,
    load_config,
    load_program,
    optimize,
    result_leaf_digest,
    trace_leaves,
)
from harness.dispute_game import GameEnv, Party, deployed_env
from harness.evm import in_process_web3
from harness.fixture_data import Fixture
from node.chain import Stage
from node.chain.contracts import StepStage
from node.chain.disputes import Execution, GraphLeaves
from node.chain.step_play import play_step_move
from node.step_holding import InstructionSide


class StepSide(InstructionSide):
    """One party's holding of the disputed instruction: honest, or (with `lie`, an element
    and a step) wrong there as the module docstring says."""

    def __init__(self, account: str, leaf, record, leaves, operands, trace_operands, output, lie: tuple[int, int] | None = None) -> None:  # noqa: ANN001
        super().__init__(leaf, record, leaves, operands, trace_operands, output)
        self.account = account
        self.lie = lie
        if lie is not None:
            element, _ = lie
            values = self.values(element)
            result = self.trace(element).steps[self.trace(element).result]
            output = np.array(self.output_array, copy=True)
            flat = output.reshape(-1)
            width = result.result_dtype.storage_bits // 8
            flat[element] = np.frombuffer(values[self.trace(element).result].to_bytes(width, "little"), dtype=output.dtype)[0]
            self.output_array = output

    def values(self, element: int) -> list[int]:
        values = super().values(element)
        if self.lie is not None and self.lie[0] == element:
            step, result = self.lie[1], self.trace(element).result
            values[step] ^= 1
            if step != result:
                values[result] ^= 1
        return values


@dataclass
class StepJob:
    """A real job: the optimized module, its graph commitment, the honest values of every
    entry instruction, the inputs and (when known) the module's text."""

    module: Module
    graph: GraphCommitment
    values: dict[int, object]
    inputs: list[np.ndarray] = field(default_factory=list)
    text: str = ""

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
                digests.append(bytes.fromhex(leaf_digest(flatten_value(self.values[id(leaf)]))))
        outputs = flatten_value(self.values[id(self.module.entry.root)])
        result = (
            result_leaf_digest(outputs)
            if first is None
            else tensor_digest(np.full(1, -1, np.int64))
        )
        return Execution(tuple(digests), bytes.fromhex(result))

    def side(self, account: str, index: int, lie: tuple[int, int] | None = None) -> StepSide:
        """A party holding leaf `index`, honest or lying at (element, step)."""
        leaves = trace_leaves(self.module)
        leaf = leaves[index]
        record = self.graph.records[index]
        return StepSide(
            account,
            leaf,
            record,
            leaves,
            [np.asarray(self.values[id(o)]) for o in leaf.operands],
            [self.values[id(leaves[j])] for j in record.trace_operands],  # type: ignore[misc]
            np.asarray(self.values[id(leaf)]),
            lie,
        )


def step_job(module: Module, inputs: Sequence[np.ndarray], graph: GraphCommitment, text: str = "") -> StepJob:
    values: dict[int, object] = {}
    evaluate(
        module,
        inputs,
        observer=lambda instruction, value: values.__setitem__(id(instruction), value),
    )
    return StepJob(module, graph, values, [np.asarray(x) for x in inputs], text)


def dot_tanh_module(m: int, k: int, n: int) -> str:
    """HLO of x (m x k) and w (k x n): a = x * x, b = -w, d = a . b (K = k terms), tanh(d). The
    multiply and the negate read job inputs; the dot and tanh read op-trace leaves."""
    return f"""
HloModule dot_tanh
ENTRY e {{
  x = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  a = f32[{m},{k}] multiply(x, x)
  b = f32[{k},{n}] negate(w)
  d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = f32[{m},{n}] tanh(d)
}}
"""


def dot_tanh_job(m: int, k: int, n: int, seed: int = 4, *, on_inputs: bool = False, scale: float = 1.0) -> StepJob:
    """A dot_tanh_module job on random inputs (`scale` times standard normal); its graph
    committed on the inputs with `on_inputs` (the leaves reading them get programs), else
    without (they keep the committee)."""
    text = dot_tanh_module(m, k, n)
    program = load_program(text)
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(shape) * scale).astype(np.float32) for shape in ((m, k), (k, n))]
    graph = graph_commitment(program, load_config(), inputs if on_inputs else None)
    return step_job(optimize(program, load_config()), inputs, graph, text)


def fixture_job(name: str) -> StepJob:
    """A job of fixture `name` on its inputs, its graph committed on them."""
    fixture = Fixture(name)
    program = load_program(fixture.module_text)
    inputs = fixture.inputs()
    graph = graph_commitment(program, load_config(), inputs)
    return step_job(optimize(program, load_config()), inputs, graph, fixture.module_text)


def leaf_index(job: StepJob, opcode: str) -> int:
    """The first op-trace leaf of the job with `opcode`."""
    return next(i for i, leaf in enumerate(trace_leaves(job.module)) if leaf.opcode == opcode)


def step_env(w3: Web3 | None = None) -> GameEnv:
    """A fresh deployment with the StepReferee as the game's referee and 8 nodes, on `w3`
    (anvil) or a new in-process py-evm chain."""
    return deployed_env(w3 or in_process_web3(), step_referee=True)


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
    at = job.side(defender_account, index).trace(element).result if step is None else step
    defender = job.side(defender_account, index, (element, at) if liar == "defender" else None)
    challenger = job.side(challenger_account, index, (element, at) if liar == "challenger" else None)
    dispute, gas = settle_with_steps(env, job, index, defender, challenger, silent=liar if silent else None)
    return env.game.get_dispute(dispute), gas


def settle_with_steps(
    env: GameEnv, job: StepJob, index: int, defender: StepSide, challenger: StepSide, silent: str | None = None
) -> tuple[int, dict[str, int]]:
    """Runs a k = 1 job whose slot `defender` holds, `challenger` disputes it, both walk the
    game to leaf `index` and play the step referee's case (`silent`: "defender" or
    "challenger" stops answering once the referee has it; the other times it out). Returns
    the dispute's id and the gas of each kind of
    move, summed."""
    defender_exec = job.execution({index: defender.output_array} if defender.lie else None)
    challenger_exec = job.execution({index: challenger.output_array} if challenger.lie else None)
    graph = job.leaves()
    job_id = env.run_job(graph, [Party(defender.account, defender_exec)])
    env.gas.clear()
    dispute = env.challenge(job_id, 0, Party(challenger.account, challenger_exec))
    env.play(dispute, Party(defender.account, defender_exec), Party(challenger.account, challenger_exec), graph)
    gas = {
        "game": sum(sum(values) for values in env.gas.values()),
        "game moves": sum(len(values) for values in env.gas.values()),
    }
    quiet = {"defender": defender.account, "challenger": challenger.account}.get(silent or "")
    gas.update(play_steps(env, dispute, defender, challenger, silent=quiet))
    referee = env.d.step_referee
    assert referee is not None
    if quiet is not None and env.game.get_dispute(dispute).stage != Stage.SETTLED:
        env.travel_to(int(referee.get_case(dispute)["deadline"]))
        gas["timeout"] = referee.timeout(env.nodes[2], dispute).gas_used
    return dispute, gas


def play_steps(
    env: GameEnv,
    case: int,
    defender: StepSide,
    challenger: StepSide,
    silent: str | None = None,
    until: StepStage | None = None,
) -> dict[str, int]:
    """Both sides move in the step referee's case until it is decided or handed to the
    committee (or `silent`'s turn comes, or the case reaches stage `until`). Returns the gas
    of each kind of move (summed) and their counts ("<name> moves")."""
    referee = env.d.step_referee
    assert referee is not None
    gas: dict[str, int] = {}
    sides = {defender.account: defender, challenger.account: challenger}
    while True:
        stage = referee.get_case(case)["stage"]
        mover = referee.to_move(case)
        if stage in (StepStage.NONE, StepStage.DONE, StepStage.COMMITTEE, until) or mover is None or mover == silent:
            return gas
        move = play_step_move(referee, mover, case, sides[mover])
        assert move is not None, (stage, mover)
        gas[move.name] = gas.get(move.name, 0) + move.tx.gas_used
        gas[f"{move.name} moves"] = gas.get(f"{move.name} moves", 0) + 1


__all__ = [
    "Party",
    "Stage",
    "StepJob",
    "StepSide",
    "dispute_with_lie",
    "dot_tanh_job",
    "dot_tanh_module",
    "leaf_index",
    "play_steps",
    "settle_with_steps",
    "step_env",
    "step_job",
]

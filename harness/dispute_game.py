"""A deployed market with its dispute game on the in-process EVM, and parties that play it,
honestly or lying on purpose: shared by tests/contracts/test_disputes.py and the gas figures
of bench/gas.py.

Jobs here are synthetic: a graph of n records whose operands are earlier leaves, an honest
execution (random digests) and faulty ones that diverge from some instruction on, as a real
wrong kernel would (every later digest differs too). Committee members vote what an honest
re-execution of the instruction gives, the honest execution's digest, unless told to lie.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from web3 import Web3

from harness.evm import in_process_web3
from node.chain import ChainClient, ContractRevert, GameTerms, Stage, TxResult, Verdict, deploy
from node.chain.contracts import Deployment
from node.chain.disputes import Execution, GraphLeaves, leaf_opening, play_move

ETHER = 10**18
MIN_STAKE = ETHER
SLASH = ETHER // 10
TERMS = GameTerms(
    min_challenge_window_s=10,
    challenge_bond_wei=ETHER // 20,
    move_window_s=100,
    committee_size=3,
    member_stake_wei=ETHER // 10,
    vote_window_s=200,
)
WINDOW = 300  # the jobs' challenge window


def digest(*parts: object) -> bytes:
    return hashlib.sha256(repr(parts).encode()).digest()


def synthetic_graph(n: int, seed: int, max_operands: int = 3) -> GraphLeaves:
    """n records reading up to `max_operands` distinct earlier leaves each, and a result record
    reading the last few."""
    rng = random.Random(seed)
    leaves = []
    for i in range(n):
        operands = sorted(rng.sample(range(i), min(i, rng.randint(0, max_operands))))
        leaves.append(digest("record", seed, i) + b"".join(j.to_bytes(4, "big") for j in operands))
    outputs = list(range(max(0, n - 2), n))
    top = digest("result-record", seed) + b"".join(j.to_bytes(4, "big") for j in outputs)
    return GraphLeaves(tuple(leaves), top)


def honest_execution(n: int, seed: int) -> Execution:
    return Execution(tuple(digest("out", seed, i) for i in range(n)), digest("result", seed))


def diverging(honest: Execution, start: int, tag: str = "wrong") -> Execution:
    """An execution equal to `honest` before `start` and different from there on (start = n:
    only the result differs)."""
    digests = tuple(d if i < start else digest(tag, i, d) for i, d in enumerate(honest.digests))
    return Execution(digests, digest(tag, "result", honest.result))


@dataclass
class Party:
    """An account and the execution it stands by."""

    account: str
    execution: Execution


@dataclass
class GameEnv:
    w3: Web3
    client: ChainClient
    d: Deployment
    deployer: str
    submitter: str
    nodes: list[str]
    gas: dict[str, list[int]] = field(default_factory=dict)

    @property
    def market(self):  # noqa: ANN201 - the binding
        return self.d.market

    @property
    def game(self):  # noqa: ANN201
        return self.d.game

    @property
    def committee(self):  # noqa: ANN201
        return self.d.committee

    def record(self, what: str, result: TxResult) -> TxResult:
        self.gas.setdefault(what, []).append(result.gas_used)
        return result

    def now(self) -> int:
        return max(self.client.timestamp(), int(time.time()))

    def travel_to(self, timestamp: int) -> None:
        now = self.client.timestamp()
        if timestamp > now:
            self.client.advance_time(timestamp - now)

    def tracked(self) -> list[str]:
        return [*self.client.accounts(), self.d.registry.address, self.market.address, self.game.address, self.committee.address]

    def total(self) -> int:
        balances = sum(self.client.balance(a) for a in self.tracked())
        return balances + sum(self.client.fees_paid.values())

    def stake(self, node: str) -> int:
        return self.d.registry.get_node(node).stake

    def locked(self, node: str) -> int:
        return self.d.registry.get_node(node).locked

    def run_job(self, graph: GraphLeaves, slots: list[Party], reward: int = ETHER, reveal: bool = True) -> int:
        """Posts a job of k = len(slots) under `graph`; every slot claims, commits and (with
        `reveal`) reveals its execution. Returns the job id."""
        now = self.now()
        job = self.market.post_job(
            self.submitter, digest("program"), digest("inputs"), len(slots), now + 1_000, now + 2_000, reward,
            graph_root=graph.root, trace_leaves=graph.n, challenge_window=WINDOW,
        )
        for p in slots:
            self.record("claimSlot", self.market.claim_slot(p.account, job))
            self.record("commit", self.market.commit_result(p.account, job, p.execution.result, p.execution.op_trace_root))
        if reveal:
            for p in slots:
                self.record("reveal", self.market.reveal(p.account, job, p.execution.result, digest("trace", p.account), p.execution.op_trace_root))
        return job

    def challenge(self, job: int, slot: int, challenger: Party) -> int:
        """`challenger` disputes `slot` with its own execution; returns the dispute id."""
        dispute = self.game.challenge(
            challenger.account, job, slot, challenger.execution.result, challenger.execution.op_trace_root, TERMS.challenge_bond_wei
        )
        # The in-process chain mines one transaction per block: the latest is the challenge.
        block = self.w3.eth.get_block("latest")
        receipt = self.w3.eth.get_transaction_receipt(block["transactions"][-1])
        self.gas.setdefault("challenge", []).append(int(receipt["gasUsed"]))
        return dispute

    def play(self, dispute: int, defender: Party, challenger: Party, graph: GraphLeaves, silent: str | None = None, stop_at: Stage | None = None) -> int:
        """Both parties move until the referee has the instruction (or the dispute settled, or
        `silent`'s turn comes: that party stops answering). Returns the moves made."""
        moves = 0
        while True:
            d = self.game.get_dispute(dispute)
            if d.stage in (Stage.REFEREE, Stage.SETTLED) or d.stage == stop_at:
                return moves
            mover = self.game.to_move(dispute)
            if mover == silent:
                return moves
            party = defender if mover == defender.account else challenger
            name = {Stage.BISECT: "bisect", Stage.REVEAL_LEAF: "revealLeaf", Stage.OPEN_LEAF: "openLeaf"}[d.stage]
            result = play_move(self.game, party.account, dispute, party.execution, graph)
            assert result is not None
            self.record(name, result)
            moves += 1

    def vote_all(self, dispute: int, honest_digest: bytes, liars: int = 0, silent: int = 0) -> list[str]:
        """The drawn members vote: the first `liars` vote a wrong digest, the next `silent`
        never vote, the rest vote `honest_digest`. Returns the members."""
        panel = self.committee.get_panel(dispute)
        for i, member in enumerate(panel.members):
            if i < liars:
                self.record("vote", self.committee.vote(member, dispute, digest("lie", i)))
            elif i < liars + silent:
                continue
            else:
                self.record("vote", self.committee.vote(member, dispute, honest_digest))
        return list(panel.members)

    def resolve(self, dispute: int) -> None:
        panel = self.committee.get_panel(dispute)
        if panel.cast < len(panel.members):
            self.travel_to(panel.deadline)
        self.record("resolve", self.committee.resolve(self.nodes[-1], dispute))

    def finalize(self, job: int) -> TxResult:
        self.travel_to(self.market.get_job(job).challenge_deadline)
        return self.record("finalize", self.market.finalize(self.deployer, job))


_CHAIN: list[tuple[Web3, Deployment, int]] = []


def _deployed() -> tuple[Web3, Deployment, int]:
    """One chain per process with 8 registered nodes, reused through snapshots."""
    if not _CHAIN:
        w3 = in_process_web3()
        d = deployed_env(w3).d
        _CHAIN.append((w3, d, w3.provider.ethereum_tester.take_snapshot()))
    return _CHAIN[0]


def game_env() -> Iterator[GameEnv]:
    """A fresh GameEnv from the snapshot; checks that no ether was created or lost."""
    w3, d, snapshot = _deployed()
    tester = w3.provider.ethereum_tester
    tester.revert_to_snapshot(snapshot)
    tester.mine_blocks(1)
    client = ChainClient(w3)
    binding = Deployment(
        type(d.registry)(client, d.registry.address),
        type(d.market)(client, d.market.address),
        type(d.game)(client, d.game.address),
        type(d.committee)(client, d.committee.address),
        d.block,
    )
    accounts = client.accounts()
    env = GameEnv(w3, client, binding, accounts[0], accounts[1], accounts[2:10])
    start = env.total()
    yield env
    assert env.total() == start, "ether was created or lost"


def deployed_env(w3: Web3, step_referee: bool = False) -> GameEnv:
    """A fresh deployment on `w3` (py-evm or anvil) with 8 registered nodes; with
    `step_referee`, the StepReferee is the game's referee."""
    client = ChainClient(w3)
    accounts = client.accounts()
    d = deploy(client, accounts[0], min_stake_wei=MIN_STAKE, unbonding_delay_s=3_600, slash_amount_wei=SLASH, terms=TERMS, step_referee=step_referee)
    for i, node in enumerate(accounts[2:10]):
        d.registry.register(node, (i + 1).to_bytes(32, "big"), f"http://node{i}.example", 2 * ETHER)
    return GameEnv(w3, client, d, accounts[0], accounts[1], accounts[2:10])


# The lies a campaign draws from: who lies, and how (tools/dispute_campaign.py, and the anvil
# sample in tests/contracts/test_disputes_anvil.py).
CASES = (
    "wrong-result",  # a faulty defender, an honest challenger
    "right-result-challenged",  # an honest defender, a lying challenger
    "defender-silent",  # the faulty defender stops answering
    "challenger-silent",  # the lying challenger stops answering
    "committee-minority",  # one committee member votes a lie
    "wrong-result-k3-majority",  # two colluding slots of three, one honest slot
    "wrong-operand-claim",  # a lying challenger opens the leaf with operands it never committed
    "forged-move",  # a faulty defender posts children (or a leaf) that are not its own
    "griefing-challengers",  # three liars challenge one honest slot and walk away
    "silent-committee",  # no member votes: no verdict, fail closed
    "malformed-graph",  # the job's graph commitment names an instruction reading itself
)
# The cases where the honest party defends, and those where the liar stops answering.
HONEST_DEFENDS = ("right-result-challenged", "challenger-silent", "wrong-operand-claim", "griefing-challengers")
LIAR_WALKS_AWAY = ("defender-silent", "challenger-silent", "wrong-operand-claim", "griefing-challengers")


def malformed(graph: GraphLeaves, index: int) -> GraphLeaves:
    """`graph` with record `index` (n: the result record) reading op-trace leaf `index` itself."""
    bad = graph.leaf(index)[:32] + index.to_bytes(4, "big")
    if index == graph.n:
        return GraphLeaves(graph.leaves, bad)
    return GraphLeaves(tuple(bad if i == index else leaf for i, leaf in enumerate(graph.leaves)), graph.top)


def play_case(g: GameEnv, case: str, n: int, diverge_at: int, seed: int) -> dict[str, object]:
    """Plays one lie end to end (job, disputes, verdicts, finalize) with the honest party on
    node 0 and checks what must hold: the honest side wins every dispute (or, with a silent
    committee, nobody does and the wrong result is not accepted), its stake is whole, and the
    job settles on the honest result or is refunded. Returns what happened, for a log."""
    honest = honest_execution(n, seed)
    wrong = diverging(honest, diverge_at)
    graph = synthetic_graph(n, seed)
    if case == "malformed-graph":
        graph = malformed(graph, diverge_at)
    good, bad = g.nodes[0], g.nodes[1]
    if case == "wrong-result-k3-majority":
        slots = [Party(good, honest), Party(bad, wrong), Party(g.nodes[2], wrong)]
        matchups = [(1, Party(good, honest)), (2, Party(good, honest))]
    elif case == "griefing-challengers":
        slots = [Party(good, honest)]
        matchups = [(0, Party(g.nodes[i], diverging(honest, (diverge_at + i) % (n + 1), f"grief{i}"))) for i in (1, 2, 3)]
    elif case in HONEST_DEFENDS:
        slots, matchups = [Party(good, honest)], [(0, Party(bad, wrong))]
    else:
        slots, matchups = [Party(bad, wrong)], [(0, Party(good, honest))]
    job = g.run_job(graph, slots)
    honest_stake = g.stake(good)
    for slot, challenger in matchups:
        defender = slots[slot]
        dispute = g.challenge(job, slot, challenger)
        liar = challenger if case in HONEST_DEFENDS else defender
        _play_lie(g, case, dispute, defender, challenger, liar, graph, honest)
        d = g.game.get_dispute(dispute)
        assert d.stage == Stage.SETTLED, (case, d.stage)
        if case == "silent-committee":
            assert d.verdict == Verdict.NO_VERDICT, (case, d)
        else:
            assert d.winner == good, (case, "the honest side lost", d)
    g.finalize(job)
    j = g.market.get_job(job)
    assert g.stake(good) == honest_stake, (case, "the honest node lost stake")
    honest_slot = any(p.account == good for p in slots)
    assert j.accepted == honest_slot and (not honest_slot or j.result == honest.result), (case, j)
    return {"case": case, "n": n, "diverge_at": diverge_at, "disputes": len(matchups), "accepted": j.accepted}


def _play_lie(g: GameEnv, case: str, dispute: int, defender: Party, challenger: Party, liar: Party, graph: GraphLeaves, honest: Execution) -> None:
    """One dispute of `case`: the liar's lie refused by the chain, then the game to its end."""
    if case == "forged-move" and g.game.get_dispute(dispute).stage in (Stage.BISECT, Stage.REVEAL_LEAF):
        # (At the result record the challenger opens first: the defender has no move to forge.)
        _refused(lambda: _forged_move(g, dispute, liar, honest))
    if case == "wrong-operand-claim":
        g.play(dispute, defender, challenger, graph, stop_at=Stage.OPEN_LEAF)
        _refused(lambda: _forged_opening(g, dispute, liar, graph))
    g.play(dispute, defender, challenger, graph, silent=liar.account if case in LIAR_WALKS_AWAY else None)
    d = g.game.get_dispute(dispute)
    if d.stage not in (Stage.REFEREE, Stage.SETTLED):
        g.travel_to(d.deadline)
        g.record("timeout", g.game.timeout(g.nodes[7], dispute))
    elif d.stage == Stage.REFEREE:
        if case != "silent-committee":
            g.vote_all(dispute, honest.digest_at(d.position), liars=1 if case == "committee-minority" else 0)
        g.resolve(dispute)


def _forged_move(g: GameEnv, dispute: int, liar: Party, honest: Execution) -> None:
    """The faulty defender's move with hashes that are not its own: children that do not hash
    to its node, or the honest digest where its leaf is."""
    d = g.game.get_dispute(dispute)
    if d.stage == Stage.BISECT:
        g.game.bisect(liar.account, dispute, digest("forged", 0), digest("forged", 1))
    else:
        g.game.reveal_leaf(liar.account, dispute, honest.digest_at(d.position))


def _forged_opening(g: GameEnv, dispute: int, liar: Party, graph: GraphLeaves) -> None:
    """The lying challenger's opening with operand digests it never committed (or, for an
    instruction without operands, a graph leaf that names one)."""
    index = g.game.get_dispute(dispute).position
    o = leaf_opening(liar.execution, graph, index)
    if o.operands:
        g.game.open_leaf(liar.account, dispute, o.digest, o.graph_leaf, o.graph_proof, [digest("lie", k) for k in range(len(o.operands))], o.operand_proofs)
    else:
        g.game.open_leaf(liar.account, dispute, o.digest, o.graph_leaf + (0).to_bytes(4, "big"), o.graph_proof, [digest("lie")], [[digest("lie")]])


def _refused(attempt) -> None:  # noqa: ANN001 - a callable that must revert
    try:
        attempt()
    except ContractRevert:
        return
    raise AssertionError("the chain took a forged move")

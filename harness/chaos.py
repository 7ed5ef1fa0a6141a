"""Chaos on a devnet: real `vxla node run` processes on anvil take a batch of chain jobs
while the harness, from one seed, kills and restarts nodes, takes their RPC endpoint away
and back, reorganizes the chain shallower and deeper than the nodes' `confirmations`, and
moves chain time forward. Afterwards every job must have settled, no honest node may have
been slashed, no node may have sent a transaction twice, and every node's chain database
must agree with the chain.

The faults, and why each is what a node meets:
- kill: SIGKILL of a random node at whatever it is doing (claiming, executing, between a
  transaction and its record), then a restart on the same data directory;
- outage: the nodes reach anvil through a TCP proxy (`RpcProxy`); it stops listening and
  drops every open connection for a few seconds, as an RPC provider going away does;
- reorg: `anvil_reorg` replaces the last `depth` blocks. A chain reorganization keeps the
  transactions of the old branch up to some point and drops the rest (a later one of an
  account cannot be kept without its earlier ones, which nonces enforce), so the new blocks
  carry the old branch's transactions up to a random cut in chain order, plus the
  submitter's posts from after the cut (still in its pool). The nodes' dropped claims,
  commits, reveals and finalizes are gone: each node has to notice and send them again;
- time jump: `evm_increaseTime` moves chain time forward, within the slack the job windows
  leave (a jump past a deadline the node could not have met would make a slash correct).

Blocks are mined every `BLOCK_INTERVAL_S` besides the transactions (anvil mines one per
transaction), so `confirmations` blocks pile up on top of a quiet chain.

`make test` runs a small seeded campaign (tests/node/test_chaos_devnet.py);
`tools/chaos_devnet.py` runs long ones.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from web3 import Web3

from attest import init_key_files, load_private_key
from harness.anvil import running_anvil
from harness.bench_load import bench
from harness.fixture_data import Fixture
from node.chain import ChainClient, Deployment, GameTerms, Phase, deploy, fetch_events
from node.devnet import free_port
from node.protocol import result_digest_of
from node.sdk import ChainSubmitter, Client

ETHER = 10**18
REWARD = ETHER // 10
SLASH = ETHER // 10
STAKE = 20 * ETHER  # 200 slots locked at once: capital never limits a campaign
BLOCK_INTERVAL_S = 0.25
CARRY_TIME_S = 3  # a reorg carries over transactions mined this close to the fork point's time
FIXTURE = Fixture("integer_arith")
FAULTS = ("kill", "outage", "shallow reorg", "deep reorg", "time jump")
# Reverts that are races between honest nodes, not a transaction sent twice: the node's
# estimate passed, and another node's claim or finalize (or the clock) got there first.
# A revert such as AlreadyClaimed or AlreadyCommitted would be a duplicate: a problem.
LOST_RACES = ("AllSlotsClaimed", "JobFinalized", "CommitPhaseOver", "RevealPhaseOver")
# Reverts of a step sent early because every slot had committed (a reveal) or revealed (a
# finalize) on the chain the node read, when a reorg then dropped one of those transactions
# before the step was mined: a race with the reorg. Each is excused only for a job that a
# reorg dropped a node transaction of, at most once a node and error for each such reorg.
# A finalize sent once the challenge deadline had passed on the chain read, when a reorg then
# dropped a reveal that had ended the reveal phase (the deadline moves later) is one too.
REORG_RACES = ("CommitPhaseNotOver", "RevealPhaseNotOver", "ChallengeWindowOpen")


@dataclass(frozen=True)
class ChaosPlan:
    """One campaign: how many nodes and jobs, how many faults, and the seed of every draw."""

    nodes: int = 3
    jobs: int = 6
    k: int = 2
    faults: int = 8
    seed: int = 1
    confirmations: int = 2
    commit_window_s: int = 240
    reveal_window_s: int = 240
    # Seconds after the reveal phase in which results may be challenged (nobody does here):
    # the market's minimum, so that jobs settle soon after their reveals.
    challenge_window_s: int = 5
    # Chain time the jumps may take in all: well inside the windows, so that a node that
    # was down can still commit and reveal in time.
    jump_budget_s: int = 90
    settle_timeout_s: float = 240.0


@dataclass
class ChaosReport:
    """What a campaign did and found."""

    plan: ChaosPlan
    jobs: list[int] = field(default_factory=list)
    injected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULTS, 0))
    dropped_transactions: int = 0  # node transactions the reorgs removed from the chain
    reorgs_dropping: dict[int, int] = field(default_factory=dict)  # job id: reorgs that dropped a node transaction of it
    node_transactions: int = 0  # mined and standing at the end
    finalized: int = 0
    accepted: int = 0
    slashed: int = 0
    reverted_node_transactions: int = 0
    lost_races: dict[str, int] = field(default_factory=dict)  # reverted node transactions by error
    outcomes: dict[str, int] = field(default_factory=dict)  # node job states at the end
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few lines for a person."""
        faults = ", ".join(f"{name} {count}" for name, count in self.injected.items())
        outcomes = ", ".join(f"{state} {count}" for state, count in sorted(self.outcomes.items()))
        return "\n".join(
            [
                f"{len(self.jobs)} jobs on {self.plan.nodes} nodes (k={self.plan.k}, confirmations="
                f"{self.plan.confirmations}, seed {self.plan.seed}) in {self.seconds:.0f} s",
                f"faults: {faults}; node transactions dropped by reorgs: {self.dropped_transactions}",
                f"settled: {self.finalized} finalized, {self.accepted} accepted; slashed: {self.slashed}; "
                f"node transactions standing: {self.node_transactions}, reverted: {self.reverted_node_transactions} "
                f"({', '.join(f'{k} {v}' for k, v in sorted(self.lost_races.items())) or 'none'})",
                f"node job states: {outcomes}",
                "problems: " + ("none" if not self.problems else "; ".join(self.problems)),
            ]
        )


# -- the RPC endpoint the nodes use -----------------------------------------------------------


class RpcProxy:
    """A TCP forwarder from a port of its own to anvil's; `cut` makes it unreachable (no
    listener, every connection dropped) until `restore`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        """Listen again on the same port."""
        listener = socket.create_server(("127.0.0.1", self.port))
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Stop listening and drop every connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        for sock in [listener, *connections]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


# -- the devnet -------------------------------------------------------------------------------


@dataclass
class ChaosNode:
    """One node of the campaign: its account, fixed port (its registered endpoint) and process."""

    index: int
    account: str
    port: int
    process: Any  # bench NodeProcess

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.process.data_dir)

    def alive(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None


def _node_config(directory: Path, port: int, rpc_url: str, d: Deployment, account: str, confirmations: int) -> str:
    return "\n".join(
        [
            "[node]",
            'host = "127.0.0.1"',
            f"port = {port}",
            f"data_dir = {json.dumps(str(directory / 'data'))}",
            f"key_file = {json.dumps(str(directory / 'keys' / 'node.key'))}",
            "workers = 1",
            "[chain]",
            f"rpc_url = {json.dumps(rpc_url)}",
            f'job_market = "{d.market.address}"',
            f'node_registry = "{d.registry.address}"',
            f"confirmations = {confirmations}",
            f'account = "{account}"',
            f"start_block = {d.block}",
            "poll_interval_s = 0.1",
            "allow_private_peers = true  # every node of the campaign is on 127.0.0.1",
            "",
        ]
    )


class Chain:
    """The harness's own view of anvil: a block every BLOCK_INTERVAL_S, and the faults that
    change the chain (reorgs, time jumps), serialized with the block producer."""

    def __init__(self, w3: Web3, node_accounts: list[str], rng: random.Random) -> None:
        self.w3 = w3
        self.node_accounts = set(node_accounts)
        self.rng = rng
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._producer.start()

    def close(self) -> None:
        self._stop.set()
        self._producer.join(10)

    def _produce(self) -> None:
        while not self._stop.wait(BLOCK_INTERVAL_S):
            with self.lock, contextlib.suppress(Exception):
                self.w3.provider.make_request("evm_mine", [])

    def reorg(self, depth: int) -> list[Any]:
        """Replaces the last `depth` blocks (see the module docstring); returns the node
        transactions it dropped."""
        with self.lock:
            # Node transactions wait in the pool meanwhile: one mined between reading the head
            # and the reorg would shift the replaced blocks by one under the list read here
            # (a kept block's transactions replayed a second time, the new one dropped).
            self.w3.provider.make_request("evm_setAutomine", [False])
            try:
                return self._reorg(depth)
            finally:
                self.w3.provider.make_request("evm_setAutomine", [True])

    def _reorg(self, depth: int) -> list[Any]:
        """`reorg` with the nodes' transactions held in the pool."""
        head = self.w3.eth.block_number
        fork_time = int(self.w3.eth.get_block(head - depth)["timestamp"])
        head_time = int(self.w3.eth.get_block(head)["timestamp"])
        old, timely = [], 0
        for number in range(head - depth + 1, head + 1):
            block = self.w3.eth.get_block(number, full_transactions=True)
            old += block["transactions"]
            if int(block["timestamp"]) <= fork_time + CARRY_TIME_S:
                timely = len(old)
        # anvil mines the new blocks at the fork point's time: a transaction that needed
        # a later time (one after a time jump) would revert there, as no chain would
        # have it, so the cut comes before the first such.
        cut = self.rng.randint(0, timely)
        carried = old[:cut] + [tx for tx in old[cut:] if tx["from"] not in self.node_accounts]
        dropped = [tx for tx in old[cut:] if tx["from"] in self.node_accounts]
        requests = [
            [{"from": tx["from"], "to": tx["to"], "input": "0x" + bytes(tx["input"]).hex(),
              "value": hex(tx["value"]), "gas": hex(tx["gas"])}, 0]
            for tx in carried
        ]  # fmt: skip
        answer = self.w3.provider.make_request("anvil_reorg", [depth, requests])
        if "error" in answer:
            raise RuntimeError(f"anvil_reorg: {answer['error']}")
        # Chain time does not go back with a reorg: the next block is at the old head's.
        self.w3.provider.make_request("evm_setNextBlockTimestamp", [head_time])
        self.w3.provider.make_request("evm_mine", [])
        return dropped

    def jump(self, seconds: int) -> None:
        """Chain time `seconds` forward, in a new block."""
        with self.lock:
            self.w3.provider.make_request("evm_increaseTime", [seconds])
            self.w3.provider.make_request("evm_mine", [])


# -- the campaign -----------------------------------------------------------------------------


def run_campaign(directory: Path, plan: ChaosPlan, say: Callable[[str], None] = lambda _: None) -> ChaosReport:
    """Runs `plan` with everything under `directory` (anvil's and each node's log, data and
    keys) and returns what happened; the checks' failures are in `report.problems`."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(plan.seed)
    report = ChaosReport(plan)
    started = time.monotonic()
    with running_anvil(directory / "anvil.log") as (w3, anvil_port):
        client = ChainClient(w3)
        deployer, submitter, *accounts = client.accounts()[: 2 + plan.nodes]
        terms = GameTerms(min_challenge_window_s=plan.challenge_window_s)
        d = deploy(client, deployer, min_stake_wei=ETHER, unbonding_delay_s=60, slash_amount_wei=SLASH, terms=terms)
        proxy = RpcProxy(anvil_port)
        nodes = []
        for index, account in enumerate(accounts):
            node_dir = directory / f"node{index}"
            node_dir.mkdir(parents=True, exist_ok=True)
            keys = init_key_files(node_dir / "keys", passphrase=bench.PASSPHRASE.encode())
            port = free_port()
            config = node_dir / "node.toml"
            config.write_text(_node_config(node_dir, port, proxy.url, d, account, plan.confirmations), encoding="utf-8")
            d.registry.register(account, bytes.fromhex(keys.key_id), f"http://127.0.0.1:{port}", STAKE)
            public_key = load_private_key(keys.private_path, bench.PASSPHRASE.encode()).public_key()
            nodes.append(ChaosNode(index, account, port, bench.NodeProcess(node_dir, config, public_key)))
        stakes = {n.account: d.registry.get_node(n.account).stake for n in nodes}
        chain = Chain(w3, [n.account for n in nodes], rng)
        try:
            for node in nodes:
                node.process.start()
            say(f"anvil, {plan.nodes} nodes up; posting {plan.jobs} jobs with {plan.faults} faults")
            expected = _post_with_faults(w3, d, submitter, nodes, proxy, chain, plan, rng, report, say)
            _settle(w3, d, nodes, chain, plan, report, say)
            _check(w3, d, nodes, stakes, expected, report)
        finally:
            chain.close()
            for node in nodes:
                node.process.stop()
            proxy.cut()
    report.seconds = time.monotonic() - started
    return report


def _inputs(seed: int) -> list[np.ndarray]:
    return bench.varied_inputs(FIXTURE, seed)


def _expected_result(inputs: list[np.ndarray]) -> bytes:
    """The result digest of an uninterrupted run here: what every job must settle on."""
    from attest.digests import tensor_digest

    return result_digest_of([tensor_digest(o) for o in _fixture_executable().run(*inputs)])


@functools.cache
def _fixture_executable() -> Any:
    """The campaign's module compiled here, once."""
    from compiler.config import load_config
    from compiler.driver import compile_program
    from compiler.program import load_program

    return compile_program(load_program(FIXTURE.module_text), load_config())


def _post_with_faults(
    w3: Web3, d: Deployment, submitter: str, nodes: list[ChaosNode], proxy: RpcProxy, chain: Chain,
    plan: ChaosPlan, rng: random.Random, report: ChaosReport, say: Callable[[str], None],
) -> dict[int, bytes]:  # fmt: skip
    """Posts the jobs from a thread of their own while faults are injected one after another
    from this one; returns each job's expected result digest."""
    expected: dict[int, bytes] = {}
    failures: list[str] = []

    def post_all() -> None:
        poster = ChainSubmitter(
            d.market, submitter, reward_wei=REWARD, commit_window_s=plan.commit_window_s,
            reveal_window_s=plan.reveal_window_s, challenge_window_s=plan.challenge_window_s,
        )  # fmt: skip
        post_rng = random.Random(plan.seed + 1)
        for index in range(plan.jobs):
            inputs = _inputs(plan.seed * 1000 + index)
            for _ in range(20):  # a node killed mid-upload: try another
                live = [n for n in nodes if n.alive()]
                node = post_rng.choice(live) if live else nodes[0]
                try:
                    with Client(node.url, chain=poster, timeout=30) as sdk:
                        job = sdk.submit(FIXTURE.module_text, inputs, redundancy=plan.k)
                    break
                except Exception as exc:  # noqa: BLE001  (the node may be down: next one)
                    say(f"  post {index}: {node.url} failed ({type(exc).__name__}: {str(exc)[:160]}), trying again")
                    time.sleep(0.5)
            else:
                failures.append(f"job {index} could not be posted")
                continue
            expected[int(job.id)] = _expected_result(inputs)
            time.sleep(post_rng.uniform(0.2, 1.0))

    poster = threading.Thread(target=post_all, daemon=True)
    poster.start()
    jumped = 0
    for number in range(plan.faults):
        time.sleep(rng.uniform(0.3, 2.0))
        fault = FAULTS[number % len(FAULTS)] if number < len(FAULTS) else rng.choice(FAULTS)
        if fault == "time jump" and jumped >= plan.jump_budget_s:
            fault = "kill"
        report.injected[fault] += 1
        if fault == "kill":
            live = [n for n in nodes if n.alive()]
            node = rng.choice(live)
            node.process.kill()
            time.sleep(rng.uniform(0.0, 2.0))
            node.process.start()
            say(f"  fault {number}: killed node{node.index}, restarted")
        elif fault == "outage":
            seconds = rng.uniform(1.0, 4.0)
            proxy.cut()
            time.sleep(seconds / 2)
            _check_outage_answers(nodes, report)
            time.sleep(seconds / 2)
            proxy.restore()
            say(f"  fault {number}: RPC away for {seconds:.1f} s")
        elif fault in ("shallow reorg", "deep reorg"):
            depth = rng.randint(1, plan.confirmations) if fault == "shallow reorg" else plan.confirmations + rng.randint(1, 4)
            dropped = chain.reorg(depth)
            report.dropped_transactions += len(dropped)
            for job_id in sorted({job_id for tx in dropped if (job_id := _job_of(d, tx)) is not None}):
                report.reorgs_dropping[job_id] = report.reorgs_dropping.get(job_id, 0) + 1
            say(f"  fault {number}: reorg of depth {depth} (confirmations {plan.confirmations}), {len(dropped)} node transactions dropped")
        else:
            seconds = min(rng.randint(5, 30), plan.jump_budget_s - jumped)
            chain.jump(seconds)
            jumped += seconds
            say(f"  fault {number}: chain time +{seconds} s")
    poster.join(300)
    report.problems += failures
    report.jobs = sorted(expected)
    return expected


def _check_outage_answers(nodes: list[ChaosNode], report: ChaosReport) -> None:
    """While the RPC is away a node still serves: healthz 200, a chain read 503 in words."""
    import httpx

    for node in nodes:
        if not node.alive():
            continue
        try:
            health = httpx.get(f"{node.url}/healthz", timeout=10).status_code
            chain = httpx.get(f"{node.url}/v1/chain/jobs/1", timeout=30)
        except httpx.HTTPError as exc:  # starting up after a kill: not listening yet
            if "Connect" not in type(exc).__name__:
                report.problems.append(f"node{node.index} during an outage: {type(exc).__name__}")
            continue
        if health != 200 or chain.status_code != 503 or "chain RPC" not in chain.text:
            report.problems.append(f"node{node.index} during an outage: healthz {health}, chain read {chain.status_code} {chain.text[:80]}")


def _settle(
    w3: Web3, d: Deployment, nodes: list[ChaosNode], chain: Chain, plan: ChaosPlan, report: ChaosReport,
    say: Callable[[str], None],
) -> None:  # fmt: skip
    """Waits until every job is finalized at a block `confirmations` deep and every node's
    database has every job in a terminal state. Chain time is moved past the challenge
    deadlines (at the latest, the reveal deadline plus the challenge window) if the jobs are
    not all settled within the windows' worth of waiting (a node's divergence monitor may
    hold its finalize until then)."""
    market = d.market
    deadline = time.monotonic() + plan.settle_timeout_s
    jumped_to_end = False
    while time.monotonic() < deadline:
        finalized = [j for j in report.jobs if market.get_job(j).phase == Phase.FINALIZED]
        terminal = all(
            _node_states(node).get(j) in ("done", "skipped", "expired") for node in nodes for j in report.jobs
        )
        if len(finalized) == len(report.jobs) and terminal:
            say(f"  settled after {time.monotonic() - deadline + plan.settle_timeout_s:.0f} s")
            return
        if not jumped_to_end and time.monotonic() > deadline - plan.settle_timeout_s / 2:
            latest = max((market.get_job(j).challenge_deadline for j in report.jobs), default=0)
            now = int(w3.eth.get_block("latest")["timestamp"])
            if latest > now:
                chain.jump(latest - now + 1)
            jumped_to_end = True
            say("  moved chain time past the last challenge deadline")
        time.sleep(0.5)
    report.problems.append(f"not settled within {plan.settle_timeout_s:.0f} s")


def _node_states(node: ChaosNode) -> dict[int, str]:
    path = node.data_dir / "chain.sqlite3"
    if not path.is_file():
        return {}
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        return {int(job_id): str(state) for job_id, state in db.execute("SELECT job_id, state FROM jobs")}


def _node_records(node: ChaosNode) -> dict[int, tuple[str, bytes | None, bytes | None, bytes | None, bytes]]:
    with contextlib.closing(sqlite3.connect(node.data_dir / "chain.sqlite3", timeout=30)) as db:
        rows = db.execute("SELECT job_id, state, result_digest, envelope_digest, op_trace_root, inputs_digest FROM jobs").fetchall()
    return {int(r[0]): (str(r[1]), r[2], r[3], r[4], bytes(r[5])) for r in rows}


def _market_call(d: Deployment, tx: Any) -> tuple[str, dict[str, Any]] | None:
    """The market function a transaction calls and its arguments (None for another call)."""
    try:
        fn, args = d.market.contract.decode_function_input(bytes(tx["input"]))
    except ValueError:
        return None
    return fn.fn_name, dict(args)


def _job_of(d: Deployment, tx: Any) -> int | None:
    """The job a market transaction is about (None for another call)."""
    call = _market_call(d, tx)
    job_id = None if call is None else call[1].get("jobId")
    return None if job_id is None else int(job_id)


def _describe(d: Deployment, tx: Any) -> str:
    """'node 0x.. claimSlot(7)', from a transaction's input."""
    call = _market_call(d, tx)
    text = "a call" if call is None else f"{call[0]}({', '.join(str(v) for v in call[1].values())[:60]})"
    return f"{tx['from']} {text}"


def _check(
    w3: Web3, d: Deployment, nodes: list[ChaosNode], stakes: dict[str, int], expected: dict[int, bytes],
    report: ChaosReport,
) -> None:  # fmt: skip
    """The campaign's claims, each failure a line of `report.problems`."""
    market, client = d.market, d.market.client
    problems = report.problems
    for job_id in report.jobs:
        job = market.get_job(job_id)
        if job.phase != Phase.FINALIZED:
            problems.append(f"job {job_id}: not finalized ({job.phase.name})")
            continue
        report.finalized += 1
        report.accepted += int(job.accepted)
        if not job.accepted or job.result != expected[job_id]:
            problems.append(f"job {job_id}: settled on {job.result.hex()[:16]}, not the computed result")
    posted = fetch_events(client, market.contract, d.block, names=("JobPosted",))
    if len(posted) != report.plan.jobs:
        problems.append(f"{len(posted)} jobs on chain, {report.plan.jobs} submitted")
    events = fetch_events(client, market.contract, d.block, names=("Slashed", "SlotClaimed", "Committed", "Revealed"))
    report.slashed = sum(1 for e in events if e.name == "Slashed")
    for e in events:
        if e.name == "Slashed":
            problems.append(f"job {e.args['jobId']}: {e.args['node']} slashed")
    for node in nodes:
        if d.registry.get_node(node.account).stake != stakes[node.account]:
            problems.append(f"node{node.index}: stake {d.registry.get_node(node.account).stake} != {stakes[node.account]}")
    # No transaction twice: once per (job, node, action) on the chain that stands, and no
    # node transaction that reverted because the chain already held its effect.
    seen: dict[tuple[str, int, str], int] = {}
    for e in events:
        if e.name != "Slashed":
            key = (str(e.args["node"]), int(e.args["jobId"]), e.name)
            seen[key] = seen.get(key, 0) + 1
    problems += [f"job {job}: {name} of {node} {count} times" for (node, job, name), count in seen.items() if count > 1]
    accounts = {n.account for n in nodes}
    mined = {a: 0 for a in accounts}
    excused: dict[tuple[str, int | None, str], int] = {}
    # Blocks and nonces at one block: the nodes are still running, and a transaction mined
    # while the blocks are read (a late finalize that loses its race) is in neither count.
    last = w3.eth.block_number
    for number in range(last + 1):
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
            if tx["from"] in accounts:
                mined[tx["from"]] += 1
                report.node_transactions += 1
                revert = client.revert_of(bytes(tx["hash"]))
                if revert is not None:
                    report.reverted_node_transactions += 1
                    name = getattr(revert, "name", str(revert))
                    report.lost_races[name] = report.lost_races.get(name, 0) + 1
                    if name in REORG_RACES:
                        race = (str(tx["from"]), _job_of(d, tx), name)
                        excused[race] = excused.get(race, 0) + 1
                        if race[1] is not None and excused[race] <= report.reorgs_dropping.get(race[1], 0):
                            continue
                    if name not in LOST_RACES:
                        problems.append(f"{_describe(d, tx)} reverted in block {number}: {name}")
    for account, count in mined.items():
        nonce = w3.eth.get_transaction_count(account, last)
        if nonce != count:  # no nonce spent on a transaction not standing
            problems.append(f"{account}: nonce {nonce} at block {last}, {count} transactions mined")
    # Every node's database agrees with the chain.
    for node in nodes:
        records = _node_records(node)
        for job_id in report.jobs:
            job = market.get_job(job_id)
            rec = records.get(job_id)
            if rec is None:
                problems.append(f"node{node.index}: job {job_id} unknown")
                continue
            state, result, envelope, op_trace_root, inputs_digest = rec
            report.outcomes[state] = report.outcomes.get(state, 0) + 1
            if inputs_digest != job.inputs_digest:
                problems.append(f"node{node.index}: job {job_id} recorded with other inputs")
            slot = next((s for s in market.get_slots(job_id) if s.node == node.account), None)
            if slot is not None:
                if state != "done":
                    problems.append(f"node{node.index}: job {job_id} holds a slot but is {state}")
                elif (result, envelope, op_trace_root) != (slot.result_digest, slot.envelope_digest, slot.op_trace_root):
                    problems.append(f"node{node.index}: job {job_id} recorded digests differ from its reveal")
            elif state not in ("skipped", "expired"):
                problems.append(f"node{node.index}: job {job_id} is {state} without a slot on chain")
        for name in ("chain.sqlite3", "jobs.sqlite3"):
            with contextlib.closing(sqlite3.connect(node.data_dir / name, timeout=30)) as db:
                if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                    problems.append(f"node{node.index}: {name} fails its integrity check")

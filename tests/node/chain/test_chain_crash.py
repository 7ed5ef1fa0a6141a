"""Crash tests of a node's chain phases on anvil: a real `vxla node run` child process with a
chain account is killed with SIGKILL at three points of a chain job's life, then restarted
on the same data directory and config:

1. after its claim is mined (its slot is on chain, its commit is not);
2. after its commit is mined (its seal is on chain, its reveal is not);
3. mid-execution (it has claimed and compiled the job and is running it: the seconds-long
   `fori_loop` module; its execution record does not exist yet).

Each job is posted with redundancy 2: the node under test holds one slot and the test holds
the other with a second registered account, committing only after the kill. Until both
slots are committed the node cannot reveal, so a kill drawn (from a fixed seed) in the
seconds after the node's commit is sure to land between its commit and its reveal.

Where each kill landed is proved after the process is dead, from the chain's events (and
the execution record in the chain database). After each restart the job must finalize, accepted, on the
result digest of an uninterrupted computation (run in this process), and then:

- no lost job: every job is DONE in the watcher's state file, finalized and accepted;
- no duplicated transaction: exactly one SlotClaimed, Committed and Revealed event of the
  node per job, every transaction sent from the node's account succeeded (receipt status 1,
  scanning every block), and the account's nonce equals the number of those transactions;
- the same trace: the trace digest revealed on chain is the SHA-256 of the envelope the
  node serves at `GET /v1/chain/jobs/{id}/trace`; after a kill that followed the commit, it
  is the one recorded before the kill (the job was not run again); and the deterministic part
  of every statement (`node.protocol.statement_digest`) equals that of an uninterrupted run of the
  same module and inputs on the same node, while the statement binds its own chain job;
- the watcher's SQLite state and the job store pass `PRAGMA integrity_check` after every kill.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
from web3 import Web3

from attest import Statement, init_key_files, load_private_key
from attest.digests import sha256_hex, tensor_digest
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from harness.bench_load import bench
from harness.fixture_data import Fixture
from node.chain import ChainClient, Deployment, GameTerms, Phase, Slot, deploy, fetch_events
from node.protocol import result_digest_of, statement_digest
from node.sdk import ChainSubmitter, Client
from node.tracing.verify import parse_envelope
from tests.contracts.test_anvil import anvil  # noqa: F401  (the fixture)

SEED = 20261201
ETHER = 10**18
REWARD = ETHER // 10
# Trip count of the runtime-bounded loop: 0.5 to 5 s of execution (20 to 200 ns an iteration,
# by host: a node's runs check their deadline in every iteration), so the kill drawn (within
# 0.3 s) after the compile lands mid-execution, and a kill drawn after the claim precedes the
# commit.
TRIPS = 25_000_000
MAX_TRIPS = 2 * TRIPS
FORI = Fixture("fori_loop")
PEER_TRACE = bytes.fromhex(sha256_hex(b"the test's own slot: a trace digest it never serves"))
# The test's own slot seals and reveals this op-trace root (the tally counts result digests).
PEER_ROOT = bytes.fromhex(sha256_hex(b"the test's own slot: an op-trace root"))
# The jobs' challenge window (and the market's minimum): they settle a second after their reveals.
WINDOW = 1


PASSPHRASE = bench.PASSPHRASE  # what NodeProcess gives the node in VXLA_KEY_PASSPHRASE
T = TypeVar("T")


def job_inputs() -> list[np.ndarray]:
    arrays = FORI.inputs()
    arrays[3] = np.array(TRIPS, dtype=np.int32)
    return arrays


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0, pause: float = 0.02) -> T:
    """The first truthy value of `probe()`; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(pause)


@dataclass
class Net:
    w3: Web3
    client: ChainClient
    deployment: Deployment
    submitter: str
    account: str  # the node under test
    peer: str  # the test's own slot holder


def new_chain_node(directory: Path, net: Net) -> Any:
    """A bench NodeProcess whose config follows `net`'s market with `net.account` (written
    as `node.devnet` writes its nodes' configs), registered and staked on chain."""
    directory.mkdir(parents=True, exist_ok=True)
    keys = init_key_files(directory / "keys", passphrase=PASSPHRASE.encode())
    d = net.deployment
    config = directory / "node.toml"
    config.write_text(
        "\n".join(
            [
                "[node]",
                'host = "127.0.0.1"',
                "port = 0",
                f"data_dir = {json.dumps(str(directory / 'data'))}",
                f"key_file = {json.dumps(str(keys.private_path))}",
                "workers = 1",
                "[limits]",
                f"max_while_iterations = {MAX_TRIPS}",
                "[chain]",
                f"rpc_url = {json.dumps(net.w3.provider.endpoint_uri)}",  # type: ignore[attr-defined]
                f'job_market = "{d.market.address}"',
                f'node_registry = "{d.registry.address}"',
                "confirmations = 0",
                f'account = "{net.account}"',
                f"start_block = {d.block}",
                "poll_interval_s = 0.1",
                # The verifier role re-executes other nodes' jobs: not what this test is about.
                "verify_fraction = 0.0",
                "",
            ]
        ),
        encoding="utf-8",
    )
    # The endpoint is never asked: the node holds every blob of its jobs itself.
    d.registry.register(net.account, bytes.fromhex(keys.key_id), "http://127.0.0.1:9", 2 * ETHER)
    public_key = load_private_key(keys.private_path, PASSPHRASE.encode()).public_key()
    return bench.NodeProcess(directory, config, public_key)


# -- reading what a dead (or live) node left ------------------------------------------------


def integrity(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def watcher_states(data_dir: Path) -> dict[int, str]:
    """The watcher's job states, read with sqlite3 from the state file."""
    with contextlib.closing(sqlite3.connect(data_dir / "chain.sqlite3")) as db:
        return {int(job_id): str(state) for job_id, state in db.execute("SELECT job_id, state FROM jobs")}


def executed_record(node: Any, net: Net, job_id: int) -> dict[str, Any] | None:
    """The node's record of executing a chain job, read with sqlite3 from its chain database."""
    with contextlib.closing(sqlite3.connect(node.data_dir / "chain.sqlite3")) as db:
        row = db.execute(
            "SELECT record FROM executed_jobs WHERE contract = ? AND job_id = ?",
            (net.deployment.market.address.lower(), job_id),
        ).fetchone()
    return None if row is None else json.loads(row[0])


def node_events(net: Net, job_id: int) -> dict[str, list[Any]]:
    """The node's SlotClaimed, Committed and Revealed events for `job_id`, by name."""
    market = net.deployment.market
    names = ("SlotClaimed", "Committed", "Revealed")
    found: dict[str, list[Any]] = {name: [] for name in names}
    for event in fetch_events(net.client, market.contract, net.deployment.block, names=names):
        if int(event.args["jobId"]) == job_id and event.args["node"] == net.account:
            found[event.name].append(event)
    return found


def event_counts(net: Net, job_id: int) -> dict[str, int]:
    return {name: len(events) for name, events in node_events(net, job_id).items()}


def my_slot(net: Net, job_id: int, account: str) -> Slot | None:
    return next((s for s in net.deployment.market.get_slots(job_id) if s.node == account), None)


def metric(url: str, name: str) -> float:
    """The sum of a metric's samples (all labels) in the node's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, flags=re.M))


def kill(node: Any) -> None:
    """SIGKILL of the node's process; it must have been alive and died of that signal."""
    assert node.process is not None and node.process.poll() is None, "the node died before the kill"
    node.process.send_signal(signal.SIGKILL)
    assert node.process.wait(30) == -signal.SIGKILL
    for name in ("chain.sqlite3", "jobs.sqlite3"):
        assert integrity(node.data_dir / name) == "ok", name


# -- one job, one kill ------------------------------------------------------------------------


@dataclass
class Crashed:
    """What one crashed job left to check at the end."""

    point: str
    job_id: int
    deterministic: str  # node.protocol.statement_digest of the statement the node revealed


def post(net: Net, url: str) -> int:
    # Deadlines far enough out for a kill, a restart (process start, compile) and a rerun.
    submitter = ChainSubmitter(
        net.deployment.market, net.submitter, reward_wei=REWARD, commit_window_s=600, reveal_window_s=600,
        challenge_window_s=WINDOW,
    )  # fmt: skip
    with Client(url, chain=submitter) as client:
        job = client.submit(FORI.module_text, job_inputs(), redundancy=2)
    assert job.on_chain
    return int(job.id)


def crash_one_job(net: Net, node: Any, url: str, point: str, rng: random.Random, expected: bytes) -> tuple[str, Crashed]:
    """Posts a job, kills the node at `point`, proves where the kill landed, restarts the
    node and follows the job to finalization. Returns the node's new URL and what to check."""
    market = net.deployment.market
    started, executions = metric(url, "vxla_executions_started_total"), metric(url, "vxla_execution_seconds_count")
    job_id = post(net, url)
    market.claim_slot(net.peer, job_id)  # the other slot: the test commits it after the kill
    recorded: dict[str, Any] | None = None

    if point == "after claim":
        wait_for(f"job {job_id}: the node's claim", lambda: my_slot(net, job_id, net.account))
        time.sleep(rng.uniform(0.0, 0.3))
        kill(node)
        counts = event_counts(net, job_id)
        assert counts == {"SlotClaimed": 1, "Committed": 0, "Revealed": 0}, f"kill after claim landed elsewhere: {counts}"
        # The kill may precede the state file's record of the claim: the restart must find it on chain.
        assert watcher_states(node.data_dir)[job_id] in {"seen", "claimed", "executed"}
    elif point == "after commit":
        wait_for(
            f"job {job_id}: the node's commit",
            lambda: (slot := my_slot(net, job_id, net.account)) is not None and slot.committed,
            timeout=120,
        )
        recorded = executed_record(node, net, job_id)  # written before the commit
        assert recorded is not None
        time.sleep(rng.uniform(0.0, 0.5))
        kill(node)
        counts = event_counts(net, job_id)
        assert counts == {"SlotClaimed": 1, "Committed": 1, "Revealed": 0}, f"kill after commit landed elsewhere: {counts}"
        assert executed_record(node, net, job_id) == recorded
        assert recorded["result_digest"] == expected.hex()
        # Killed between the commit being mined and, maybe, its record in the state file.
        assert watcher_states(node.data_dir)[job_id] in {"executed", "committed"}
    elif point == "mid execution":
        wait_for(f"job {job_id}: the node's claim", lambda: my_slot(net, job_id, net.account))
        # The started counter moves when the job goes to its execution process; the execution
        # histogram when its run returns: in between, the job is running.
        wait_for(f"job {job_id}: the start of its execution", lambda: metric(url, "vxla_executions_started_total") > started)
        assert metric(url, "vxla_execution_seconds_count") == executions, "the execution ended before the kill"
        time.sleep(rng.uniform(0.05, 0.3))
        kill(node)
        counts = event_counts(net, job_id)
        assert counts == {"SlotClaimed": 1, "Committed": 0, "Revealed": 0}, f"kill mid-execution landed elsewhere: {counts}"
        assert executed_record(node, net, job_id) is None, "the execution had finished at the kill (its record exists)"
        assert watcher_states(node.data_dir)[job_id] == "claimed"
    else:
        raise AssertionError(point)

    # The other slot commits while the node is down, so the node may reveal once it commits.
    market.commit_result(net.peer, job_id, expected, PEER_ROOT)
    url = node.start()
    wait_for(
        f"job {job_id} ({point}): the restarted node's reveal",
        lambda: (slot := my_slot(net, job_id, net.account)) is not None and slot.revealed,
        timeout=120,
    )
    market.reveal(net.peer, job_id, expected, PEER_TRACE, PEER_ROOT)
    final = wait_for(
        f"job {job_id} ({point}): finalization",
        lambda: (job := market.get_job(job_id)).phase == Phase.FINALIZED and job,
        timeout=60,
    )
    assert final.accepted and final.result == expected, f"job {job_id} ({point}) finalized on the wrong result"
    slot = my_slot(net, job_id, net.account)
    assert slot is not None and slot.result_digest == expected

    # The revealed trace is the envelope the node serves, bound to this chain job.
    envelope = httpx.get(f"{url}/v1/chain/jobs/{job_id}/trace", timeout=30)
    assert envelope.status_code == 200, envelope.text
    assert sha256_hex(envelope.content) == slot.envelope_digest.hex()
    statement = Statement.from_json_bytes(parse_envelope(envelope.content).payload)
    predicate = statement.predicate
    assert (predicate.job_id, predicate.chain_id) == (str(job_id), net.client.chain_id)
    assert str(predicate.contract).lower() == market.address.lower()
    assert [o.digest for o in predicate.deterministic.outputs] == executed_record(node, net, job_id)["output_tensor_digests"]  # type: ignore[index]
    # ... and its op-trace root is the one the node sealed and revealed.
    assert predicate.deterministic.op_trace is not None and slot.op_trace_root.hex() == predicate.deterministic.op_trace.merkle_root
    if recorded is not None:
        # Killed after the commit: the recorded trace is revealed, the job is not run again.
        assert slot.envelope_digest.hex() == recorded["envelope_digest"]
        assert executed_record(node, net, job_id) == recorded
    return url, Crashed(point, job_id, statement_digest(statement))


# -- the test ---------------------------------------------------------------------------------


def test_sigkill_after_claim_after_commit_and_mid_execution_loses_nothing(anvil: Web3, tmp_path: Path) -> None:  # noqa: F811
    rng = random.Random(SEED)
    client = ChainClient(anvil)
    deployer, submitter, account, peer = client.accounts()[:4]
    d = deploy(
        client, deployer, min_stake_wei=ETHER, unbonding_delay_s=60, slash_amount_wei=ETHER // 10,
        terms=GameTerms(min_challenge_window_s=WINDOW),
    )  # fmt: skip
    net = Net(anvil, client, d, submitter, account, peer)
    d.registry.register(peer, b"\x70" * 32, "http://127.0.0.1:9", 2 * ETHER)
    node = new_chain_node(tmp_path / "node", net)

    # The uninterrupted computation of the job, here: its result digest is what must win.
    executable = compile_program(load_program(FORI.module_text), load_config())
    outputs = executable.run(*job_inputs(), max_while_iterations=MAX_TRIPS)
    expected = result_digest_of([tensor_digest(o) for o in outputs])

    crashed: list[Crashed] = []
    try:
        url = node.start()
        for point in ("after claim", "after commit", "mid execution"):
            url, outcome = crash_one_job(net, node, url, point, rng, expected)
            crashed.append(outcome)
        # The uninterrupted run on the node itself: a local job of the same module and inputs.
        with Client(url) as local:
            reference = local.submit(FORI.module_text, job_inputs()).wait(timeout=120).info
        for outcome in crashed:
            assert outcome.deterministic == reference["statement_digest"], f"{outcome.point}: another execution"
        # Every job is settled in the watcher's state before a clean stop.
        wait_for(
            "the watcher to record every job done",
            lambda: all(watcher_states(node.data_dir).get(c.job_id) == "done" for c in crashed),
        )
        assert node.stop() == 0
    finally:
        node.kill()

    for name in ("chain.sqlite3", "jobs.sqlite3"):
        assert integrity(node.data_dir / name) == "ok", name
    for outcome in crashed:
        assert event_counts(net, outcome.job_id) == {"SlotClaimed": 1, "Committed": 1, "Revealed": 1}, outcome.point
        job = d.market.get_job(outcome.job_id)
        assert job.phase == Phase.FINALIZED and job.accepted and job.result == expected, outcome.point
    # No transaction of the node's account failed, and none is missing from the blocks.
    sent = [
        tx
        for number in range(anvil.eth.block_number + 1)
        for tx in anvil.eth.get_block(number, full_transactions=True)["transactions"]
        if tx["from"] == account
    ]
    assert [anvil.eth.get_transaction_receipt(tx["hash"])["status"] for tx in sent] == [1] * len(sent)
    assert anvil.eth.get_transaction_count(account) == len(sent)
    # One registration, then per job at least a claim, a commit and a reveal.
    assert len(sent) >= 1 + 3 * len(crashed)

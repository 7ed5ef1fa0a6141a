"""End to end on anvil: three nodes (NodeServer threads with their chain watchers) take a job
posted through the SDK with redundancy 3. An honest job finalizes with three identical
result digests and the reward split; with one node started with fault injection, the job
finalizes on the honest digest, the faulty node is slashed, and the honest nodes' divergence
reports name the injected instruction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from web3 import Web3

from attest.digests import tensor_digest
from attest.keys import generate_private_key, init_key_files, key_id
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from compiler.runtime.executable import Fault
from harness.chaos import RpcProxy
from harness.fixture_data import Fixture
from node.chain import ChainClient, Deployment, GameTerms, Phase, deploy, fetch_events
from node.chain.errors import DeploymentMismatch
from node.chain.state import JobState
from node.cli import main
from node.daemon.config import ChainConfig, NodeConfig
from node.daemon.server import NodeServer
from node.protocol import envelope_digest_of, result_digest_of
from node.sdk import ChainSubmitter, Client, JobFailed
from tests.contracts.test_anvil import anvil  # noqa: F401  (the fixture)
from tests.node.chain.test_chain_state import legacy_layout

ETHER = 10**18
REWARD = ETHER // 10
SLASH = ETHER // 10
FIXTURE = Fixture("integer_arith")
# The jobs' challenge window (and the market's minimum): they settle two seconds after their
# reveal phase.
WINDOW = 2
# A job whose honest nodes must challenge within its window: one node thread sees the reveal,
# compares and sends its challenge, on a machine whose cores other tests keep busy.
DISPUTED_WINDOW = 10
# An optimistic job whose verifiers are nodes started after its claim: each starts its
# execution processes, fetches the trace, compiles and re-executes before it challenges.
VERIFIED_WINDOW = 30
TERMS = GameTerms(min_challenge_window_s=1)


@dataclass
class Devnet:
    client: ChainClient
    deployment: Deployment
    submitter: str
    accounts: list[str]
    tmp: Path


@pytest.fixture
def devnet(anvil: Web3, tmp_path: Path) -> Devnet:  # noqa: F811
    client = ChainClient(anvil)
    deployer, submitter, *accounts = client.accounts()[:5]
    d = deploy(client, deployer, min_stake_wei=ETHER, unbonding_delay_s=60, slash_amount_wei=SLASH, terms=TERMS)
    return Devnet(client, d, submitter, accounts, tmp_path)


def node_config(net: Devnet, name: str, account: str, fault: Fault | None = None, *, run_before_claim: bool = False) -> NodeConfig:
    """A node on the test chain, serving on a free port, data under tmp/name."""
    d = net.deployment
    return NodeConfig(
        port=0,
        data_dir=net.tmp / name,
        chain=ChainConfig(
            rpc_url=net.client.w3.provider.endpoint_uri,  # type: ignore[attr-defined]
            job_market=d.market.address,
            node_registry=d.registry.address,
            confirmations=0,
            account=account,
            start_block=d.block,
            poll_interval_s=0.2,
            allow_private_peers=True,  # every node of the test chain is on 127.0.0.1
            run_before_claim=run_before_claim,
        ),
        fault_instruction=fault.instruction if fault else "",
        fault_bit=fault.bit if fault else 0,
    )


def start_nodes(net: Devnet, faults: dict[int, Fault], run_first: tuple[int, ...] = ()) -> list[NodeServer]:
    """Three registered nodes serving from threads; node i runs with `faults[i]` if given,
    and executes before it claims if i is in `run_first`."""
    servers = []
    d = net.deployment
    for i, account in enumerate(net.accounts):
        config = node_config(net, f"node{i}", account, faults.get(i), run_before_claim=i in run_first)
        server = NodeServer(config, generate_private_key(), log_level="warning")
        # The key id the node signs with: peers check served traces against it.
        d.registry.register(account, bytes.fromhex(key_id(server.signing_key)), server.url, 2 * ETHER)
        servers.append(server)
    for server in servers:
        server.start_in_thread()
    return servers


@pytest.fixture
def nodes_factory(devnet: Devnet) -> Iterator:
    started: list[NodeServer] = []

    def make(faults: dict[int, Fault] | None = None, run_first: tuple[int, ...] = ()) -> list[NodeServer]:
        started.extend(start_nodes(devnet, faults or {}, run_first))
        return started

    yield make
    for server in started:
        server.stop()


def submit(net: Devnet, server: NodeServer, window: int = WINDOW):  # noqa: ANN201
    submitter = ChainSubmitter(net.deployment.market, net.submitter, reward_wei=REWARD, challenge_window_s=window)
    client = Client(server.url, chain=submitter)
    job = client.submit(FIXTURE.module_text, FIXTURE.inputs(), redundancy=3)
    assert job.on_chain and job.state == "open"
    return client, job


def test_honest_job_finalizes_with_three_identical_results_and_splits_the_reward(
    devnet: Devnet, nodes_factory
) -> None:  # noqa: ANN001
    servers = nodes_factory()
    client, job = submit(devnet, servers[0])
    job.wait(timeout=60, poll_seconds=0.2)
    market = devnet.deployment.market
    chain_job = market.get_job(int(job.id))
    assert chain_job.phase == Phase.FINALIZED and chain_job.accepted
    expected = result_digest_of([tensor_digest(o) for o in FIXTURE.xla_outputs()])
    assert chain_job.result == expected
    slots = market.get_slots(int(job.id))
    assert sorted(s.node for s in slots) == sorted(devnet.accounts)
    assert {s.result_digest for s in slots} == {expected}
    # Every node records its own signed trace of the same outputs, and revealed its op-trace
    # root (one execution: the same on every node) after the challenge window.
    roots = {s.node: s.op_trace_root.hex() for s in slots}
    assert len(set(roots.values())) == 1
    for server in servers:
        info = Client(server.url)._json("GET", f"/v1/chain/jobs/{job.id}")
        assert info["local"]["result_digest"] == expected.hex()
        assert server.chain is not None and info["local"]["op_trace_root"] == roots[server.chain.address]
        assert info["challenge_window"] == WINDOW and info["challenge_deadline"] == chain_job.reveal_end + WINDOW
        assert info["open_disputes"] == 0 and not any(slot["refuted"] for slot in info["slots"])
    outputs = job.outputs()
    assert [tensor_digest(o) for o in outputs] == [tensor_digest(o) for o in FIXTURE.xla_outputs()]
    # Anyone with a node's URL and the chain job's number verifies it, re-executed here.
    # It says what it checked: the binding to this job on this market and chain, the result
    # the chain finalized, and every slot's revealed result.
    with Client(servers[1].url) as stranger:
        report = stranger.job(job.id).verify(chain_id=devnet.client.chain_id)
    assert report.ok and report.verified, [c.message for c in report.failed]
    checks = {c.name: c.message for c in report.checks}
    assert f"job_id {job.id}, chain_id {devnet.client.chain_id}, contract " in checks["job binding"]
    assert checks["chain result"] == f"the re-executed result {expected.hex()[:16]}... is the one the chain finalized for job {job.id}"
    assert checks["slots"].startswith(f"every revealed slot that stands (3 of 3) revealed the re-executed result {expected.hex()[:16]}")
    with Client(servers[1].url) as stranger:  # a market the trace is not for: the binding fails
        other = stranger.job(job.id).verify(execute=False, contract="0x" + "11" * 20)
    assert not other.ok and other.failed[0].name == "job binding"
    # The reward is split among the three (paid as credits, withdrawn by the watchers).
    rewarded = _events(devnet, "Rewarded", int(job.id))
    assert len(rewarded) == 3 and sum(int(e.args["amount"]) for e in rewarded) == REWARD
    assert not _events(devnet, "Slashed", int(job.id))
    divergence = Client(servers[0].url)._json("GET", f"/v1/chain/jobs/{job.id}/divergence")
    assert divergence["divergences"] == [] and divergence["recorded_block"] is None
    # Each node's metrics follow its chain jobs: this one ends done on every node.
    deadline = time.monotonic() + 30
    for server in servers:
        while 'vxla_chain_jobs{state="done"} 1.0' not in (text := Client(server.url)._http.get("/metrics").text):
            assert time.monotonic() < deadline, text
            time.sleep(0.2)
        assert 'vxla_verifications_total{outcome="agree"} 2.0' in text
    key = Client(servers[0].url).node_key()
    assert key_id(key) == devnet.deployment.registry.get_node(devnet.accounts[0]).key_id.hex()
    # Bad chain job ids: 400 for a non-number, 404 for a job never posted.
    http = Client(servers[1].url)._http
    assert http.get("/v1/chain/jobs/abc").status_code == 400
    assert http.get("/v1/chain/jobs/999").status_code == 404
    assert http.get("/v1/chain/jobs/999/trace").status_code == 404


def _events(net: Devnet, name: str, job_id: int) -> list:
    market = net.deployment.market
    events = fetch_events(net.client, market.contract, net.deployment.block, names=(name,))
    return [e for e in events if int(e.args["jobId"]) == job_id]


def _visible_fault() -> Fault:
    """An instruction in the middle of the schedule and a bit whose flip changes the outputs
    (so the faulty node commits a different result)."""
    executable = compile_program(load_program(FIXTURE.module_text), load_config())
    honest = [tensor_digest(o) for o in executable.run_traced(*FIXTURE.inputs()).outputs]
    points = [p for p in executable.plan.trace_points if executable.plan.buffers[p.buffers[0]].kind == "arena"]
    for point in points[len(points) // 2 :] + points[: len(points) // 2]:
        for bit in (0, 3, 9):
            fault = Fault(point.name, bit)
            try:
                run = executable.run_traced(*FIXTURE.inputs(), fault=fault)
            except ValueError:
                continue
            if [tensor_digest(o) for o in run.outputs] != honest:
                return fault
    raise AssertionError("no fault changes the outputs")


def test_faulty_node_is_outvoted_slashed_and_named_by_the_divergence_report(devnet: Devnet, nodes_factory) -> None:  # noqa: ANN001
    fault = _visible_fault()
    servers = nodes_factory({2: fault})
    faulty = devnet.accounts[2]
    # A fourth node without a registration (so without a slot): only the verifier role.
    verifier = NodeServer(
        node_config(devnet, "verifier", devnet.client.accounts()[5]), generate_private_key(), log_level="warning"
    )
    servers.append(verifier)  # the fixture stops it
    verifier.start_in_thread()
    client, job = submit(devnet, servers[0], window=DISPUTED_WINDOW)
    job.wait(timeout=90, poll_seconds=0.2)
    market = devnet.deployment.market
    chain_job = market.get_job(int(job.id))
    expected = result_digest_of([tensor_digest(o) for o in FIXTURE.xla_outputs()])
    assert chain_job.accepted and chain_job.result == expected
    # The honest slots challenge the faulty one (and it challenges them): the disputes refute
    # it, which slashes it once; it wins none of its own.
    refuted = _events(devnet, "Refuted", int(job.id))
    assert {e.args["node"] for e in refuted} == {faulty}
    assert _events(devnet, "Slashed", int(job.id)) == []
    assert devnet.deployment.registry.get_node(faulty).stake == 2 * ETHER - SLASH
    assert all(devnet.deployment.registry.get_node(a).stake == 2 * ETHER for a in devnet.accounts if a != faulty)
    # The honest nodes' monitors fetch the faulty trace and name the injected instruction.
    deadline = time.monotonic() + 30
    for server in (servers[0], servers[1], verifier):
        while True:
            report = Client(server.url)._json("GET", f"/v1/chain/jobs/{job.id}/divergence")
            if report["divergences"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        [entry] = report["divergences"]
        assert entry["node"] == faulty
        assert entry["instruction_name"] == fault.instruction
        assert entry["their_result"] != entry["our_result"] == expected.hex()
        assert fault.instruction in entry["summary"]
    # The node that settled the quorum had its report on record before it did: its
    # watcher finalizes early only once its monitor has compared every commitment.
    [finalized] = _events(devnet, "Finalized", int(job.id))
    finalizer = devnet.client.w3.eth.get_transaction(finalized.tx_hash)["from"]
    reporters = {s.chain.address: s for s in servers[:3] if s.chain is not None}
    if finalizer in reporters:
        report = Client(reporters[finalizer].url)._json("GET", f"/v1/chain/jobs/{job.id}/divergence")
        assert report["divergences"] and report["recorded_block"] < finalized.block_number
    else:
        # On a loaded machine the submitter's wait can settle it first, once the challenge
        # window is over with no dispute open (anyone may); then no node finalized early.
        assert finalizer == devnet.submitter
    metrics = Client(servers[0].url)._http.get("/metrics").text
    assert 'vxla_verifications_total{outcome="diverge"} 1.0' in metrics
    assert 'vxla_chain_transactions_total{action="claim"} 1.0' in metrics


def test_an_optimistic_job_run_by_a_faulty_node_is_refuted_by_an_honest_verifier(devnet: Devnet) -> None:
    """k = 1: the faulty node takes the only slot; two honest nodes started after it
    re-execute as verifiers, challenge its result, play the game with it (bisection to the
    injected instruction) and sit on each other's committee; the contract refutes and slashes
    the faulty node and refunds the submitter."""
    fault = _visible_fault()
    d = devnet.deployment
    configs = [node_config(devnet, f"node{i}", a, fault if i == 2 else None) for i, a in enumerate(devnet.accounts)]
    servers = [NodeServer(c, generate_private_key(), log_level="warning") for c in configs]
    for server, account in zip(servers, devnet.accounts, strict=True):
        d.registry.register(account, bytes.fromhex(key_id(server.signing_key)), server.url, 2 * ETHER)
    faulty_server, honest = servers[2], servers[:2]
    faulty = devnet.accounts[2]
    try:
        faulty_server.start_in_thread()
        submitter = ChainSubmitter(d.market, devnet.submitter, reward_wei=REWARD, challenge_window_s=VERIFIED_WINDOW)
        job = Client(faulty_server.url, chain=submitter).submit(FIXTURE.module_text, FIXTURE.inputs(), redundancy=1)
        job_id = int(job.id)
        deadline = time.monotonic() + 30
        while not d.market.get_slots(job_id):
            assert time.monotonic() < deadline, "the faulty node did not claim the job"
            time.sleep(0.05)
        for server in honest:
            server.start_in_thread()
        deadline = time.monotonic() + 90
        while d.market.get_job(job_id).phase != Phase.FINALIZED:
            assert time.monotonic() < deadline, "the optimistic job did not settle"
            time.sleep(0.2)
        chain_job = d.market.get_job(job_id)
        assert not chain_job.accepted  # refuted: the reward goes back to the submitter
        [refuted] = _events(devnet, "Refuted", job_id)
        assert refuted.args["node"] == faulty and refuted.args["challenger"] in devnet.accounts[:2]
        assert d.registry.get_node(faulty).stake == 2 * ETHER - SLASH
        assert all(d.registry.get_node(a).stake == 2 * ETHER for a in devnet.accounts[:2])
        opened = fetch_events(devnet.client, d.game.contract, d.block, names=("DisputeOpened",))
        settled = fetch_events(devnet.client, d.game.contract, d.block, names=("DisputeSettled",))
        assert opened and len(settled) == len(opened)
        for dispute_id in (int(e.args["disputeId"]) for e in opened):
            dispute = d.game.get_dispute(dispute_id)
            assert dispute.defender == faulty and dispute.winner == dispute.challenger and not dispute.by_timeout
        # Every walk stopped at the injected instruction, the first whose digest differs, and
        # the committee decided that one.
        executable = compile_program(load_program(FIXTURE.module_text), load_config())
        honest_trace = executable.run_traced(*FIXTURE.inputs()).instructions
        faulty_trace = executable.run_traced(*FIXTURE.inputs(), fault=fault).instructions
        first = next(i for i, (a, b) in enumerate(zip(honest_trace, faulty_trace, strict=True)) if a != b)
        assert honest_trace[first][0] == fault.instruction
        drawn = fetch_events(devnet.client, d.committee.contract, d.block, names=("CommitteeDrawn",))
        assert len(drawn) == len(opened) and all(int(e.args["index"]) == first for e in drawn)
    finally:
        for server in servers:
            server.stop()


def test_the_submitter_disputes_a_wrong_optimistic_result_through_the_sdk(devnet: Devnet) -> None:
    """k = 1 with the faulty node alone on the job and no node challenging by itself (the
    honest nodes only play and vote): the submitter's job.verify(dispute=True) re-executes
    here, challenges, plays the bisection and wins on the committee's vote."""
    fault = _visible_fault()
    d = devnet.deployment
    servers = []
    for i, account in enumerate(devnet.accounts):
        config = node_config(devnet, f"node{i}", account, fault if i == 2 else None)
        config = replace(config, chain=replace(config.chain, challenge=False, min_reward_wei=REWARD if i != 2 else 1))
        server = NodeServer(config, generate_private_key(), log_level="warning")
        d.registry.register(account, bytes.fromhex(key_id(server.signing_key)), server.url, 2 * ETHER)
        servers.append(server)
    faulty = devnet.accounts[2]
    try:
        for server in servers:
            server.start_in_thread()
        submitter = ChainSubmitter(d.market, devnet.submitter, reward_wei=REWARD // 10, challenge_window_s=30)
        job = Client(servers[2].url, chain=submitter).submit(FIXTURE.module_text, FIXTURE.inputs(), redundancy=1)
        report = job.verify(dispute=True, timeout=120)
        assert not report.ok and report.re_executed
        [dispute] = report.disputes
        assert dispute["challenger"] == devnet.submitter and dispute["defender"] == faulty
        assert dispute["verdict"] == "defender-wrong" and dispute["winner"] == devnet.submitter
        [refuted] = _events(devnet, "Refuted", int(job.id))
        assert refuted.args["node"] == faulty and refuted.args["challenger"] == devnet.submitter
        assert d.registry.get_node(faulty).stake == 2 * ETHER - SLASH
        # The submitter got its bond back and the faulty node's slashed stake.
        assert d.market.credits(devnet.submitter) == SLASH + d.game.challenge_bond()
    finally:
        for server in servers:
            server.stop()


def test_a_node_pointed_at_contracts_without_a_dispute_game_refuses_to_start(devnet: Devnet) -> None:
    """A registry from before the dispute game has no `game`: the node says so at start
    instead of failing in its chain loop (here the market's address stands in for one)."""
    config = node_config(devnet, "old", devnet.accounts[0])
    config = replace(config, chain=replace(config.chain, node_registry=devnet.deployment.market.address))
    with pytest.raises(DeploymentMismatch, match="not a NodeRegistry with a dispute game"):
        NodeServer(config, generate_private_key(), log_level="warning")


def test_a_node_stopped_after_executing_and_restarted_finishes_the_job_without_duplicates(
    devnet: Devnet, nodes_factory
) -> None:  # noqa: ANN001
    servers = nodes_factory()
    client, job = submit(devnet, servers[0])
    node2 = servers[2]
    assert node2.chain is not None
    state, contract = node2.chain.executor.state, devnet.deployment.market.address
    deadline = time.monotonic() + 30
    while not state.executed_job_ids(contract):
        assert time.monotonic() < deadline, "node2 did not execute the job"
        time.sleep(0.01)
    [job_id] = state.executed_job_ids(contract)
    recorded = state.execution(contract, job_id)
    assert recorded is not None
    config, key = node2.config, node2.signing_key
    node2.stop()
    restarted = NodeServer(config, key, log_level="warning")
    servers[2] = restarted  # the fixture stops this one
    restarted.start_in_thread()
    job.wait(timeout=60, poll_seconds=0.2)
    market = devnet.deployment.market
    chain_job = market.get_job(int(job.id))
    assert chain_job.accepted and chain_job.revealed == 3
    slots = {s.node: s for s in market.get_slots(int(job.id))}
    # The restarted node revealed the trace it had recorded before the stop: not run again.
    assert slots[devnet.accounts[2]].envelope_digest.hex() == recorded["envelope_digest"]
    for name in ("SlotClaimed", "Committed", "Revealed"):
        nodes = sorted(str(e.args["node"]) for e in _events(devnet, name, int(job.id)))
        assert nodes == sorted(devnet.accounts), name


# 9.7 GB of output from a 4-byte input: within every limit checked before compiling (module
# and input sizes, estimated operations), over the default limits.max_job_memory_bytes
# (8 GiB) once the plan is known.
OVER_MEMORY = """HloModule over_the_memory_limit

ENTRY main {
  x = f32[] parameter(0)
  ROOT b = f32[49152,49152] broadcast(x), dimensions={}
}
"""


def test_a_job_no_node_can_run_is_refused_before_any_claim_and_slashes_nobody(devnet: Devnet, nodes_factory, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """The memory a job needs is known once it is compiled: each node compiles a chain job in
    an execution process, without running it, before it claims a slot. A job over the limit
    is skipped with the reason, and no stake is locked on it (a claim would be slashed for
    the missing reveal). Node 0 executes before it claims (`run_before_claim`)."""
    servers = nodes_factory(run_first=(0,))
    client = Client(servers[0].url, chain=ChainSubmitter(devnet.deployment.market, devnet.submitter, reward_wei=REWARD, challenge_window_s=WINDOW))
    refused = client.submit(OVER_MEMORY, [np.float32(1.5)], redundancy=3)
    job_id = int(refused.id)
    deadline = time.monotonic() + 60
    for server in servers:
        assert server.chain is not None
        while (tracked := server.chain.executor.state.job(job_id)) is None or tracked.state != JobState.SKIPPED:
            assert time.monotonic() < deadline, f"{server.url}: {tracked}"
            time.sleep(0.1)
        assert "refused: execution: needs" in tracked.note and "limits.max_job_memory_bytes (8589934592)" in tracked.note
    registry = devnet.deployment.registry
    assert devnet.deployment.market.get_job(job_id).claimed == 0
    assert [registry.get_node(account).locked for account in devnet.accounts] == [0, 0, 0]
    # The node says why to anyone who asks: in its chain job list and in `vxla job`.
    listed = {job["job_id"]: job for job in client.jobs(chain=True)}
    assert listed[job_id]["state"] == "skipped" and "refused: execution: needs" in listed[job_id]["note"]
    assert main(["job", str(job_id), "--node", servers[0].url]) == 0
    shown = capsys.readouterr().out
    assert "phase        open" in shown and "this node    skipped: refused: execution: needs" in shown
    # Its own job list is empty; `vxla jobs` says where its jobs are instead of "no jobs".
    assert main(["jobs", "--node", servers[0].url]) == 0
    assert "no jobs of its own; it has seen chain jobs: vxla jobs --chain lists them" in capsys.readouterr().out
    # The submitter waiting on it hears, once the commit deadline is past on the chain's
    # clock (moved without a block, as an idle devnet's is), that it expired: no endless "open".
    devnet.client.w3.provider.make_request("evm_increaseTime", [61])
    with pytest.raises(JobFailed, match=rf"job {job_id} expired: no node committed a result before its commit deadline \(0 of 3 slots claimed") as failed:
        refused.wait(timeout=30, poll_seconds=0.2)
    assert "the node: skipped, refused: execution: needs" in str(failed.value)
    # The nodes go on: the next job runs on all three, node 0's before its claim.
    job = submit(devnet, servers[1])[1]
    job.wait(timeout=60, poll_seconds=0.2)
    assert devnet.deployment.market.get_job(int(job.id)).accepted
    assert [len(_events(devnet, "Revealed", int(job.id)))] == [3]
    assert servers[0].chain is not None and servers[0].chain.executor.record(devnet.deployment.market.address, int(job.id)) is not None


def test_a_trace_is_served_only_once_the_commit_phase_is_over(devnet: Devnet, nodes_factory) -> None:  # noqa: ANN001
    """A job of 4 slots on 3 nodes keeps its commit phase open until the deadline: the nodes
    hold their traces back (409) so that no node can copy a result it did not compute."""
    servers = nodes_factory()
    submitter = ChainSubmitter(devnet.deployment.market, devnet.submitter, reward_wei=REWARD, commit_window_s=600, challenge_window_s=WINDOW)
    job = Client(servers[0].url, chain=submitter).submit(FIXTURE.module_text, FIXTURE.inputs(), redundancy=4)
    market = devnet.deployment.market
    deadline = time.monotonic() + 30
    while market.get_job(int(job.id)).committed < 3:
        assert time.monotonic() < deadline, "the three nodes did not commit"
        time.sleep(0.1)
    http = Client(servers[0].url)._http
    held = http.get(f"/v1/chain/jobs/{job.id}/trace")
    assert held.status_code == 409
    assert "commit phase open (3 of 4 slots committed" in held.json()["detail"]
    devnet.client.advance_time(601)  # past the commit deadline: no commitment can land
    served = http.get(f"/v1/chain/jobs/{job.id}/trace")
    assert served.status_code == 200
    info = Client(servers[0].url)._json("GET", f"/v1/chain/jobs/{job.id}")
    assert envelope_digest_of(served.text) == bytes.fromhex(info["local"]["envelope_digest"])


def test_more_slots_than_nodes_on_an_idle_chain_settle_with_no_honest_node_slashed(devnet: Devnet, nodes_factory) -> None:  # noqa: ANN001
    """The test chain mines only when a transaction comes (anvil's automine, no block
    interval): its clock stands still between transactions, like an idle devnet. A job of 5
    slots on 3 nodes keeps its commit phase open until the commit deadline, which the latest
    block's time never reaches while nobody sends anything. Each node sends its reveal once
    the time its transaction will run at (the pending block's) is past the commit deadline:
    every reveal lands in the reveal window, the job settles on the three equal results, and
    no honest node loses stake. The idle seconds are not waited out: once the three nodes
    have committed (and again once they have revealed) the chain's clock is moved past the
    deadline without a block, as `evm_increaseTime` does, so only the pending block's time
    passes it and the latest block stays old."""
    servers = nodes_factory()
    market, registry = devnet.deployment.market, devnet.deployment.registry
    stakes = {account: registry.get_node(account).stake for account in devnet.accounts}
    submitter = ChainSubmitter(market, devnet.submitter, reward_wei=REWARD, commit_window_s=25, reveal_window_s=15, challenge_window_s=WINDOW)
    job = Client(servers[0].url, chain=submitter).submit(FIXTURE.module_text, FIXTURE.inputs(), redundancy=5)
    job_id = int(job.id)

    def idle_until(what: str, done) -> None:  # noqa: ANN001
        deadline = time.monotonic() + 60
        while not done(market.get_job(job_id)):
            assert time.monotonic() < deadline, f"{what}: {market.get_job(job_id)}"
            time.sleep(0.1)

    def move_clock_past(moment: int) -> None:
        """The chain's clock past `moment` with no block mined (the latest block stays old)."""
        w3 = devnet.client.w3
        pending = int(w3.eth.get_block("pending")["timestamp"])
        assert devnet.client.timestamp() <= moment, "a block was mined past the deadline"
        w3.provider.make_request("evm_increaseTime", [max(0, moment + 1 - pending)])

    idle_until("the three nodes did not commit", lambda j: j.committed == 3)
    assert market.get_job(job_id).revealed == 0  # the commit phase is open: no reveal yet
    move_clock_past(market.get_job(job_id).commit_deadline)
    idle_until("the three nodes did not reveal", lambda j: j.revealed == 3)
    assert market.get_job(job_id).phase != Phase.FINALIZED
    move_clock_past(market.get_job(job_id).reveal_deadline)
    idle_until("not finalized", lambda j: j.phase == Phase.FINALIZED)
    chain_job = market.get_job(job_id)
    expected = result_digest_of([tensor_digest(o) for o in FIXTURE.xla_outputs()])
    assert chain_job.accepted and chain_job.result == expected and chain_job.revealed == 3
    assert all(s.revealed for s in market.get_slots(job_id))
    assert not _events(devnet, "Slashed", job_id)
    assert {account: registry.get_node(account).stake for account in devnet.accounts} == stakes
    rewarded = _events(devnet, "Rewarded", job_id)
    assert len(rewarded) == 3 and sum(int(e.args["amount"]) for e in rewarded) == REWARD


def test_an_older_data_directory_is_moved_into_the_chain_database_on_start(devnet: Devnet) -> None:
    account, contract = devnet.accounts[0], devnet.deployment.market.address
    config = node_config(devnet, "older", account)
    legacy_layout(config.data_dir, account=account, chain_id=devnet.client.chain_id, contract=contract, next_block=devnet.deployment.block + 1)
    server = NodeServer(config, generate_private_key(), log_level="warning")
    try:
        assert server.chain is not None
        state = server.chain.executor.state
        assert state.next_block("watcher") == devnet.deployment.block + 1
        assert state.execution(contract, 7) is not None and state.divergence(contract, 7) is not None
        assert (config.data_dir / "chain-state.sqlite.migrated").is_file()
        assert not (config.data_dir / "chain-state.sqlite").exists() and not (config.data_dir / "chain-jobs").exists()
    finally:
        server.shutdown()


def test_a_node_refuses_older_chain_files_of_another_account_with_exit_2(devnet: Devnet, capsys: pytest.CaptureFixture[str]) -> None:
    d = devnet.deployment
    directory = devnet.tmp / "other-account"
    legacy_layout(directory / "data", account="0x" + "99" * 20, chain_id=devnet.client.chain_id, contract=d.market.address)
    keys = init_key_files(directory / "keys")
    config = directory / "node.toml"
    config.write_text(
        f'[node]\nhost = "127.0.0.1"\nport = 0\ndata_dir = "{directory / "data"}"\nkey_file = "{keys.private_path}"\n'
        f'[chain]\nrpc_url = "{devnet.client.w3.provider.endpoint_uri}"\njob_market = "{d.market.address}"\n'  # type: ignore[attr-defined]
        f'node_registry = "{d.registry.address}"\naccount = "{devnet.accounts[0]}"\nstart_block = {d.block}\n'
    )
    assert main(["node", "run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "node.data_dir" in error and "chain-state.sqlite" in error and "move the" in error
    assert (directory / "data" / "chain-state.sqlite").is_file()  # left as it was


def test_a_node_whose_rpc_is_away_when_its_chain_loop_starts_takes_jobs_once_it_is_back(devnet: Devnet) -> None:
    """The chain loop reads the registry's game and referees for its dispute role: a node
    (re)started while its RPC endpoint is away used to lose that thread to the first
    ConnectionError and never take a job. Now the role is made in the first round the
    endpoint answers."""
    anvil_port = int(devnet.client.w3.provider.endpoint_uri.rsplit(":", 1)[1])  # type: ignore[attr-defined]
    proxy = RpcProxy(anvil_port)
    config = node_config(devnet, "node0", devnet.accounts[0])
    config = replace(config, chain=replace(config.chain, rpc_url=proxy.url))
    server = NodeServer(config, generate_private_key(), log_level="warning")  # the endpoint answers at start
    d = devnet.deployment
    d.registry.register(devnet.accounts[0], bytes.fromhex(key_id(server.signing_key)), server.url, 2 * ETHER)
    proxy.cut()
    try:
        server.start_in_thread()
        time.sleep(1.5)  # the chain loop's first rounds, with the endpoint away
        proxy.restore()
        job = Client(server.url, chain=ChainSubmitter(d.market, devnet.submitter, reward_wei=REWARD, challenge_window_s=WINDOW)).submit(
            FIXTURE.module_text, FIXTURE.inputs(), redundancy=1
        )
        deadline = time.monotonic() + 60
        while not d.market.get_slots(int(job.id)):
            assert time.monotonic() < deadline, "the node took no job after its endpoint came back"
            time.sleep(0.1)
        assert server._chain_thread is not None and server._chain_thread.is_alive()
    finally:
        server.stop()
        proxy.cut()

"""What a divergence monitor accepts as another node's trace (py-evm chain): only a trace
signed by the key the node registered, bound to the job, whose outputs give the result the
node sealed (with its op-trace root), and, once revealed, the very bytes whose digest it
revealed. Each other trace is
refused with the reason named."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from attest import key_id, sign_statement
from attest.keys import generate_private_key, raw_public_key
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from compiler.runtime.executable import Fault
from harness.fixture_data import Fixture
from node.chain.state import ChainState
from node.chain.watcher import ChainWatcher
from node.daemon.chain_executor import ExecutedChainJob
from node.daemon.divergence import DivergenceMonitor
from node.daemon.store import JobStore
from node.tracing.statement import build_statement
from tests.node.chain.test_watcher import (  # noqa: F401  (_chain and net are fixtures)
    STAKE,
    Net,
    TraceExecutor,
    _chain,
    net,
    post_traced,
)

FIXTURE = Fixture("integer_arith")


def _key_body(public_key: object) -> bytes:
    """What `GET /v1/key` answers for `public_key`."""
    return json.dumps({"key_id": key_id(public_key), "public_key": raw_public_key(public_key).hex()}).encode()  # type: ignore[arg-type]



def chain_database(network: Net) -> ChainState:
    """Our node's chain database (where the monitor keeps its reports)."""
    return ChainState(
        network.tmp / "ours-chain.sqlite3", chain_id=network.client.chain_id, contract=network.market.address,
        account=network.nodes[0], start_block=network.chain.block,
    )  # fmt: skip

def test_a_peer_trace_is_trusted_only_under_its_registered_key_and_commitment(net: Net) -> None:  # noqa: F811
    key, stranger = generate_private_key(), generate_private_key()
    peer = net.client.accounts()[5]
    net.registry.register(peer, bytes.fromhex(key_id(key)), "http://peer.example", STAKE)
    executable = compile_program(load_program(FIXTURE.module_text), load_config())
    executor = TraceExecutor(FIXTURE, executable, key)
    watcher = ChainWatcher(net.market, peer, executor, net.tmp / "peer.sqlite", start_block=net.chain.block)
    job_id = post_traced(net, executor)
    watcher.step()  # claim, execute, commit and reveal (k=1: the commit ends the commit phase)
    [slot] = net.market.get_slots(job_id)
    assert slot.committed and slot.revealed
    envelope = executor.envelopes[job_id].encode()
    monitor = DivergenceMonitor(net.market, net.registry, None, net.nodes[0])  # type: ignore[arg-type]

    # The key: the one whose id the peer registered, not another it might serve.
    assert monitor.registered_key(peer, _key_body(key.public_key())) is not None
    assert "is not the registered key" in str(monitor.registered_key(peer, _key_body(stranger.public_key())))
    assert "unreadable public key" in str(monitor.registered_key(peer, b'{"public_key": "zz"}'))

    public = key.public_key()
    assert monitor.trace_problem(job_id, slot, envelope, public) is None
    assert "unknown key id" in str(monitor.trace_problem(job_id, slot, envelope, stranger.public_key()))

    def signed(job: int, fault: Fault | None = None, signer: object = key) -> bytes:
        run = executable.run_traced(*executor.inputs, fault=fault)
        statement = build_statement(
            executor.program, executable, executor.inputs, run,
            job_id=str(job), chain_id=net.client.chain_id, contract=net.market.address,
            key_id=key_id(signer), threads=1, timings_ns={"execute": 0}, op_level=True,  # type: ignore[arg-type]
        )  # fmt: skip
        return sign_statement(statement, signer).to_json().encode()  # type: ignore[arg-type]

    assert signed(job_id) == envelope  # the same statement and key: the same bytes
    # A genuine trace of the peer, but for another job: a replay.
    assert "predicate.job_id" in str(monitor.trace_problem(job_id, slot, signed(job_id + 1), public))
    # Signed by the peer, for this job, but not the result it sealed.
    point = next(p for p in executable.plan.trace_points if executable.plan.buffers[p.buffers[0]].kind == "arena")
    other = signed(job_id, Fault(point.name, 0))
    assert monitor.trace_problem(job_id, slot, other, public) == "its outputs and op-trace root do not give the sealed commitment"
    # The same signed statement in other bytes: after the reveal only the revealed bytes do.
    respaced = json.dumps(json.loads(envelope), indent=2).encode()
    assert monitor.trace_problem(job_id, slot, respaced, public) == "its digest is not the revealed trace digest"
    unrevealed = dataclasses.replace(slot, revealed=False)
    assert monitor.trace_problem(job_id, unrevealed, respaced, public) is None
    monitor.close()
    watcher.close()


def test_ready_only_once_every_other_commitment_is_compared(net: Net) -> None:  # noqa: F811
    """The watcher's finalize gate: a node holding an execution of the job is ready once each
    other commitment has been compared with its result; one holding none is always ready."""
    key = generate_private_key()
    executable = compile_program(load_program(FIXTURE.module_text), load_config())
    executor = TraceExecutor(FIXTURE, executable, key)
    watcher = net.watcher(1, executor)
    job_id = post_traced(net, executor)
    watcher.step()
    watcher.close()
    [slot] = net.market.get_slots(job_id)
    result = slot.result_digest

    records: dict[int, ExecutedChainJob] = {}
    ours = SimpleNamespace(
        record=lambda contract, job: records.get(job), state=chain_database(net),
        op_trace_root=lambda record: bytes.fromhex(record.op_trace_root),
    )  # fmt: skip
    monitor = DivergenceMonitor(net.market, net.registry, ours, net.nodes[0])  # type: ignore[arg-type]
    assert monitor.ready(job_id)  # no execution of ours: nothing to wait for
    records[job_id] = ExecutedChainJob(
        job_id, net.client.chain_id, net.market.address, "", [], [], [], "", result.hex(), slot.op_trace_root.hex()
    )
    assert slot.node == net.nodes[1] and not monitor.ready(job_id)  # node1's commitment not compared yet
    assert monitor.check_job(job_id) is None  # it seals our result: agreement, no report
    assert monitor.ready(job_id)
    monitor.close()


def test_a_diverging_node_with_an_unusable_endpoint_does_not_hold_up_finalizing(net: Net) -> None:  # noqa: F811
    executable = compile_program(load_program(FIXTURE.module_text), load_config())
    executor = TraceExecutor(FIXTURE, executable, generate_private_key())
    peer = net.client.accounts()[6]
    net.registry.register(peer, bytes.fromhex(key_id(executor.key)), "::garbage", STAKE)  # not a URL
    watcher = ChainWatcher(net.market, peer, executor, net.tmp / "peer.sqlite", start_block=net.chain.block)
    job_id = post_traced(net, executor)
    watcher.step()
    watcher.close()
    other_result = "ab" * 32  # ours differs from what the peer sealed
    store = JobStore(net.tmp / "ours")
    envelope = store.blobs.put(b"our envelope")
    record = ExecutedChainJob(job_id, net.client.chain_id, net.market.address, "", [], [], [], envelope, other_result, "cd" * 32)
    state = chain_database(net)
    ours = SimpleNamespace(
        record=lambda contract, job: record, state=state, store=store, op_trace_root=lambda record: bytes.fromhex(record.op_trace_root)
    )  # fmt: skip
    monitor = DivergenceMonitor(net.market, net.registry, ours, net.nodes[0])  # type: ignore[arg-type]
    assert not monitor.ready(job_id)
    assert monitor.check_job(job_id) is None  # no trace to compare: no report, and no retry
    assert monitor.ready(job_id)
    assert state.divergence(net.market.address, job_id) is None
    monitor.close()
    store.close()

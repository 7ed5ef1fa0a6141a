"""Divergence reports: when another node committed to a result that differs from this node's
for a chain job both executed, fetch that node's signed trace and name the first instruction
where the two executions part (`attest.first_divergence` against this node's op-level trace).

Timing: a commitment is a seal of (node, job, result digest, op-trace root), so comparing it
with the seal of our own execution tells agreement from divergence as soon as the commitment
is mined (a node that reached our result through another op trace diverges too). A node
serves its trace once the job's commit phase is over (before that it would let a lazy node
copy the result), so the report is written at the start of the reveal phase, from the
commitments alone: it does not wait for any reveal. The watcher finalizes a job early only
once this monitor has compared every other commitment (`ready`), so a node's report exists
before the quorum it takes part in is settled.

The other trace is found at the other node's `GET /v1/chain/jobs/{id}/trace` (endpoint from
the registry) and is accepted only if it is signed by the key the node registered on chain
(the public key from its `GET /v1/key`, checked against the registered key id), its
statement is bound to the same job, chain and contract, its outputs and op-trace root give
the seal the node committed on chain, and, once the node has revealed, its bytes hash to the
trace digest it revealed. Reports are written to
the node's chain database (node/chain/state.py), logged, and served at
`GET /v1/chain/jobs/{id}/divergence`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from attest import first_divergence, key_id, verify
from attest.errors import VerificationError
from attest.keys import public_key_from_raw
from attest.statement import Statement
from node.chain import JobMarket, NodeRegistry, Phase, Slot
from node.daemon.chain_executor import ChainExecutor, ExecutedChainJob, download, op_trace_root_of
from node.daemon.peer_addresses import PeerAddressPolicy, PeerAddressRefused
from node.protocol import envelope_digest_of, result_digest_of, seal_of
from node.tracing.verify import parse_envelope
from node.transfers import deadline_transport

log = logging.getLogger("vxla.node.divergence")


@dataclass(frozen=True)
class NodeDivergence:
    """How one other node's execution of a job differs from ours."""

    node: str
    endpoint: str
    our_result: str
    their_result: str
    summary: str
    instruction_index: int | None
    instruction_name: str | None
    instruction_opcode: str | None
    our_digest: str | None
    their_digest: str | None


@dataclass(frozen=True)
class DivergenceReport:
    """Every diverging node of one chain job; `recorded_block` is the chain head when the
    report was last written (so anyone can see it came before the job's Finalized event)."""

    job_id: int
    contract: str
    divergences: list[NodeDivergence]
    recorded_block: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the API answer)."""
        return asdict(self)


def compare_envelopes(ours: str | bytes, theirs: str | bytes) -> tuple[str, Any]:
    """(summary, first differing instruction or None) of two envelopes' statements."""
    left = Statement.from_json_bytes(parse_envelope(ours).payload)
    right = Statement.from_json_bytes(parse_envelope(theirs).payload)
    divergence = first_divergence(left, right)
    return divergence.summary(), divergence.first_instruction


class DivergenceMonitor:
    """Checks the commitments of other nodes to the chain jobs this node executed (see the
    module docstring)."""

    def __init__(
        self,
        market: JobMarket,
        registry: NodeRegistry,
        executor: ChainExecutor,
        address: str,
        timeout: float = 30.0,
        on_compare: Callable[[str], None] | None = None,
        policy: PeerAddressPolicy | None = None,
    ) -> None:
        """`on_compare` is called with "agree" or "diverge" for each other node compared
        (metrics); `policy`: which peer addresses traces may be fetched from (default: global
        ones only)."""
        self.policy = policy or PeerAddressPolicy()
        self.on_compare = on_compare if on_compare is not None else (lambda outcome: None)
        self.market = market
        self.registry = registry
        self.executor = executor
        self.address = address
        self.timeout = timeout
        self.http = httpx.Client(timeout=timeout, transport=deadline_transport())
        self._done: set[tuple[str, int, str]] = set()  # (contract, job, node) compared
        self._settled: set[tuple[str, int]] = set()  # finalized jobs with every slot compared

    def close(self) -> None:
        """Closes the connections to peers."""
        self.http.close()

    def report(self, contract: str, job_id: int) -> DivergenceReport | None:
        """The stored report of a job, or None when no divergence was found (yet)."""
        data = self.executor.state.divergence(contract, job_id)
        if data is None:
            return None
        return DivergenceReport(
            data["job_id"], data["contract"], [NodeDivergence(**d) for d in data["divergences"]], data["recorded_block"]
        )

    def step(self) -> list[DivergenceReport]:
        """Look at every executed job's commitments once; returns the reports written now."""
        written = []
        contract = self.market.address
        for job_id in self.executor.state.executed_job_ids(contract):
            if (contract, job_id) in self._settled:
                continue
            report = self.check_job(job_id)
            if report is not None:
                written.append(report)
        return written

    def ready(self, job_id: int) -> bool:
        """Whether every other node's commitment to `job_id` has been compared with our
        result (true when this node holds no execution of the job): the watcher's condition
        for finalizing before the reveal deadline."""
        contract = self.market.address
        if self.executor.record(contract, job_id) is None:
            return True
        return all(
            slot.node == self.address or (contract, job_id, slot.node) in self._done
            for slot in self.market.get_slots(job_id)
            if slot.committed
        )

    def check_job(self, job_id: int) -> DivergenceReport | None:
        """Compare our result with every other commitment to `job_id` not compared yet."""
        contract = self.market.address
        ours = self.executor.record(contract, job_id)
        if ours is None:
            return None
        previous = self.report(contract, job_id)
        # Nodes already in the stored report are not compared again (after a restart too).
        self._done.update((contract, job_id, d.node) for d in (previous.divergences if previous else []))
        job = self.market.get_job(job_id)
        traces_served = job.commit_phase_over(self.market.client.next_block_time())
        our_seal_result = bytes.fromhex(ours.result_digest)
        our_root = self.executor.op_trace_root(ours)
        found = []
        pending = False
        for slot in self.market.get_slots(job_id):
            key = (contract, job_id, slot.node)
            if slot.node == self.address or key in self._done:
                continue
            if not slot.committed:
                pending = pending or not traces_served  # it may still commit
                continue
            if slot.seal == seal_of(slot.node, job_id, our_seal_result, our_root):
                self._done.add(key)
                self.on_compare("agree")
                continue
            if not traces_served:
                pending = True  # a diverging commitment: its trace is served after the commit phase
                continue
            divergence = self._compare(job_id, slot, ours)
            if divergence is None:
                pending = pending or key not in self._done
                continue
            self._done.add(key)
            self.on_compare("diverge")
            found.append(divergence)
            log.warning("job %d: node %s diverges from us: %s", job_id, slot.node, divergence.summary)
        if job.phase == Phase.FINALIZED and not pending:
            self._settled.add((contract, job_id))
        if not found:
            return None
        report = DivergenceReport(
            job_id, contract, (previous.divergences if previous else []) + found, self.market.client.block_number()
        )
        self.executor.state.save_divergence(contract, job_id, report.to_dict())
        return report

    def _compare(self, job_id: int, slot: Slot, ours: ExecutedChainJob) -> NodeDivergence | None:
        """The divergence of `slot`'s node from us, from the trace it serves; None when the
        trace is not available yet (retried) or is not the one the node committed to (given
        up, and marked compared so it does not hold up finalizing)."""
        key = (self.market.address, job_id, slot.node)
        endpoint = self.registry.get_node(slot.node).endpoint.rstrip("/")
        our_envelope = self.executor.store.blobs.get(ours.envelope_digest)
        # A trace of the same program is about as long as ours (the same instructions).
        limit = 2 * len(our_envelope) + 65536
        try:
            key_body = download(self.http, f"{endpoint}/v1/key", 4096, self.timeout, policy=self.policy)
            theirs = download(self.http, f"{endpoint}/v1/chain/jobs/{job_id}/trace", limit, self.timeout, policy=self.policy)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, PeerAddressRefused) as error:
            # The registered endpoint can never answer, or is one this node does not send
            # requests to: give up rather than hold up finalizing.
            self._done.add(key)
            log.warning("job %d: %s registered an unusable endpoint %r: %s", job_id, slot.node, endpoint, error)
            return None
        except httpx.HTTPError as error:
            log.info("job %d: trace of %s not reachable, will retry: %s", job_id, slot.node, error)
            return None
        if key_body is None or theirs is None:
            return None
        public_key = self.registered_key(slot.node, key_body)
        if isinstance(public_key, str):
            problem: str | None = public_key
        else:
            problem = self.trace_problem(job_id, slot, theirs, public_key)
        if problem is not None:
            self._done.add(key)
            log.warning("job %d: %s served a trace that is not the one it committed to: %s", job_id, slot.node, problem)
            return None
        statement = Statement.from_json_bytes(parse_envelope(theirs).payload)
        their_result = result_digest_of([o.digest for o in statement.predicate.deterministic.outputs])
        summary, first = compare_envelopes(our_envelope, theirs)
        return NodeDivergence(
            node=slot.node,
            endpoint=endpoint,
            our_result=ours.result_digest,
            their_result=their_result.hex(),
            summary=summary,
            instruction_index=None if first is None else first.index,
            instruction_name=None if first is None else first.name,
            instruction_opcode=None if first is None else first.opcode,
            our_digest=None if first is None or first.left is None else first.left.digest,
            their_digest=None if first is None or first.right is None else first.right.digest,
        )

    def registered_key(self, node: str, key_body: bytes) -> Ed25519PublicKey | str:
        """The public key a node serves (its `GET /v1/key` answer), if its key id is the one
        it registered; else why not."""
        try:
            public_key = public_key_from_raw(bytes.fromhex(json.loads(key_body)["public_key"]))
        except (ValueError, KeyError, TypeError) as error:
            return f"unreadable public key: {error}"
        registered = self.registry.get_node(node).key_id.hex()
        if key_id(public_key) != registered:
            return f"its key {key_id(public_key)} is not the registered key {registered}"
        return public_key

    def trace_problem(self, job_id: int, slot: Slot, envelope: bytes, public_key: Ed25519PublicKey) -> str | None:
        """Why `envelope` is not the trace behind `slot`'s commitment, or None if it is."""
        try:
            statement = verify(
                envelope, [public_key], job_id=str(job_id), chain_id=self.market.client.chain_id,
                contract=self.market.address,
            )  # fmt: skip
        except VerificationError as error:
            return str(error)
        result = result_digest_of([o.digest for o in statement.predicate.deterministic.outputs])
        if seal_of(slot.node, job_id, result, op_trace_root_of(statement)) != slot.seal:
            return "its outputs and op-trace root do not give the sealed commitment"
        if slot.revealed and envelope_digest_of(envelope.decode("utf-8", errors="replace")) != slot.envelope_digest:
            return "its digest is not the revealed trace digest"
        return None

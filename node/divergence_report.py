"""Divergence reports: when another node revealed a result that differs from this node's for
a chain job both executed, fetch that node's signed trace and name the first instruction
where the two executions part (`attest.first_divergence` against this node's op-level trace).

The other trace is found at the other node's `GET /v1/chain/jobs/{id}/trace` (endpoint from
the registry) and is accepted only if its bytes hash to the trace digest that node revealed
on chain (so it is the trace that node's account stood behind) and its statement is bound to
the same job, chain and contract. Reports are written to
`<data_dir>/chain-jobs/<contract>-<job id>.divergence.json`, logged, and served at
`GET /v1/chain/jobs/{id}/divergence`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from attest import first_divergence
from attest.statement import Statement
from compiler.atomic_files import write_bytes_atomic
from node.chain import JobMarket, NodeRegistry, Phase
from node.chain_executor import ChainExecutor
from node.trace import parse_envelope
from node.watcher import trace_digest_of

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
    """Every diverging node of one chain job."""

    job_id: int
    contract: str
    divergences: list[NodeDivergence]

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
    """Checks the revealed slots of the chain jobs this node executed (see the module docstring)."""

    def __init__(
        self,
        market: JobMarket,
        registry: NodeRegistry,
        executor: ChainExecutor,
        address: str,
        timeout: float = 30.0,
        on_compare: Callable[[str], None] | None = None,
    ) -> None:
        """`on_compare` is called with "agree" or "diverge" for each other node compared (metrics)."""
        self.on_compare = on_compare if on_compare is not None else (lambda outcome: None)
        self.market = market
        self.registry = registry
        self.executor = executor
        self.address = address
        self.timeout = timeout
        self._done: set[tuple[str, int, str]] = set()  # (contract, job, node) compared
        self._settled: set[tuple[str, int]] = set()  # finalized jobs with every slot compared

    def _path(self, contract: str, job_id: int) -> Path:
        return self.executor.directory / f"{contract.lower()}-{job_id}.divergence.json"

    def report(self, contract: str, job_id: int) -> DivergenceReport | None:
        """The stored report of a job, or None when no divergence was found (yet)."""
        path = self._path(contract, job_id)
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return DivergenceReport(
            data["job_id"], data["contract"], [NodeDivergence(**d) for d in data["divergences"]]
        )

    def step(self) -> list[DivergenceReport]:
        """Look at every executed job's revealed slots once; returns the reports written now."""
        written = []
        contract = self.market.address
        for path in sorted(self.executor.directory.glob(f"{contract.lower()}-*.json")):
            if path.name.endswith(".divergence.json"):
                continue
            job_id = int(path.stem.rsplit("-", 1)[1])
            if (contract, job_id) in self._settled:
                continue
            report = self.check_job(job_id)
            if report is not None:
                written.append(report)
        return written

    def check_job(self, job_id: int) -> DivergenceReport | None:
        """Compare with every other revealed slot of `job_id` not compared yet."""
        contract = self.market.address
        ours = self.executor.record(contract, job_id)
        if ours is None:
            return None
        previous = self.report(contract, job_id)
        # Nodes already in the stored report are not compared again (after a restart too).
        self._done.update((contract, job_id, d.node) for d in (previous.divergences if previous else []))
        finalized = self.market.get_job(job_id).phase == Phase.FINALIZED
        found = []
        pending = False
        for slot in self.market.get_slots(job_id):
            key = (contract, job_id, slot.node)
            if slot.node == self.address or key in self._done:
                continue
            if not slot.revealed:
                pending = not finalized  # after finalize an unrevealed slot never reveals
                continue
            if slot.result_digest.hex() == ours.result_digest:
                self._done.add(key)
                self.on_compare("agree")
                continue
            endpoint = self.registry.get_node(slot.node).endpoint
            try:
                response = httpx.get(f"{endpoint.rstrip('/')}/v1/chain/jobs/{job_id}/trace", timeout=self.timeout)
            except httpx.HTTPError as error:
                log.info("job %d: trace of %s not reachable, will retry: %s", job_id, slot.node, error)
                pending = True
                continue
            if response.status_code != 200:
                pending = True
                continue
            theirs = response.content
            if trace_digest_of(theirs.decode("utf-8")) != slot.trace_digest:
                self._done.add(key)
                log.warning("job %d: %s served a trace that is not the one it revealed", job_id, slot.node)
                continue
            envelope = self.executor.store.blobs.get(ours.envelope_digest)
            summary, first = compare_envelopes(envelope, theirs)
            self._done.add(key)
            self.on_compare("diverge")
            found.append(
                NodeDivergence(
                    node=slot.node,
                    endpoint=endpoint,
                    our_result=ours.result_digest,
                    their_result=slot.result_digest.hex(),
                    summary=summary,
                    instruction_index=None if first is None else first.index,
                    instruction_name=None if first is None else first.name,
                    instruction_opcode=None if first is None else first.opcode,
                    our_digest=None if first is None or first.left is None else first.left.digest,
                    their_digest=None if first is None or first.right is None else first.right.digest,
                )
            )
            log.warning("job %d: node %s diverges from us: %s", job_id, slot.node, summary)
        if finalized and not pending:
            self._settled.add((contract, job_id))
        if not found:
            return None
        report = DivergenceReport(job_id, contract, (previous.divergences if previous else []) + found)
        write_bytes_atomic(self._path(contract, job_id), json.dumps(report.to_dict(), indent=1).encode())
        return report

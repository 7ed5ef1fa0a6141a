"""What a node knows of a job for its disputes (node/chain/dispute_role.py's
DisputeKnowledge), from its chain executor: its own execution (the signed trace it stored),
the graph leaves of its own compile (in an execution process, never in the daemon), and the
digest it votes as a committee member.

A member decides one instruction by re-executing the job here (the whole job, in an
execution process, with its op-level trace) and voting its own digest at that instruction.
That needs nothing from the parties, so withholding operands cannot stall a verdict, and it
holds even where the parties agree on wrong operands. Evaluating the instruction alone from
operand values the parties serve (`compiler.api.evaluate_leaf`) is cheaper; nodes do not
serve those values yet.
"""

from __future__ import annotations

from attest import Statement
from attest.commitment import commitment_root
from node.chain import JobMarket, OnChainJob
from node.chain.disputes import Execution, GraphLeaves
from node.chain.watcher import ChainJob
from node.daemon.chain_executor import ChainExecutor
from node.errors import JobRejected
from node.tracing.verify import parse_envelope


class ExecutorKnowledge:
    """DisputeKnowledge from the daemon's ChainExecutor."""

    def __init__(self, executor: ChainExecutor, market: JobMarket, chain_id: int) -> None:
        self.executor = executor
        self.market = market
        self.chain_id = chain_id
        self._executions: dict[str, Execution] = {}  # by the signed trace's envelope digest

    @property
    def contract(self) -> str:
        return self.market.address

    def executed_jobs(self) -> list[int]:
        return self.executor.state.executed_job_ids(self.contract)

    def execution(self, job_id: int) -> Execution | None:
        record = self.executor.record(self.contract, job_id)
        if record is None:
            return None
        known = self._executions.get(record.envelope_digest)
        if known is not None:
            return known
        blobs = self.executor.store.blobs
        if not blobs.has(record.envelope_digest):
            raise JobRejected(f"the signed trace of chain job {job_id} is no longer stored")
        statement = Statement.from_json_bytes(parse_envelope(blobs.get(record.envelope_digest)).payload)
        op_trace = statement.predicate.deterministic.op_trace
        digests = () if op_trace is None else tuple(bytes.fromhex(i.digest) for i in op_trace.instructions)
        execution = self._executions[record.envelope_digest] = Execution(digests, bytes.fromhex(record.result_digest))
        return execution

    def graph(self, job: OnChainJob, job_id: int) -> GraphLeaves:
        summary = self.executor.graph(self.chain_job(job, job_id))
        leaves = summary.leaves
        graph = GraphLeaves(tuple(leaves[:-1]), leaves[-1])
        if graph.root.hex() != summary.root or commitment_root(list(leaves[:-1]), leaves[-1]) != summary.root:
            raise JobRejected(f"job {job_id}: the graph leaves of this node's compile do not give its own root")
        return graph

    def vote(self, job: OnChainJob, job_id: int, index: int) -> bytes:
        """This node's digest at instruction `index` (n: the result), from its own execution of
        the job (run now, in the background, if it holds none: JobPending meanwhile)."""
        if self.executor.record(self.contract, job_id) is None:
            self.executor.execute(self.chain_job(job, job_id))  # JobPending until recorded
        execution = self.execution(job_id)
        if execution is None:
            raise JobRejected(f"job {job_id} ran but left no record")
        if not 0 <= index <= len(execution.digests):
            raise JobRejected(f"job {job_id}: instruction {index} is not in this node's trace of {len(execution.digests)}")
        return execution.digest_at(index)

    def chain_job(self, job: OnChainJob, job_id: int) -> ChainJob:
        """The executor's view of an on-chain job."""
        return ChainJob(
            job_id=job_id,
            submitter=job.submitter,
            program_digest=job.program_digest,
            inputs_digest=job.inputs_digest,
            reward=job.reward,
            k=job.k,
            commit_deadline=job.commit_deadline,
            reveal_deadline=job.reveal_deadline,
            chain_id=self.chain_id,
            contract=self.contract,
            graph_root=job.graph_root,
            trace_leaves=job.trace_leaves,
            challenge_window=job.challenge_window,
        )

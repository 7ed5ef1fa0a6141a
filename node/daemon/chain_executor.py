"""The daemon's chain executor: what a `ChainWatcher` runs a posted job with.

How a chain job names its blobs (the mapping between the JobMarket and the blob store):
- `programDigest` is the blob digest of the module: SHA-256 of the HLO module text bytes.
- `inputsDigest` is the blob digest of an *inputs manifest*: the bytes of
  `inputs_manifest(input_digests)`, a canonical JSON object `{"inputs": [d0, d1, ...]}` with
  the input blobs' digests (SHA-256 of each input's .npy bytes) in parameter order. The
  manifest is itself a blob, so one on-chain digest finds every input, and the digest binds
  the exact inputs and their order.
- The submitter stores the module, the inputs and the manifest on a node (`PUT /v1/blobs`);
  every node finds them in its own blob store or fetches them by digest from the
  `GET /v1/blobs/{digest}` endpoint of the registered nodes (endpoints from the registry's
  NodeRegistered events and `getNode`), checking that the bytes hash to the digest.

Execution goes through the node's one execution path (`WorkerPool.execute_bound`: compile
with the cache, `run_traced`, `build_statement` bound to the job id, chain id and contract,
sign, store outputs and envelope). Before the claim, `check` compiles the job and checks
its memory in an execution process without running it (`WorkerPool.check_bound`), so a
program that kills the compiler or needs too much memory is refused before any stake is
locked on it; the same check gives the graph commitment of this node's compile, and a job
that names another (root or op-trace leaf count, docs/disputes.md) is refused: the node
would run another graph than the one the job's disputes are decided on. Both run in background threads (the blob fetches too); `check` and `execute`
answer `JobPending` until they are done. The result digest is `node.protocol.result_digest_of`
over the output tensor digests; the envelope digest is the stored envelope blob's digest; the
op-trace root is the signed trace's `op_trace.merkle_root` (`op_trace_root_of`).
Each finished chain job is recorded in the node's chain database (node/chain/state.py), so
a restarted node reveals the digests it committed to instead of re-running.

For a dispute's committee (docs/disputes.md), a node serves the values of the op-trace leaves
of a job it executed (`leaf`, the API's `/v1/chain/jobs/{id}/leaves/...`): it runs the job
again in an execution process copying those values out (`WorkerPool.capture_bound`; nothing
is signed or stored), checks each value's digest against its own signed trace of the job,
and keeps them in memory (`LeafValues`: a few jobs' worth, bounded in bytes) so a committee's
several requests run the job once. A member evaluates one instruction from values it fetched
(`evaluate_leaf`, in an execution process too).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

import httpx

from attest import EMPTY_ROOT, Statement
from attest.digests import sha256_hex
from core.lru import Lru
from node.chain import NodeRegistry, fetch_events
from node.chain.state import ChainState
from node.chain.watcher import ChainJob, ExecutionOutcome, JobPending
from node.daemon.peer_addresses import PeerAddressPolicy, PeerAddressRefused
from node.daemon.sandbox import MAX_LEAVES, GraphSummary, LeafBuffer
from node.daemon.store import BlobError, JobStore
from node.daemon.worker import WorkerPool
from node.errors import JobRejected
from node.protocol import parse_manifest, result_digest_of
from node.sqlite import StorageError
from node.tracing.verify import parse_envelope
from node.transfers import AnswerRefused, deadline_transport, fetch

log = logging.getLogger("vxla.node.chain")
R = TypeVar("R")

# Leaf values kept for a dispute's committee: the most bytes (or the job memory limit, when
# lower), and the jobs whose signed traces' digests are kept to check them.
LEAF_CACHE_BYTES = 1 << 30
LEAF_TRACES_KEPT = 16


def op_trace_root_of(statement: Statement) -> bytes:
    """The op-trace root a node seals and reveals for an execution: its signed statement's
    `op_trace.merkle_root`, or the root of no leaves (EMPTY_ROOT, SHA-256 of nothing) for a
    graph without traced instructions, whose statement has no op trace."""
    op_trace = statement.predicate.deterministic.op_trace
    return bytes.fromhex(EMPTY_ROOT if op_trace is None else op_trace.merkle_root)


def download(http: httpx.Client, url: str, max_bytes: int | None, max_seconds: float = 120.0, *, policy: PeerAddressPolicy) -> bytes | None:
    """The body of a 200 answer to GET `url`, or None: another status (a redirect is not
    followed), a body longer than `max_bytes`, or one still arriving after `max_seconds`
    (node.transfers.fetch: the deadline bounds the whole answer, not each read).
    PeerAddressRefused when `policy` refuses the address, before connecting or once
    connected (before the answer is read). A peer can make a node neither buffer unbounded
    data, nor wait without end, nor send requests into its own network."""
    policy.check(url)
    try:
        answer = fetch(http, "GET", url, max_bytes=max_bytes, max_seconds=max_seconds, on_answer=policy.check_connected)
    except AnswerRefused as error:
        log.warning("%s, dropped", error)
        return None
    return answer.body if answer.status == 200 else None


class BlobFetcher:
    """Finds blobs by digest: the local store first, then each peer's `GET /v1/blobs/{digest}`
    (bytes checked against the digest before they are stored)."""

    def __init__(
        self,
        store: JobStore,
        peers: Callable[[], list[str]],
        timeout: float = 30.0,
        http: httpx.Client | None = None,
        max_bytes: int | None = None,
        policy: PeerAddressPolicy | None = None,
    ) -> None:
        """`peers`: the base URLs to ask, read anew at each miss (nodes register over time);
        `http`: the HTTP client (tests pass one with a mock transport); `max_bytes`: the
        largest blob taken from a peer (a longer answer is dropped as it streams in);
        `policy`: which peer addresses may be fetched from (default: global ones only)."""
        self.store = store
        self.peers = peers
        self.max_bytes = max_bytes
        self.policy = policy or PeerAddressPolicy()
        self.http = http if http is not None else httpx.Client(timeout=timeout, transport=deadline_transport())

    def ensure(self, digest: str) -> bytes:
        """The blob's bytes, fetched and stored if missing; BlobError if no peer has it."""
        blobs = self.store.blobs
        if blobs.has(digest):
            return blobs.get(digest)
        tried = []
        for url in self.peers():
            tried.append(url)
            try:
                data = download(self.http, f"{url.rstrip('/')}/v1/blobs/{digest}", self.max_bytes, policy=self.policy)
            except (httpx.HTTPError, httpx.InvalidURL) as error:  # endpoints are what nodes registered
                log.info("blob %s: %s unreachable: %s", digest, url, error)
                continue
            except PeerAddressRefused as error:
                log.warning("blob %s: %s not asked: %s", digest, url, error)
                continue
            if data is None:
                continue
            if sha256_hex(data) != digest:
                # A peer serving wrong bytes is ignored, never stored.
                log.warning("blob %s: %s served bytes with another digest", digest, url)
                continue
            blobs.put(data)
            return data
        raise BlobError(f"blob {digest}: not stored here nor at {len(tried)} peer(s)")


class PeerDirectory:
    """The API endpoints of the registered nodes, other than this node's own `own_url`.
    NodeRegistered events are read incrementally (each block once), endpoints anew from
    `getNode` at each call, since a node may change its endpoint by registering again."""

    def __init__(self, registry: NodeRegistry, start_block: int, own_url: Callable[[], str]) -> None:
        """`own_url`: this node's URL, asked at each call (the port may be known only after start)."""
        self.registry = registry
        self.own_url = own_url
        self._next_block = start_block
        self._nodes: list[str] = []  # in order of first registration
        self._lock = threading.Lock()

    def __call__(self) -> list[str]:
        """The endpoints, in order of first registration, without duplicates or empties."""
        client = self.registry.client
        with self._lock:
            head = client.block_number()
            if head >= self._next_block:
                events = fetch_events(client, self.registry.contract, self._next_block, head, names=("NodeRegistered",))
                for event in events:
                    node = str(event.args["node"])
                    if node not in self._nodes:
                        self._nodes.append(node)
                self._next_block = head + 1
            nodes = list(self._nodes)
        own = self.own_url().rstrip("/")
        urls = [self.registry.get_node(node).endpoint for node in nodes]
        return [u for u in dict.fromkeys(urls) if u and u.rstrip("/") != own]


@dataclass(frozen=True)
class ExecutedChainJob:
    """A chain job this node executed: what it committed to and where its blobs are."""

    job_id: int
    chain_id: int
    contract: str
    module_digest: str
    input_digests: list[str]
    output_digests: list[str]  # .npy blobs
    output_tensor_digests: list[str]
    envelope_digest: str  # the envelope blob's digest: what the node reveals on chain
    result_digest: str  # hex
    # hex: the signed trace's op-trace root, sealed and revealed with the result; "" in a
    # record made before it was recorded (read from the stored envelope then).
    op_trace_root: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the API answer)."""
        return asdict(self)


def trace_digests_of(envelope: bytes) -> tuple[str, ...]:
    """The op-trace digests (hex, in trace order) of a signed trace's statement."""
    op_trace = Statement.from_json_bytes(parse_envelope(envelope).payload).predicate.deterministic.op_trace
    return () if op_trace is None else tuple(i.digest for i in op_trace.instructions)


@dataclass(frozen=True)
class ServedLeaf:
    """The value of one op-trace leaf of a job this node executed, as it serves it: its flat
    buffers, whose digest (`compiler.api.leaf_digest`) is `digest`, the node's own op-trace
    digest there."""

    job_id: int
    index: int
    digest: str
    buffers: tuple[LeafBuffer, ...]

    def describe(self) -> dict[str, Any]:
        """The JSON the API answers: the digest, and each buffer's element type, dimensions and
        .npy size (`/leaves/{index}/{buffer}` serves the bytes)."""
        return {
            "job_id": self.job_id,
            "index": self.index,
            "digest": self.digest,
            "buffers": [{"dtype": b.dtype, "shape": list(b.shape), "bytes": len(b.data)} for b in self.buffers],
        }

    @property
    def nbytes(self) -> int:
        return sum(len(b.data) for b in self.buffers)


def leaf_digest_of(buffers: Iterable[LeafBuffer]) -> str:
    """The op-trace digest of a leaf whose flat buffers are `buffers` (ValueError: one is not
    readable as its type and shape)."""
    from compiler.api import leaf_digest  # the reference's digest rule, loaded on first use

    return leaf_digest([b.array() for b in buffers])


class LeafValues:
    """The op-trace leaf values a node serves of the jobs it executed (the module docstring):
    a miss runs the job again capturing the leaf asked for, with every other leaf of the same
    job asked for meanwhile or named in `also` (one run for a committee's requests); values
    are kept least recently used first out, at most `max_bytes` in all (by default
    LEAF_CACHE_BYTES or the job memory limit, the lower; a value larger than that is served to
    its asker and not kept)."""

    def __init__(self, executor: ChainExecutor, max_bytes: int | None = None) -> None:
        self.executor = executor
        self._max_bytes = max_bytes
        self._cond = threading.Condition()
        self._values: OrderedDict[tuple[str, int], ServedLeaf | JobRejected] = OrderedDict()  # (envelope, index)
        self._bytes = 0
        self._traces: Lru[str, tuple[str, ...]] = Lru(LEAF_TRACES_KEPT)  # envelope digest -> op-trace digests
        self._running: set[str] = set()  # envelopes whose job runs again now
        self._wanted: dict[str, set[int]] = {}  # leaves to capture with the next run of a job

    @property
    def max_bytes(self) -> int:
        if self._max_bytes is None:
            self._max_bytes = min(LEAF_CACHE_BYTES, self.executor.pool.limits.max_job_memory_bytes)
        return self._max_bytes

    def trace(self, record: ExecutedChainJob) -> tuple[str, ...]:
        """The op-trace digests of the node's signed trace of the job (JobRejected 404 when it
        is no longer stored)."""
        key = record.envelope_digest
        with self._cond:
            kept = self._traces.get(key)
        if kept is not None:
            return kept
        blobs = self.executor.store.blobs
        if not blobs.has(key):
            raise JobRejected(f"chain job {record.job_id}: this node's signed trace of it is no longer stored", 404)
        digests = trace_digests_of(blobs.get(key))
        with self._cond:
            self._traces.put(key, digests)
        return digests

    def get(self, record: ExecutedChainJob, index: int, also: Iterable[int] = ()) -> ServedLeaf:
        """Leaf `index`'s value (JobRejected: 404 outside the trace, 500 when a run gives a
        value of another digest than the signed trace's, 503 when the run fails)."""
        digests = self.trace(record)
        n = len(digests)
        if not 0 <= index < n:
            raise JobRejected(
                f"chain job {record.job_id}: no op-trace leaf {index} (this node's trace has {n}, 0..{n - 1}; "
                f"the result record {n} has no value of its own)",
                404,
            )
        key = record.envelope_digest
        extra = {j for j in also if 0 <= j < n}
        while True:
            with self._cond:
                known = self._values.get((key, index))
                if known is not None:
                    self._values.move_to_end((key, index))
                    if isinstance(known, JobRejected):
                        raise known
                    return known
                wanted = self._wanted.setdefault(key, set())
                wanted |= {index} | {j for j in extra if (key, j) not in self._values}
                if key in self._running:  # a run of this job is under way: wait for it, then look again
                    self._cond.wait()
                    continue
                self._running.add(key)
                take = frozenset(sorted(self._wanted.pop(key))[:MAX_LEAVES])
                if index not in take:
                    take = frozenset([index, *sorted(take)[: MAX_LEAVES - 1]])
            results: dict[int, ServedLeaf | JobRejected] = {}
            try:
                results = self._capture(record, digests, take)
            finally:
                with self._cond:
                    self._running.discard(key)
                    for j, value in results.items():
                        self._keep((key, j), value)
                    self._cond.notify_all()
            value = results[index]
            if isinstance(value, JobRejected):
                raise value
            return value

    def _capture(self, record: ExecutedChainJob, digests: tuple[str, ...], take: frozenset[int]) -> dict[int, ServedLeaf | JobRejected]:
        """The values of the leaves `take`, from one run of the job, each checked against the
        signed trace's digest; a run that fails gives its error for each."""
        try:
            captured = self.executor.pool.capture_bound(
                record.module_digest, record.input_digests, take, job_id=str(record.job_id), chain_id=record.chain_id, contract=record.contract
            )
        except (JobRejected, BlobError, StorageError) as error:
            failed = JobRejected(f"chain job {record.job_id}: running it again for its leaf values failed ({error}); try again", 503)
            log.warning("%s", failed)
            return {j: failed for j in take}
        results: dict[int, ServedLeaf | JobRejected] = {}
        for j in take:
            buffers = tuple(captured[j])
            digest = leaf_digest_of(buffers)
            if digest != digests[j]:
                results[j] = JobRejected(
                    f"chain job {record.job_id}: this node's run again gave leaf {j} a value of digest {digest}, "
                    f"its signed trace holds {digests[j]}; not served",
                    500,
                )
                log.error("%s", results[j])
            else:
                results[j] = ServedLeaf(record.job_id, j, digest, buffers)
        return results

    def _keep(self, key: tuple[str, int], value: ServedLeaf | JobRejected) -> None:
        """Keeps a value (under the lock), dropping the least recently used past the bound. A
        failed run is not kept (the next request runs again); a digest mismatch is."""
        if isinstance(value, JobRejected) and value.status == 503:
            return
        size = value.nbytes if isinstance(value, ServedLeaf) else 0
        if size > self.max_bytes:
            return
        old = self._values.pop(key, None)
        if isinstance(old, ServedLeaf):
            self._bytes -= old.nbytes
        self._values[key] = value
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, dropped = self._values.popitem(last=False)
            if isinstance(dropped, ServedLeaf):
                self._bytes -= dropped.nbytes


class ChainExecutor:
    """The `JobExecutor` of the daemon (see the module docstring)."""

    def __init__(self, pool: WorkerPool, fetcher: BlobFetcher, state: ChainState, *, workers: int = 1) -> None:
        self.pool = pool
        self.store = pool.store
        self.fetcher = fetcher
        self.state = state  # the node's chain database: the execution records live there
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vxla-chain-job")
        # Checks have a thread of their own: admitting a job does not wait for a long run.
        self._check_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vxla-chain-check")
        self._checking: dict[ChainJob, Future[None]] = {}
        self._running: dict[ChainJob, Future[ExecutedChainJob]] = {}
        self._graphing: dict[ChainJob, Future[GraphSummary]] = {}
        self._graphs: dict[tuple[str, int], GraphSummary] = {}  # kept for the node's disputes
        self._lock = threading.Lock()
        self.leaves = LeafValues(self)

    def close(self) -> None:
        """Stops taking work (a job still running is redone after restart, with the same
        digests) and closes the connections to peers."""
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._check_thread.shutdown(wait=False, cancel_futures=True)
        self.fetcher.http.close()

    def record(self, contract: str, job_id: int) -> ExecutedChainJob | None:
        """The record of a chain job this node executed, or None."""
        data = self.state.execution(contract, job_id)
        return None if data is None else ExecutedChainJob(**data)

    def _digests(self, job: ChainJob) -> tuple[str, list[str]]:
        """The module blob digest and input blob digests of `job`, blobs fetched if needed.
        A blob found nowhere raises BlobError, which the watcher treats as transient (a peer
        may be down for a moment; it retries until the commit deadline); a manifest that is
        not one is JobRejected."""
        module_digest, manifest_digest = job.program_digest.hex(), job.inputs_digest.hex()
        module = self.fetcher.ensure(module_digest)
        parameters = len(self.pool.check_module(module).parameter_shapes)
        manifest = self.fetcher.ensure(manifest_digest)  # BlobError (a ValueError) stays transient
        try:
            input_digests = parse_manifest(manifest)
        except ValueError as error:
            raise JobRejected(str(error)) from None
        # Before fetching any input: a manifest cannot send the node after blobs the module
        # would never take.
        if len(input_digests) != parameters:
            raise JobRejected(f"inputs manifest lists {len(input_digests)} inputs; the module takes {parameters}")
        for digest in input_digests:
            self.fetcher.ensure(digest)
        return module_digest, input_digests

    def check(self, job: ChainJob) -> None:
        """Before claiming: the blobs are found, the job passes the node's limits, and it
        compiles within the memory limit in an execution process, not run (a process that dies
        there refuses the job while no stake is locked on it). The fetch and the compile run
        in the background: JobPending until they are done."""
        self._in_background(self._check_thread, self._checking, job, lambda: self._check(job))

    def leaf(self, contract: str, job_id: int, index: int, also: Iterable[int] = ()) -> ServedLeaf:
        """The value of op-trace leaf `index` of a job this node executed, checked against its
        signed trace (`LeafValues.get`; `also`: other leaves to capture in the same run).
        JobRejected: 404 for a job not executed here or an index outside its trace, 500 when
        a run gives another value than the trace's, 503 when the run fails. Whether the value
        may be served yet (the commit phase) is the caller's to decide."""
        record = self.record(contract, job_id)
        if record is None:
            raise JobRejected(f"chain job {job_id}: not executed by this node", 404)
        return self.leaves.get(record, index, also)

    def evaluate_leaf(self, job: ChainJob, index: int, graph_leaf: bytes, values: dict[int, list[LeafBuffer]], digests: dict[int, str]) -> bytes:
        """The digest a committee member votes for instruction `index` of the job (n: the
        result record), evaluated alone from the operand `values` (checked against their
        committed `digests`) in an execution process, under this node's compile, whose graph
        leaf at `index` must be `graph_leaf`. Blobs are fetched as for a run (BlobError when
        no peer has one); JobRejected as the evaluation is refused."""
        module_digest, input_digests = self._digests(job)
        return bytes.fromhex(self.pool.evaluate_leaf_bound(module_digest, input_digests, index, graph_leaf, values, digests))

    def steps(self, job: ChainJob, index: int, graph_leaf: bytes, element: int | None = None, step: int | None = None) -> tuple[dict, list[bytes]]:
        """What this node holds of instruction `index` for the step referee, from the
        reference's run of the job in an execution process (WorkerPool.steps_bound); blobs
        are fetched as for a run."""
        module_digest, input_digests = self._digests(job)
        return self.pool.steps_bound(module_digest, input_digests, index, graph_leaf, element, step)

    def graph(self, job: ChainJob) -> GraphSummary:
        """The job's graph commitment with its leaves from this node's compile (in an
        execution process, like `check`), for the node's disputes; JobPending until done."""
        key = (job.contract.lower(), job.job_id)
        known = self._graphs.get(key)
        if known is None:
            known = self._in_background(self._check_thread, self._graphing, job, lambda: self._graph(job))
            self._graphs[key] = known
        return known

    def _graph(self, job: ChainJob) -> GraphSummary:
        module_digest, input_digests = self._digests(job)
        return self.pool.check_bound(module_digest, input_digests)

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        """The recorded outcome, or JobPending while the job runs in the background."""
        record = self.record(job.contract, job.job_id)
        if record is None:
            record = self._in_background(self._threads, self._running, job, lambda: self._run(job))  # JobRejected passes through
        return ExecutionOutcome(
            bytes.fromhex(record.result_digest), bytes.fromhex(record.envelope_digest), self.op_trace_root(record)
        )

    def op_trace_root(self, record: ExecutedChainJob) -> bytes:
        """The op-trace root of an executed job: recorded, or for a record made before roots
        were recorded, read from its stored signed trace (and recorded then)."""
        if not record.op_trace_root:
            record = self._with_op_trace_root(record)
        return bytes.fromhex(record.op_trace_root)

    def _with_op_trace_root(self, record: ExecutedChainJob) -> ExecutedChainJob:
        """A record made before op-trace roots were recorded, with the root of the signed
        trace it names (stored here: the node served it), recorded from now on. JobRejected
        when that trace is gone: the node cannot say what it would seal."""
        blobs = self.store.blobs
        if not blobs.has(record.envelope_digest):
            raise JobRejected(f"the record of chain job {record.job_id} has no op-trace root and its signed trace is no longer stored")
        envelope = blobs.get(record.envelope_digest)
        statement = Statement.from_json_bytes(parse_envelope(envelope).payload)
        record = replace(record, op_trace_root=op_trace_root_of(statement).hex())
        self.state.record_execution(record.contract, record.job_id, record.to_dict())
        return record

    def _in_background(
        self, threads: ThreadPoolExecutor, started: dict[ChainJob, Future[R]], job: ChainJob, work: Callable[[], R]
    ) -> R:
        """`work`'s result once the thread of `threads` that runs it is done; the first call
        starts it, and every call raises JobPending until then. Keyed by the whole job, so
        that a job id a reorg gave to another job does not take this one's result."""
        with self._lock:
            future = started.get(job)
            if future is None:
                started[job] = threads.submit(work)
                raise JobPending()
            if not future.done():
                raise JobPending()
            del started[job]
        return future.result()

    def _check(self, job: ChainJob) -> None:
        module_digest, input_digests = self._digests(job)
        # The module and inputs are checked (and the inputs digested) for the request.
        graph = self.pool.check_bound(module_digest, input_digests)
        if (graph.root, graph.trace_leaves) != (job.graph_root.hex(), job.trace_leaves):
            raise JobRejected(
                f"graph commitment differs: the job names root {job.graph_root.hex()} with {job.trace_leaves} "
                f"op-trace leaves, this node's compile of its program ({self.pool.compiler_config.pipeline} "
                f"pipeline) commits to root {graph.root} with {graph.trace_leaves}"
            )

    def _run(self, job: ChainJob) -> ExecutedChainJob:
        module_digest, input_digests = self._digests(job)
        result = self.pool.execute_bound(
            module_digest, input_digests, job_id=str(job.job_id), chain_id=job.chain_id, contract=job.contract
        )
        record = ExecutedChainJob(
            job_id=job.job_id,
            chain_id=job.chain_id,
            contract=job.contract,
            module_digest=module_digest,
            input_digests=list(input_digests),
            output_digests=result.output_digests,
            output_tensor_digests=result.output_tensor_digests,
            envelope_digest=result.envelope_digest,
            result_digest=result_digest_of(result.output_tensor_digests).hex(),
            op_trace_root=op_trace_root_of(result.statement).hex(),
        )
        self.state.record_execution(job.contract, job.job_id, record.to_dict())
        log.info("chain job %d executed: result %s", job.job_id, record.result_digest)
        return record

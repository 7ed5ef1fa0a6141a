"""The node's worker pool: takes queued jobs from the store, checks them against the limits,
compiles (with a compile cache), runs them with op-level tracing, signs the statement and
stores the outputs and the envelope as blobs.

Compiling and running happen in execution processes (node/daemon/sandbox.py), which the
pool can kill: a job that crashes native code or runs past its wall-time limit fails, and
the node goes on. The daemon checks what a process answers, signs the statement and stores
the outputs and the envelope. A job whose process died is queued once more (the death may
have had another cause) and failed for good the second time.

The node's storage failing while a job runs (a full disk under its compile cache, its
outputs or its trace) is not the job's fault: the job goes back to the queue, and the worker
waits until the store takes a write again (with growing pauses, so a disk with room for the
probe but not for the job costs one try a while, not a busy loop) before it takes one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from attest import Statement, key_id, sign_statement
from attest.digests import sha256_hex
from compiler.api import (
    CompilerConfig,
    ExecutionError,
    Fault,
    TargetNotRunnable,
    machine_threads,
    this_host,
)
from compiler.api import load_config as load_compiler_config
from node.daemon.config import Limits
from node.daemon.job_checks import (
    InputRecords,
    KnownModules,
    ModuleSummary,
    check_flops,
    check_module_size,
)
from node.daemon.sandbox import (
    ExecutionDied,
    ExecutionKilled,
    ExecutionProcesses,
    ExecutionRequest,
    GraphSummary,
    LeafBuffer,
    LeafRequest,
    ModuleCheckRequest,
    StepsRequest,
)
from node.daemon.store import STATES, JobStore, StoredJob
from node.errors import JobRejected
from node.protocol import statement_digest
from node.sqlite import StorageError
from node.tracing.statement import compiler_identity

log = logging.getLogger("vxla.node")
R = TypeVar("R")

# A job's outcome the store fails to record is tried this many times, the waits between
# doubling from the first (0.5 + 1 + 2 + 4 s), before the job goes back to the queue.
RECORD_TRIES = 5
RECORD_FIRST_WAIT_S = 0.5
# After a job went back to the queue over a storage failure, the longest pause between a
# worker's checks that the store takes writes again (the first is its poll interval).
STORAGE_WAIT_MAX_S = 30.0
# Checker processes: how many parse modules at once, how long a request waits for one (then
# 503), and the memory one may use past its start, per byte of the largest module allowed (a
# parsed module takes up to about 16 times its text, and parsing more while it runs).
MODULE_CHECKERS = 2
MODULE_CHECK_WAIT_S = 30.0
MODULE_CHECK_MEMORY_PER_BYTE = 48
# A module over this many bytes is large: parsing one near max_module_bytes takes a checker
# for a minute. Large modules take at most MODULE_CHECKERS - 1 checkers at once, so a small
# job never waits behind them (two 16 MB modules once held both checkers, and a small valid
# job waited 30 s for a 503).
LARGE_MODULE_BYTES = 1 << 20


@dataclass
class Metrics:
    """The node's Prometheus metrics, in a registry of its own (one per node, so several
    nodes in one process, as in tests, do not collide)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.jobs = Gauge("vxla_jobs", "Jobs in the store by state", ["state"], registry=self.registry)
        self.compile_cache = Counter(
            "vxla_compile_cache", "Compilations by outcome (hit: executable reused)", ["outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.executions_started = Counter(
            "vxla_executions_started", "Jobs handed to an execution process", registry=self.registry
        )
        self.execution_seconds = Histogram(
            "vxla_execution_seconds", "Wall time of one job's execution", registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300),
        )  # fmt: skip
        self.finished = Counter(
            "vxla_jobs_finished", "Jobs finished by outcome", ["outcome"], registry=self.registry
        )
        self.chain_transactions = Counter(
            "vxla_chain_transactions", "Transactions the chain watcher sent, by action", ["action"],
            registry=self.registry,
        )  # fmt: skip
        self.chain_jobs = Gauge(
            "vxla_chain_jobs", "Chain jobs the watcher follows, by state", ["state"], registry=self.registry
        )
        # Other nodes' results compared with ours (outcome: agree, diverge).
        self.verifications = Counter(
            "vxla_verifications", "Verifications of other nodes' traces by outcome", ["outcome"],
            registry=self.registry,
        )  # fmt: skip

    def update_jobs(self, store: JobStore) -> None:
        """Sets the per-state job gauge from the store (when the metrics are scraped)."""
        for state, count in store.counts().items():
            self.jobs.labels(state=state).set(count)


def node_compiler_config(target: str = "") -> CompilerConfig:
    """The compiler configuration of a node's jobs: the pinned configuration, whose target is
    the widest this host runs unless it names one, with `target` (node.target: a pinned CPU
    name, or "widest") instead when given. ConfigError for an unknown name."""
    config = load_compiler_config()
    return config.with_target(cpu=target) if target else config


def check_node_target(config: CompilerConfig) -> None:
    """TargetNotRunnable, naming what is missing, unless a node can run jobs of `config`'s
    target: a CPU target this host runs. A node's jobs run in confined execution processes
    (confinement.py) that cannot reach a GPU driver, so a GPU target is refused (vxla run
    runs one on a GPU host)."""
    if not config.runs_on_host:
        raise TargetNotRunnable(
            f"target {config.cpu}: a node does not run its jobs on a GPU yet (its confined execution processes "
            f"cannot reach the GPU driver); pin a CPU target (vxla run --target {config.cpu} runs on a GPU host)"
        )
    this_host().check(config)


class WorkerPool:
    """`workers` threads taking queued jobs from `store`, one job at a time each."""

    def __init__(
        self,
        store: JobStore,
        signing_key: Ed25519PrivateKey,
        limits: Limits,
        *,
        workers: int = 1,
        threads: int = 0,
        compiler_config: CompilerConfig | None = None,
        metrics: Metrics | None = None,
        poll_seconds: float = 0.5,
        fault: Fault | None = None,
    ) -> None:
        """`threads`: each job's worker threads (0: the machine's cores shared among the
        `workers`; results never depend on it). `fault`: for tests and demos only, flips a bit of one instruction's output in
        every job this pool runs (a faulty node; `node.fault_instruction` in the config)."""
        self.store = store
        self.fault = fault
        self.signing_key = signing_key
        self.key_id = key_id(signing_key)
        self.limits = limits
        self.workers = workers
        self.threads = threads or max(1, machine_threads() // workers)
        self.compiler_config = compiler_config or load_compiler_config()
        # Fail closed at start: a node that cannot run its pinned target must not take jobs
        # (nor claim chain jobs) it could only fail.
        check_node_target(self.compiler_config)
        self.metrics = metrics or Metrics()
        # What the checker processes found of the modules checked before, shared by the API
        # and the chain executor of this node (summaries: small, so many are kept).
        self.known_modules: KnownModules[ModuleSummary] = KnownModules(entries=1024, source_bytes=1 << 40)
        # The input tensors' records, which the daemon gives its execution processes and holds
        # their statements to (computed once per input blob: a model's weights recur).
        self.input_records = InputRecords()
        self.poll_seconds = poll_seconds
        self._wake = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._current: dict[int, str] = {}
        self._stranded: set[str] = set()  # running jobs the store refused to put back (under _wake)
        self._storage_pause_s = 0.0  # the pause after a storage failure; grows while they go on
        # One execution process per job that may run at once: the local workers' and the
        # chain executor's (which runs as many).
        self.executions = ExecutionProcesses(self.compiler_config, store.data_dir / "compile-cache", limits.max_job_memory_bytes, 2 * workers)
        # The processes that parse and check modules for the API and the chain executor: the
        # daemon never parses one (a large or hostile module costs a checker's time and
        # memory, bounded, not the daemon's).
        self.checkers = ExecutionProcesses(
            self.compiler_config, store.data_dir / "compile-cache", MODULE_CHECK_MEMORY_PER_BYTE * limits.max_module_bytes, MODULE_CHECKERS
        )
        self._large_checks = threading.BoundedSemaphore(MODULE_CHECKERS - 1)

    def check_module(self, module_bytes: bytes) -> ModuleSummary:
        """A module's summary (identity, parameters, work), from a checker process or from
        an earlier check of the same bytes; JobRejected naming why it is refused (503 while
        every checker is busy for MODULE_CHECK_WAIT_S)."""
        check_module_size(module_bytes, self.limits)
        summary = self.known_modules.recall(module_bytes)
        if summary is None:
            with self._checker_lane(len(module_bytes)):
                summary = self.checkers.check_module(ModuleCheckRequest(module_bytes, self.limits), MODULE_CHECK_WAIT_S)
            self.known_modules.remember(module_bytes, summary)
        check_flops(summary.flops, self.limits)
        return summary

    @contextlib.contextmanager
    def _checker_lane(self, module_bytes: int) -> Iterator[None]:
        """Holds a large module's share of the checkers while it is checked (small modules
        need none: a checker is always left to them); JobRejected 503 when the large
        modules' share stays taken for MODULE_CHECK_WAIT_S."""
        if module_bytes <= LARGE_MODULE_BYTES:
            yield
            return
        if not self._large_checks.acquire(timeout=MODULE_CHECK_WAIT_S):
            raise JobRejected(
                f"module: the node is checking other large modules (over {LARGE_MODULE_BYTES} bytes) "
                f"for {MODULE_CHECK_WAIT_S:.0f} s; try again",
                503,
            )
        try:
            yield
        finally:
            self._large_checks.release()

    def start(self) -> None:
        """Starts the worker threads, and in the background a checker process and one
        execution process per worker (so that the first jobs do not wait for a process to
        import the compiler)."""
        # A checker process too: the first job posted waits for it only if it is still starting.
        threading.Thread(target=self._start_execution, args=(self.checkers,), name="vxla-checker-start", daemon=True).start()
        for index in range(self.workers):
            threading.Thread(target=self._start_execution, args=(self.executions,), name=f"vxla-execution-start-{index}", daemon=True).start()
        for index in range(self.workers):
            thread = threading.Thread(target=self._loop, args=(index,), name=f"vxla-worker-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _start_execution(self, processes: ExecutionProcesses) -> None:
        try:
            processes.start()
        except JobRejected as error:  # the first job starts one again and fails with the reason
            log.error("%s", error)

    def notify(self) -> None:
        """Wakes an idle worker (a job was queued)."""
        with self._wake:
            self._wake.notify()

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Lets running jobs finish for up to `timeout` seconds, then puts the ones still
        running back in the queue (they are redone after restart, with the same digests).
        Returns the requeued job ids."""
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        requeued = [job_id for job_id in list(self._current.values()) if self._requeue(job_id)]
        self.executions.close()
        self.checkers.close()
        return requeued

    def _loop(self, index: int) -> None:
        job: StoredJob | None = None
        while not self._stopping.is_set():
            self._requeue_stranded()
            if job is None:
                job = self._claim(index)
                if job is None:
                    with self._wake:
                        self._wake.wait(self.poll_seconds)
                    continue
            self._current[index] = job.id
            try:
                job = self.run_job(job, claim_next=True)
                self._storage_pause_s = 0.0
            except StorageError as error:  # a full disk, say: the node's trouble, not the job's
                log.warning("job %s: the node's storage failed while it ran (%s); it goes back to the queue and runs again once the store takes writes", job.id, error)
                self._put_back(job.id)
                job = None
                self._wait_for_storage(index)
            except Exception:  # the store failing as the outcome is recorded, after retries
                log.exception("job %s: its outcome could not be stored; it goes back to the queue", job.id)
                self._put_back(job.id)
                job = None
            finally:
                self._current.pop(index, None)
        if job is not None:  # claimed with the last job's finish as the pool stopped, not run
            self._requeue(job.id)

    def _wait_for_storage(self, index: int) -> None:
        """Waits until the store takes a write again (or the pool stops): each failure in a row
        doubles the first pause, up to STORAGE_WAIT_MAX_S, since a store with room for the
        small probe may still have none for the job."""
        self._storage_pause_s = min(STORAGE_WAIT_MAX_S, max(self.poll_seconds, 2 * self._storage_pause_s))
        pause = self._storage_pause_s
        while not self._stopping.wait(pause):
            try:
                self.store.check_writable()
            except StorageError as error:
                log.debug("worker %d: the store takes no write yet (%s)", index, error)
                pause = min(STORAGE_WAIT_MAX_S, 2 * pause)
                continue
            log.info("worker %d: the store takes writes again; taking jobs", index)
            return

    def _claim(self, index: int) -> StoredJob | None:
        try:
            return self.store.claim_next()
        except Exception:  # the store failing (disk full, I/O error) must not end the worker
            log.exception("worker %d: could not take the next job; trying again", index)
            self._stopping.wait(self.poll_seconds)
            return None

    def _requeue(self, job_id: str) -> bool:
        try:
            self.store.requeue(job_id)
        except ValueError:
            return False  # it is no longer running
        return True

    def _recorded(self, write: Callable[[], R], what: str) -> R:
        """`write()` (a change of a job's state), tried again while the store fails (a full
        disk may free up): RECORD_TRIES tries over some 15 s; the last StorageError is raised."""
        wait = RECORD_FIRST_WAIT_S
        for attempt in range(RECORD_TRIES):
            try:
                return write()
            except StorageError as error:
                if attempt == RECORD_TRIES - 1 or self._stopping.is_set():
                    raise
                log.warning("%s: the store failed (%s); trying again in %.1f s", what, error, wait)
                self._stopping.wait(wait)
                wait *= 2
        raise AssertionError("unreachable")

    def _put_back(self, job_id: str) -> None:
        """A running job whose outcome could not be stored goes back to the queue (it is
        redone, to the same digests); while the store refuses even that, it is kept here and
        tried again before every claim, so it is never left running until a restart."""
        try:
            self._recorded(lambda: self._requeue(job_id), f"job {job_id}")
        except StorageError:
            with self._wake:
                self._stranded.add(job_id)

    def _requeue_stranded(self) -> None:
        with self._wake:
            stranded, self._stranded = sorted(self._stranded), set()
        for job_id in stranded:
            try:
                self._requeue(job_id)
                log.info("job %s: queued again now the store takes writes", job_id)
            except StorageError:
                with self._wake:
                    self._stranded.add(job_id)

    def run_job(self, job: StoredJob, *, claim_next: bool = False) -> StoredJob | None:
        """Runs one claimed job to `done` or `failed` (never leaves it running unless the
        process dies, in which case the next start requeues it). With `claim_next` (and the
        pool not stopping), a job that is done is recorded in one transaction with the claim
        of the next queued job, which is returned (None otherwise)."""
        started = time.perf_counter()
        following = None
        try:
            following = self._execute(job, claim_next=claim_next and not self._stopping.is_set())
            outcome = "done"
        except StorageError:
            raise  # the store failed, during the run or as its outcome was recorded: the caller puts the job back in the queue
        except ExecutionDied as error:
            outcome = self._after_death(job, str(error))
        except (JobRejected, ExecutionError) as error:
            outcome = "failed"
            self._fail(job, str(error))
        except Exception as error:  # an internal error must not kill the worker thread
            log.exception("job %s: internal error", job.id)
            outcome = "failed"
            self._fail(job, f"internal error: {type(error).__name__}: {error}")
        self.metrics.finished.labels(outcome=outcome).inc()
        log.info("job %s %s in %.3f s", job.id, outcome, time.perf_counter() - started)
        return following

    def _after_death(self, job: StoredJob, message: str) -> str:
        """A job whose execution process died: queued once more, failed the second time."""
        try:
            again = self._recorded(lambda: self.store.record_death(job.id, f"{message}, for the second time: not run again"), f"job {job.id}")
        except ValueError:
            return "requeued"  # a stop requeued it already
        log.warning("job %s: %s; %s", job.id, message, "queued once more" if again else "failed for good")
        return "requeued" if again else "failed"

    def _fail(self, job: StoredJob, message: str) -> None:
        try:
            self._recorded(lambda: self.store.fail(job.id, message), f"job {job.id}")
        except ValueError:
            log.warning("job %s: no longer running (requeued at shutdown)", job.id)

    def _execute(self, job: StoredJob, *, claim_next: bool) -> StoredJob | None:
        result = self.execute_bound(
            job.module_digest, list(job.input_digests), job_id=job.id, chain_id=None, contract=None, store_blobs=False
        )
        return self._recorded(
            lambda: self.store.finish(
                job.id, result.output_digests, statement_digest(result.statement), result.envelope_digest, result.unstored,
                claim_next=claim_next,
            ),
            f"job {job.id}",
        )  # fmt: skip

    def execute_bound(
        self,
        module_digest: str,
        input_digests: Sequence[str],
        *,
        job_id: str,
        chain_id: int | None,
        contract: str | None,
        store_blobs: bool = True,
    ) -> ExecutionResult:
        """Compile (cached), run with op-level tracing in an execution process, sign, and store
        the outputs and the envelope as blobs: the one execution path of local and chain jobs.
        The trace binds `job_id`, `chain_id` and `contract`. With `store_blobs` false the
        blobs are left to the caller (`ExecutionResult.unstored`: a local job stores them
        with its `finish`). Raises JobRejected when the job cannot run (ExecutionKilled past
        the wall limit, ExecutionDied when the process died)."""
        blobs = self.store.blobs
        self.metrics.executions_started.inc()
        request = self._request(module_digest, input_digests, job_id, chain_id, contract)
        answer = self.executions.execute(request)
        statement = answer.statement
        self._check_claims(statement, module_digest, request, job_id, chain_id)
        self.metrics.compile_cache.labels(outcome="hit" if answer.cache_hit else "miss").inc()
        self.metrics.execution_seconds.observe(answer.execute_ns / 1e9)
        envelope = sign_statement(statement, self.signing_key).to_json() + "\n"
        produced = [*answer.outputs, envelope.encode()]
        if store_blobs:
            *outputs, envelope_digest = blobs.put_all(produced)
        else:
            *outputs, envelope_digest = [sha256_hex(data) for data in produced]
        tensor_digests = [o.digest for o in statement.predicate.deterministic.outputs]
        unstored = () if store_blobs else tuple(produced)
        return ExecutionResult(statement, envelope, envelope_digest, outputs, tensor_digests, unstored)

    def _check_claims(self, statement: Statement, module_digest: str, request: ExecutionRequest, job_id: str, chain_id: int | None) -> None:
        """ExecutionDied unless the execution process's statement is of what it was asked to
        run, as far as the daemon knows it without parsing the module: the job, the key, the
        module's bytes (source_hash is their SHA-256, as the blob's digest), the inputs' records
        (the daemon's own, `InputRecords`), and this node's compiler identity. A process a
        hostile program took over can make its job fail, not make the node sign a trace of
        another program, other inputs or another compiler; the outputs are checked against
        their digests as they arrive (sandbox.py)."""
        predicate = statement.predicate
        execution = predicate.deterministic
        if (predicate.job_id, predicate.chain_id, predicate.key_id) != (job_id, chain_id, self.key_id):
            raise ExecutionDied("execution: the execution process answered for another job", 500)
        if execution.program.source_hash != module_digest or execution.inputs != request.input_records:
            raise ExecutionDied("execution: the execution process answered for another module or other inputs", 500)
        if execution.compiler != compiler_identity(self.compiler_config):
            raise ExecutionDied("execution: the execution process answered with another compiler identity", 500)

    def check_bound(self, module_digest: str, input_digests: Sequence[str]) -> GraphSummary:
        """Compile (cached) and check the plan's memory in an execution process, without
        running: what a chain job passes before the node claims it, so that a program that
        kills the compiler or needs too much memory costs no stake. Returns the program's
        graph commitment under this node's pipeline (what the job must name). Raises
        JobRejected (ExecutionDied when the process died, ExecutionKilled past the wall
        limit)."""
        return self.executions.check(self._request(module_digest, input_digests, "", None, None))

    def capture_bound(
        self, module_digest: str, input_digests: Sequence[str], capture: frozenset[int], *, job_id: str, chain_id: int | None, contract: str | None
    ) -> dict[int, list[LeafBuffer]]:
        """Runs the job again in an execution process, as `execute_bound` does, copying out the
        values of the op-trace leaves `capture` names (what the node serves a dispute's
        committee); nothing is signed or stored. Raises JobRejected as `execute_bound`."""
        self.metrics.executions_started.inc()
        request = replace(self._request(module_digest, input_digests, job_id, chain_id, contract), capture=frozenset(capture))
        answer = self.executions.execute(request)
        predicate = answer.statement.predicate
        if (predicate.job_id, predicate.chain_id, predicate.key_id) != (job_id, chain_id, self.key_id):
            raise ExecutionDied("execution: the execution process answered for another job", 500)
        return answer.captured

    def evaluate_leaf_bound(
        self, module_digest: str, input_digests: Sequence[str], index: int, graph_leaf: bytes,
        values: dict[int, list[LeafBuffer]], digests: dict[int, str],
    ) -> str:  # fmt: skip
        """The digest (hex) of instruction `index` of the job (n: the result record) evaluated
        alone from `values` (by trace index, each checked against its committed digest in
        `digests`) in an execution process: what a committee member votes (docs/disputes.md).
        JobRejected as the process refuses (a value not the committed one, this node's compile
        having another graph leaf than `graph_leaf` at the index) or dies."""
        blobs = self.store.blobs
        request = LeafRequest(
            blobs.get(module_digest), [blobs.get(d) for d in input_digests], self.limits, index, graph_leaf, dict(values), dict(digests)
        )
        return self.executions.evaluate(request)

    def steps_bound(
        self, module_digest: str, input_digests: Sequence[str], index: int, graph_leaf: bytes, element: int | None = None, step: int | None = None
    ) -> tuple[dict, list[bytes]]:
        """What a party to a dispute under the step referee holds of instruction `index`, from
        the reference's run of the job in an execution process (sandbox.StepsRequest): the
        answer's header and byte frames. JobRejected as the process refuses or dies."""
        blobs = self.store.blobs
        request = StepsRequest(
            blobs.get(module_digest), [blobs.get(d) for d in input_digests], self.limits, index, graph_leaf, element, step
        )
        return self.executions.steps(request)

    def _request(
        self, module_digest: str, input_digests: Sequence[str], job_id: str, chain_id: int | None, contract: str | None
    ) -> ExecutionRequest:
        """The request for one run of the job, with the inputs' records the statement must
        hold (JobRejected when the module or an input no longer passes its checks)."""
        blobs = self.store.blobs
        module, inputs = blobs.get(module_digest), [blobs.get(d) for d in input_digests]
        records = self.input_records.of(self.check_module(module).parameter_shapes, input_digests, inputs, self.limits)
        return ExecutionRequest(
            module, inputs, self.limits, self.threads, self.fault, job_id, chain_id, contract, self.key_id, records,
        )  # fmt: skip


@dataclass(frozen=True)
class ExecutionResult:
    """One signed execution: the statement, its envelope (text and blob digest), the output
    blobs (.npy) and the output tensors' digests (what a chain result digest is over)."""

    statement: Statement
    envelope: str
    envelope_digest: str
    output_digests: list[str]
    output_tensor_digests: list[str]
    unstored: tuple[bytes, ...] = ()  # the output and envelope blobs, when the caller stores them


__all__ = [
    "STATES",
    "ExecutionKilled",
    "ExecutionResult",
    "JobRejected",
    "Metrics",
    "WorkerPool",
]

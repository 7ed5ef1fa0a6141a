"""The node's worker pool: takes queued jobs from the store, checks them against the limits,
compiles (with a compile cache), runs them with op-level tracing, signs the statement and
stores the outputs and the envelope as blobs.

The checks a job must pass (`prepare_job`) are the same function the HTTP API calls before
it stores anything, so a job the API accepted is never refused later for a different reason.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from attest import Statement, key_id, sign_statement
from compiler.config import CompilerConfig
from compiler.config import load_config as load_compiler_config
from compiler.driver import compile_program
from compiler.errors import ExecutionError
from compiler.hlo import HloError
from compiler.hlo.cost import estimate_flops
from compiler.program import Program, load_program
from compiler.runtime.executable import DeadlineExceeded, Executable, Fault
from compiler.runtime.host import TargetNotRunnable, this_host
from compiler.runtime.threads import machine_threads
from node.daemon.config import Limits
from node.daemon.store import STATES, JobStore, StoredJob
from node.errors import JobRejected
from node.protocol import statement_digest
from node.tensors import npy_bytes
from node.tracing.statement import TraceInputError, build_statement, checked_inputs, tensor_records

log = logging.getLogger("vxla.node")


def decode_npy(data: bytes, what: str) -> np.ndarray:
    """The array in .npy bytes (never unpickles); JobRejected naming `what` otherwise."""
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise JobRejected(f"{what}: not a readable .npy file ({error})") from None


def check_module(module_bytes: bytes, limits: Limits) -> Program:
    """The parsed, verified module; JobRejected (400 with line:col, 413, 422) otherwise."""
    if len(module_bytes) > limits.max_module_bytes:
        raise JobRejected(
            f"module: {len(module_bytes)} bytes, over limits.max_module_bytes ({limits.max_module_bytes})",
            413,
        )
    try:
        program = load_program(module_bytes)
    except HloError as error:
        raise JobRejected(f"module: {error}") from None
    flops = estimate_flops(program.module)
    if flops > limits.max_flops:
        raise JobRejected(f"module: estimated {flops} operations, over limits.max_flops ({limits.max_flops})", 422)
    return program


def prepare_job(
    module_bytes: bytes, input_bytes: Sequence[bytes], limits: Limits
) -> tuple[Program, list[np.ndarray]]:
    """Everything checked before a job is stored or run: module size, parse and work estimate,
    each input's size and decoding, and the inputs' count, dtypes and shapes against the
    module's parameters. Raises JobRejected naming the problem."""
    program = check_module(module_bytes, limits)
    arrays = []
    for index, data in enumerate(input_bytes):
        if len(data) > limits.max_tensor_bytes:
            raise JobRejected(
                f"input {index}: {len(data)} bytes, over limits.max_tensor_bytes ({limits.max_tensor_bytes})",
                413,
            )
        arrays.append(decode_npy(data, f"input {index}"))
    try:
        return program, checked_inputs(program, arrays)
    except TraceInputError as error:
        raise JobRejected(str(error)) from None




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
        for state, count in store.counts().items():
            self.jobs.labels(state=state).set(count)


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
        executable_cache_size: int = 16,
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
        this_host().check(self.compiler_config)
        self.metrics = metrics or Metrics()
        self.poll_seconds = poll_seconds
        self._wake = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._current: dict[int, str] = {}
        # Executables by hlo_hash, most recently used last; each with a lock because one
        # Executable runs one job at a time (its arena is reused).
        self._executables: OrderedDict[str, tuple[Executable, threading.Lock]] = OrderedDict()
        self._executables_lock = threading.Lock()
        self._executable_cache_size = executable_cache_size

    def start(self) -> None:
        """Starts the worker threads."""
        for index in range(self.workers):
            thread = threading.Thread(target=self._loop, args=(index,), name=f"vxla-worker-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

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
        requeued = []
        for job_id in list(self._current.values()):
            try:
                self.store.requeue(job_id)
                requeued.append(job_id)
            except ValueError:
                pass  # it finished between the join and here
        return requeued

    def _loop(self, index: int) -> None:
        while not self._stopping.is_set():
            job = self.store.claim_next()
            if job is None:
                with self._wake:
                    self._wake.wait(self.poll_seconds)
                continue
            self._current[index] = job.id
            try:
                self.run_job(job)
            finally:
                self._current.pop(index, None)

    def _executable(self, program: Program) -> tuple[Executable, threading.Lock]:
        with self._executables_lock:
            entry = self._executables.get(program.hlo_hash)
            if entry is not None:
                self._executables.move_to_end(program.hlo_hash)
                self.metrics.compile_cache.labels(outcome="hit").inc()
                return entry
        self.metrics.compile_cache.labels(outcome="miss").inc()
        executable = compile_program(
            program, self.compiler_config, threads=self.threads,
            cache_dir=self.store.data_dir / "compile-cache",
        )  # fmt: skip
        with self._executables_lock:
            entry = self._executables.setdefault(program.hlo_hash, (executable, threading.Lock()))
            while len(self._executables) > self._executable_cache_size:
                self._executables.popitem(last=False)
        return entry

    def run_job(self, job: StoredJob) -> None:
        """Runs one claimed job to `done` or `failed` (never leaves it running unless the
        process dies, in which case the next start requeues it)."""
        started = time.perf_counter()
        try:
            self._execute(job)
            outcome = "done"
        except (JobRejected, ExecutionError) as error:
            outcome = "failed"
            self._fail(job, str(error))
        except Exception as error:  # an internal error must not kill the worker thread
            log.exception("job %s: internal error", job.id)
            outcome = "failed"
            self._fail(job, f"internal error: {type(error).__name__}: {error}")
        self.metrics.finished.labels(outcome=outcome).inc()
        self.metrics.update_jobs(self.store)
        log.info("job %s %s in %.3f s", job.id, outcome, time.perf_counter() - started)

    def _fail(self, job: StoredJob, message: str) -> None:
        try:
            self.store.fail(job.id, message)
        except ValueError:
            log.warning("job %s: no longer running (requeued at shutdown)", job.id)

    def _execute(self, job: StoredJob) -> None:
        result = self.execute_bound(
            job.module_digest, list(job.input_digests), job_id=job.id, chain_id=None, contract=None
        )
        self.store.finish(job.id, result.output_digests, statement_digest(result.statement), result.envelope_digest)

    def execute_bound(
        self,
        module_digest: str,
        input_digests: Sequence[str],
        *,
        job_id: str,
        chain_id: int | None,
        contract: str | None,
    ) -> ExecutionResult:
        """Compile (cached), run with op-level tracing, sign, and store the outputs and the
        envelope as blobs: the one execution path of local and chain jobs. The trace binds
        `job_id`, `chain_id` and `contract`. Raises JobRejected when the job cannot run."""
        blobs = self.store.blobs
        program, arrays = prepare_job(
            blobs.get(module_digest), [blobs.get(d) for d in input_digests], self.limits
        )
        begin = time.perf_counter_ns()
        # The wall limit covers compiling and running. Compiling is not interruptible (its
        # work is bounded by the module limits); the run stops between steps and at every
        # while-loop iteration once past the deadline.
        deadline = time.monotonic() + self.limits.job_wall_seconds
        executable, lock = self._executable(program)
        compiled = time.perf_counter_ns()
        try:
            with lock:
                run = executable.run_traced(
                    *arrays,
                    threads=self.threads,
                    max_while_iterations=self.limits.max_while_iterations,
                    fault=self.fault,
                    deadline=deadline,
                )
        except TargetNotRunnable as error:
            raise JobRejected(f"execution: {error}") from None
        except DeadlineExceeded as error:
            raise JobRejected(
                f"execution: over limits.job_wall_seconds ({self.limits.job_wall_seconds}): {error}"
            ) from None
        except ExecutionError as error:
            # Name the setting when the loop limit stopped the job, so the submitter knows
            # this node refuses it (not that the module is wrong).
            hint = (
                f" (limits.max_while_iterations = {self.limits.max_while_iterations})"
                if "past the limit" in str(error)
                else ""
            )
            raise JobRejected(f"execution: {error}{hint}") from None
        executed = time.perf_counter_ns()
        self.metrics.execution_seconds.observe((executed - compiled) / 1e9)
        statement = build_statement(
            program, executable, arrays, run,
            job_id=job_id, chain_id=chain_id, contract=contract, key_id=self.key_id,
            threads=self.threads, timings_ns={"compile": compiled - begin, "execute": executed - compiled},
            op_level=True, input_records=tensor_records(arrays, "in"),
        )  # fmt: skip
        envelope = sign_statement(statement, self.signing_key).to_json() + "\n"
        outputs = [blobs.put(npy_bytes(a)) for a in run.outputs]
        envelope_digest = blobs.put(envelope.encode())
        tensor_digests = [o.digest for o in statement.predicate.deterministic.outputs]
        return ExecutionResult(statement, envelope, envelope_digest, outputs, tensor_digests)


@dataclass(frozen=True)
class ExecutionResult:
    """One signed execution: the statement, its envelope (text and blob digest), the output
    blobs (.npy) and the output tensors' digests (what a chain result digest is over)."""

    statement: Statement
    envelope: str
    envelope_digest: str
    output_digests: list[str]
    output_tensor_digests: list[str]


__all__ = [
    "STATES",
    "ExecutionResult",
    "JobRejected",
    "Metrics",
    "WorkerPool",
    "check_module",
    "decode_npy",
    "prepare_job",
]

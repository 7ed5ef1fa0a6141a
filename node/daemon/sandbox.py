"""Job execution in child processes the daemon can kill.

A job's compile and run happen in an execution process, never in the daemon: native code
that crashes (a codegen bug, an illegal instruction) or runs away kills that process, not
the node. Each worker has one such process, started with `spawn` (no state forked from the
daemon's threads) and kept across jobs, so executables stay loaded between jobs of the same
program; after a death or a kill the next job starts a fresh one.

- Wall time: the child stops a run between steps once past `limits.job_wall_seconds`; if it
  has not answered a little after the limit (a single long kernel), the daemon kills it.
- Memory: after compiling, the child refuses a job whose plan needs more than
  `limits.max_job_memory_bytes` (arena, inputs and outputs), and its address space is capped
  (RLIMIT_AS) at what it had at start plus that limit plus headroom, so an allocation past it
  fails in the child.
- Before a claim: a chain job is compiled and its memory checked in an execution process
  without running (`ExecutionRequest.run` false), so a program that kills the compiler, or
  one over the memory limit, is refused before the node locks stake on it. The check also
  answers the graph commitment of the compiled program (`GraphSummary`: root and op-trace
  leaf count, docs/disputes.md), which the chain executor compares with the job's.
- Leaf values: a run may also copy out the values of some op-trace leaves
  (`ExecutionRequest.capture`: what a dispute's committee asks a party for, docs/disputes.md),
  answered as .npy bytes after the outputs, with each buffer's element type and shape
  (`LeafBuffer`). A committee member evaluates one instruction from such values
  (`LeafRequest`: the module, the job's inputs, the instruction's index and graph leaf, the
  values of the leaves it reads and their committed digests), answered with the digest it
  votes; the child checks that its own compile has the dispute's graph leaf at that index.
  A party to a dispute under the step referee asks for the instruction's element program,
  an element's values of its steps, or what resolving at a step needs (`StepsRequest`,
  answered from the reference evaluator's run of the job, never the backend's).
- Trust: the child does not hold the signing key and answers in bytes, never pickles: the
  daemon parses the statement with the strict parser, checks every output against its
  digest in the statement and what the statement says was run (worker.py
  `_check_claims`), and only then signs. The inputs' records come from the daemon
  (`ExecutionRequest.input_records`, digested once per input blob), so the child neither
  digests the inputs again nor has a say in them. A child running a hostile program can make its job
  fail, not make the node sign something else.
- Storage: a job that finds the node's disk full (its compile cache, say) is answered 507,
  which the daemon raises as a StorageError: the job waits in the queue for space (the
  worker pool), rather than failing for good over the node's trouble.
- Reach: once it has imported what it runs, the child confines itself
  (node/daemon/confinement.py: another user or no capabilities, Landlock) and says what holds
  in its first answer; it reaches its compile cache through a directory the daemon opened
  for it, never by a path it would need rights on the way to.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

import numpy as np

from attest import Statement, TensorRecord
from compiler.api import CompilerConfig, Fault
from core.dtypes import from_name
from core.lru import Lru
from node.daemon.config import Limits
from node.daemon.confinement import (
    Confinement,
    cap_address_space,
    confine,
    end_with_the_daemon,
    executable_files,
    execution_user,
    hand_over,
    loaded_library_directories,
)
from node.daemon.job_checks import KnownModules, ModuleSummary, checked_module, prepare_job
from node.errors import JobRejected
from node.sqlite import StorageError
from node.tensors import NPY_HEADER_BYTES, read_npy, recorded_array

log = logging.getLogger("vxla.node.sandbox")

# How long a new execution process may take to import the compiler and say it is ready.
START_TIMEOUT_S = 120.0
# How long past the wall limit the daemon waits for the child's own stop between steps
# before it kills it (a stop inside one kernel).
KILL_GRACE_S = 0.5
# Address space the child may use beyond its start size and the job memory limit: thread
# stacks and allocator arenas reserve space they seldom touch.
ADDRESS_SPACE_HEADROOM = 4 << 30
_EXECUTABLES_KEPT = 16
# The status of a child's answer that the node's storage is full (the API's for it).
STORAGE_FULL = 507
# The most op-trace leaves one run copies out, and one leaf evaluation reads (an instruction
# reads at most a few leaves; a capture serves a few members' requests at once).
MAX_LEAVES = 256

T = TypeVar("T")


@dataclass(frozen=True)
class ExecutionRequest:
    """One job for the child: its bytes, limits and what the statement binds."""

    module: bytes
    inputs: list[bytes]
    limits: Limits
    threads: int
    fault: Fault | None
    job_id: str
    chain_id: int | None
    contract: str | None
    key_id: str
    # The inputs' records (element type, dimensions, tensor digest) as the daemon checked
    # them: what the statement records, and what the daemon holds it to.
    input_records: tuple[TensorRecord, ...]
    # False: compile (cached) and check the plan's memory, without running: what a chain
    # job must pass before the node stakes a claim on it.
    run: bool = True
    # Op-trace indices whose values the run copies out (ExecutionAnswer.captured): what the
    # node serves a dispute's committee (at most MAX_LEAVES).
    capture: frozenset[int] = frozenset()


@dataclass(frozen=True)
class LeafBuffer:
    """One flat buffer of an op-trace leaf's value: its element type (the HLO name), its
    dimensions and its .npy bytes (never unpickled)."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @staticmethod
    def bound(dtype: str, shape: tuple[int, ...]) -> int:
        """The most .npy bytes a buffer of `dtype` and `shape` takes (KeyError: no such type)."""
        count = 1
        for dim in shape:
            count *= dim
        return NPY_HEADER_BYTES + from_name(dtype).numpy.itemsize * count

    def array(self) -> np.ndarray:
        """The array, as the element type and shape say; ValueError for bytes that are not
        that (another type or shape, not .npy)."""
        try:
            dtype = from_name(self.dtype).numpy
        except KeyError:
            raise ValueError(f"{self.dtype!r} is not an element type") from None
        array = read_npy(self.data, dtype, tuple(self.shape))
        if array.dtype != dtype and array.dtype.itemsize == dtype.itemsize:
            array = array.view(dtype)  # bf16 and fp8 round-trip .npy as raw records
        if array.dtype != dtype or array.shape != tuple(self.shape):
            raise ValueError(f"holds {array.dtype.name}{list(array.shape)}, not {self.dtype}{list(self.shape)}")
        return array


@dataclass(frozen=True)
class LeafRequest:
    """One instruction for the child to evaluate alone (`compiler.api.evaluate_leaf`): the
    job's module and inputs, the op-trace index (n: the result record), the dispute's graph
    leaf at that index (the child's compile must have the same), the values of the leaves it
    reads by trace index and the digests they were committed under. Answered with the digest a
    committee member votes."""

    module: bytes
    inputs: list[bytes]
    limits: Limits
    index: int
    graph_leaf: bytes
    values: dict[int, list[LeafBuffer]]
    digests: dict[int, str]


# The largest byte frame of a StepsRequest's answer: a program's templates (62 bytes a step,
# at most 2^17 steps), an element's values (32 bytes a step) or the instruction's output.
STEPS_FRAME_BYTES = 1 << 30


@dataclass(frozen=True)
class StepsRequest:
    """What a party to a dispute under the step referee holds of instruction `index`
    (node/chain/step_play.py), from the reference evaluator's run of the job: with no
    `element`, the instruction's element program (record body, commitment, templates) and its
    output; with an `element`, that element's values of the program's steps; with a `step`
    too, what resolving at that step needs. The child checks that its own compile has the
    dispute's graph leaf at the index."""

    module: bytes
    inputs: list[bytes]
    limits: Limits
    index: int
    graph_leaf: bytes
    element: int | None = None
    step: int | None = None


@dataclass(frozen=True)
class ModuleCheckRequest:
    """One module for a checker process to parse, verify and estimate (`job_checks.
    check_module`): the daemon never parses a module itself."""

    module: bytes
    limits: Limits


@dataclass(frozen=True)
class ExecutionAnswer:
    """What the child computed, checked by the daemon: the statement, each output's .npy
    bytes, and timings."""

    statement: Statement
    outputs: list[bytes]
    compile_ns: int
    execute_ns: int
    cache_hit: bool
    # The values of the leaves the request named in `capture`, by op-trace index.
    captured: dict[int, list[LeafBuffer]] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphSummary:
    """What a check answers of the compiled program: its graph commitment (the root in hex
    and n, the op-trace leaves), as `compiler.api.graph_commitment` makes it, with its n + 1
    graph leaves (the result record's last): what a dispute opens a leaf with."""

    root: str
    trace_leaves: int
    leaves: tuple[bytes, ...] = ()


class ExecutionDied(JobRejected):
    """The execution process died during a job (a signal, memory exhaustion)."""


class ExecutionKilled(JobRejected):
    """The daemon killed the execution process: the job ran past its wall-time limit."""


class OpenDirectory:
    """A directory the daemon opened, handed to a child as a file descriptor when pickled for
    it (the way multiprocessing hands over a pipe): a confined child may have no right to
    reach the directory by its path."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        from multiprocessing import reduction

        return OpenDirectory._received, (reduction.DupFd(self.fd),)

    @staticmethod
    def _received(duplicate) -> OpenDirectory:
        return OpenDirectory(duplicate.detach())

    @property
    def path(self) -> str:
        """A path to the directory through its descriptor, in this process."""
        return f"/proc/self/fd/{self.fd}"


class ExecutionProcess:
    """One child process and the pipe to it; `confinement` is what the child said holds."""

    def __init__(self, compiler_config: CompilerConfig, cache_dir: Path, memory_limit: int, user: tuple[int, int] | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        cache = _open_directory(cache_dir)
        self.process = context.Process(
            target=serve, args=(child_end, compiler_config, cache, memory_limit, user), name="vxla-execution", daemon=True
        )
        try:
            self.process.start()
        finally:
            child_end.close()
            if isinstance(cache, OpenDirectory):
                os.close(cache.fd)
        # Ready before any job is sent, so starting never counts against a job's wall time.
        ready = None
        try:
            if self._connection.poll(START_TIMEOUT_S):
                ready = json.loads(self._connection.recv_bytes(1 << 16))
        except (EOFError, OSError, ValueError):
            ready = None
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            self.kill()
            said = ready.get("error") if isinstance(ready, dict) else None
            raise ExecutionDied(f"execution: the execution process did not start ({said or self._death_reason() or 'no answer'})", 500)
        self.confinement: dict = ready.get("confinement") or {}

    def execute(self, request: ExecutionRequest) -> ExecutionAnswer:
        """Runs one job; ExecutionKilled past the wall limit, ExecutionDied if the child dies,
        JobRejected as the child refused the job."""
        header = self._ask(request)
        try:
            statement = Statement.from_json_bytes(self._connection.recv_bytes(1 << 30))
            outputs = [self._connection.recv_bytes(request.limits.max_job_memory_bytes + 4096) for _ in range(int(header["outputs"]))]
            timings = (int(header["compile_ns"]), int(header["execute_ns"]), bool(header["cache_hit"]))
            captured = self._captured(request, header.get("captured", []))
        except (EOFError, OSError, ValueError, KeyError, TypeError) as error:
            raise self._lost(error) from None
        _check_outputs(statement, outputs)
        return ExecutionAnswer(statement, outputs, *timings, captured)

    def _captured(self, request: ExecutionRequest, described: list) -> dict[int, list[LeafBuffer]]:
        """The captured leaves the header describes, their bytes read after the outputs: each
        a readable .npy buffer of the type and shape described; exactly the leaves asked for."""
        captured: dict[int, list[LeafBuffer]] = {}
        for index, buffers in described:
            if not isinstance(index, int) or index not in request.capture or index in captured:
                raise ValueError(f"captured leaf {index!r} was not asked for")
            leaf = []
            for dtype, shape in buffers:
                shape = tuple(int(d) for d in shape)
                bound = min(LeafBuffer.bound(str(dtype), shape), request.limits.max_job_memory_bytes + NPY_HEADER_BYTES)
                buffer = LeafBuffer(str(dtype), shape, self._connection.recv_bytes(bound))
                buffer.array()  # ValueError: unreadable
                leaf.append(buffer)
            captured[index] = leaf
        if set(captured) != set(request.capture):
            raise ValueError("the captured leaves are not the ones asked for")
        return captured

    def evaluate(self, request: LeafRequest) -> str:
        """The digest (hex) of instruction `request.index` evaluated alone from the served
        values; JobRejected as the child refused (a value that is not the committed one,
        another graph leaf at the index), the errors of `execute` otherwise."""
        header = self._ask(request)
        try:
            digest = header["digest"]
            if not (isinstance(digest, str) and len(digest) == 64):
                raise ValueError("not a digest")
            bytes.fromhex(digest)
            return digest
        except (ValueError, KeyError) as error:
            raise self._lost(error) from None

    def steps(self, request: StepsRequest) -> tuple[dict, list[bytes]]:
        """The child's answer to a StepsRequest: its header and the byte frames after it
        (`StepsAnswer` reads them); JobRejected as it refused."""
        header = self._ask(request)
        try:
            frames = [self._connection.recv_bytes(STEPS_FRAME_BYTES) for _ in range(int(header["frames"]))]
        except (EOFError, OSError, ValueError, KeyError, TypeError) as error:
            raise self._lost(error) from None
        return header, frames

    def check(self, request: ExecutionRequest) -> GraphSummary:
        """Compiles the job and checks its plan's memory without running it (`run` false);
        returns the program's graph commitment. The same errors as `execute`."""
        header = self._ask(replace(request, run=False))
        try:
            if header.get("checked") is not True:
                raise ValueError("no check answer")
            root, leaves = header["graph_root"], header["trace_leaves"]
            if not (isinstance(root, str) and len(root) == 64 and isinstance(leaves, int) and leaves >= 0):
                raise ValueError("not a graph commitment")
            graph_leaves = tuple(bytes.fromhex(leaf) for leaf in header["graph_leaves"])
            if len(graph_leaves) != leaves + 1:
                raise ValueError("graph leaves do not match the leaf count")
            return GraphSummary(root, leaves, graph_leaves)
        except (ValueError, KeyError) as error:
            raise self._lost(error) from None

    def check_module(self, request: ModuleCheckRequest) -> ModuleSummary:
        """The summary of a module the child parsed and verified; JobRejected as it refused
        the module, ExecutionKilled past the wall limit, ExecutionDied if it died."""
        header = self._ask(request)
        try:
            return ModuleSummary.from_json(header["summary"])
        except (KeyError, TypeError, ValueError) as error:
            raise self._lost(error) from None

    def _ask(self, request: ExecutionRequest | ModuleCheckRequest | LeafRequest | StepsRequest) -> dict:
        """Sends the request and reads the answer's header, raising what the child refused."""
        try:
            self._connection.send(request)
        except OSError:  # it died while idle
            reason = self._death_reason()
            self.kill()
            raise ExecutionDied(f"execution: the execution process had died ({reason or 'its pipe is closed'})", 500) from None
        if not self._connection.poll(request.limits.job_wall_seconds + KILL_GRACE_S):
            self.kill()
            raise ExecutionKilled(
                f"execution: over limits.job_wall_seconds ({request.limits.job_wall_seconds}): "
                "the execution process was stopped inside a step and killed"
            )
        try:
            header = json.loads(self._connection.recv_bytes(1 << 20))
            refused = None if header["ok"] else _refusal(str(header["error"]), int(header["status"]))
        except (EOFError, OSError, ValueError, KeyError, TypeError) as error:
            raise self._lost(error) from None
        if refused is not None:
            raise refused
        return header

    def _lost(self, error: Exception) -> ExecutionDied:
        """The child's answer broke off: it died, or it sent something unreadable (killed
        either way, so the next job gets a fresh process)."""
        reason = self._death_reason()
        self.kill()
        if reason is None:
            return ExecutionDied(f"execution: the execution process sent an unreadable answer ({type(error).__name__})", 500)
        return ExecutionDied(f"execution: the execution process died ({reason})", 500)

    def _death_reason(self) -> str | None:
        self.process.join(1.0)
        code = self.process.exitcode
        if code is None:
            return None
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name in ("SIGKILL", "SIGABRT") else ""
            return f"killed by {name}{hint}"
        return f"exit status {code}"

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self._connection.close()

    def close(self) -> None:
        self.kill()


def _refusal(message: str, status: int) -> JobRejected | StorageError:
    """What a child's refusal raises: StorageError when the node's storage was full (the job
    is not at fault, and waits for space), JobRejected otherwise."""
    if status == STORAGE_FULL:
        return StorageError(message, STORAGE_FULL)
    return JobRejected(message, status)


def _check_outputs(statement: Statement, outputs: list[bytes]) -> None:
    """Every output is a readable .npy array whose digest is the statement's."""
    records = statement.predicate.deterministic.outputs
    if len(records) != len(outputs):
        raise ExecutionDied(f"execution: the execution process sent {len(outputs)} outputs for {len(records)}", 500)
    for record, data in zip(records, outputs, strict=True):
        try:
            recorded_array(data, record, statement.predicate.deterministic.digest_version)
        except ValueError as error:
            raise ExecutionDied(f"execution: from the execution process: {error}", 500) from None


class ExecutionProcesses:
    """The execution processes of a worker pool: one per concurrent job, started when first
    needed and again after a death."""

    def __init__(self, compiler_config: CompilerConfig, cache_dir: Path, memory_limit: int, count: int) -> None:
        self.compiler_config = compiler_config
        self.cache_dir = cache_dir
        self.memory_limit = memory_limit
        self.count = count
        self.user = execution_user()
        hand_over(cache_dir, self.user)
        self.confinement: dict | None = None  # what the last process started said holds
        self._idle: list[ExecutionProcess] = []
        self._free = threading.Semaphore(count)
        self._lock = threading.Condition()
        self._all: list[ExecutionProcess] = []
        self._starting = 0  # processes `start` is bringing up

    def execute(self, request: ExecutionRequest) -> ExecutionAnswer:
        """Runs `request` in an idle execution process (see ExecutionProcess.execute)."""
        return self._in_a_process(lambda process: process.execute(request))

    def check(self, request: ExecutionRequest) -> GraphSummary:
        """Compiles `request` and checks its memory, without running; the program's graph
        commitment (ExecutionProcess.check)."""
        return self._in_a_process(lambda process: process.check(request))

    def evaluate(self, request: LeafRequest) -> str:
        """Evaluates one instruction alone in an idle execution process (ExecutionProcess.evaluate)."""
        return self._in_a_process(lambda process: process.evaluate(request))

    def steps(self, request: StepsRequest) -> tuple[dict, list[bytes]]:
        """An element program's part in an idle execution process (ExecutionProcess.steps)."""
        return self._in_a_process(lambda process: process.steps(request))

    def check_module(self, request: ModuleCheckRequest, wait_s: float) -> ModuleSummary:
        """Parses and checks a module in an idle process (ExecutionProcess.check_module),
        waiting at most `wait_s` seconds for one: past that, JobRejected 503 (every process is
        busy checking other modules)."""
        if not self._free.acquire(timeout=wait_s):
            raise JobRejected(f"module: the node is checking other modules (all {self.count} checker processes busy for {wait_s:.0f} s); try again", 503)
        try:
            return self._in_a_process(lambda process: process.check_module(request), acquired=True)
        finally:
            self._free.release()

    def _in_a_process(self, work: Callable[[ExecutionProcess], T], acquired: bool = False) -> T:
        with contextlib.nullcontext() if acquired else self._free:
            with self._lock:
                # A process being started is as good as idle: wait for it, do not start another.
                while not self._idle and self._starting:
                    self._lock.wait()
                process = self._idle.pop() if self._idle else None
            if process is None or not process.alive:
                process = self._new_process()
                with self._lock:
                    self._all.append(process)
            try:
                return work(process)
            finally:
                with self._lock:
                    if process.alive:
                        self._idle.append(process)
                    else:
                        self._all.remove(process)

    def start(self) -> None:
        """Starts one execution process now (in the caller's thread), so the first job finds
        it ready."""
        with self._lock:
            self._starting += 1
        try:
            process = self._new_process()
            with self._lock:
                self._all.append(process)
                self._idle.append(process)
        finally:
            with self._lock:
                self._starting -= 1
                self._lock.notify_all()

    def _new_process(self) -> ExecutionProcess:
        process = ExecutionProcess(self.compiler_config, self.cache_dir, self.memory_limit, self.user)
        if self.confinement is None:
            log.info("%s", Confinement.from_dict(process.confinement).describe())
        self.confinement = process.confinement
        return process

    def pids(self) -> list[int]:
        """The process ids of the execution processes alive now (tests, operators)."""
        with self._lock:
            return [p.process.pid for p in self._all if p.alive and p.process.pid is not None]

    def close(self) -> None:
        with self._lock:
            processes, self._all, self._idle = list(self._all), [], []
        for process in processes:
            process.close()


# --- the child ---------------------------------------------------------------------------
def _open_directory(directory: Path) -> OpenDirectory | str:
    """The compile cache as the child gets it: an open directory on Linux, else its path."""
    directory.mkdir(parents=True, exist_ok=True)
    if not sys.platform.startswith("linux"):
        return str(directory)
    return OpenDirectory(os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))



def confine_execution(cache_fd: int | None, user: tuple[int, int] | None) -> Confinement:
    """Confines an execution process (confinement.py `confine`) to its compile cache, and
    lets it start Python itself, reading the shared libraries it has loaded: the LLVM worker
    processes a large program's parts are compiled in (compiler/codegen/llvm_workers.py),
    as confined as it is. Call it after every import."""
    return confine(cache_fd, user, reads=loaded_library_directories(), executables=executable_files(sys.executable))

def serve(connection: Connection, compiler_config: CompilerConfig, cache: OpenDirectory | str, memory_limit: int, user: tuple[int, int] | None = None) -> None:
    """The child's loop: one request at a time, answered in bytes (see the module docstring).
    Its first answer says it is ready and what confines it, or why it could not start."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when its children stop
    end_with_the_daemon(lambda: os._exit(1))
    cap_address_space(memory_limit + ADDRESS_SPACE_HEADROOM)
    # Everything a job needs is loaded, and what it reads once is read, before the process
    # confines itself (and before "ready": the first job does not wait for it).
    # The compiler and LLVM, and the reference that evaluates a dispute's one instruction.
    # What a party to a step referee's case asks for (StepsRequest): element steps by the reference.
    import node.step_holding  # noqa: F401
    from compiler.api import compile_program, evaluate_leaf, graph_commitment, leaf_digest, optimize  # noqa: F401
    from node.tracing.statement import host_record
    from node.version import vxla_version

    host_record()
    vxla_version()
    try:
        confinement = confine_execution(cache.fd if isinstance(cache, OpenDirectory) else None, user)
    except OSError as error:
        connection.send_bytes(json.dumps({"ready": False, "error": f"cannot confine the execution process: {error}"}).encode())
        return
    cache_dir = cache.path if isinstance(cache, OpenDirectory) else cache
    executables: Lru[str, object] = Lru(_EXECUTABLES_KEPT)
    graphs: Lru[tuple, object] = Lru(_EXECUTABLES_KEPT)  # graph commitments by program and inputs
    optimized: Lru[str, object] = Lru(_EXECUTABLES_KEPT)  # optimized modules by hlo_hash (disputes)
    known = KnownModules()
    sides: Lru[tuple, object] = Lru(_EXECUTABLES_KEPT)  # disputed instructions' holdings (StepsRequest)
    connection.send_bytes(json.dumps({"ready": True, "confinement": confinement.to_dict()}).encode())
    while True:
        try:
            request: ExecutionRequest | ModuleCheckRequest = connection.recv()
        except (EOFError, OSError):
            return  # the daemon is gone
        if isinstance(request, ModuleCheckRequest):
            connection.send_bytes(json.dumps(_check_module(request, known)).encode())
            continue
        if isinstance(request, LeafRequest):
            connection.send_bytes(json.dumps(_evaluate_leaf(request, compiler_config, graphs, optimized, known)).encode())
            continue
        if isinstance(request, StepsRequest):
            header, frames = _steps(request, compiler_config, graphs, optimized, known, sides)
            connection.send_bytes(json.dumps(header).encode())
            for frame in frames:
                connection.send_bytes(frame)
            continue
        try:
            program, arrays = prepare_job(request.module, request.inputs, request.limits, known)
            answer = _run(request, program, arrays, compiler_config, cache_dir, executables)
            if answer is None:  # checked, not run: with the graph commitment
                graph = _graph_summary(program, arrays, compiler_config, graphs)
                header = {
                    "ok": True, "checked": True, "graph_root": graph.root, "trace_leaves": graph.trace_leaves,
                    "graph_leaves": [leaf.hex() for leaf in graph.leaves],
                }  # fmt: skip
                connection.send_bytes(json.dumps(header).encode())
                continue
        except JobRejected as error:
            connection.send_bytes(json.dumps({"ok": False, "error": str(error), "status": error.status}).encode())
            continue
        except MemoryError:
            message = f"execution: over limits.max_job_memory_bytes ({request.limits.max_job_memory_bytes}): an allocation failed"
            connection.send_bytes(json.dumps({"ok": False, "error": message, "status": 413}).encode())
            continue
        except Exception as error:  # an internal error fails the job, not the process
            connection.send_bytes(json.dumps(_internal_error(error)).encode())
            continue
        statement, outputs, header, captured = answer
        connection.send_bytes(json.dumps({"ok": True, "outputs": len(outputs), **header}).encode())
        connection.send_bytes(statement)
        for data in outputs:
            connection.send_bytes(data)
        for data in captured:
            connection.send_bytes(data)


def _internal_error(error: Exception) -> dict:
    """The answer to a job that raised `error`: the node's storage full (a compile cache
    write, say) is said as such, STORAGE_FULL, as the job may run once there is space; any
    other error fails the job."""
    if _out_of_space(error):
        return {"ok": False, "error": f"execution: the node's storage is full ({error})", "status": STORAGE_FULL}
    return {"ok": False, "error": f"internal error: {type(error).__name__}: {error}", "status": 500}


def _out_of_space(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, is a full disk or quota."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def _check_module(request: ModuleCheckRequest, known: KnownModules) -> dict:
    """The answer to a module check: the module's summary, or why it is refused."""
    try:
        return {"ok": True, "summary": ModuleSummary.of(*checked_module(request.module, request.limits, known)).to_json()}
    except JobRejected as error:
        return {"ok": False, "error": str(error), "status": error.status}
    except MemoryError:
        return {"ok": False, "error": "module: checking it needs more memory than a checker process may use", "status": 413}
    except RecursionError:
        return {"ok": False, "error": "module: nested too deeply to check", "status": 400}


def _run(request: ExecutionRequest, program, arrays, compiler_config: CompilerConfig, cache_dir: str, executables) -> tuple[bytes, list[bytes], dict, list[bytes]] | None:
    from compiler.api import (
        DeadlineExceeded,
        ExecutionError,
        TargetNotRunnable,
        compile_program,
        where_it_stopped,
    )
    from node.tensors import npy_bytes
    from node.tracing.statement import build_statement

    limits = request.limits
    begin = time.perf_counter_ns()
    deadline = time.monotonic() + limits.job_wall_seconds
    executable = executables.get(program.hlo_hash)
    cache_hit = executable is not None
    if executable is None:
        executable = compile_program(program, compiler_config, threads=request.threads, cache_dir=cache_dir)
        executables.put(program.hlo_hash, executable)
    needed = executable.plan.arena_bytes + sum(a.nbytes for a in arrays) + _output_bytes(executable)
    if needed > limits.max_job_memory_bytes:
        raise JobRejected(f"execution: needs {needed} bytes of memory, over limits.max_job_memory_bytes ({limits.max_job_memory_bytes})", 413)
    if not request.run:
        return None
    capture = frozenset(request.capture)
    if len(capture) > MAX_LEAVES or not all(isinstance(i, int) and 0 <= i < len(executable.plan.trace_points) for i in capture):
        raise JobRejected(f"execution: capture names leaves outside the trace's {len(executable.plan.trace_points)} (or over {MAX_LEAVES})")
    compiled = time.perf_counter_ns()
    try:
        run = executable.run_traced(
            *arrays, threads=request.threads, max_while_iterations=limits.max_while_iterations, fault=request.fault, deadline=deadline,
            capture=capture or None,
        )  # fmt: skip
    except TargetNotRunnable as error:
        raise JobRejected(f"execution: {error}") from None
    except DeadlineExceeded as error:
        where = where_it_stopped(error, program, compiler_config)
        raise JobRejected(f"execution: over limits.job_wall_seconds ({limits.job_wall_seconds}): {error}{where}") from None
    except ExecutionError as error:
        # Name the setting when the loop limit stopped the job, so the submitter knows this
        # node refuses it (not that the module is wrong), and the user's code it stopped in.
        hint = f" (limits.max_while_iterations = {limits.max_while_iterations})" if "past the limit" in str(error) else ""
        raise JobRejected(f"execution: {error}{where_it_stopped(error, program, compiler_config)}{hint}") from None
    executed = time.perf_counter_ns()
    statement = build_statement(
        program, executable, arrays, run,
        job_id=request.job_id, chain_id=request.chain_id, contract=request.contract, key_id=request.key_id,
        threads=request.threads, timings_ns={"compile": compiled - begin, "execute": executed - compiled},
        op_level=True, input_records=request.input_records,
    )  # fmt: skip
    header = {"compile_ns": compiled - begin, "execute_ns": executed - compiled, "cache_hit": cache_hit}
    # The captured leaves: each buffer's type and shape (as the plan holds it) in the header,
    # its .npy bytes after the outputs.
    described, captured = [], []
    for index in sorted(run.captured):
        buffers = [executable.plan.buffers[b] for b in executable.plan.trace_points[index].buffers]
        described.append([index, [[b.dtype, list(b.dims)] for b in buffers]])
        captured += [npy_bytes(value) for value in run.captured[index]]
    if described:
        header["captured"] = described
    return statement.to_json_bytes(), [npy_bytes(a) for a in run.outputs], header, captured


def _evaluate_leaf(request: LeafRequest, compiler_config: CompilerConfig, graphs: Lru, optimized: Lru[str, object], known: KnownModules) -> dict:
    """The answer to a leaf evaluation: the digest to vote, or why the child refuses."""
    from compiler.api import VxlaError, evaluate_leaf, leaf_digest, optimize, result_leaf_digest

    limits = request.limits
    try:
        program, arrays = prepare_job(request.module, request.inputs, limits, known)
        graph = _graph_summary(program, arrays, compiler_config, graphs)
        index = request.index
        if not 0 <= index <= graph.trace_leaves:
            raise JobRejected(f"leaf: index {index} is outside 0..{graph.trace_leaves} (this node's compile has {graph.trace_leaves} op-trace leaves)", 404)
        if graph.leaves[index] != request.graph_leaf:
            raise JobRejected(f"leaf: this node's compile ({compiler_config.pipeline} pipeline) has another graph leaf at {index} than the dispute's", 409)
        if len(request.values) > MAX_LEAVES:
            raise JobRejected(f"leaf: over {MAX_LEAVES} operand values", 413)
        module = optimized.get(program.hlo_hash)
        if module is None:
            module = optimize(program, compiler_config)
            optimized.put(program.hlo_hash, module)
        values = {}
        for j, buffers in request.values.items():
            try:
                values[j] = [buffer.array() for buffer in buffers]
            except ValueError as error:
                raise JobRejected(f"leaf: the value of trace leaf {j}: {error}") from None
        try:
            out = evaluate_leaf(module, index, values, arrays, trace_digests=request.digests, max_while_iterations=limits.max_while_iterations)
        except (ValueError, VxlaError) as error:
            raise JobRejected(f"leaf {index}: {error}") from None
        digest = result_leaf_digest(out) if index == graph.trace_leaves else leaf_digest(out)
        return {"ok": True, "digest": digest}
    except JobRejected as error:
        return {"ok": False, "error": str(error), "status": error.status}
    except MemoryError:
        return {"ok": False, "error": f"leaf: over limits.max_job_memory_bytes ({limits.max_job_memory_bytes}): an allocation failed", "status": 413}
    except Exception as error:  # an internal error refuses the evaluation, not the process
        return _internal_error(error)


def _steps(request: StepsRequest, compiler_config: CompilerConfig, graphs, optimized, known: KnownModules, sides: Lru) -> tuple[dict, list[bytes]]:
    """The answer to a StepsRequest: (header, frames), or a refusal with no frames."""
    try:
        side = _disputed_instruction(request, compiler_config, graphs, optimized, known, sides)
        if request.element is None:
            return _instruction_answer(side)
        if side.program is None or not 0 <= request.element < side.output_array.size:
            raise JobRejected(f"steps: element {request.element} is not one of the output's {side.output_array.size}", 400)
        if request.step is None:
            values = side.element(request.element)
            return {"ok": True, "frames": 1}, [b"".join(values.leaves)]
        if not 0 <= request.step < len(side.trace(request.element).steps):
            raise JobRejected(f"steps: the element has no step {request.step}", 400)
        opening = side.opening(request.element, request.step)
        return {
            "ok": True, "frames": 0, "arguments": list(opening.arguments),
            "load": None if opening.load is None else opening.load.to_dict(),
            "entry": None if opening.entry is None else [opening.entry[0], list(opening.entry[1])],
            "parts": [p.hex() for p in opening.parts],
        }, []  # fmt: skip
    except JobRejected as error:
        return {"ok": False, "error": str(error), "status": error.status}, []
    except MemoryError:
        return {"ok": False, "error": f"steps: over limits.max_job_memory_bytes ({request.limits.max_job_memory_bytes}): an allocation failed", "status": 413}, []
    except Exception as error:  # an internal error refuses the request, not the process
        return _internal_error(error), []


def _instruction_answer(side) -> tuple[dict, list[bytes]]:  # noqa: ANN001 - an InstructionSide
    from attest.digests import element_type_name
    from node.tensors import npy_bytes

    program = side.program
    header: dict = {"ok": True, "record_body": side.record_body.hex(), "program": None, "frames": 0}
    if program is None:
        return header, []
    frames = [npy_bytes(side.output_array)]
    if program is not None:
        header["program"] = {
            "root": program.root.hex(), "result": program.result, "elements": program.elements,
            "header_hash": program.header_hash.hex(),
        }  # fmt: skip
        header["steps"] = program.steps
        frames.append(b"".join(program.templates))
    header["frames"] = len(frames)
    header["output"] = {"dtype": element_type_name(side.output_array.dtype), "shape": list(side.output_array.shape)}
    return header, frames


def _disputed_instruction(request: StepsRequest, compiler_config: CompilerConfig, graphs, optimized, known: KnownModules, sides: Lru):
    """The holding of the disputed instruction from the reference's run of the job (kept for
    the next requests of the same dispute)."""
    from compiler.api import optimize
    from node.step_holding import reference_side

    program, arrays = prepare_job(request.module, request.inputs, request.limits, known)
    graph = _graph_summary(program, arrays, compiler_config, graphs)
    index = request.index
    if not 0 <= index < graph.trace_leaves:
        raise JobRejected(f"steps: index {index} is not an instruction's (this node's compile has {graph.trace_leaves} op-trace leaves)", 404)
    if graph.leaves[index] != request.graph_leaf:
        raise JobRejected(f"steps: this node's compile ({compiler_config.pipeline} pipeline) has another graph leaf at {index} than the dispute's", 409)
    key = (program.hlo_hash, tuple(request.inputs), index)
    side = sides.get(key)
    if side is not None:
        return side
    module = optimized.get(program.hlo_hash)
    if module is None:
        module = optimize(program, compiler_config)
        optimized.put(program.hlo_hash, module)
    record = _graph_commitment(program, arrays, compiler_config, graphs).records[index]
    try:
        side = reference_side(module, record, arrays, index, request.limits.max_while_iterations)
    except ValueError as error:
        raise JobRejected(f"steps: {error}", 422) from None
    sides.put(key, side)
    return side


def _graph_summary(program, arrays, compiler_config: CompilerConfig, graphs: Lru) -> GraphSummary:  # noqa: ANN001
    """The graph commitment of `program` on the job's inputs `arrays` under the node's
    pipeline (kept per program and inputs, as the executables are)."""
    commitment = _graph_commitment(program, arrays, compiler_config, graphs)
    return GraphSummary(commitment.root, commitment.trace_leaves, tuple(record.leaf() for record in commitment.records))


def _graph_commitment(program, arrays, compiler_config: CompilerConfig, graphs: Lru):  # noqa: ANN001, ANN202
    """compiler.api.graph_commitment of the job: it depends on the inputs, whose digests the
    element programs of the instructions reading them hold."""
    import hashlib

    from compiler.api import graph_commitment

    key = (program.hlo_hash, tuple((a.dtype.str, a.shape, hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()) for a in arrays))
    commitment = graphs.get(key)
    if commitment is None:
        commitment = graph_commitment(program, compiler_config, arrays)
        graphs.put(key, commitment)
    return commitment


def _output_bytes(executable) -> int:
    return sum(executable.plan.buffers[b].nbytes for b in executable.plan.outputs)

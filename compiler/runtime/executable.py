"""Executable: compiled object code plus its plan, run on numpy arrays.

Each run gets its own arena (one allocation holding every intermediate buffer) and control
block, validates the inputs, sets their addresses in the pointer table, calls the object's
native entry (compiler/codegen/native_plan.py: it runs every step, copy and loop of the
plan) on every worker thread, and returns the outputs as fresh arrays.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from attest.digests import TENSOR_DIGEST_VERSION, TensorDigester, known_digest_version, tuple_digest
from compiler.codegen import native_plan as N
from compiler.codegen import plan as P
from compiler.config import CompilerConfig
from compiler.errors import ArgumentError, BackendError, ExecutionError
from compiler.hlo.shape import ArrayShape
from compiler.program import Program, bind_argument, bind_arguments
from compiler.runtime.devices import driver_of
from compiler.runtime.grid_runner import Device, DeviceMemory, GridRun, allocate_memory
from compiler.runtime.loader import LoadedObject, load_object
from compiler.runtime.stops import deadline_error, while_limit_error
from compiler.runtime.threads import RunThreads, machine_threads
from core.dtypes import from_name

# i32 vxla_run(ptr table, ptr control, i64 thread, i64 threads, i64 first, i64 last)
ENTRY_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


@dataclass(frozen=True)
class Fault:
    """A deliberate error for tests and demos: bit `bit` of the named instruction's output
    (its first buffer, little-endian bit order) is flipped right after it is computed, so
    everything downstream computes on the wrong value, as a faulty node would."""

    instruction: str
    bit: int = 0


@dataclass
class TracedRun:
    """A run's outputs and, in schedule order, every traced instruction's (name in the
    optimized graph, opcode, output digest). `captured`: for the op-trace indices a run was
    asked to capture, the values its digest was taken of (the instruction's flat output
    buffers, each a fresh array of its element type and dimensions), what a party serves a
    dispute's committee (docs/disputes.md). `digest_version`: the tensor digest version the
    digests are of (attest/digests.py)."""

    outputs: list[np.ndarray]
    instructions: list[tuple[str, str, str]]
    captured: dict[int, list[np.ndarray]] = field(default_factory=dict)
    digest_version: str = TENSOR_DIGEST_VERSION


@dataclass
class RunState:
    """One execution's memory: the arena, the input arrays, the output arrays that kernels
    write directly (`outputs`, by buffer id), the pointer table and the control block."""

    executable: Executable
    inputs: list[np.ndarray]
    arena: np.ndarray
    table: ctypes.Array
    control: ctypes.Array
    pool: RunThreads
    outputs: dict[int, np.ndarray]

    def view(self, buffer_id: int) -> np.ndarray:
        """The bytes of a buffer as a uint8 array (read-only for constants)."""
        buffer = self.executable.plan.buffers[buffer_id]
        if buffer_id in self.outputs:
            return self.outputs[buffer_id].reshape(-1).view(np.uint8)
        if buffer.kind == "arena":
            return self.arena[buffer.offset : buffer.offset + buffer.nbytes]
        if buffer.kind == "input":
            return self.inputs[buffer.input_index].reshape(-1).view(np.uint8)
        address = self.executable.constant_address(buffer.symbol)
        return np.ctypeslib.as_array((ctypes.c_uint8 * buffer.nbytes).from_address(address)) if buffer.nbytes else np.zeros(0, np.uint8)

    def array(self, buffer_id: int) -> np.ndarray:
        """A buffer as a fresh array of its element type and dimensions."""
        if buffer_id in self.outputs:
            return self.outputs.pop(buffer_id)
        buffer = self.executable.plan.buffers[buffer_id]
        dtype = from_name(buffer.dtype).numpy
        return self.view(buffer_id).copy().view(dtype).reshape(buffer.dims)


@dataclass
class Executable:
    """A compiled module: `run(*arrays)` returns the outputs; `hashes` identifies exactly what
    runs (hlo_hash of the program, graph_hash of the optimized graph, binary_hash of the
    object bytes and the plan that drives them: compiler/codegen/plan.py `binary_hash`)."""

    program: Program
    config: CompilerConfig
    plan: P.Plan
    object_bytes: bytes
    hashes: dict[str, str]
    threads: int = 0  # a run's default worker threads; 0: the machine's cores (machine_threads)
    _loaded: LoadedObject | None = field(default=None, repr=False)
    _entry: Callable | None = field(default=None, repr=False)
    _constants: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Memory free for the next run: arenas, each with its pointer table (arena and constant
    # entries filled once; input and output entries are set by every run) and control block.
    _free_arenas: list[tuple[np.ndarray, ctypes.Array, ctypes.Array]] = field(default_factory=list, repr=False)
    _pools: dict[int, RunThreads] = field(default_factory=dict, repr=False)
    _digesters: dict[tuple[int, str], TensorDigester] = field(default_factory=dict, repr=False)
    # GPU targets: the device the plan's grid runs on (opened on first use, or given: the
    # host emulation of tests, compiler/runtime/emulated_grid.py), and the device memory of
    # its runs, one run at a time (a recorded CUDA graph names that memory).
    device: Device | None = field(default=None, repr=False)
    emulated: bool = False  # the grid runs on the host: a test build, never signed
    _grid_memory: DeviceMemory | None = field(default=None, repr=False)
    _grid_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.threads = self.threads or machine_threads()
        # The plan's input buffers are the entry parameters, in order (tuple parameters are
        # refused by the lowering), so the program's module need not be parsed to bind them.
        self._parameter_shapes: list[ArrayShape] = [ArrayShape.of(from_name(self.plan.buffers[b].dtype), self.plan.buffers[b].dims) for b in self.plan.inputs]
        # (numpy type, dims) of the parameters an array of that type and shape binds to without
        # a check; s4 and u4 (whose int8/uint8 holders may hold values out of range) and tuples
        # never do.
        self._parameter_types = [
            (np.dtype(shape.dtype.numpy), shape.dims) if isinstance(shape, ArrayShape) and not shape.dtype.is_sub_byte else (None, None)
            for shape in self._parameter_shapes
        ]
        self._input_slots = [(b.id, b.input_index) for b in self.plan.buffers if b.kind == "input"]
        self._direct_output_specs = self._direct_output_specs_of_plan()
        self._step_count = len(self.plan.steps)
        # A plan whose every step runs on one worker anyway is run by the calling thread
        # alone: handing work to pool threads costs more than such a plan's kernels.
        self._runs_alone = all(N.runs_alone(step) for step in self.plan.steps)
        # Worker threads end with the executable.
        weakref.finalize(self, _close_pools, self._pools)

    def plan_kernels(self) -> list[str]:
        """Names of the kernels the plan runs, in plan order (those in loops and branches
        included)."""
        return [step.kernel for step in N.sites(self.plan.steps) if isinstance(step, P.KernelStep)]

    def load(self) -> LoadedObject | Device:
        """The object mapped into this process (a GPU target: the device with its cubin
        loaded), loaded on first use, and only after the host is found to have every feature
        the target may use (TargetNotRunnable otherwise, before a byte of it runs). An
        executable for any target can be built and hashed anywhere."""
        if not self.config.runs_on_host:
            return self.grid_device()
        with self._lock:
            if self._loaded is None:
                self._loaded = load_object(self.object_bytes, self.config)
            return self._loaded

    def grid_device(self) -> Device:
        """A GPU target's device: GPU 0 with the cubin loaded (TargetNotRunnable naming the
        missing driver, GPU or compute capability)."""
        with self._lock:
            if self.device is None:
                self.device = driver_of(self.config).open_device(self.config, self.object_bytes)
            return self.device

    def entry(self) -> Callable:
        """The object's native entry (compiler/codegen/native_plan.py), as a ctypes function."""
        if self._entry is None:
            self._entry = ENTRY_SIGNATURE(self._cpu_object().address(N.ENTRY_SYMBOL))
        return self._entry

    def _cpu_object(self) -> LoadedObject:
        loaded = self.load()
        assert isinstance(loaded, LoadedObject), "a CPU target's object"
        return loaded

    def constant_address(self, symbol: str) -> int:
        if symbol not in self._constants:
            address = self._cpu_object().engine.get_global_value_address(symbol)
            if not address:
                raise BackendError(f"object has no constant {symbol!r}")
            self._constants[symbol] = address
        return self._constants[symbol]

    def run(
        self,
        *arrays: np.ndarray,
        threads: int | None = None,
        max_while_iterations: int | None = None,
        deadline: float | None = None,
        schedule_seed: int = 0,
    ) -> list[np.ndarray]:
        """Runs the module on `arrays` (one per entry parameter); returns the flattened outputs.
        `deadline` (a `time.monotonic()` value): raise DeadlineExceeded once past it.
        `schedule_seed`: the seed of the workers' delays in a build with the (test-only)
        schedule perturbation; it changes the order workers meet, never a result."""
        self.load()
        parameters = self._parameter_shapes
        if len(arrays) != len(parameters):
            raise ArgumentError(f"module takes {len(parameters)} inputs, got {len(arrays)}")
        inputs = list(arrays)
        for index, (expected, array) in enumerate(zip(self._parameter_types, arrays, strict=True)):
            # The common case without a call: an ndarray of exactly the parameter's type.
            if not (type(array) is np.ndarray and array.dtype == expected[0] and array.shape == expected[1] and array.flags.c_contiguous):
                inputs[index] = bind_argument(parameters[index], array, index)
        if not self.config.runs_on_host:
            return self._run_grid(inputs, max_while_iterations, deadline, schedule_seed).outputs
        with self._arena() as memory:
            state = self._state(inputs, self._pool(threads or self.threads), memory, max_while_iterations, deadline, schedule_seed)
            self._execute(state, 0, self._step_count)
            return [state.array(b) for b in self.plan.outputs]

    def run_traced(
        self,
        *arrays: np.ndarray,
        threads: int | None = None,
        max_while_iterations: int | None = None,
        fault: Fault | None = None,
        deadline: float | None = None,
        schedule_seed: int = 0,
        capture: frozenset[int] | None = None,
        digest_version: str = TENSOR_DIGEST_VERSION,
    ) -> TracedRun:
        """Runs the module like `run` and takes the digest of every traced instruction's
        output (plan.trace_points) as soon as it is computed, before a later step can reuse
        its memory (the entry runs the stretch of steps up to each trace point, then the
        digests are taken); `fault` corrupts one instruction's output on purpose; `deadline`
        and `schedule_seed` as in `run`. `capture`: op-trace indices (positions in
        `instructions`, 0..n-1) whose output buffers are also copied out at their trace
        point, after a fault (what the digest is of), into TracedRun.captured.
        `digest_version`: the tensor digest version of the digests (a verifier of an older
        trace asks for the trace's; attest's DigestVersionError for one it does not know)."""
        known_digest_version(digest_version)
        points: dict[int, list[P.TracePoint]] = {}
        for point in self.plan.trace_points:
            points.setdefault(point.after_step, []).append(point)
        if fault is not None:
            self._check_fault(fault)
        if capture is not None:
            capture = self._check_capture(capture)
        self.load()
        inputs = bind_arguments(self._parameter_shapes, arrays)
        if not self.config.runs_on_host:
            return self._run_grid(inputs, max_while_iterations, deadline, schedule_seed, points, fault, capture, digest_version)
        records: list[tuple[str, str, str]] = []
        captured: dict[int, list[np.ndarray]] = {}
        with self._arena() as memory:
            state = self._state(inputs, self._pool(threads or self.threads), memory, max_while_iterations, deadline, schedule_seed)
            self._record(state, points.get(0, []), fault, records, digest_version)
            if capture:
                self._capture(state.view, points.get(0, []), 0, capture, captured)
            completed = 0
            for stop in sorted({*(after for after in points if after > 0), self._step_count}):
                self._execute(state, completed, stop)
                completed = stop
                first = len(records)
                self._record(state, points.get(completed, []), fault, records, digest_version)
                if capture:
                    self._capture(state.view, points.get(completed, []), first, capture, captured)
            return TracedRun([state.array(b) for b in self.plan.outputs], records, captured, digest_version)

    def step_times(self, *arrays: np.ndarray, threads: int | None = None) -> list[tuple[str, float]]:
        """Where a run's time goes: runs the module like `run`, one top-level step at a time,
        and returns (the step's instruction, or "copy", and its seconds) in plan order. Each
        step costs a call from Python more than in `run`. The outputs are those of `run`."""
        if not self.config.runs_on_host:
            raise ArgumentError(f"step_times times the steps of code the host runs; {self.config.cpu}'s steps are timed by tools/gpu_check.py")
        self.load()
        inputs = bind_arguments(self._parameter_shapes, arrays)
        with self._arena() as memory:
            state = self._state(inputs, self._pool(threads or self.threads), memory, None, None)
            times = []
            for index, step in enumerate(self.plan.steps):
                started = time.perf_counter()
                self._execute(state, index, index + 1)
                times.append((getattr(step, "instruction", step.kind), time.perf_counter() - started))
            return times

    def _run_grid(
        self,
        inputs: list[np.ndarray],
        max_while_iterations: int | None,
        deadline: float | None,
        schedule_seed: int,
        points: dict[int, list[P.TracePoint]] | None = None,
        fault: Fault | None = None,
        capture: frozenset[int] | None = None,
        digest_version: str = TENSOR_DIGEST_VERSION,
    ) -> TracedRun:
        """A GPU target's run (compiler/runtime/grid_runner.py): the inputs uploaded, the
        steps driven from here, the outputs (and with `points`, each traced instruction's
        digest, taken as soon as it is computed, and the values of those in `capture`) read
        back."""
        if schedule_seed:
            raise ArgumentError("schedule_seed perturbs a build compiled with schedule_perturbation only")
        device = self.grid_device()
        with self._grid_lock:
            if self._grid_memory is None:
                self._grid_memory = allocate_memory(device, self.plan)
            memory = self._grid_memory
            for buffer_id, input_index in self._input_slots:
                device.upload(memory.inputs[buffer_id], np.ascontiguousarray(inputs[input_index]).reshape(-1).view(np.uint8))
            run = GridRun(device, self.plan, memory, max_while_iterations, deadline)
            records: list[tuple[str, str, str]] = []
            captured: dict[int, list[np.ndarray]] = {}
            completed = 0
            stops = sorted({*(after for after in points if after > 0), self._step_count}) if points is not None else [self._step_count]
            if points is not None:
                self._record_grid(run, points.get(0, []), fault, records, digest_version)
                if capture:
                    self._capture(run.read, points.get(0, []), 0, capture, captured)
            for stop in stops:
                run.execute(completed, stop)
                completed = stop
                if points is not None:
                    first = len(records)
                    self._record_grid(run, points.get(completed, []), fault, records, digest_version)
                    if capture:
                        self._capture(run.read, points.get(completed, []), first, capture, captured)
            outputs = []
            for buffer_id in self.plan.outputs:
                buffer = self.plan.buffers[buffer_id]
                outputs.append(run.read(buffer_id).view(from_name(buffer.dtype).numpy).reshape(buffer.dims))
            return TracedRun(outputs, records, captured, digest_version)

    def _record_grid(self, run: GridRun, points: list[P.TracePoint], fault: Fault | None, records: list[tuple[str, str, str]], version: str) -> None:
        for point in points:
            if fault is not None and point.name == fault.instruction:
                data = run.read(point.buffers[0])
                data[fault.bit // 8] ^= 1 << (fault.bit % 8)
                run.write(point.buffers[0], data)
            digests = [self._digester(b, version).of_memory(run.read(b)) for b in point.buffers]
            records.append((point.name, point.opcode, digests[0] if len(digests) == 1 else tuple_digest(digests)))

    def _execute(self, state: RunState, first: int, last: int) -> None:
        """Runs the top-level steps [first, last) on every worker; raises where the entry
        stopped early."""
        if first >= last:
            return
        entry, table, control = self.entry(), ctypes.addressof(state.table), ctypes.addressof(state.control)
        if self._runs_alone or state.pool.threads == 1:
            status = entry(table, control, 0, 1, first, last)
        else:
            threads = state.pool.threads
            status = state.pool.run(lambda thread: entry(table, control, thread, threads, first, last))[0]
        if status != N.Status.DONE:
            raise self._stopped(state, N.Status(status))

    def _stopped(self, state: RunState, status: N.Status) -> ExecutionError:
        sites = N.sites(self.plan.steps)
        words = state.control
        site = sites[int(words[N.Control.STOPPED_SITE])]
        loop_site = int(words[N.Control.STOPPED_LOOP])
        loop = sites[loop_site] if loop_site >= 0 else None
        if status == N.Status.WHILE_LIMIT:
            return while_limit_error(site, int(words[N.Control.WHILE_LIMIT]))  # type: ignore[arg-type]
        return deadline_error(site, loop, int(words[N.Control.STOPPED_ITERATION]))  # type: ignore[arg-type]

    def _check_fault(self, fault: Fault) -> None:
        point = next((p for p in self.plan.trace_points if p.name == fault.instruction), None)
        if point is None:
            names = ", ".join(p.name for p in self.plan.trace_points)
            raise ValueError(f"no traced instruction {fault.instruction!r}; traced: {names}")
        buffer = self.plan.buffers[point.buffers[0]]
        if buffer.kind != "arena":
            raise ValueError(f"{fault.instruction} returns {buffer.kind} memory unchanged; choose an instruction that computes a value")
        if not 0 <= fault.bit < 8 * buffer.nbytes:
            raise ValueError(f"bit {fault.bit} is outside {fault.instruction}'s {8 * buffer.nbytes} bits")

    def _check_capture(self, capture: frozenset[int]) -> frozenset[int]:
        count = len(self.plan.trace_points)
        wrong = sorted(i for i in capture if not (isinstance(i, int | np.integer) and 0 <= i < count))
        if wrong:
            raise ValueError(f"capture names op-trace indices {wrong[:5]} outside 0..{count - 1} (the trace has {count} leaves)")
        return frozenset(int(i) for i in capture)

    def _capture(
        self, read: Callable[[int], np.ndarray], points: list[P.TracePoint], first: int, capture: frozenset[int], captured: dict[int, list[np.ndarray]]
    ) -> None:
        """Copies out the buffers of the trace points numbered first, first + 1, ... that
        `capture` names (`read`: a buffer's bytes as uint8, a view or a fresh copy)."""
        for index, point in enumerate(points, start=first):
            if index in capture:
                captured[index] = [self._typed_copy(b, read(b)) for b in point.buffers]

    def _typed_copy(self, buffer_id: int, data: np.ndarray) -> np.ndarray:
        buffer = self.plan.buffers[buffer_id]
        return data.copy().view(from_name(buffer.dtype).numpy).reshape(buffer.dims)

    def _record(self, state: RunState, points: list[P.TracePoint], fault: Fault | None, records: list[tuple[str, str, str]], version: str) -> None:
        for point in points:
            if fault is not None and point.name == fault.instruction:
                data = state.view(point.buffers[0])
                data[fault.bit // 8] ^= 1 << (fault.bit % 8)
            digests = [self._digester(b, version).of_memory(state.view(b)) for b in point.buffers]
            records.append((point.name, point.opcode, digests[0] if len(digests) == 1 else tuple_digest(digests)))

    def _digester(self, buffer_id: int, version: str) -> TensorDigester:
        digester = self._digesters.get((buffer_id, version))
        if digester is None:
            buffer = self.plan.buffers[buffer_id]
            digester = self._digesters[buffer_id, version] = TensorDigester.of(np.dtype(from_name(buffer.dtype).numpy), buffer.dims, version)
        return digester

    def _pool(self, threads: int) -> RunThreads:
        pool = self._pools.get(threads)
        if pool is not None:
            return pool
        with self._lock:
            if threads not in self._pools:
                self._pools[threads] = RunThreads(threads)
            return self._pools[threads]

    @contextmanager
    def _arena(self) -> Iterator[tuple[np.ndarray, ctypes.Array, ctypes.Array]]:
        """The memory of one run (an arena, its pointer table and a control block), handed
        back for the next run when the run ends."""
        memory = self._acquire_arena()
        try:
            yield memory
        finally:
            with self._lock:
                self._free_arenas.append(memory)

    def _acquire_arena(self) -> tuple[np.ndarray, ctypes.Array, ctypes.Array]:
        """An arena for one run, its pointer table and a control block: reused across runs
        (concurrent runs get their own)."""
        with self._lock:
            if self._free_arenas:
                return self._free_arenas.pop()
        # Every buffer is written before it is read, so the arena needs no clearing.
        storage = np.empty(self.plan.arena_bytes + P.BUFFER_ALIGNMENT, dtype=np.uint8)
        skip = (-storage.ctypes.data) % P.BUFFER_ALIGNMENT
        arena = storage[skip : skip + self.plan.arena_bytes]
        table = (ctypes.c_void_p * max(len(self.plan.buffers), 1))()
        base = arena.ctypes.data
        for buffer in self.plan.buffers:
            if buffer.kind == "arena":
                table[buffer.id] = base + buffer.offset
            elif buffer.kind == "constant":
                table[buffer.id] = self.constant_address(buffer.symbol)
        control = (ctypes.c_int64 * N.CONTROL_WORDS)()
        clock, yield_processor = _libc_functions()
        control[N.Control.CLOCK_FUNCTION] = clock
        control[N.Control.YIELD_FUNCTION] = yield_processor
        return arena, table, control

    def _direct_outputs(self) -> dict[int, np.ndarray]:
        """Fresh arrays for output buffers that kernels can write in place: arena buffers that
        appear once among the outputs."""
        return {buffer_id: np.empty(dims, dtype=dtype) for buffer_id, dims, dtype in self._direct_output_specs}

    def _direct_output_specs_of_plan(self) -> list[tuple[int, tuple[int, ...], np.dtype]]:
        buffers = self.plan.buffers
        return [(b, buffers[b].dims, np.dtype(from_name(buffers[b].dtype).numpy)) for b in P.direct_outputs(self.plan)]

    def _state(
        self,
        inputs: list[np.ndarray],
        pool: RunThreads,
        memory: tuple[np.ndarray, ctypes.Array, ctypes.Array],
        max_while_iterations: int | None,
        deadline: float | None,
        schedule_seed: int = 0,
    ) -> RunState:
        if schedule_seed and not self.config.schedule_perturbation:
            raise ArgumentError("schedule_seed perturbs a build compiled with schedule_perturbation only")
        arena, table, control = memory
        outputs = self._direct_outputs()
        if self.config.schedule_perturbation:
            # Memory a run reads before it writes would hold the last run's (right) values:
            # a perturbed run starts from a seeded poison instead, so such a read shows.
            poison = (schedule_seed * 0x9E3779B1 >> 8) & 0xFF
            arena.fill(poison)
            for array in outputs.values():
                array.reshape(-1).view(np.uint8).fill(poison)
        for buffer_id, input_index in self._input_slots:
            table[buffer_id] = _address(inputs[input_index])
        for buffer_id, array in outputs.items():
            table[buffer_id] = _address(array)  # the same buffers every run: no reset needed
        control[N.Control.ARRIVED] = 0
        control[N.Control.DECISION] = 0
        control[N.Control.SOLO_STATUS] = N.Status.DONE
        control[N.Control.DEADLINE_NS] = N.NO_DEADLINE if deadline is None else min(int(deadline * 1e9), N.NO_DEADLINE)
        control[N.Control.WHILE_LIMIT] = N.NO_LIMIT if max_while_iterations is None else max(0, max_while_iterations)
        control[N.Control.PERTURB_SEED] = ctypes.c_int64(schedule_seed & (2**64 - 1)).value
        return RunState(self, inputs, arena, table, control, pool, outputs)


@lru_cache(maxsize=1)
def _libc_functions() -> tuple[int, int]:
    """The addresses of libc's clock_gettime and sched_yield, which the native entry calls
    through its control block (the object itself references no symbol)."""
    libc = ctypes.CDLL(None)
    return ctypes.cast(libc.clock_gettime, ctypes.c_void_p).value or 0, ctypes.cast(libc.sched_yield, ctypes.c_void_p).value or 0


def _address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's first element. Through the buffer protocol for
    writable arrays (half the cost of `array.ctypes.data`, which matters on small models)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty
        return array.ctypes.data


def _close_pools(pools: dict[int, RunThreads]) -> None:
    for pool in pools.values():
        pool.close()

"""Executable: compiled object code plus its plan, run on numpy arrays.

Each run gets its own arena (one allocation holding every intermediate buffer), validates the
inputs, follows the plan's steps (kernels on the worker pool, buffer copies, while loops,
conditionals) and returns the outputs as fresh arrays.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from attest.digests import TensorDigester, tuple_digest
from compiler.codegen import plan as P
from compiler.config import CompilerConfig
from compiler.errors import ArgumentError, ExecutionError
from compiler.hlo.shape import ArrayShape
from compiler.numerics.dtypes import from_name
from compiler.program import Program, bind_argument, bind_arguments
from compiler.runtime.loader import LoadedObject, load_object
from compiler.runtime.threads import KernelThreadPool

KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

StepObserver = Callable[[str, "RunState"], None]


class DeadlineExceeded(ExecutionError):
    """A run passed its deadline. Runs are stopped between steps (a kernel, a kernel
    sequence, a copy) and at every while-loop iteration, never inside a kernel, so one
    step's work bounds how late the stop can come."""


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
    optimized graph, opcode, output digest)."""

    outputs: list[np.ndarray]
    instructions: list[tuple[str, str, str]]


@dataclass
class RunState:
    """One execution's memory: the arena, the input arrays, the output arrays that kernels
    write directly (`outputs`, by buffer id) and the pointer table."""

    executable: Executable
    inputs: list[np.ndarray]
    arena: np.ndarray
    table: ctypes.Array
    pool: KernelThreadPool
    outputs: dict[int, np.ndarray]
    deadline: float | None = None  # time.monotonic() value past which the run stops

    def check_deadline(self, where: str) -> None:
        """DeadlineExceeded when the deadline has passed; `where` says what was about to run."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineExceeded(f"run stopped past its deadline, before {where}")

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
    object bytes)."""

    program: Program
    config: CompilerConfig
    plan: P.Plan
    object_bytes: bytes
    hashes: dict[str, str]
    threads: int = 1
    _loaded: LoadedObject | None = field(default=None, repr=False)
    _kernels: dict[str, Callable] = field(default_factory=dict, repr=False)
    _constants: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Arenas free for the next run, each with its pointer table (arena and constant entries
    # filled once; input and output entries are set by every run).
    _free_arenas: list[tuple[np.ndarray, ctypes.Array]] = field(default_factory=list, repr=False)
    _pools: dict[int, KernelThreadPool] = field(default_factory=dict, repr=False)
    _digesters: dict[int, TensorDigester] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._parameter_shapes = self.program.parameter_shapes
        # (numpy type, dims) of the parameters an array of that type and shape binds to without
        # a check; s4 and u4 (whose int8/uint8 holders may hold values out of range) and tuples
        # never do.
        self._parameter_types = [
            (np.dtype(shape.dtype.numpy), shape.dims) if isinstance(shape, ArrayShape) and not shape.dtype.is_sub_byte else (None, None)
            for shape in self._parameter_shapes
        ]
        self._input_slots = [(b.id, b.input_index) for b in self.plan.buffers if b.kind == "input"]
        self._direct_output_specs = self._direct_output_specs_of_plan()
        # Worker threads end with the executable.
        weakref.finalize(self, _close_pools, self._pools)

    def plan_kernels(self) -> list[str]:
        """Names of the kernels the plan runs, in plan order (sub-steps included; the kernels
        of a sequence rather than the sequence)."""
        names: list[str] = []

        def visit(steps) -> None:
            for step in steps:
                if isinstance(step, P.KernelStep) and step.parts:
                    visit(step.parts)
                elif isinstance(step, P.KernelStep):
                    names.append(step.kernel)
                elif isinstance(step, P.WhileStep):
                    visit(step.condition)
                    visit(step.body)
                elif isinstance(step, P.ConditionalStep):
                    for branch in step.branches:
                        visit(branch)

        visit(self.plan.steps)
        return names

    def load(self) -> LoadedObject:
        """The object mapped into this process, loaded on first use, and only after the host
        is found to have every feature the target may use (TargetNotRunnable otherwise, before
        a byte of it runs). An executable for any target can be built and hashed anywhere."""
        with self._lock:
            if self._loaded is None:
                self._loaded = load_object(self.object_bytes, self.config)
            return self._loaded

    def kernel(self, name: str) -> Callable:
        if name not in self._kernels:
            self._kernels[name] = KERNEL_SIGNATURE(self.load().address(name))
        return self._kernels[name]

    def constant_address(self, symbol: str) -> int:
        if symbol not in self._constants:
            address = self.load().engine.get_global_value_address(symbol)
            if not address:
                raise RuntimeError(f"object has no constant {symbol!r}")
            self._constants[symbol] = address
        return self._constants[symbol]

    def run(
        self,
        *arrays: np.ndarray,
        threads: int | None = None,
        max_while_iterations: int | None = None,
        observer: StepObserver | None = None,
        deadline: float | None = None,
    ) -> list[np.ndarray]:
        """Runs the module on `arrays` (one per entry parameter); returns the flattened outputs.
        `deadline` (a `time.monotonic()` value): raise DeadlineExceeded once past it."""
        self.load()
        parameters = self._parameter_shapes
        if len(arrays) != len(parameters):
            raise ArgumentError(f"module takes {len(parameters)} inputs, got {len(arrays)}")
        inputs = list(arrays)
        for index, (expected, array) in enumerate(zip(self._parameter_types, arrays, strict=True)):
            # The common case without a call: an ndarray of exactly the parameter's type.
            if not (type(array) is np.ndarray and array.dtype == expected[0] and array.shape == expected[1] and array.flags.c_contiguous):
                inputs[index] = bind_argument(parameters[index], array, index)
        arena, table = self._acquire_arena()
        try:
            state = self._state(inputs, self._pool(threads or self.threads), arena, table, deadline)
            self._run_steps(state, self.plan.steps, max_while_iterations, observer)
            return [state.array(b) for b in self.plan.outputs]
        finally:
            with self._lock:
                self._free_arenas.append((arena, table))

    def run_traced(
        self,
        *arrays: np.ndarray,
        threads: int | None = None,
        max_while_iterations: int | None = None,
        fault: Fault | None = None,
        deadline: float | None = None,
    ) -> TracedRun:
        """Runs the module like `run` and takes the digest of every traced instruction's
        output (plan.trace_points) as soon as it is computed, before a later step can reuse
        its memory; `fault` corrupts one instruction's output on purpose; `deadline` as in
        `run`."""
        points: dict[int, list[P.TracePoint]] = {}
        for point in self.plan.trace_points:
            points.setdefault(point.after_step, []).append(point)
        if fault is not None:
            self._check_fault(fault)
        self.load()
        inputs = bind_arguments(self._parameter_shapes, arrays)
        records: list[tuple[str, str, str]] = []
        arena, table = self._acquire_arena()
        try:
            state = self._state(inputs, self._pool(threads or self.threads), arena, table, deadline)
            self._record(state, points.get(0, []), fault, records)
            completed = 0
            for step in self.plan.steps:
                for part in step.parts if isinstance(step, P.KernelStep) and step.parts else (step,):
                    self._run_steps(state, (part,), max_while_iterations, None)
                    completed += 1
                    self._record(state, points.get(completed, []), fault, records)
            return TracedRun([state.array(b) for b in self.plan.outputs], records)
        finally:
            with self._lock:
                self._free_arenas.append((arena, table))

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

    def _record(self, state: RunState, points: list[P.TracePoint], fault: Fault | None, records: list[tuple[str, str, str]]) -> None:
        for point in points:
            if fault is not None and point.name == fault.instruction:
                data = state.view(point.buffers[0])
                data[fault.bit // 8] ^= 1 << (fault.bit % 8)
            digests = [self._digester(b).of_memory(state.view(b)) for b in point.buffers]
            records.append((point.name, point.opcode, digests[0] if len(digests) == 1 else tuple_digest(digests)))

    def _digester(self, buffer_id: int) -> TensorDigester:
        digester = self._digesters.get(buffer_id)
        if digester is None:
            buffer = self.plan.buffers[buffer_id]
            digester = self._digesters[buffer_id] = TensorDigester.of(np.dtype(from_name(buffer.dtype).numpy), buffer.dims)
        return digester

    def _pool(self, threads: int) -> KernelThreadPool:
        pool = self._pools.get(threads)
        if pool is not None:
            return pool
        with self._lock:
            if threads not in self._pools:
                self._pools[threads] = KernelThreadPool(threads)
            return self._pools[threads]

    def _acquire_arena(self) -> tuple[np.ndarray, ctypes.Array]:
        """An arena for one run and its pointer table: reused across runs (concurrent runs
        get their own)."""
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
        return arena, table

    def _direct_outputs(self) -> dict[int, np.ndarray]:
        """Fresh arrays for output buffers that kernels can write in place: arena buffers that
        appear once among the outputs."""
        return {buffer_id: np.empty(dims, dtype=dtype) for buffer_id, dims, dtype in self._direct_output_specs}

    def _direct_output_specs_of_plan(self) -> list[tuple[int, tuple[int, ...], np.dtype]]:
        counts: dict[int, int] = {}
        for buffer_id in self.plan.outputs:
            counts[buffer_id] = counts.get(buffer_id, 0) + 1
        specs = []
        for buffer_id, count in counts.items():
            buffer = self.plan.buffers[buffer_id]
            if count == 1 and buffer.kind == "arena":
                specs.append((buffer_id, buffer.dims, np.dtype(from_name(buffer.dtype).numpy)))
        return specs

    def _state(
        self, inputs: list[np.ndarray], pool: KernelThreadPool, arena: np.ndarray, table: ctypes.Array, deadline: float | None
    ) -> RunState:
        outputs = self._direct_outputs()
        for buffer_id, input_index in self._input_slots:
            table[buffer_id] = _address(inputs[input_index])
        for buffer_id, array in outputs.items():
            table[buffer_id] = _address(array)  # the same buffers every run: no reset needed
        return RunState(self, inputs, arena, table, pool, outputs, deadline)

    def _run_steps(self, state: RunState, steps: Sequence[P.Step], limit: int | None, observer: StepObserver | None) -> None:
        for step in steps:
            if state.deadline is not None:
                state.check_deadline("a buffer copy" if isinstance(step, P.CopyStep) else f"%{step.instruction}")
            if isinstance(step, P.KernelStep):
                if step.parts and observer is not None:
                    self._run_steps(state, step.parts, limit, observer)
                    continue
                function = self.kernel(step.kernel)
                state.pool.run(function, step.extent, step.grain, ctypes.addressof(state.table))
                if observer is not None:
                    observer(step.instruction, state)
            elif isinstance(step, P.CopyStep):
                staged = [state.view(source).copy() for source in step.sources]
                for target, data in zip(step.targets, staged, strict=True):
                    state.view(target)[:] = data
            elif isinstance(step, P.WhileStep):
                self._run_while(state, step, limit, observer)
            elif isinstance(step, P.ConditionalStep):
                self._run_steps(state, step.branches[self._branch(state, step)], limit, observer)

    def _run_while(self, state: RunState, step: P.WhileStep, limit: int | None, observer: StepObserver | None) -> None:
        iterations = 0
        try:
            while True:
                self._run_steps(state, step.condition, limit, observer)
                if not state.view(step.predicate)[0]:
                    return
                if limit is not None and iterations >= limit:
                    raise ExecutionError(f"while loop %{step.instruction} ran past the limit of {limit} iterations")
                self._run_steps(state, step.body, limit, observer)
                self._run_steps(state, (P.CopyStep(step.body_results, step.state),), limit, observer)
                iterations += 1
        except DeadlineExceeded as error:
            raise DeadlineExceeded(f"{error}, in iteration {iterations} of while loop %{step.instruction}") from None

    @staticmethod
    def _branch(state: RunState, step: P.ConditionalStep) -> int:
        raw = state.view(step.selector)
        if step.selector_is_pred:
            return 0 if raw[0] else 1
        index = int(raw.view(np.int32)[0])
        return index if 0 <= index < len(step.branches) else len(step.branches) - 1


def _address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's first element. Through the buffer protocol for
    writable arrays (half the cost of `array.ctypes.data`, which matters on small models)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty
        return array.ctypes.data


def _close_pools(pools: dict[int, KernelThreadPool]) -> None:
    for pool in pools.values():
        pool.close()

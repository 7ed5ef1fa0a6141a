"""Runs a GPU target's plan: the host drives the steps, the device runs the kernels.

The device holds the buffers of the same buffer assignment the CPU targets use: one arena
allocation (every arena buffer at its offset, plus the staging space compiler/codegen/grid.py
reserved), a copy of each input, one allocation per direct output (plan.direct_outputs,
which the assignment keeps out of the arena as the CPU runtime does), and the module's
constants where the code object placed them. Each kernel step gets a slot table in device
memory (the addresses of its buffers, in its slot order), written once, so a launch passes
only the table's address and the step's extent.

A kernel step is one launch of ceil(extent / GRID_BLOCK_SIZE) blocks; a copy is device-to-device,
staged through the arena when a target overlaps another pair's source (all reads before any
write), as the CPU entry does; a while loop reads its predicate, and a conditional its
selector, back to the host. The deadline is checked before every step and loop iteration,
and the while-loop limit applies, with the CPU runtime's messages (stops.py).

It imports neither LLVM nor the compiler's configuration: a GPU machine with numpy and
cuda-bindings runs a bundle compiled elsewhere (tools/gpu_check.py). `Device` is the seam: compiler/runtime/cuda_device.py drives an NVIDIA GPU through the
driver, compiler/runtime/emulated_grid.py runs the same grid on the host's CPU to test the
grid logic without a GPU.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from compiler.codegen import plan as P
from compiler.runtime.stops import deadline_error, while_limit_error


class Device(Protocol):
    """Device memory (addresses are integers in the device's space) and kernel launches, in
    the order they are issued."""

    def allocate(self, nbytes: int) -> int: ...

    def free(self, address: int) -> None: ...

    def upload(self, address: int, data: np.ndarray) -> None:
        """Copies the bytes of a C-contiguous array to `address`."""
        ...

    def download(self, address: int, nbytes: int) -> np.ndarray:
        """A fresh uint8 array of the `nbytes` at `address` (after all work issued before)."""
        ...

    def copy(self, target: int, source: int, nbytes: int) -> None: ...

    def launch(self, symbol: str, blocks: int, block_size: int, slots: int, extent: int) -> None:
        """Launches the grid entry `symbol` with (slots, extent)."""
        ...

    def constant_address(self, symbol: str) -> int: ...

    def synchronize(self) -> None: ...

    def replay(self, key: object, issue: Callable[[], None]) -> None:
        """Issues what `issue()` issues; a device may record it the first time under `key`
        and replay the recording after (a CUDA graph)."""
        ...


@dataclass
class DeviceMemory:
    """One run's device buffers: reused by the next run of the same executable."""

    arena: int
    inputs: dict[int, int]  # buffer id -> address
    outputs: dict[int, int]  # direct outputs: buffer id -> address
    table: dict[int, int]  # every buffer id -> address
    slots: dict[int, int] = field(default_factory=dict)  # id(kernel step) -> its slot table

    def release(self, device: Device) -> None:
        for address in (self.arena, *self.inputs.values(), *self.outputs.values(), *set(self.slots.values())):
            if address:
                device.free(address)


def allocate_memory(device: Device, plan: P.Plan) -> DeviceMemory:
    """Device buffers for `plan`, and every kernel step's slot table (one allocation)."""
    arena = device.allocate(plan.arena_bytes) if plan.arena_bytes else 0
    direct = set(P.direct_outputs(plan))
    inputs = {b.id: device.allocate(b.nbytes) for b in plan.buffers if b.kind == "input"}
    outputs = {b: device.allocate(plan.buffers[b].nbytes) for b in sorted(direct)}
    table: dict[int, int] = {}
    for buffer in plan.buffers:
        if buffer.id in outputs:
            table[buffer.id] = outputs[buffer.id]
        elif buffer.kind == "arena":
            table[buffer.id] = arena + buffer.offset
        elif buffer.kind == "input":
            table[buffer.id] = inputs[buffer.id]
        else:
            table[buffer.id] = device.constant_address(buffer.symbol)
    memory = DeviceMemory(arena, inputs, outputs, table)
    kernel_steps = [step for step in P.walk(plan.steps) if isinstance(step, P.KernelStep)]
    words = [address for step in kernel_steps for address in (table[b] for b in step.buffers)]
    if words:
        block = device.allocate(8 * len(words))
        device.upload(block, np.frombuffer(struct.pack(f"<{len(words)}Q", *words), dtype=np.uint8))
        offset = 0
        for step in kernel_steps:
            memory.slots[id(step)] = block + offset
            offset += 8 * len(step.buffers)
    return memory


@dataclass
class GridRun:
    """One execution of a plan on a device."""

    device: Device
    plan: P.Plan
    memory: DeviceMemory
    max_while_iterations: int | None = None
    deadline: float | None = None

    def execute(self, first: int, last: int) -> None:
        """Runs the top-level steps [first, last) and waits for the device. A stretch of
        kernels and copies alone, in a run without a deadline, is the same launches every
        run: the device may replay it as one recording."""
        steps = self.plan.steps[first:last]
        if steps and self.deadline is None and all(isinstance(s, P.KernelStep | P.CopyStep) for s in steps):
            self.device.replay((id(self.memory), first, last), lambda: self._steps(steps, None, 0))
        else:
            self._steps(steps, None, 0)
        self.device.synchronize()

    def read(self, buffer_id: int) -> np.ndarray:
        """The bytes of a buffer (uint8), after every step issued so far."""
        return self.device.download(self.memory.table[buffer_id], self.plan.buffers[buffer_id].nbytes)

    def write(self, buffer_id: int, data: np.ndarray) -> None:
        self.device.upload(self.memory.table[buffer_id], data)

    def _steps(self, steps, loop: P.WhileStep | None, iteration: int) -> None:
        for step in steps:
            self._check(step, loop, iteration)
            if isinstance(step, P.KernelStep):
                if step.extent > 0:
                    self.device.launch(P.grid_symbol(step.kernel), P.grid_blocks(step.extent), P.GRID_BLOCK_SIZE, self.memory.slots[id(step)], step.extent)
            elif isinstance(step, P.CopyStep):
                self._copies(step.sources, step.targets)
            elif isinstance(step, P.WhileStep):
                self._while(step)
            else:
                self._conditional(step, loop, iteration)

    def _check(self, site: P.Step, loop: P.WhileStep | None, iteration: int) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise deadline_error(site, loop, iteration)

    def _copies(self, sources: tuple[int, ...], targets: tuple[int, ...]) -> None:
        plan, table, direct = self.plan, self.memory.table, set(self.memory.outputs)
        pairs = [(s, t) for s, t in zip(sources, targets, strict=True) if not P.same_memory(plan, s, t, direct)]
        if not pairs:
            return
        if P.needs_staging(plan, P.CopyStep(tuple(sources), tuple(targets))):
            place = self.memory.arena + P.staging_offset(plan)
            staged = []
            for source, _ in pairs:
                nbytes = plan.buffers[source].nbytes
                self.device.copy(place, table[source], nbytes)
                staged.append(place)
                place += P.aligned_size(nbytes)
            for (source, target), where in zip(pairs, staged, strict=True):
                self.device.copy(table[target], where, plan.buffers[source].nbytes)
        else:
            for source, target in pairs:
                self.device.copy(table[target], table[source], plan.buffers[source].nbytes)

    def _while(self, step: P.WhileStep) -> None:
        iteration = 0
        while True:
            self._steps(step.condition, step, iteration)
            self._check(step, step, iteration)
            if not self.read(step.predicate)[0]:
                return
            if self.max_while_iterations is not None and iteration >= max(0, self.max_while_iterations):
                raise while_limit_error(step, max(0, self.max_while_iterations))
            self._steps(step.body, step, iteration)
            self._check(step, step, iteration)
            self._copies(step.body_results, step.state)
            iteration += 1

    def _conditional(self, step: P.ConditionalStep, loop: P.WhileStep | None, iteration: int) -> None:
        raw = self.read(step.selector)
        if step.selector_is_pred:
            index = 0 if raw[0] else 1
        else:
            selector = int(raw[:4].view(np.int32)[0])
            index = selector if 0 <= selector < len(step.branches) else len(step.branches) - 1
        self._steps(step.branches[index], loop, iteration)

"""Runs under contention, shared by the contention test (tests/codegen/test_contention.py) and
the campaign (tools/contention_campaign.py): processes that keep every core busy, the thread
counts to run with (more threads than cores among them), and the comparison of every
multi-threaded run, of the pinned build and of a schedule-perturbed one, with the pinned
build's 1-thread run.

A quiet machine hides races: a worker that reads another's share too early mostly finds it
done. Busy cores preempt workers mid-step, and the perturbed build
(CompilerConfig.schedule_perturbation) splits every kernel as finely as it can, delays its
workers at random (seeded) and poisons the memory a run starts with, so a read of anything
not yet written shows even where the machine is quiet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from compiler.config import CompilerConfig
from compiler.driver import compile_program
from compiler.hlo.ir import Module
from compiler.program import Program
from compiler.runtime.executable import Executable

# A process that spins until it is killed.
_SPIN = "while True: pass"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def busy_cores(count: int | None = None) -> Iterator[int]:
    """`count` processes (default: one per core) spinning for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(count or cores())]
    try:
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def thread_counts(core_count: int | None = None) -> tuple[int, ...]:
    """Thread counts for contended runs: 2, 3, 4 and 8, and one more than the cores and twice
    the cores (both more threads than cores)."""
    core_count = core_count or cores()
    return tuple(sorted({2, 3, 4, 8, core_count + 1, 2 * core_count}))


def module_inputs(module: Module, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs for a module whose parameters are f32 (normal values), s32 (0 to 63: in
    range as indices of the contention modules) or pred (true)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for parameter in module.entry.parameters:
        shape = parameter.array_shape
        if shape.dtype.name == "f32":
            arrays.append(rng.standard_normal(shape.dims).astype(np.float32))
        elif shape.dtype.name == "s32":
            arrays.append(rng.integers(0, 64, shape.dims).astype(np.int32))
        elif shape.dtype.name == "pred":
            arrays.append(np.ones(shape.dims, dtype=np.bool_))
        else:
            raise ValueError(f"parameter {parameter.name}: no inputs for {shape.dtype.name}")
    return arrays


@dataclass(frozen=True)
class Difference:
    """A contended run whose output bits differ from the 1-thread run."""

    module: str
    target: str
    build: str  # "pinned" or "perturbed"
    threads: int
    seed: int

    def __str__(self) -> str:
        seed = f", schedule seed {self.seed}" if self.build == "perturbed" else ""
        return f"{self.module} on {self.target}, {self.build} build, {self.threads} threads{seed}"


@dataclass
class Tally:
    """Contended runs so far, by thread count, and those that differed."""

    runs: dict[int, int] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.runs.values())


def _bits(outputs: Sequence[np.ndarray]) -> list[bytes]:
    return [np.ascontiguousarray(o).tobytes() for o in outputs]


@dataclass
class Contender:
    """One module on one target: the pinned build, whose 1-thread run gives the bits every
    other run must give, and the perturbed build."""

    name: str
    target: str
    pinned: Executable
    perturbed: Executable
    inputs: list[np.ndarray]
    expected: list[bytes]

    @staticmethod
    def of(name: str, program: Program, config: CompilerConfig, inputs: list[np.ndarray]) -> Contender:
        pinned = compile_program(program, config, cache_dir=False)
        perturbed = compile_program(program, config.with_schedule_perturbation(), cache_dir=False)
        return Contender(name, config.cpu, pinned, perturbed, inputs, _bits(pinned.run(*inputs, threads=1)))

    def round(self, threads: Sequence[int], seed: int, tally: Tally) -> None:
        """One run of each build with each thread count (the perturbed ones with seeds
        `seed`, `seed` + 1, ...), each compared with the 1-thread run."""
        for offset, count in enumerate(threads):
            for build, executable, run_seed in (("pinned", self.pinned, 0), ("perturbed", self.perturbed, seed + offset)):
                got = _bits(executable.run(*self.inputs, threads=count, schedule_seed=run_seed))
                tally.runs[count] = tally.runs.get(count, 0) + 1
                if got != self.expected:
                    tally.differences.append(Difference(self.name, self.target, build, count, run_seed))


def contend(contenders: Sequence[Contender], threads: Sequence[int], seconds: float, tally: Tally, first_seed: int = 1) -> int:
    """Rounds over every contender until `seconds` have passed (at least one round each);
    returns the next unused seed."""
    stop = time.monotonic() + seconds
    seed = first_seed
    while True:
        for contender in contenders:
            contender.round(threads, seed, tally)
            seed += len(threads)
        if time.monotonic() >= stop:
            return seed

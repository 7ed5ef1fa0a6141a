"""Kernel sequences: consecutive small kernel steps become one call.

A kernel step whose extent is below twice its grain always runs as one range on one thread,
whatever the thread count (threads.partition), so a run of such steps can be called as one
generated function that calls each kernel body over its whole extent, in plan order. The
kernels, their order and their ranges are unchanged, so the bits are too; what goes is the
cost of one call from Python per step, which dominates small models.

This runs after buffer assignment, which needs each step's own liveness.
"""

from __future__ import annotations

import dataclasses

from compiler.codegen import plan as P
from compiler.codegen.kernel import KernelModule


def _single_range(step: P.Step) -> bool:
    return isinstance(step, P.KernelStep) and not step.parts and step.extent < 2 * max(step.grain, 1)


def merge_small_steps(steps: list[P.Step], kernels: KernelModule) -> list[P.Step]:
    """`steps` with every run of two or more consecutive single-range kernel steps replaced
    by one step calling a sequence kernel (recursively inside loops and conditionals)."""
    merged: list[P.Step] = []
    run: list[P.KernelStep] = []

    def flush() -> None:
        if len(run) >= 2:
            name = kernels.sequence([(s.kernel, s.extent) for s in run])
            merged.append(P.KernelStep(name, 1, 1, run[0].instruction, kernels.kernel_buffers[name], tuple(run)))
        else:
            merged.extend(run)
        run.clear()

    for step in steps:
        if _single_range(step):
            run.append(step)  # type: ignore[arg-type]
            continue
        flush()
        if isinstance(step, P.WhileStep):
            step = dataclasses.replace(step, condition=tuple(merge_small_steps(list(step.condition), kernels)), body=tuple(merge_small_steps(list(step.body), kernels)))
        elif isinstance(step, P.ConditionalStep):
            step = dataclasses.replace(step, branches=tuple(tuple(merge_small_steps(list(b), kernels)) for b in step.branches))
        merged.append(step)
    flush()
    return merged

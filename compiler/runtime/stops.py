"""Why a run stopped early, in the words every runtime uses (the CPU's native entry reports
where through its control block, the GPU's host loop knows it directly)."""

from __future__ import annotations

from compiler.codegen import plan as P
from compiler.errors import ExecutionError


class DeadlineExceeded(ExecutionError):
    """A run passed its deadline. Runs are stopped between steps (a kernel, a copy) and at
    every while-loop iteration, never inside a kernel, so one step's work bounds how late the
    stop can come."""


def while_limit_error(loop: P.WhileStep, limit: int) -> ExecutionError:
    return ExecutionError(f"while loop %{loop.instruction} ran past the limit of {limit} iterations", loop.instruction)


def deadline_error(site: P.Step, loop: P.WhileStep | None, iteration: int) -> DeadlineExceeded:
    """The stop before step `site`, inside iteration `iteration` of `loop` if any."""
    where = "a buffer copy" if isinstance(site, P.CopyStep) else f"%{site.instruction}"  # type: ignore[union-attr]
    message = f"run stopped past its deadline, before {where}"
    if loop is not None:
        message += f", in iteration {iteration} of while loop %{loop.instruction}"
    return DeadlineExceeded(message, loop.instruction if loop is not None else getattr(site, "instruction", None))

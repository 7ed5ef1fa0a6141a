"""The checks a job must pass before it is stored or run: module size, parse and work
estimate, each input's size and decoding, and the inputs against the module's parameters.

The HTTP API, the worker pool and the execution process call the same functions, so a job
the API accepted is never refused later for a different reason.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from compiler.hlo import HloError
from compiler.hlo.cost import estimate_flops
from compiler.program import Program, load_program
from node.daemon.config import Limits
from node.errors import JobRejected
from node.tracing.statement import TraceInputError, checked_inputs


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
    """Everything checked before a job is stored or run: the module (`check_module`), then
    its inputs (`check_inputs`). Raises JobRejected naming the problem."""
    program = check_module(module_bytes, limits)
    return program, check_inputs(program, input_bytes, limits)


def check_inputs(program: Program, input_bytes: Sequence[bytes], limits: Limits) -> list[np.ndarray]:
    """Each input's size and decoding, and the inputs' count, dtypes and shapes against the
    checked `program`'s parameters; the arrays, or JobRejected naming the problem."""
    arrays = []
    for index, data in enumerate(input_bytes):
        if len(data) > limits.max_tensor_bytes:
            raise JobRejected(
                f"input {index}: {len(data)} bytes, over limits.max_tensor_bytes ({limits.max_tensor_bytes})",
                413,
            )
        arrays.append(decode_npy(data, f"input {index}"))
    try:
        return checked_inputs(program, arrays)
    except TraceInputError as error:
        raise JobRejected(str(error)) from None

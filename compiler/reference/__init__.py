"""The reference evaluator: numpy, slow, the executable form of the numerics contract.

    compiler.reference.evaluate(module, arrays) -> list of output arrays

`module` is a Module or HLO text; the outputs are the flattened result tuple.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.hlo import load_module
from compiler.hlo.ir import Module
from compiler.hlo.opcodes import family_modules
from compiler.numerics.floats import check_fp_environment
from compiler.reference import (
    batch_norm,
    control_flow,
    data_movement,
    dot_conv,
    elementwise,
    fft,
    linalg,
    random_bits,
    reductions,
    sort_gather_scatter,
)
from compiler.reference.evaluator import (
    Handler,
    InstructionObserver,
    Value,
    evaluate_module,
    flatten_value,
)

# The module of each op family (compiler/hlo/opcodes.py FAMILIES), whose HANDLERS evaluate
# that family's opcodes.
FAMILY_MODULES = family_modules(batch_norm, control_flow, data_movement, dot_conv, elementwise, fft, linalg, random_bits, reductions, sort_gather_scatter)
HANDLERS: dict[str, Handler] = {opcode: handler for module in FAMILY_MODULES.values() for opcode, handler in module.HANDLERS.items()}


def evaluate(
    module: Module | str,
    arrays: Sequence[np.ndarray],
    *,
    max_while_iterations: int | None = None,
    observer: InstructionObserver | None = None,
) -> list[np.ndarray]:
    """Runs `module` on `arrays` (one per entry parameter, in parameter order) under the
    numerics contract and returns the flattened outputs."""
    if isinstance(module, str):
        module = load_module(module)
    check_fp_environment()
    value = evaluate_module(module, arrays, HANDLERS, max_while_iterations, observer)
    return flatten_value(value)


__all__ = ["FAMILY_MODULES", "HANDLERS", "Value", "evaluate"]

"""The reference evaluator: numpy, slow, the executable form of the numerics contract.

    compiler.reference.evaluate(module, arrays) -> list of output arrays

`module` is a Module or HLO text; the outputs are the flattened result tuple.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.hlo.ir import Module
from compiler.numerics.floats import check_fp_environment
from compiler.reference import (
    control_flow,
    data_movement,
    dot_conv,
    elementwise,
    reductions,
    sort_gather_scatter,
)
from compiler.reference.evaluator import (
    EvaluationError,
    Handler,
    InstructionObserver,
    Value,
    evaluate_module,
    flatten_value,
)

HANDLERS: dict[str, Handler] = {
    **elementwise.HANDLERS,
    **data_movement.HANDLERS,
    **reductions.HANDLERS,
    **dot_conv.HANDLERS,
    **control_flow.HANDLERS,
    **sort_gather_scatter.HANDLERS,
}


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
        from compiler.hlo import load_module

        module = load_module(module)
    check_fp_environment()
    value = evaluate_module(module, arrays, HANDLERS, max_while_iterations, observer)
    return flatten_value(value)


__all__ = ["EvaluationError", "HANDLERS", "Value", "evaluate"]

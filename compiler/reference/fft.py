"""fft: the pinned passes of compiler/numerics/fft.py on whole arrays."""

from __future__ import annotations

import numpy as np

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.numerics import fft as transforms
from compiler.reference.evaluator import Evaluator, Value


def _fft(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    fft_type = str(instruction.attrs["fft_type"])
    lengths = tuple(instruction.attrs["fft_length"])  # type: ignore[arg-type]
    operand, result = instruction.operands[0].array_shape.dtype, instruction.array_shape.dtype
    if instruction.array_shape.element_count == 0:
        return np.zeros(instruction.array_shape.dims, result.numpy)
    dtype = result if fft_type == "RFFT" else operand
    return transforms.fft(np.asarray(operands[0]), fft_type, lengths, dtype).astype(result.numpy, copy=False)


HANDLERS = family_table("fft", globals())

"""The shape rule of fft."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import ShapeRule, array, attribute, check, int_list, operand_count
from compiler.numerics.fft import FFT_TYPES
from core.dtypes import C64, C128, F32, F64


def _fft(instruction: Instruction) -> Shape:
    """XLA's shape rule; an fft whose operand or lengths hold zero elements has an empty
    result (nothing to transform), the one case where FFT and IFFT lengths may differ from
    the dimensions."""
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    fft_type = attribute(instruction, "fft_type")
    check(fft_type in FFT_TYPES, f"fft_type must be one of {', '.join(FFT_TYPES)}, not {fft_type}")
    lengths = int_list(instruction, "fft_length")
    check(1 <= len(lengths) <= 3 and len(lengths) <= operand.rank, f"fft_length {list(lengths)} must name 1 to 3 of the operand's {operand.rank} dimensions")
    check(all(n >= 0 for n in lengths), f"fft_length {list(lengths)} has a negative length")
    leading, last = operand.dims[: operand.rank - len(lengths)], operand.dims[operand.rank - len(lengths) :]
    if fft_type == "RFFT":
        check(operand.dtype in (F32, F64), f"RFFT takes f32 or f64, not {operand.dtype.name}")
        check(last == lengths, f"RFFT of dimensions {list(last)} with fft_length {list(lengths)}")
        kept = lengths[-1] // 2 + 1 if lengths[-1] else 0
        return ArrayShape.of(C64 if operand.dtype is F32 else C128, (*leading, *lengths[:-1], kept))
    check(operand.dtype.is_complex, f"{fft_type} takes a complex operand, not {operand.dtype.name}")
    if fft_type == "IRFFT":
        check(last[:-1] == lengths[:-1], f"IRFFT of dimensions {list(last)} with fft_length {list(lengths)}")
        check(last[-1] == lengths[-1] // 2 + 1 or (last[-1] == 0 and lengths[-1] == 0),
              f"IRFFT of dimensions {list(last)} with fft_length {list(lengths)} (the last one holds n/2+1 values)")  # fmt: skip
        return ArrayShape.of(operand.dtype.component, (*leading, *lengths))
    check(last == lengths or operand.element_count == 0, f"{fft_type} of dimensions {list(last)} with fft_length {list(lengths)}")
    return operand


RULES: dict[str, ShapeRule] = family_table("fft", globals())

"""stochastic-convert as the numerics contract defines it (docs/numerics.md §2): XLA's
StochasticConvertDecomposer sequence, as an HLO computation. A float rounds toward zero to
an integer, then one away from zero when its fraction, scaled to the random operand's
width, exceeds the random value; values at or beyond the result type's bounds saturate.
The reference evaluator evaluates the computation and the backend lowers it; neither has
stochastic-convert arithmetic of its own. Only signed integer results are defined (XLA
decomposes no other).
"""

from __future__ import annotations

from functools import cache

from compiler.hlo.ir import Computation, Instruction


def expansion(instruction: Instruction) -> Computation:
    """The computation that is `instruction` (parameters: the operand and the random bits)."""
    operand, random = instruction.operands[0].array_shape, instruction.operands[1].array_shape
    result = instruction.array_shape
    return _expansion(operand.dtype.name, random.dtype.name, result.dtype.name, operand.dims, random.dtype.bits, result.dtype.bits)


@cache  # a pure function of its arguments
def _expansion(source: str, random: str, target: str, dims: tuple[int, ...], random_bits: int, target_bits: int) -> Computation:
    from compiler.hlo import load_module  # below this module in the import order at run time only

    shape = ",".join(str(d) for d in dims)
    wide = "f32" if source == "f16" else source  # 2^16 is not an f16
    least, greatest = -(1 << (target_bits - 1)), (1 << (target_bits - 1)) - 1
    text = f"""HloModule stochastic_convert
ENTRY stochastic_convert {{
  x = {source}[{shape}] parameter(0)
  r = {random}[{shape}] parameter(1)
  s = {source}[{shape}] sign(x)
  zero = {source}[{shape}] broadcast({source}[] constant(0)), dimensions={{}}
  negative = pred[{shape}] compare(s, zero), direction=LT
  a = {source}[{shape}] abs(x)
  t = {source}[{shape}] floor(a)
  fraction = {source}[{shape}] subtract(a, t)
  widened = {wide}[{shape}] convert(fraction)
  scale = {wide}[{shape}] broadcast({wide}[] constant({float(2**random_bits)!r})), dimensions={{}}
  fixed = {wide}[{shape}] multiply(widened, scale)
  threshold = {random}[{shape}] convert(fixed)
  up = pred[{shape}] compare(r, threshold), direction=LT
  i = {target}[{shape}] convert(t)
  one = {target}[{shape}] broadcast({target}[] constant(1)), dimensions={{}}
  bumped = {target}[{shape}] add(i, one)
  rounded = {target}[{shape}] select(up, bumped, i)
  flipped = {target}[{shape}] negate(rounded)
  signed = {target}[{shape}] select(negative, flipped, rounded)
  low = {source}[{shape}] broadcast({source}[] constant({least})), dimensions={{}}
  is_min = pred[{shape}] compare(x, low), direction=LE
  least = {target}[{shape}] broadcast({target}[] constant({least})), dimensions={{}}
  floored = {target}[{shape}] select(is_min, least, signed)
  high = {source}[{shape}] broadcast({source}[] constant({greatest})), dimensions={{}}
  is_max = pred[{shape}] compare(x, high), direction=GE
  greatest = {target}[{shape}] broadcast({target}[] constant({greatest})), dimensions={{}}
  ROOT result = {target}[{shape}] select(is_max, greatest, floored)
}}
"""
    return load_module(text).entry

"""The shape rule of rng-bit-generator."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from compiler.hlo.verifier.checks import ShapeRule, array, attribute, check, operand_count
from compiler.numerics import random_bits
from core.dtypes import U64


def _rng_bit_generator(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    state = array(instruction, 0)
    algorithm = attribute(instruction, "algorithm")
    check(algorithm in random_bits.ALGORITHMS, f"rng-bit-generator algorithm {algorithm} is not one of {', '.join(random_bits.ALGORITHMS)}")
    sizes = (2,) if random_bits.resolved(str(algorithm)) == random_bits.THREEFRY else (2, 3)
    check(state.dtype == U64 and state.rank == 1 and state.dims[0] in sizes, f"rng-bit-generator {algorithm} takes a u64[{' or '.join(map(str, sizes))}] state, not {state}")
    declared = instruction.shape
    check(isinstance(declared, TupleShape) and len(declared.elements) == 2 and isinstance(declared.elements[1], ArrayShape),
          "rng-bit-generator returns a tuple (new state, bits)")  # fmt: skip
    assert isinstance(declared, TupleShape)
    bits = declared.elements[1]
    assert isinstance(bits, ArrayShape)
    check(bits.dtype.is_integer and bits.dtype.bits in random_bits.ELEMENT_BITS, f"rng-bit-generator fills integer arrays of 8 to 64 bits, not {bits.dtype.name}")
    return TupleShape((state, bits))


RULES: dict[str, ShapeRule] = family_table("random_bits", globals())

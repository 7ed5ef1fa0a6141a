"""The facts the passes and the backend read from the registry (compiler/hlo/opcodes.py) hold
under the contract: each binary op's laws are checked on the reference evaluator's own
results, bit for bit, and every per-opcode set derived from the registry is made of its
opcodes (plus, for the passes' safety sets, every opcode refused at the frontend)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import reference
from compiler.hlo.opcodes import (
    ALIASING,
    FAMILIES,
    NEVER_MERGED,
    NOT_FOLDED,
    OPCODES,
    OPERAND_ALIASING,
    ORDER_FREE,
    SUPPORTED,
    UNARY_ELEMENTWISE,
    UNSUPPORTED_REASONS,
    family_opcodes,
    holds_on,
    law_value,
)
from compiler.numerics import mathlib
from compiler.numerics.mathlib.f32_exceptions import (
    AMBIGUOUS_COUNTS,
    F32_EXCEPTIONS,
    F32_REFERENCE_DIGESTS,
)
from compiler.numerics.mathlib.fast_f32 import FAST_F32
from compiler.numerics.mathlib.mpfr_reference import HIGH_PRECISION
from core.dtypes import BY_NAME, DType

LAWFUL = sorted(name for name, op in OPCODES.items() if op.algebra)
TYPES = ("pred", "s8", "u16", "s32", "u64", "f16", "bf16", "f32", "f64")
N = 64


def _binary(opcode: str, dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    shape = f"{dtype.name}[{a.size}]"
    text = (
        f"HloModule m\nENTRY e {{\n  a = {shape} parameter(0)\n  b = {shape} parameter(1)\n"
        f"  ROOT r = {shape} {opcode}(a, b)\n}}\n"
    )
    return reference.evaluate(text, [a, b])[0]


def _values(dtype: DType, seed: int) -> np.ndarray:
    """Values of every sort: zeros of both signs, extremes, infinities and NaNs for floats."""
    rng = np.random.default_rng(seed)
    if dtype.is_pred:
        return rng.integers(0, 2, N).astype(np.bool_)
    if dtype.is_integer:
        low, high = dtype.integer_bounds
        edge = np.array([dtype.numpy.type(v) for v in (low, high, 0, 1, high // 2 + 1)])
        noise = rng.integers(0, 256, (N - edge.size) * dtype.itemsize, dtype=np.uint8).view(dtype.numpy)
        return np.concatenate([edge, noise])
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    return np.concatenate([edge, rng.standard_normal(N - edge.size) * 1e3]).astype(dtype.numpy)


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _cases() -> list[tuple[str, str]]:
    return [(op, t) for op in LAWFUL for t in TYPES if _defined(op, BY_NAME[t])]


def _defined(opcode: str, dtype: DType) -> bool:
    """Whether the contract defines `opcode` on `dtype` (bitwise ops and shifts on integers
    and pred or integers only, remainder-free arithmetic everywhere)."""
    if opcode in ("and", "or", "xor"):
        return dtype.is_integer or dtype.is_pred
    if opcode.startswith("shift"):
        return dtype.is_integer
    if opcode in ("subtract", "divide"):
        return not dtype.is_pred
    return True


@pytest.mark.parametrize(("opcode", "type_name"), _cases())
def test_each_law_holds_bit_for_bit_where_the_registry_says(opcode: str, type_name: str) -> None:
    dtype = BY_NAME[type_name]
    laws = OPCODES[opcode].algebra
    x = _values(dtype, 1)
    if holds_on(laws.laws_on, dtype):
        for kind, sides in ((laws.identity, "both"), (laws.right_identity, "right")):
            if kind:
                e = np.full(N, law_value(kind, dtype))
                assert _bits(_binary(opcode, dtype, x, e)) == _bits(x), (opcode, kind)
                if sides == "both":
                    assert _bits(_binary(opcode, dtype, e, x)) == _bits(x), (opcode, kind)
        if laws.absorbing:
            z = np.full(N, law_value(laws.absorbing, dtype))
            assert _bits(_binary(opcode, dtype, x, z)) == _bits(z)
            assert _bits(_binary(opcode, dtype, z, x)) == _bits(z)
        if laws.idempotent:
            assert _bits(_binary(opcode, dtype, x, x)) == _bits(x)
    if holds_on(laws.order_free, dtype):
        y, z = _values(dtype, 2), _values(dtype, 3)
        assert _bits(_binary(opcode, dtype, x, y)) == _bits(_binary(opcode, dtype, y, x))
        left = _binary(opcode, dtype, _binary(opcode, dtype, x, y), z)
        right = _binary(opcode, dtype, x, _binary(opcode, dtype, y, z))
        assert _bits(left) == _bits(right)


def test_a_float_law_the_registry_withholds_does_fail() -> None:
    # The check above can fail: float add has the identity zero only on integers (-0 + 0 is +0).
    f32 = BY_NAME["f32"]
    assert not holds_on(OPCODES["add"].algebra.laws_on, f32)
    x = np.array([-0.0], np.float32)
    assert _bits(_binary("add", f32, x, np.zeros(1, np.float32))) != _bits(x)


def test_the_derived_sets_are_made_of_registry_opcodes() -> None:
    refused = set(UNSUPPORTED_REASONS)
    assert {"add", "multiply", "and", "or", "xor", "maximum", "minimum"} == ORDER_FREE
    assert NOT_FOLDED - refused <= SUPPORTED and refused <= NOT_FOLDED
    assert NEVER_MERGED - refused == {"parameter", "rng-bit-generator"} and refused <= NEVER_MERGED
    # Values that only alias compute nothing to fold; operand aliases are fed by operands.
    assert ALIASING - {"copy"} <= NOT_FOLDED
    assert OPERAND_ALIASING <= ALIASING and "parameter" not in OPERAND_ALIASING
    assert sorted(op for family in FAMILIES for op in family_opcodes(family)) == sorted(SUPPORTED)


def test_the_math_functions_have_one_list() -> None:
    assert set(mathlib.UNARY_OPCODES.values()) == set(mathlib.UNARY_FUNCTIONS)
    assert set(mathlib.UNARY_OPCODES) <= set(UNARY_ELEMENTWISE)
    assert set(HIGH_PRECISION) == set(mathlib.UNARY_FUNCTIONS)
    # The generated tables cover each function; the fast binary32 variants are some of them.
    assert set(F32_REFERENCE_DIGESTS) == set(AMBIGUOUS_COUNTS) == set(mathlib.UNARY_FUNCTIONS)
    assert set(F32_EXCEPTIONS) <= set(mathlib.UNARY_FUNCTIONS) and set(FAST_F32) <= set(mathlib.UNARY_FUNCTIONS)

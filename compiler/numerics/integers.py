"""Integer semantics of the numerics contract: two's complement, wrapping, and total (every
operation defined for every input, so that nothing undefined reaches a result)."""

from __future__ import annotations

import numpy as np

from core.dtypes import DType, signed_of_width, unsigned_of_width


def _unsigned(values: np.ndarray, dtype: DType) -> np.ndarray:
    return np.asarray(values).view(unsigned_of_width(dtype.storage_bits).numpy)


def _signed(values: np.ndarray, dtype: DType) -> np.ndarray:
    return np.asarray(values).view(signed_of_width(dtype.storage_bits).numpy)


def _contiguous(values: np.ndarray, dtype: DType) -> np.ndarray:
    return np.require(values, dtype=dtype.numpy, requirements="C")


def _division_cases(x: np.ndarray, y: np.ndarray, dtype: DType) -> tuple[np.ndarray, ...]:
    """x and y broadcast; where y is 0; where x / y overflows (INT_MIN / -1, signed types
    only); and y with both cases replaced by 1, safe to divide by."""
    x, y = np.broadcast_arrays(_contiguous(x, dtype), _contiguous(y, dtype))
    zero = y == 0
    overflow = (x == np.iinfo(dtype.numpy).min) & (y == -1) if dtype.is_signed else np.zeros_like(zero)
    safe_y = np.where(zero | overflow, np.array(1, dtype.numpy), y)
    return x, y, zero, overflow, safe_y


def divide(x: np.ndarray, y: np.ndarray, dtype: DType) -> np.ndarray:
    """Truncating division; x / 0 = -1 (all ones for unsigned); INT_MIN / -1 = INT_MIN."""
    x, _, zero, overflow, safe_y = _division_cases(x, y, dtype)
    if dtype.is_signed:
        info = np.iinfo(dtype.numpy)
        quotient, remainder = np.divmod(x, safe_y)
        # numpy floors; truncation differs when the remainder is non-zero and signs differ.
        fix = (remainder != 0) & ((x < 0) != (safe_y < 0))
        quotient = np.where(fix, quotient + np.array(1, dtype.numpy), quotient)
        quotient = np.where(overflow, np.array(info.min, dtype.numpy), quotient)
        return np.where(zero, np.array(-1, dtype.numpy), quotient).astype(dtype.numpy)
    quotient = x // safe_y
    return np.where(zero, np.array(np.iinfo(dtype.numpy).max, dtype.numpy), quotient).astype(dtype.numpy)


def remainder(x: np.ndarray, y: np.ndarray, dtype: DType) -> np.ndarray:
    """Remainder of truncating division (sign of x); x % 0 = x; INT_MIN % -1 = 0."""
    x, _, zero, overflow, safe_y = _division_cases(x, y, dtype)
    if dtype.is_signed:
        rem = np.fmod(x, safe_y)  # C-style: sign of the dividend
        rem = np.where(overflow, np.array(0, dtype.numpy), rem)
        return np.where(zero, x, rem).astype(dtype.numpy)
    return np.where(zero, x, x % safe_y).astype(dtype.numpy)


def _shift_amount(amount: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """(amount as unsigned, mask of amounts at or past the width). Shift amounts are read as
    unsigned, so a negative amount is a huge one."""
    unsigned = _unsigned(_contiguous(amount, dtype), dtype)
    too_far = unsigned >= dtype.bits
    clamped = np.where(too_far, 0, unsigned).astype(unsigned.dtype)
    return clamped, too_far


def _zero_filling_shift(x: np.ndarray, amount: np.ndarray, dtype: DType, shift) -> np.ndarray:
    clamped, too_far = _shift_amount(amount, dtype)
    # The type's own bits only: a sign-extended s4 must shift in zeros at bit 3, not bit 7.
    bits = _unsigned(_contiguous(x, dtype), dtype) & np.array((1 << dtype.bits) - 1).astype(clamped.dtype)
    shifted = np.where(too_far, np.zeros_like(bits), shift(bits, clamped))
    return wrap(shifted.astype(bits.dtype).view(dtype.numpy), dtype)


def shift_left(x: np.ndarray, amount: np.ndarray, dtype: DType) -> np.ndarray:
    """x << amount; 0 when amount >= width."""
    return _zero_filling_shift(x, amount, dtype, np.left_shift)


def shift_right_logical(x: np.ndarray, amount: np.ndarray, dtype: DType) -> np.ndarray:
    """Zero-filling right shift; 0 when amount >= width."""
    return _zero_filling_shift(x, amount, dtype, np.right_shift)


def shift_right_arithmetic(x: np.ndarray, amount: np.ndarray, dtype: DType) -> np.ndarray:
    """Sign-filling right shift; all sign bits when amount >= width."""
    clamped, too_far = _shift_amount(amount, dtype)
    signed = _signed(_contiguous(x, dtype), dtype)
    clamped = np.where(too_far, dtype.bits - 1, clamped).astype(clamped.dtype)
    shifted = np.right_shift(signed, clamped.astype(signed.dtype))
    return shifted.astype(signed.dtype).view(dtype.numpy)


def power(x: np.ndarray, y: np.ndarray, dtype: DType) -> np.ndarray:
    """x ** y with wrapping, by squaring over all bits of y. For signed y < 0 the result is
    1 when x == 1 and 0 otherwise."""
    x, y = np.broadcast_arrays(_contiguous(x, dtype), _contiguous(y, dtype))
    base = _unsigned(np.require(x, requirements="C"), dtype).copy()
    exponent = _unsigned(np.require(y, requirements="C"), dtype).copy()
    result = np.ones_like(base)
    with np.errstate(over="ignore"):
        for _ in range(dtype.bits):
            odd = (exponent & 1) == 1
            result = np.where(odd, result * base, result)
            base = base * base
            exponent = exponent >> 1
    result = result.view(dtype.numpy)
    if dtype.is_signed:
        negative = y < 0
        one = np.array(1, dtype.numpy)
        result = np.where(negative, np.where(x == one, one, np.array(0, dtype.numpy)), result)
    return result.astype(dtype.numpy)


def wrap(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Values of any integer type reduced modulo 2^width into `dtype` (s4 and u4 held
    sign- or zero-extended in their byte)."""
    held = np.asarray(values).astype(dtype.numpy)
    if not dtype.is_sub_byte:
        return held
    low_bits = held.view(np.uint8) & np.uint8((1 << dtype.bits) - 1)
    if dtype.is_unsigned:
        return low_bits
    sign = np.int8(1 << (dtype.bits - 1))
    return (low_bits.view(np.int8) ^ sign) - sign


def _own_bits(x: np.ndarray, dtype: DType) -> np.ndarray:
    """The `dtype.bits` bits of each value as unsigned 64-bit integers (an s4 holder's
    sign extension dropped)."""
    return _unsigned(_contiguous(x, dtype), dtype).astype(np.uint64) & np.uint64((1 << dtype.bits) - 1)


def population_count(x: np.ndarray, dtype: DType) -> np.ndarray:
    """popcnt: how many of the value's `dtype.bits` bits are set."""
    bits = _own_bits(x, dtype)
    count = np.zeros(bits.shape, np.uint64)
    for bit in range(dtype.bits):
        count += (bits >> np.uint64(bit)) & np.uint64(1)
    return count.astype(dtype.numpy)


def count_leading_zeros(x: np.ndarray, dtype: DType) -> np.ndarray:
    """count-leading-zeros: the zero bits above the highest set one (`dtype.bits` for 0)."""
    bits = _own_bits(x, dtype)
    count = np.full(bits.shape, dtype.bits, np.int64)
    for bit in range(dtype.bits):  # the highest set bit decides last
        count = np.where((bits >> np.uint64(bit)) & np.uint64(1) == 1, dtype.bits - 1 - bit, count)
    return count.astype(dtype.numpy)

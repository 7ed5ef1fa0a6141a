"""The element types of the numerics contract (the HLO primitive types vxla executes): their
widths, numpy storage types and, for floats, bit layouts and canonical NaNs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np


class Kind(Enum):
    """The arithmetic family of an element type."""

    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"


@dataclass(frozen=True)
class FloatLayout:
    """The bit layout of one binary float format and its canonical NaN, the one NaN the
    numerics contract produces (docs/numerics.md). The IEEE formats reserve the all-ones
    exponent for infinities and NaNs; two 8-bit families do not (`specials`): "fn" has no
    infinity and one NaN magnitude (all ones), "fnuz" no infinity, no -0 and one NaN, the
    -0 pattern. The 8-bit formats name their exponent bias."""

    bits: int
    mantissa_bits: int  # stored fraction bits
    canonical_nan: int
    specials: str = "ieee"  # "ieee", "fn" or "fnuz"
    exponent_bias: int | None = None  # when not the IEEE bias 2^(exponent bits - 1) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def abs_mask(self) -> int:
        return self.sign_mask - 1

    @property
    def inf_bits(self) -> int:
        return self.abs_mask ^ self.mantissa_mask

    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1

    @property
    def exponent_bits(self) -> int:
        return self.bits - 1 - self.mantissa_bits

    @property
    def bias(self) -> int:
        if self.exponent_bias is not None:
            return self.exponent_bias
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def max_finite(self) -> float:
        """The largest finite value."""
        top_exponent = (1 << self.exponent_bits) - 1 - self.bias  # the all-ones exponent
        fraction = 2.0 - 2.0 ** -self.mantissa_bits  # all-ones mantissa
        if self.specials == "ieee":
            return fraction * 2.0 ** (top_exponent - 1)
        if self.specials == "fn":
            return (fraction - 2.0 ** -self.mantissa_bits) * 2.0**top_exponent
        return fraction * 2.0**top_exponent


@dataclass(frozen=True)
class DType:
    """One HLO primitive type: its text name, width, numpy storage type and, for floats, its
    bit layout."""

    name: str
    bits: int
    kind: Kind
    numpy: np.dtype
    layout: FloatLayout | None = None
    component_name: str | None = None  # a complex type's real and imaginary parts

    @property
    def float_layout(self) -> FloatLayout:
        """The layout of a float type; ValueError for any other type."""
        if self.layout is None:
            raise ValueError(f"{self.name} is not a floating-point type")
        return self.layout

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_float8(self) -> bool:
        """An 8-bit float type: the contract converts, moves and multiplies (in dot) these
        values; it computes nothing else on them (docs/numerics.md §1)."""
        return self.kind is Kind.FLOAT and self.bits == 8

    @property
    def is_integer(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.SIGNED

    @property
    def is_unsigned(self) -> bool:
        return self.kind is Kind.UNSIGNED

    @property
    def is_pred(self) -> bool:
        return self.kind is Kind.PRED

    @property
    def is_complex(self) -> bool:
        return self.kind is Kind.COMPLEX

    @property
    def component(self) -> DType:
        """The float type of a complex type's parts; ValueError for any other type."""
        if self.component_name is None:
            raise ValueError(f"{self.name} is not a complex type")
        return BY_NAME[self.component_name]

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def storage_bits(self) -> int:
        """The bits one element occupies in memory: `bits` rounded up to a whole byte."""
        return 8 * self.numpy.itemsize

    @property
    def is_sub_byte(self) -> bool:
        """Whether the type is narrower than its storage (s4 and u4, held one per byte,
        sign- or zero-extended)."""
        return self.bits < self.storage_bits

    @property
    def holder(self) -> DType:
        """The byte-wide type whose values hold this type's: s8 or u8 for a sub-byte integer
        (its storage, sign- or zero-extended), the type itself otherwise."""
        return from_numpy(self.numpy) if self.is_sub_byte else self

    @property
    def integer_bounds(self) -> tuple[int, int]:
        """The least and greatest value of an integer type; ValueError for any other type."""
        if self.is_signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if self.is_unsigned:
            return 0, (1 << self.bits) - 1
        raise ValueError(f"{self.name} is not an integer type")

    def __str__(self) -> str:
        return self.name


PRED = DType("pred", 8, Kind.PRED, np.dtype(np.bool_))
# s4 and u4 are held one element per byte, the value sign- or zero-extended: what their .npy
# inputs and outputs hold and what their digests cover (docs/numerics.md, "4-bit integers").
S4 = DType("s4", 4, Kind.SIGNED, np.dtype(np.int8))
U4 = DType("u4", 4, Kind.UNSIGNED, np.dtype(np.uint8))
# s2 and u2 likewise: -2..1 and 0..3 in a byte.
S2 = DType("s2", 2, Kind.SIGNED, np.dtype(np.int8))
U2 = DType("u2", 2, Kind.UNSIGNED, np.dtype(np.uint8))
S8 = DType("s8", 8, Kind.SIGNED, np.dtype(np.int8))
S16 = DType("s16", 16, Kind.SIGNED, np.dtype(np.int16))
S32 = DType("s32", 32, Kind.SIGNED, np.dtype(np.int32))
S64 = DType("s64", 64, Kind.SIGNED, np.dtype(np.int64))
U8 = DType("u8", 8, Kind.UNSIGNED, np.dtype(np.uint8))
U16 = DType("u16", 16, Kind.UNSIGNED, np.dtype(np.uint16))
U32 = DType("u32", 32, Kind.UNSIGNED, np.dtype(np.uint32))
U64 = DType("u64", 64, Kind.UNSIGNED, np.dtype(np.uint64))
F16 = DType("f16", 16, Kind.FLOAT, np.dtype(np.float16), FloatLayout(16, 10, 0x7E00))
BF16 = DType("bf16", 16, Kind.FLOAT, np.dtype(ml_dtypes.bfloat16), FloatLayout(16, 7, 0x7FC0))
F32 = DType("f32", 32, Kind.FLOAT, np.dtype(np.float32), FloatLayout(32, 23, 0x7FC00000))
F64 = DType("f64", 64, Kind.FLOAT, np.dtype(np.float64), FloatLayout(64, 52, 0x7FF8000000000000))
# Complex: the real part, then the imaginary part (numpy's and XLA's memory order).
C64 = DType("c64", 64, Kind.COMPLEX, np.dtype(np.complex64), component_name="f32")
C128 = DType("c128", 128, Kind.COMPLEX, np.dtype(np.complex128), component_name="f64")

# 8-bit floats (OCP FP8 and the fnuz variants), held one per byte as their bits.
F8E5M2 = DType("f8e5m2", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e5m2), FloatLayout(8, 2, 0x7E))
F8E4M3 = DType("f8e4m3", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e4m3), FloatLayout(8, 3, 0x7C))
F8E3M4 = DType("f8e3m4", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e3m4), FloatLayout(8, 4, 0x78))
F8E4M3FN = DType("f8e4m3fn", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e4m3fn), FloatLayout(8, 3, 0x7F, "fn"))
F8E4M3FNUZ = DType("f8e4m3fnuz", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e4m3fnuz), FloatLayout(8, 3, 0x80, "fnuz", 8))
F8E5M2FNUZ = DType("f8e5m2fnuz", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e5m2fnuz), FloatLayout(8, 2, 0x80, "fnuz", 16))
F8E4M3B11FNUZ = DType("f8e4m3b11fnuz", 8, Kind.FLOAT, np.dtype(ml_dtypes.float8_e4m3b11fnuz), FloatLayout(8, 3, 0x80, "fnuz", 11))
FLOAT8_DTYPES: tuple[DType, ...] = (F8E5M2, F8E4M3, F8E3M4, F8E4M3FN, F8E4M3FNUZ, F8E5M2FNUZ, F8E4M3B11FNUZ)

ALL_DTYPES: tuple[DType, ...] = (PRED, S2, S4, S8, S16, S32, S64, U2, U4, U8, U16, U32, U64, *FLOAT8_DTYPES, F16, BF16, F32, F64, C64, C128)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
FLOAT_DTYPES: tuple[DType, ...] = tuple(d for d in ALL_DTYPES if d.is_float)

# HLO types that exist in XLA but are outside the numerics contract; named so that the
# parser can say "unsupported element type" rather than "unknown".
UNSUPPORTED_TYPE_NAMES: tuple[str, ...] = (
    "s1", "u1", "token", "opaque", "f8e8m0fnu", "f4e2m1fn",
)  # fmt: skip


def from_name(name: str) -> DType:
    """Returns the DType called `name` in HLO text; raises KeyError if there is none."""
    return BY_NAME[name]


def from_numpy(dtype: np.dtype) -> DType:
    """Returns the DType stored as numpy `dtype` (int8 is s8, never s4); raises KeyError if
    there is none."""
    dtype = np.dtype(dtype)
    for candidate in ALL_DTYPES:
        if candidate.numpy == dtype and not candidate.is_sub_byte:
            return candidate
    raise KeyError(str(dtype))


def unsigned_of_width(bits: int) -> DType:
    """The unsigned integer type with `bits` bits (used to view float bit patterns)."""
    return {8: U8, 16: U16, 32: U32, 64: U64}[bits]


def signed_of_width(bits: int) -> DType:
    """The signed integer type with `bits` bits."""
    return {8: S8, 16: S16, 32: S32, 64: S64}[bits]

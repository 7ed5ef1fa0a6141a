"""Constant literals: parsing their text into arrays and printing arrays canonically.

A floating-point literal's decimal text denotes: the nearest binary64 value, then rounded
(nearest-even) to binary32, then to the element type. This is how XLA reads literals, so a
module means the same here as there. A NaN literal denotes the canonical NaN.
"""

from __future__ import annotations

import math
import re

import numpy as np

from compiler.errors import CompilerError
from compiler.hlo.shape import ArrayShape
from compiler.numerics import floats
from core.dtypes import BF16, F64, DType


class LiteralSyntaxError(CompilerError, ValueError):
    """A literal that does not parse; `offset` is relative to the literal's text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


_TOKEN = re.compile(r"\{|\}|,|[^\s{},]+")
_NAN_PAYLOAD = re.compile(r"[-+]?nan(\(0x[0-9a-fA-F]+\))?")


_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _without_comments(text: str) -> str:
    """`/* ... */` comments (XLA prints index comments in literals) blanked out, offsets kept."""
    return _COMMENT.sub(lambda m: " " * len(m.group()), text)


def _element_tokens(text: str, shape: ArrayShape) -> list[tuple[str, int]]:
    """The element tokens of a braced literal, in row-major order, after checking that the
    nesting matches the shape. Returns (token, offset) pairs. A single unbraced value for an
    array is its first element, the others zero: how XLA's parser reads `f32[2,3]
    constant(1)`."""
    text = _without_comments(text)
    rank = shape.rank
    if rank and not text.strip().startswith("{"):
        stripped = text.strip()
        if not stripped or "," in stripped:
            raise LiteralSyntaxError(f"expected a braced literal or one value, found {stripped!r}")
        if shape.element_count == 0:
            raise LiteralSyntaxError(f"a value {stripped!r} for an array of no elements")
        zero = "false" if shape.dtype.is_pred else "0"
        return [(stripped, text.find(stripped))] + [(zero, 0)] * (shape.element_count - 1)
    if rank == 0:
        stripped = text.strip()
        if stripped.startswith("{"):
            # XLA also accepts a scalar written as a one-element list.
            inner = stripped[1:-1] if stripped.endswith("}") else stripped
            stripped = inner.strip()
        if not stripped or "," in stripped or "{" in stripped:
            raise LiteralSyntaxError(f"expected one scalar value, found {text.strip()!r}")
        return [(stripped, text.find(stripped))]
    tokens: list[tuple[str, int]] = []
    depth = 0
    counts = [0] * (rank + 1)
    expect_element = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        offset = match.start()
        if token == "{":
            if depth >= rank:
                raise LiteralSyntaxError(f"literal nested deeper than rank {rank}", offset)
            depth += 1
            counts[depth] = 0
            expect_element = True
        elif token == "}":
            if depth == 0:
                raise LiteralSyntaxError("unbalanced '}' in literal", offset)
            size = shape.dims[depth - 1]
            if counts[depth] != size:
                raise LiteralSyntaxError(
                    f"literal has {counts[depth]} elements in dimension {depth - 1}, shape has {size}",
                    offset,
                )
            depth -= 1
            if depth > 0:
                counts[depth] += 1
            expect_element = False
        elif token == ",":
            if expect_element or depth == 0:
                raise LiteralSyntaxError("unexpected ',' in literal", offset)
            expect_element = True
        else:
            if token == "...":
                raise LiteralSyntaxError(
                    "the constant's value was elided ('{...}'); export the module with large "
                    "constants printed in full",
                    offset,
                )
            if depth != rank:
                raise LiteralSyntaxError(
                    f"element {token!r} at nesting depth {depth}, expected depth {rank}", offset
                )
            counts[depth] += 1
            tokens.append((token, offset))
            expect_element = False
        if depth == 0 and token == "}":
            rest = text[match.end() :].strip()
            if rest:
                raise LiteralSyntaxError(f"unexpected {rest[:20]!r} after literal", match.end())
            return tokens
    raise LiteralSyntaxError("literal ends before its closing '}'", len(text))


def _parse_float(token: str, offset: int) -> float:
    lowered = token.lower()
    if _NAN_PAYLOAD.fullmatch(lowered):
        return math.nan
    try:
        return float(lowered)
    except ValueError:
        raise LiteralSyntaxError(f"expected a floating-point number, found {token!r}", offset) from None


def _parse_int(token: str, offset: int, dtype: DType) -> int:
    try:
        value = int(token, 0) if token.lower().startswith(("0x", "-0x")) else int(token)
    except ValueError:
        raise LiteralSyntaxError(f"expected an integer, found {token!r}", offset) from None
    least, greatest = dtype.integer_bounds
    if dtype.is_unsigned and -(1 << (dtype.bits - 1)) <= value < 0:
        return value + (1 << dtype.bits)  # XLA reads a negative unsigned literal modulo 2^bits
    if not least <= value <= greatest:
        raise LiteralSyntaxError(f"{value} is out of range for {dtype.name}", offset)
    return value


def _parse_pred(token: str, offset: int) -> bool:
    if token in ("true", "1"):
        return True
    if token in ("false", "0"):
        return False
    raise LiteralSyntaxError(f"expected true or false, found {token!r}", offset)


_COMPLEX_ELEMENT = re.compile(r"\(\s*([^(){},\s]+)\s*,\s*([^(){},\s]+)\s*\)")


def _complex_tokens(text: str) -> str:
    """Complex elements `(re, im)` rewritten as one token `re|im`, padded so offsets stay."""
    return _COMPLEX_ELEMENT.sub(lambda m: f"{m.group(1)}|{m.group(2)}".ljust(len(m.group())), _without_comments(text))


def parse_literal(text: str, shape: ArrayShape) -> np.ndarray:
    """The array a literal's text denotes, with the shape's element type and dimensions."""
    dtype = shape.dtype
    if dtype.is_complex:
        return _parse_complex(_element_tokens(_complex_tokens(text), shape), shape)
    tokens = _element_tokens(text, shape)
    if dtype.is_pred:
        values = [_parse_pred(t, o) for t, o in tokens]
        array = np.array(values, dtype=np.bool_)
    elif dtype.is_integer:
        values = [_parse_int(t, o, dtype) for t, o in tokens]
        array = np.array(values, dtype=dtype.numpy) if values else np.zeros(0, dtype.numpy)
    else:
        doubles = np.array([_parse_float(t, o) for t, o in tokens], dtype=np.float64)
        array = floats.literal_from_float64(doubles, dtype)
    return array.reshape(shape.dims)


def _parse_complex(tokens: list[tuple[str, int]], shape: ArrayShape) -> np.ndarray:
    """Elements `re|im` (or one real number, imaginary part zero), each part read as a float
    literal of the component type."""
    parts = [token.split("|", 1) if "|" in token else [token, "0"] for token, _ in tokens]
    component = shape.dtype.component
    real = floats.literal_from_float64(np.array([_parse_float(p[0], o) for p, (_, o) in zip(parts, tokens, strict=True)], np.float64), component)
    imag = floats.literal_from_float64(np.array([_parse_float(p[1], o) for p, (_, o) in zip(parts, tokens, strict=True)], np.float64), component)
    array = np.empty(len(tokens), shape.dtype.numpy)
    array.real, array.imag = real, imag
    return array.reshape(shape.dims)


def _float_texts(array: np.ndarray, dtype: DType) -> list[str]:
    """Decimal texts for float elements: short, and each reading back as exactly the element
    under the literal rule. Candidates are the shortest round-trip digits of the element in
    its own type (numpy's Dragon4); every candidate is checked, and the rare one that does
    not read back exactly (double rounding through binary64) is printed as the exact binary64
    value instead. The final spelling is Python's repr of the binary64 value, which is fixed."""
    flat = np.require(array, requirements="C").reshape(-1)
    through_f32 = dtype is BF16 or dtype.is_float8  # no decimal printing of their own
    source = floats.to_f32(flat, dtype) if through_f32 else flat
    exact = source.astype(np.float64)
    if dtype is F64:
        return [repr(v) for v in exact.tolist()]
    candidates = source.astype(str).astype(np.float64)
    readback = floats.literal_from_float64(candidates, dtype)
    bits = floats.bits_dtype(dtype)
    good = readback.view(bits) == floats.canonicalize_nans(flat, dtype).view(bits)
    chosen = np.where(good, candidates, exact)
    return [repr(v) for v in chosen.tolist()]


def format_literal(array: np.ndarray, dtype: DType) -> str:
    """Canonical text of a literal: nested braces, `, ` between elements."""
    if dtype.is_pred:
        texts = ["true" if v else "false" for v in array.reshape(-1).tolist()]
    elif dtype.is_integer:
        texts = [str(v) for v in array.reshape(-1).tolist()]
    elif dtype.is_complex:
        flat = np.require(array, requirements="C").reshape(-1)
        real, imag = _float_texts(flat.real.copy(), dtype.component), _float_texts(flat.imag.copy(), dtype.component)
        texts = [f"({r}, {i})" for r, i in zip(real, imag, strict=True)]
    else:
        texts = _float_texts(array, dtype)
    if array.ndim == 0:
        return texts[0]
    return _nest(texts, array.shape)


def _nest(texts: list[str], dims: tuple[int, ...]) -> str:
    if len(dims) == 1:
        return "{" + ", ".join(texts) + "}"
    stride = math.prod(dims[1:])
    rows = [_nest(texts[i * stride : (i + 1) * stride], dims[1:]) for i in range(dims[0])]
    return "{" + ", ".join(rows) + "}"

"""Typed values of HLO instruction attributes, with their canonical text forms.

Each attribute key the compiler understands has a kind (an integer list, a window, a slice
spec, ...). Parsing turns the attribute's text into a typed value; `format_attribute` prints it
back in one canonical form, so the printed module does not depend on how the input was spelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

import numpy as np

from compiler.errors import CompilerError


class AttrKind(Enum):
    INT = "int"
    BOOL = "bool"
    INT_LIST = "int_list"
    IDENT = "ident"
    SLICE = "slice"
    PADDING = "padding"
    WINDOW = "window"
    DIM_LABELS = "dim_labels"
    COMPUTATION = "computation"
    COMPUTATION_LIST = "computation_list"
    FLOAT32 = "float32"


ATTRIBUTE_KINDS: dict[str, AttrKind] = {
    "index": AttrKind.INT,
    "iota_dimension": AttrKind.INT,
    "index_vector_dim": AttrKind.INT,
    "feature_group_count": AttrKind.INT,
    "exponent_bits": AttrKind.INT,
    "fft_type": AttrKind.IDENT,
    "num_carries": AttrKind.INT,
    "is_reverse": AttrKind.BOOL,
    "is_associative": AttrKind.BOOL,
    "fft_length": AttrKind.INT_LIST,
    "mantissa_bits": AttrKind.INT,
    "feature_index": AttrKind.INT,
    "epsilon": AttrKind.FLOAT32,
    "batch_group_count": AttrKind.INT,
    "is_stable": AttrKind.BOOL,
    "largest": AttrKind.BOOL,
    "k": AttrKind.INT,
    "indices_are_sorted": AttrKind.BOOL,
    "lower": AttrKind.BOOL,
    "left_side": AttrKind.BOOL,
    "unit_diagonal": AttrKind.BOOL,
    "transpose_a": AttrKind.IDENT,
    "unique_indices": AttrKind.BOOL,
    "dimensions": AttrKind.INT_LIST,
    "lhs_batch_dims": AttrKind.INT_LIST,
    "rhs_batch_dims": AttrKind.INT_LIST,
    "lhs_contracting_dims": AttrKind.INT_LIST,
    "rhs_contracting_dims": AttrKind.INT_LIST,
    "offset_dims": AttrKind.INT_LIST,
    "collapsed_slice_dims": AttrKind.INT_LIST,
    "start_index_map": AttrKind.INT_LIST,
    "slice_sizes": AttrKind.INT_LIST,
    "operand_batching_dims": AttrKind.INT_LIST,
    "start_indices_batching_dims": AttrKind.INT_LIST,
    "update_window_dims": AttrKind.INT_LIST,
    "inserted_window_dims": AttrKind.INT_LIST,
    "scatter_dims_to_operand_dims": AttrKind.INT_LIST,
    "input_batching_dims": AttrKind.INT_LIST,
    "scatter_indices_batching_dims": AttrKind.INT_LIST,
    "dynamic_slice_sizes": AttrKind.INT_LIST,
    "direction": AttrKind.IDENT,
    "type": AttrKind.IDENT,
    "kind": AttrKind.IDENT,
    "algorithm": AttrKind.IDENT,
    "slice": AttrKind.SLICE,
    "padding": AttrKind.PADDING,
    "window": AttrKind.WINDOW,
    "dim_labels": AttrKind.DIM_LABELS,
    "to_apply": AttrKind.COMPUTATION,
    "calls": AttrKind.COMPUTATION,
    "condition": AttrKind.COMPUTATION,
    "body": AttrKind.COMPUTATION,
    "true_computation": AttrKind.COMPUTATION,
    "false_computation": AttrKind.COMPUTATION,
    "branch_computations": AttrKind.COMPUTATION_LIST,
    "select": AttrKind.COMPUTATION,
    "scatter": AttrKind.COMPUTATION,
}

# Attributes that carry no meaning under the numerics contract: debugging information,
# placement and scheduling hints, and precision requests that the contract pins anyway. They
# are kept on the instruction for display but never printed in canonical text, so they never
# change hlo_hash.
IGNORED_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "metadata",
        "sharding",
        "frontend_attributes",
        "backend_config",
        "statistics",
        "control-predecessors",
        "origin",
        "operand_precision",
        "result_accuracy",
    }
)

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


class AttributeSyntaxError(CompilerError, ValueError):
    """An attribute value that does not parse; `offset` is relative to the value's text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class PadDim:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class WindowDim:
    """One dimension of a window: XLA's `lhs_dilate` is `base_dilation`, `rhs_dilate` is
    `window_dilation`."""

    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    base_dilation: int = 1
    window_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]


@dataclass(frozen=True)
class ConvDimLabels:
    """Convolution dimension numbers, as in `dim_labels=b01f_01io->b01f`."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]

    @property
    def num_spatial(self) -> int:
        return len(self.input_spatial)


@dataclass(frozen=True)
class ComputationRef:
    """A reference by name to a computation, resolved after the whole module is parsed."""

    name: str


@dataclass(frozen=True)
class RawAttribute:
    """An attribute the compiler does not interpret, kept as text."""

    text: str


def custom_call_target(attrs: dict[str, object]) -> str | None:
    """A custom call's target (`custom_call_target="lapack_sgetrf_ffi"`), unquoted; None
    without one."""
    value = attrs.get("custom_call_target")
    text = value.text if isinstance(value, RawAttribute) else value if isinstance(value, str) else None
    return None if text is None else text.strip().strip('"')


_INT = re.compile(r"-?\d+")
_NAME = re.compile(r"%?([A-Za-z0-9_.\-]+)")


def _int(text: str, offset: int = 0) -> int:
    text = text.strip()
    if not _INT.fullmatch(text):
        raise AttributeSyntaxError(f"expected an integer, found {text!r}", offset)
    return int(text)


def parse_float32(text: str) -> float:
    """A float attribute XLA holds as binary32 (batch-norm's epsilon): the decimal rounded to
    the nearest binary32, held as the Python float of that value."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        raise AttributeSyntaxError(f"expected a number, found {text!r}") from None
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def parse_int_list(text: str) -> tuple[int, ...]:
    """`{1,2,3}` -> (1, 2, 3)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError(f"expected a list like {{0,1}}, found {text!r}")
    inner = body[1:-1].strip()
    if not inner:
        return ()
    return tuple(_int(part) for part in inner.split(","))


def parse_bool(text: str) -> bool:
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise AttributeSyntaxError(f"expected true or false, found {text!r}")


def parse_slice(text: str) -> tuple[SliceDim, ...]:
    """`{[0:2], [1:9:2]}` -> SliceDims."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError(f"expected slice={{[start:limit:stride], ...}}, found {text!r}")
    dims = []
    for match in re.finditer(r"\[([^\]]*)\]", body):
        parts = match.group(1).split(":")
        if len(parts) not in (2, 3):
            raise AttributeSyntaxError(f"bad slice bounds [{match.group(1)}]", match.start())
        values = [_int(p, match.start()) for p in parts]
        dims.append(SliceDim(*values))
    leftover = re.sub(r"\[[^\]]*\]", "", body[1:-1]).replace(",", "").strip()
    if leftover:
        raise AttributeSyntaxError(f"unexpected text {leftover!r} in slice")
    return tuple(dims)


def parse_padding(text: str) -> tuple[PadDim, ...]:
    """`0_1_0x2_2` -> PadDims (low_high[_interior] per dimension, joined by x)."""
    if text.strip() in ("", "{}"):
        return ()
    dims = []
    for part in text.split("x"):
        values = [_int(v) for v in part.split("_")]
        if len(values) not in (2, 3):
            raise AttributeSyntaxError(f"bad padding {part!r}: expected low_high or low_high_interior")
        dims.append(PadDim(*values))
    return tuple(dims)


_WINDOW_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def parse_window(text: str) -> Window:
    """`{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}`."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError(f"expected window={{size=...}}, found {text!r}")
    fields: dict[str, list[str]] = {}
    for item in body[1:-1].split():
        key, sep, value = item.partition("=")
        if not sep or key not in _WINDOW_FIELDS:
            raise AttributeSyntaxError(f"unknown window field {item!r}")
        fields[key] = value.split("x")
    if "size" not in fields:
        if fields:
            raise AttributeSyntaxError("window without size=")
        return Window(())
    rank = len(fields["size"])
    for key, values in fields.items():
        if len(values) != rank:
            raise AttributeSyntaxError(f"window field {key} has {len(values)} dimensions, size has {rank}")

    def column(key: str, default: str) -> list[str]:
        return fields.get(key, [default] * rank)

    dims = []
    for size, stride, pad, lhs, rhs, rev in zip(
        column("size", "1"),
        column("stride", "1"),
        column("pad", "0_0"),
        column("lhs_dilate", "1"),
        column("rhs_dilate", "1"),
        column("rhs_reversal", "0"),
        strict=True,
    ):
        low, _, high = pad.partition("_")
        dims.append(
            WindowDim(
                size=_int(size),
                stride=_int(stride),
                pad_low=_int(low),
                pad_high=_int(high),
                base_dilation=_int(lhs),
                window_dilation=_int(rhs),
                reversal=parse_bool(rev),
            )
        )
    return Window(tuple(dims))


def _parse_labels(text: str, first: str, second: str) -> tuple[int, int, tuple[int, ...]]:
    """Positions of the two named dimensions and of the spatial digits, in digit order."""
    if text.count(first) != 1 or text.count(second) != 1:
        raise AttributeSyntaxError(f"dimension labels {text!r} need one {first!r} and one {second!r}")
    spatial: dict[int, int] = {}
    for position, char in enumerate(text):
        if char.isdigit():
            if int(char) in spatial:
                raise AttributeSyntaxError(f"spatial dimension {char} repeated in {text!r}")
            spatial[int(char)] = position
        elif char not in (first, second):
            raise AttributeSyntaxError(f"unexpected label {char!r} in {text!r}")
    if sorted(spatial) != list(range(len(spatial))):
        raise AttributeSyntaxError(f"spatial dimensions of {text!r} are not 0..n-1")
    return text.index(first), text.index(second), tuple(spatial[i] for i in range(len(spatial)))


def parse_dim_labels(text: str) -> ConvDimLabels:
    """`b01f_01io->b01f` -> ConvDimLabels."""
    match = re.fullmatch(r"([^_]+)_([^-]+)->(.+)", text.strip())
    if not match:
        raise AttributeSyntaxError(f"expected dim_labels like b01f_01io->b01f, found {text!r}")
    lhs, rhs, out = match.groups()
    ib, if_, isp = _parse_labels(lhs, "b", "f")
    ki, ko, ksp = _parse_labels(rhs, "i", "o")
    ob, of, osp = _parse_labels(out, "b", "f")
    if not (len(isp) == len(ksp) == len(osp)):
        raise AttributeSyntaxError(f"dim_labels {text!r} disagree on the number of spatial dimensions")
    return ConvDimLabels(ib, if_, isp, ki, ko, ksp, ob, of, osp)


def parse_computation_ref(text: str) -> ComputationRef:
    match = _NAME.fullmatch(text.strip())
    if not match:
        raise AttributeSyntaxError(f"expected a computation name, found {text!r}")
    return ComputationRef(match.group(1))


def parse_computation_list(text: str) -> tuple[ComputationRef, ...]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError(f"expected {{%comp1, %comp2}}, found {text!r}")
    inner = body[1:-1].strip()
    return tuple(parse_computation_ref(p) for p in inner.split(",")) if inner else ()


def parse_ident(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        raise AttributeSyntaxError(f"expected an identifier, found {text!r}")
    return text


_PARSERS = {
    AttrKind.INT: _int,
    AttrKind.BOOL: parse_bool,
    AttrKind.INT_LIST: parse_int_list,
    AttrKind.IDENT: parse_ident,
    AttrKind.SLICE: parse_slice,
    AttrKind.PADDING: parse_padding,
    AttrKind.WINDOW: parse_window,
    AttrKind.DIM_LABELS: parse_dim_labels,
    AttrKind.COMPUTATION: parse_computation_ref,
    AttrKind.COMPUTATION_LIST: parse_computation_list,
    AttrKind.FLOAT32: parse_float32,
}


def parse_attribute(key: str, text: str) -> object:
    """The typed value of attribute `key` written as `text`; unknown keys stay raw."""
    kind = ATTRIBUTE_KINDS.get(key)
    if kind is None:
        return RawAttribute(normalize_raw(text))
    return _PARSERS[kind](text)


def normalize_raw(text: str) -> str:
    """Collapses runs of whitespace outside string literals, so that formatting of an
    attribute the compiler does not interpret does not change the canonical text."""
    out = []
    in_string = False
    escaped = False
    pending_space = False
    for char in text.strip():
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char.isspace():
            pending_space = True
            continue
        if pending_space and out and out[-1] not in "{[(,=" and char not in "}]),=":
            out.append(" ")
        pending_space = False
        out.append(char)
        if char == '"':
            in_string = True
    return "".join(out)


def _join_ints(values: tuple[int, ...] | list[int], sep: str = ",") -> str:
    return sep.join(str(v) for v in values)


def format_window(window: Window) -> str:
    if not window.dims:
        return "{}"
    dims = window.dims
    parts = ["size=" + "x".join(str(d.size) for d in dims)]
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.pad_low or d.pad_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.pad_low}_{d.pad_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation != 1 for d in dims):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.reversal for d in dims):
        parts.append("rhs_reversal=" + "x".join(str(int(d.reversal)) for d in dims))
    return "{" + " ".join(parts) + "}"


def _format_labels(rank: int, named: dict[int, str], spatial: tuple[int, ...]) -> str:
    chars = [""] * rank
    for position, label in named.items():
        chars[position] = label
    for digit, position in enumerate(spatial):
        chars[position] = str(digit)
    return "".join(chars)


def format_dim_labels(labels: ConvDimLabels) -> str:
    rank = labels.num_spatial + 2
    lhs = _format_labels(rank, {labels.input_batch: "b", labels.input_feature: "f"}, labels.input_spatial)
    rhs = _format_labels(
        rank,
        {labels.kernel_input_feature: "i", labels.kernel_output_feature: "o"},
        labels.kernel_spatial,
    )
    out = _format_labels(rank, {labels.output_batch: "b", labels.output_feature: "f"}, labels.output_spatial)
    return f"{lhs}_{rhs}->{out}"


def format_slice(dims: tuple[SliceDim, ...]) -> str:
    parts = [
        f"[{d.start}:{d.limit}]" if d.stride == 1 else f"[{d.start}:{d.limit}:{d.stride}]" for d in dims
    ]
    return "{" + ", ".join(parts) + "}"


def format_padding(dims: tuple[PadDim, ...]) -> str:
    if not dims:
        return "{}"
    return "x".join(
        f"{d.low}_{d.high}" if d.interior == 0 else f"{d.low}_{d.high}_{d.interior}" for d in dims
    )


def format_attribute(value: object, computation_name=None) -> str:
    """Canonical text of a typed attribute value. `computation_name` maps a resolved
    computation to the name the printer gives it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # exact: a binary32 value printed as the binary64 that holds it
    if isinstance(value, str):
        return value
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "{" + _join_ints(value) + "}"
    if isinstance(value, tuple) and value and isinstance(value[0], SliceDim):
        return format_slice(value)
    if isinstance(value, tuple) and value and isinstance(value[0], PadDim):
        return format_padding(value)
    if isinstance(value, Window):
        return format_window(value)
    if isinstance(value, ConvDimLabels):
        return format_dim_labels(value)
    if isinstance(value, RawAttribute):
        return value.text
    if isinstance(value, ComputationRef):
        return "%" + value.name
    if isinstance(value, tuple):
        return "{" + ", ".join(format_attribute(v, computation_name) for v in value) + "}"
    if computation_name is not None:
        return "%" + computation_name(value)
    raise TypeError(f"cannot format attribute value {value!r}")

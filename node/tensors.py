"""Reading and writing tensors as .npy/.npz files, without pickle and without half-written
files."""

from __future__ import annotations

import contextlib
import functools
import io
import math
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from attest.digests import TENSOR_DIGEST_VERSION, tensor_digest
from attest.statement import TensorRecord
from core.atomic_files import write_atomic
from core.dtypes import from_name
from node.errors import NodeError


class TensorFileError(NodeError, ValueError):
    """A tensor file that cannot be read; the message names the file."""


def load_npy(path: str | Path) -> np.ndarray:
    """Loads one array from an .npy file (never unpickles)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            return np.load(handle, allow_pickle=False)
    except FileNotFoundError:
        raise TensorFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TensorFileError(f"{path}: is a directory") from None
    except (ValueError, OSError, EOFError) as exc:
        raise TensorFileError(f"{path}: not a readable .npy file ({exc})") from None


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy encoding of `array`, byte for byte what `np.save` writes; ml_dtypes' int4 and
    uint4 (what JAX hands out) as the int8 and uint8 holding their values, the form nodes take
    s4 and u4 in."""
    if array.dtype.name in ("int4", "uint4"):
        array = array.astype(np.int8 if array.dtype.name == "int4" else np.uint8)
    array = np.require(array, requirements="C")
    if not array.dtype.hasobject:  # object arrays: np.save refuses them below (no pickle)
        with contextlib.suppress(ValueError):  # a header over format 1.0's size: np.save's choice
            return _npy_header(array.dtype, array.shape) + array.tobytes()
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@functools.lru_cache(maxsize=1024)
def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The header `np.save` writes (format 1.0) before a C-order array of `dtype` and `shape`
    (kept: a node writes and reads the same few forms for every job)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def is_npy(data: bytes) -> bool:
    """Whether `data` starts as an .npy file does (numpy's magic string)."""
    return data.startswith(np.lib.format.MAGIC_PREFIX)


def read_npy(data: bytes, dtype: np.dtype | None = None, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The array in .npy `data` (never unpickled); ValueError if it is not one. Given the
    `dtype` and `shape` it should have, data that is exactly what `np.save` writes for them
    (a node's every input and output) is read without parsing the header."""
    if dtype is not None and shape is not None:
        header = _npy_header(dtype, shape)
        if data.startswith(header) and len(data) == len(header) + dtype.itemsize * math.prod(shape):
            return np.frombuffer(data, dtype, offset=len(header)).reshape(shape).copy()
    declared_type, declared_shape, fortran, offset = _npy_layout(data)
    # The header's shape is checked against the bytes that follow before anything is
    # allocated for it: 16 bytes declaring 10^10 elements are refused, not 40 GB asked for.
    size = declared_type.itemsize * math.prod(declared_shape)
    if len(data) - offset != size:
        raise ValueError(
            f"not a readable .npy file (its header declares {declared_type.name}{list(declared_shape)}, "
            f"{size} bytes, and {len(data) - offset} bytes follow)"
        )
    array = np.frombuffer(data, declared_type, math.prod(declared_shape), offset)
    return array.reshape(declared_shape, order="F" if fortran else "C").copy(order="K")


# numpy's messages about a bad .npy header, by how they start, and what ours say instead:
# numpy's go on to echo what the header held (reprs of what it parsed, even of the parser's
# own objects with their heap addresses), which the node must not send back to a client.
_HEADER_PROBLEMS = (
    ("EOF", "it ends inside its header"),
    ("the magic string is not correct", "it does not start with the .npy magic string"),
    ("Header info length", "its header is over numpy's size limit"),
    ("Header is not a dictionary", "its header is not a dictionary"),
    ("Header does not contain the correct keys", "its header's keys are not descr, fortran_order and shape"),
    ("shape is not valid", "its header's shape is not a tuple of integers"),
    ("fortran_order is not a valid bool", "its header's fortran_order is not True or False"),
    ("descr is not a valid dtype descriptor", "its header's descr is not an element type"),
)


def _header_problem(error: Exception) -> str:
    """What is wrong with an .npy header, in words of ours (see _HEADER_PROBLEMS)."""
    text = str(error)
    for start, problem in _HEADER_PROBLEMS:
        if text.startswith(start):
            return problem
    return "its header is not a valid .npy header"


def _npy_layout(data: bytes) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """The element type, shape, Fortran order and data offset an .npy header declares
    (format 1.0 or 2.0); ValueError naming the problem for anything else, pickled objects
    among them, without echoing what the header holds."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
    except Exception as error:  # a hostile header makes numpy raise anything, not only ValueError
        raise _unreadable(_header_problem(error)) from None
    read_header = _HEADER_READERS.get(version)
    if read_header is None:
        raise _unreadable(f"format version {version[0]}.{version[1]}; 1.0 and 2.0 are read")
    try:
        shape, fortran, dtype = read_header(stream)
    except Exception as error:  # IndexError, TypeError... as well as ValueError
        raise _unreadable(_header_problem(error)) from None
    if dtype.hasobject:
        raise _unreadable("it holds Python objects, never unpickled")
    if any(dim < 0 for dim in shape):
        raise _unreadable("its header's shape has a negative dimension")
    return dtype, tuple(shape), bool(fortran), stream.tell()


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _unreadable(problem: str) -> ValueError:
    return ValueError(f"not a readable .npy file ({problem})")


# The longest .npy header there is: format 1.0 (what `npy_bytes` writes) has a 2-byte length
# after the magic string and version, and numpy reads no longer header in format 2.0.
NPY_HEADER_BYTES = 10 + 0xFFFF


def npy_size_bound(record: TensorRecord) -> int:
    """The most bytes an .npy file of the tensor `record` describes may take: its elements
    and the longest header (what a reader may download before `recorded_array` checks it)."""
    return NPY_HEADER_BYTES + from_name(record.dtype).numpy.itemsize * math.prod(record.shape)


def recorded_array(data: bytes, record: TensorRecord, version: str = TENSOR_DIGEST_VERSION) -> np.ndarray:
    """The array in .npy `data` (never unpickled) as the tensor `record` describes, checked
    against it: element type, shape and digest (of `version`, the tensor digest version of
    the statement that holds the record: `Execution.digest_version`); ValueError when it is
    not that tensor. bfloat16 arrays round-trip .npy as raw 2-byte records and are read back
    as the recorded type."""
    dtype = from_name(record.dtype).numpy
    try:
        array = read_npy(data, dtype, record.shape)
    except ValueError as error:
        raise ValueError(f"{record.name}: {error}") from None
    if array.dtype != dtype and array.dtype.itemsize == dtype.itemsize:
        array = array.view(dtype)
    # The digest is what the record's signer claims: the bytes must also be the type and
    # shape the record names, or a signer could describe one shape over another's bytes.
    if array.dtype != dtype or array.shape != tuple(record.shape):
        raise ValueError(f"{record.name} is {array.dtype.name}{list(array.shape)}, its record says {record.dtype}{list(record.shape)}")
    if tensor_digest(array, version) != record.digest:
        raise ValueError(f"{record.name} does not match its recorded digest")
    return array


def save_npz_atomic(path: str | Path, arrays: Sequence[np.ndarray], prefix: str = "out") -> None:
    """Writes arrays as `{prefix}0`, `{prefix}1`, ... into an .npz; the file appears complete
    or not at all (written beside it, then renamed)."""

    def fill(handle: BinaryIO) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
            for index, array in enumerate(arrays):
                info = zipfile.ZipInfo(f"{prefix}{index}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                archive.writestr(info, npy_bytes(array))

    write_atomic(path, fill)

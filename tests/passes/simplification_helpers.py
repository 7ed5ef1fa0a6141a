"""Shared helpers for the pass tests: parsing, running a pass, special input values and
bit-exact comparison of reference outputs."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

from compiler.config import load_config
from compiler.driver import optimize
from compiler.hlo import canonical_text, load_module, verify_module
from compiler.hlo.ir import Instruction, Module
from compiler.passes.base import Pass
from compiler.program import Program, load_program
from compiler.reference import evaluate


def run_pass(pass_: Pass, text: str) -> tuple[Module, Module, bool]:
    """(the unchanged module, the module after `pass_`, whether the pass reported a change);
    the rewritten module must verify."""
    before = load_module(text)
    after = load_module(text)
    changed = pass_.run(after)
    verify_module(after)
    return before, after, changed


def assert_same_result(make_pass: Callable[[], Pass], text: str, variant: str) -> None:
    """`variant` spells the program of `text` another way (renamed, reordered): a fresh pass
    of each makes the same canonical module, so the pass's output does not depend on names
    or on the order of independent instructions."""
    assert variant != text
    _, one, _ = run_pass(make_pass(), text)
    _, two, _ = run_pass(make_pass(), variant)
    assert canonical(one) == canonical(two)


def optimized_by_default(text: str) -> tuple[Program, Module]:
    """The program of `text` and the module the default configuration's pipeline makes of it."""
    program = load_program(text)
    return program, optimize(program, load_config())


def instructions_of(module: Module, opcode: str) -> list[Instruction]:
    """Every `opcode` instruction of every computation of `module`."""
    return [i for c in module.computations for i in c.instructions if i.opcode == opcode]


def opcodes(module: Module) -> list[str]:
    """The entry's opcodes in canonical (execution) order."""
    return [i.opcode for i in module.entry.execution_order()]


def bits(array: np.ndarray) -> bytes:
    """The raw bytes of an array, with its type and dimensions (compare bits, not values)."""
    array = np.ascontiguousarray(array)
    return f"{array.dtype}{array.shape}".encode() + array.tobytes()


def assert_bit_identical(before: Module, after: Module, inputs: list[np.ndarray] | None = None) -> None:
    """The reference evaluator gives the same output bits for both modules, on `inputs` or
    by default on inputs_for(before) (special values of every parameter's type)."""
    if inputs is None:
        inputs = inputs_for(before)
    expected = evaluate(before, inputs)
    got = evaluate(after, inputs)
    assert len(expected) == len(got)
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert bits(have) == bits(want), f"output {index} differs:\n{have!r}\nwant\n{want!r}"


_FLOAT_BITS = {
    "f16": (
        np.float16,
        np.uint16,
        [
            0x0000,
            0x8000,
            0x7C00,
            0xFC00,
            0x7E00,
            0x7E01,
            0xFE00,
            0x7C01,
            0x7D55,
            0x0001,
            0x83FF,
            0x7BFF,
            0x3C00,
            0xBC00,
        ],
    ),
    "bf16": (
        ml_dtypes.bfloat16,
        np.uint16,
        [
            0x0000,
            0x8000,
            0x7F80,
            0xFF80,
            0x7FC0,
            0x7FC1,
            0xFFC0,
            0x7F81,
            0x7FA5,
            0x0001,
            0x807F,
            0x7F7F,
            0x3F80,
            0xBF80,
        ],
    ),
    "f32": (
        np.float32,
        np.uint32,
        [
            0x00000000,
            0x80000000,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x7FC00001,
            0xFFC00000,
            0x7F800001,
            0x7FA5A5A5,
            0x00000001,
            0x807FFFFF,
            0x7F7FFFFF,
            0x3F800000,
            0xBF800000,
        ],
    ),
    "f64": (
        np.float64,
        np.uint64,
        [
            0x0,
            0x8000000000000000,
            0x7FF0000000000000,
            0xFFF0000000000000,
            0x7FF8000000000000,
            0x7FF8000000000001,
            0xFFF8000000000000,
            0x7FF0000000000001,
            0x7FF5A5A5A5A5A5A5,
            0x1,
            0x800FFFFFFFFFFFFF,
            0x7FEFFFFFFFFFFFFF,
            0x3FF0000000000000,
            0xBFF0000000000000,
        ],
    ),
}
_INTS = {
    "s8": np.int8,
    "s16": np.int16,
    "s32": np.int32,
    "s64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}

# Number of special values per element type (for building shapes in tests).
SPECIAL_COUNT = 14


def special_values(dtype: str) -> np.ndarray:
    """SPECIAL_COUNT values of `dtype` that exercise every corner of the contract: for floats
    +-0, +-inf, the canonical NaN, NaNs with payloads, a negative NaN, signalling NaNs,
    subnormals, the largest finite value, +-1; for integers 0, +-1, the extremes and some
    others; for pred alternating values."""
    if dtype in _FLOAT_BITS:
        storage, unsigned, patterns = _FLOAT_BITS[dtype]
        return np.array(patterns, dtype=unsigned).view(storage)
    if dtype == "pred":
        return np.array([i % 3 == 0 for i in range(SPECIAL_COUNT)], dtype=np.bool_)
    kind = _INTS[dtype]
    info = np.iinfo(kind)
    values = [
        0,
        1,
        info.max,
        info.min,
        info.max - 1,
        info.min + 1,
        2,
        3,
        7,
        info.max // 2,
        100,
        5,
        1,
        0,
    ]
    if info.min < 0:
        values[2:4] = [-1, info.min]
        values[10] = info.max
    return np.array(values, dtype=kind)


def inputs_for(module: Module) -> list[np.ndarray]:
    """One array per entry parameter, filled with special values of its type (cycled), a
    different rotation per parameter so binary ops see every pairing that fits."""
    arrays = []
    for parameter in module.entry.parameters:
        shape = parameter.array_shape
        values = special_values(shape.dtype.name)
        count = shape.element_count
        index = (
            np.arange(count) * (1 + parameter.parameter_number) + 3 * parameter.parameter_number
        ) % values.size
        arrays.append(values[index].reshape(shape.dims))
    return arrays


def canonical(module: Module) -> str:
    return canonical_text(module)

"""The numerics primitives in LLVM IR (compiler/codegen/numerics_ir.py) against the reference
implementations of the numerics contract (compiler/numerics/), bit for bit.

Every primitive is compiled into a small kernel (a loop over arrays in vector chunks of W lanes
plus a scalar tail) for x86-64-v2 (no FMA, no F16C), v3 (AVX2, FMA, F16C) and v4 (AVX-512),
run on special values and random bit patterns, and compared with the reference. The object
files must be self-contained (no undefined symbols, no function but the kernels, so no call)
and identical when compiled twice.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import gmpy2
import numpy as np
import pytest
from llvmlite import ir

from attest.digests import sha256_hex
from compiler.codegen import numerics_ir as nir
from compiler.codegen.llvm_ir import storage_type
from compiler.codegen.objfile import STB_GLOBAL, STT_FUNC, elf_symbols, undefined_symbols
from compiler.codegen.target import compile_ir
from compiler.config import CompilerConfig
from compiler.numerics import convert as ref_convert
from compiler.numerics import floats
from compiler.reference.elementwise import float_maximum, float_minimum
from compiler.runtime.loader import load_object
from core.dtypes import (
    ALL_DTYPES,
    BF16,
    C64,
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F16,
    F32,
    F64,
    FLOAT8_DTYPES,
    PRED,
    S2,
    S4,
    S8,
    S32,
    S64,
    U2,
    U8,
    U64,
    DType,
)
from harness.sampling import one_each
from harness.targets import CPUS as ALL_TARGETS
from harness.targets import HOST, session_cache
from harness.targets import config as target_config

# Every pinned target, the x86-64 levels by their short names.
TARGETS = {name.removeprefix("x86-64-"): target_config(name) for name in ALL_TARGETS}
# The targets this host executes; the others are compiled and checked by
# test_object_is_self_contained and test_ir_has_no_fast_math_and_no_external_calls.
RUN_TARGETS = [name for name, config in TARGETS.items() if HOST.can_run(config)]
FLOATS = (F16, BF16, F32, F64)
SEED = 20240611
RANDOM_COUNT = 12000


# --- kernels ----------------------------------------------------------------------------------

Body = Callable[[ir.IRBuilder, list[ir.Value], CompilerConfig], ir.Value]


@dataclass(frozen=True)
class Kernel:
    """`out[i] = body(in0[i], in1[i], ...)` over n elements, W lanes at a time."""

    name: str
    inputs: tuple[DType, ...]
    output: DType
    body: Body
    width: int


def _emit_kernel(module: ir.Module, kernel: Kernel, config: CompilerConfig) -> None:
    pointer = ir.PointerType()
    i64 = ir.IntType(64)
    function_type = ir.FunctionType(ir.VoidType(), [i64, pointer, pointer, pointer, pointer])
    function = ir.Function(module, function_type, kernel.name)
    n, *pointers = function.args
    inputs, output = pointers[: len(kernel.inputs)], pointers[3]
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    entry = builder.block
    vector_head = builder.append_basic_block("vector.head")
    vector_body = builder.append_basic_block("vector.body")
    tail_head = builder.append_basic_block("tail.head")
    tail_body = builder.append_basic_block("tail.body")
    done = builder.append_basic_block("done")
    width = ir.Constant(i64, kernel.width)
    one = ir.Constant(i64, 1)

    def element_types(lanes: int | None) -> tuple[list[ir.Type], ir.Type]:
        def shaped(dtype: DType) -> ir.Type:
            scalar = storage_type(dtype)
            return scalar if lanes is None else ir.VectorType(scalar, lanes)

        return [shaped(d) for d in kernel.inputs], shaped(kernel.output)

    def body(index: ir.Value, lanes: int | None) -> None:
        in_types, out_type = element_types(lanes)
        args = []
        for dtype, ptr, ty in zip(kernel.inputs, inputs, in_types, strict=True):
            address = builder.gep(ptr, [index], source_etype=storage_type(dtype))
            args.append(builder.load(address, typ=ty, align=dtype.itemsize))
        result = kernel.body(builder, args, config)
        assert result.type == out_type, (kernel.name, result.type, out_type)
        address = builder.gep(output, [index], source_etype=storage_type(kernel.output))
        builder.store(result, address, align=kernel.output.itemsize)

    builder.branch(vector_head)
    builder.position_at_end(vector_head)
    index = builder.phi(i64)
    index.add_incoming(ir.Constant(i64, 0), entry)
    fits = builder.icmp_signed("<=", builder.add(index, width), n)
    builder.cbranch(fits, vector_body, tail_head)
    builder.position_at_end(vector_body)
    body(index, kernel.width)
    index.add_incoming(builder.add(index, width), builder.block)
    builder.branch(vector_head)

    builder.position_at_end(tail_head)
    tail_index = builder.phi(i64)
    tail_index.add_incoming(index, vector_head)
    builder.cbranch(builder.icmp_signed("<", tail_index, n), tail_body, done)
    builder.position_at_end(tail_body)
    body(tail_index, None)
    tail_index.add_incoming(builder.add(tail_index, one), builder.block)
    builder.branch(tail_head)
    builder.position_at_end(done)
    builder.ret_void()


def _without_fma(config: CompilerConfig) -> CompilerConfig:
    return replace(config, features="-fma")


def _unary(function: Callable[..., ir.Value], *extra: object) -> Body:
    return lambda builder, args, config: function(builder, args[0], *extra)


# Every conversion of the contract: all pairs of types but complex to real, which the verifier
# refuses (it would drop the imaginary part). The 8-bit floats and s2/u2 convert through the
# f32 (or s8/u8) paths plus a rounding or wrapping step: they are swept against one type of
# each kind and width (`PARTNERS`) and each other's families, in a module of their own
# compiled for one target that runs (the object checks below compile the main module for
# every target). tests/reference/test_float8.py converts every code of every 8-bit type on
# every target, and tests/codegen/test_int4.py s4/u4 to and from every type.
SEPARATE_TYPES = (*FLOAT8_DTYPES, S2, U2)
PARTNERS = (PRED, S4, S8, U8, S32, U64, S64, F16, BF16, F32, F64, C64, F8E4M3FN, F8E5M2, F8E4M3FNUZ, S2)
ALL_CONVERSIONS = [(s, t) for s, t in itertools.product(ALL_DTYPES, repeat=2) if t.is_complex or not s.is_complex]
CONVERSIONS = [(s, t) for s, t in ALL_CONVERSIONS if s not in SEPARATE_TYPES and t not in SEPARATE_TYPES]
SEPARATE_CONVERSIONS = [
    (s, t) for s, t in ALL_CONVERSIONS if s != t and ((s in SEPARATE_TYPES and t in PARTNERS) or (t in SEPARATE_TYPES and s in PARTNERS))
]
SWEPT_CONVERSIONS = CONVERSIONS + SEPARATE_CONVERSIONS


def _kernels() -> list[Kernel]:
    # Vector widths vary between kernels (every kernel also runs its scalar tail).
    widths = itertools.cycle((4, 8, 2, 16))
    kernels: list[Kernel] = []

    def add(
        name: str, inputs: tuple[DType, ...], output: DType, body: Body, width: int = 0
    ) -> None:
        kernels.append(Kernel(name, inputs, output, body, width or next(widths)))

    for dtype in FLOATS:
        add(f"canon_{dtype}", (dtype,), dtype, _unary(nir.canonicalize_nan, dtype))
    for dtype in (F16, BF16):
        add(f"widen_{dtype}", (dtype,), F32, _unary(nir.widen_to_f32, dtype))
    for dtype in (F16, BF16, F32):
        add(f"round_{dtype}", (F32,), dtype, _unary(nir.round_f32_to, dtype))
    for dtype in (F32, F64):
        three, two = (dtype,) * 3, (dtype,) * 2

        def fma(
            b: ir.IRBuilder, a: list[ir.Value], c: CompilerConfig, d: DType = dtype
        ) -> ir.Value:
            return nir.fma(b, *a, d, c)

        def fma_emulated(b: ir.IRBuilder, a: list[ir.Value], c: CompilerConfig, d: DType = dtype):
            return nir.fma(b, *a, d, _without_fma(c))

        def fmod(
            b: ir.IRBuilder, a: list[ir.Value], c: CompilerConfig, d: DType = dtype
        ) -> ir.Value:
            return nir.fmod(b, *a, d)

        # `fma_*` uses the target's FMA where it has one; `fma_emulated_*` never does.
        add(f"fma_{dtype}", three, dtype, fma, 4)
        add(f"fma_emulated_{dtype}", three, dtype, fma_emulated, 16 if dtype is F32 else 8)
        add(f"fmod_{dtype}", two, dtype, fmod, 4)
        for is_max in (True, False):

            def min_max(b, a, c, d: DType = dtype, m: bool = is_max) -> ir.Value:
                return nir.float_min_max(b, *a, d, m)

            add(f"{'max' if is_max else 'min'}_{dtype}", two, dtype, min_max)
    kernels += _conversion_kernels(CONVERSIONS)
    return kernels


def _conversion_kernels(pairs: list[tuple[DType, DType]]) -> list[Kernel]:
    widths = itertools.cycle((4, 8, 2, 16))
    kernels = []
    for source, target in pairs:

        def convert(b, a, c, s: DType = source, t: DType = target) -> ir.Value:
            return nir.convert(b, a[0], s, t, c)

        kernels.append(Kernel(f"convert_{source}_{target}", (source,), target, convert, next(widths)))
    return kernels


KERNELS = {kernel.name: kernel for kernel in _kernels()}
SEPARATE_KERNELS = {kernel.name: kernel for kernel in _conversion_kernels(SEPARATE_CONVERSIONS)}


def module_ir(config: CompilerConfig, kernels: dict[str, Kernel] = KERNELS) -> str:
    module = ir.Module(name="numerics_ir_test")
    for kernel in kernels.values():
        _emit_kernel(module, kernel, config)
    return str(module)


@cache
def compiled(target: str, separate: bool = False) -> bytes:
    """The object of the module for `target`, compiled once per test session: the workers
    share it through the session's directory, keyed by the IR and the configuration (about
    five seconds of LLVM a target; test_compilation_is_deterministic compiles afresh)."""
    config = TARGETS[target]
    text = module_ir(config, SEPARATE_KERNELS if separate else KERNELS)
    path = session_cache() / f"numerics-ir-{sha256_hex((text + config.digest()).encode())}.o"
    if path.is_file():
        return path.read_bytes()
    data = compile_ir(text, config)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return data


@cache
def loaded(target: str, separate: bool = False):
    return load_object(compiled(target, separate), TARGETS[target])


def run(target: str, name: str, *inputs: np.ndarray) -> np.ndarray:
    """Runs kernel `name` on storage arrays (f16/bf16 as uint16, pred as uint8)."""
    separate = name in SEPARATE_KERNELS
    kernel = SEPARATE_KERNELS[name] if separate else KERNELS[name]
    arrays = [np.ascontiguousarray(a) for a in inputs]
    for array, dtype in zip(arrays, kernel.inputs, strict=True):
        assert array.dtype == _storage_numpy(dtype), (name, array.dtype)  # never convert silently
    n = len(arrays[0])
    out = np.zeros(n, dtype=_storage_numpy(kernel.output))
    pointers = [a.ctypes.data for a in arrays] + [None] * (3 - len(arrays)) + [out.ctypes.data]
    c_ptr = ctypes.c_void_p
    function = loaded(target, separate).function(name, None, ctypes.c_int64, c_ptr, c_ptr, c_ptr, c_ptr)
    function(n, *pointers)
    return out


def _storage_numpy(dtype: DType) -> np.dtype:
    if dtype in (F16, BF16):
        return np.dtype(np.uint16)
    if dtype is PRED:
        return np.dtype(np.uint8)
    return dtype.numpy


def as_values(bits: np.ndarray, dtype: DType) -> np.ndarray:
    """Storage array -> the reference's numpy type."""
    if dtype is PRED:
        return bits.astype(bool)
    return bits.view(dtype.numpy)


def as_storage(values: np.ndarray, dtype: DType) -> np.ndarray:
    values = np.ascontiguousarray(np.asarray(values, dtype=dtype.numpy))
    if dtype is PRED:
        return values.astype(np.uint8)
    return values.view(_storage_numpy(dtype))


def _bits(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    if array.dtype.itemsize == 16:  # c128: its two 64-bit halves
        return array.reshape(-1).view(np.uint64).reshape(*array.shape, 2)
    return array.view(np.dtype(f"uint{array.dtype.itemsize * 8}"))


def assert_bits_equal(
    actual: np.ndarray, expected: np.ndarray, context: str, *inputs: np.ndarray
) -> None:
    """Bit-for-bit equality; a failure lists the first differing elements with their inputs."""
    got, want = _bits(actual), _bits(expected)
    bad = np.flatnonzero(got != want)
    if bad.size:
        rows = []
        for i in bad[:8].tolist():
            shown = ", ".join(hex(int(_bits(x)[i])) for x in inputs)
            rows.append(f"  [{i}] in ({shown}): got {hex(int(got[i]))}, want {hex(int(want[i]))}")
        pytest.fail(f"{context}: {bad.size} of {got.size} differ\n" + "\n".join(rows))


# --- test data --------------------------------------------------------------------------------


def _rng(tag: str) -> np.random.Generator:
    return np.random.default_rng([SEED, *tag.encode()])


def _random_bits(dtype: DType, count: int, tag: str) -> np.ndarray:
    bits = _rng(tag).integers(0, 1 << 63, size=count, dtype=np.uint64, endpoint=True)
    bits ^= _rng(tag + "/hi").integers(0, 2, size=count, dtype=np.uint64) << np.uint64(63)
    return bits.astype(np.dtype(f"uint{dtype.bits}")).view(
        _storage_numpy(dtype) if dtype is not PRED else np.uint8
    )


def _moderate(dtype: DType, count: int, tag: str, low: int, high: int) -> np.ndarray:
    """Random values with binary exponents in [low, high), random signs and significands."""
    rng = _rng(tag)
    values = rng.uniform(1.0, 2.0, size=count) * np.exp2(rng.integers(low, high, size=count))
    values *= rng.choice([-1.0, 1.0], size=count)
    with np.errstate(over="ignore"):
        return as_storage(floats.round_from_f64(values, dtype), dtype)


def _neighbours(values: list[float], dtype: DType) -> list[float]:
    """Each value rounded to `dtype` and its next values up and down in `dtype`."""
    out: list[float] = []
    typed = floats.round_from_f64(np.array(values, dtype=np.float64), dtype)
    as_f64 = ref_convert.float_to_f64(typed, dtype)
    for value in as_f64.tolist():
        out.append(value)
        out.extend(_step(value, dtype, +1))
        out.extend(_step(value, dtype, -1))
    return out


def _step(value: float, dtype: DType, direction: int) -> list[float]:
    bits = as_storage(floats.round_from_f64(np.array([value]), dtype), dtype)
    unsigned = bits.view(np.dtype(f"uint{dtype.bits}"))
    one = unsigned.dtype.type(1)
    moved = (unsigned + one if direction > 0 else unsigned - one).view(_storage_numpy(dtype))
    result = ref_convert.float_to_f64(as_values(moved, dtype), dtype)
    return [float(v) for v in result if np.isfinite(v)]


def float_specials(dtype: DType) -> np.ndarray:
    """Zeros, infinities, NaNs with payloads and both signs, subnormals, extremes, rounding
    ties of the narrower types, and values around the bounds of every integer type."""
    layout = dtype.float_layout
    width = dtype.bits
    mantissa = layout.mantissa_bits
    raw = [
        0,
        layout.sign_mask,
        layout.inf_bits,
        layout.inf_bits | layout.sign_mask,
        layout.canonical_nan,
        layout.canonical_nan | layout.sign_mask,
        layout.inf_bits | 1,
        layout.inf_bits | 1 | layout.sign_mask,
        layout.abs_mask,
        (1 << width) - 1,
        layout.inf_bits | (1 << (mantissa - 1)) | 5,
        1,
        2,
        3,
        layout.mantissa_mask,
        layout.mantissa_mask - 1,
        1 << mantissa,
        (1 << mantissa) | 1,
        layout.inf_bits - 1,
        layout.inf_bits - 2,
        (layout.bias << mantissa),
        (layout.bias << mantissa) | 1,
    ]
    raw += [v | layout.sign_mask for v in raw]
    bits = np.array([v & ((1 << width) - 1) for v in raw], dtype=np.dtype(f"uint{width}"))
    specials = [as_values(bits.view(_storage_numpy(dtype)), dtype)]
    bounds = [
        0.5,
        1.0,
        1.5,
        2.5,
        3.0,
        127.0,
        128.0,
        255.0,
        256.0,
        32767.0,
        32768.0,
        65535.0,
        65536.0,
        2.0**24 + 1,
        2.0**31,
        2.0**32,
        2.0**53 + 2,
        2.0**63,
        2.0**64,
        65504.0,
        65520.0,
        3.4028235677973366e38,
        3.4028235677973366e38 * (1 + 2**-25),
        2.0**-14,
        2.0**-24,
        2.0**-25,
        1.5 * 2.0**-25,
        2.0**-126,
        2.0**-149,
        2.0**-150,
        1.5 * 2**-150,
        2.0**-1022,
    ]
    bounds += [2.0**31 + 0.5, 2.0**31 - 0.5, 2.0**32 - 0.5, 2.0**15 - 0.5, 2.0**8 - 0.5]
    with np.errstate(all="ignore"):  # sNaNs and overflows are part of the data
        near = _neighbours(bounds, dtype)
        values = np.array(near + [-v for v in near], dtype=np.float64)
        specials.append(floats.round_from_f64(values, dtype))
    return as_storage(np.concatenate(specials), dtype)


def float_inputs(dtype: DType, tag: str) -> np.ndarray:
    parts = [
        float_specials(dtype),
        _random_bits(dtype, RANDOM_COUNT, tag),
        _moderate(dtype, RANDOM_COUNT // 2, tag + "/moderate", -30, 70),
    ]
    return np.concatenate(parts)


def integer_specials(dtype: DType) -> np.ndarray:
    if dtype is PRED:
        return np.array([0, 1], dtype=np.uint8)
    info = np.iinfo(dtype.numpy)
    values = {0, 1, 2, -1, -2, info.min, info.max, info.min + 1, info.max - 1}
    for k in range(dtype.bits):
        values |= {(1 << k), (1 << k) + 1, (1 << k) - 1, -(1 << k), -(1 << k) - 1}
    # Rounding ties and their neighbours for every float significand width (f64 53, f32 24,
    # f16 11, bf16 8) at every position.
    for precision in (8, 11, 24, 53):
        for shift in range(1, dtype.bits - precision + 1):
            base = ((1 << (precision - 1)) | 0b1011) << shift
            for odd_base in (base, base + (1 << shift)):
                tie = odd_base + (1 << (shift - 1))
                values |= {tie, tie + 1, tie - 1, -tie, -tie - 1, -tie + 1}
    wrapped = [v % (1 << dtype.bits) for v in values]
    return np.array(sorted(wrapped), dtype=np.dtype(f"uint{dtype.bits}")).view(dtype.numpy)


def integer_inputs(dtype: DType, tag: str) -> np.ndarray:
    if dtype is PRED:
        return _rng(tag).integers(0, 2, size=1001, dtype=np.uint8)
    if dtype.is_sub_byte:  # every value, held as the contract holds it
        least, greatest = dtype.integer_bounds
        return np.arange(least, greatest + 1).astype(dtype.numpy)
    random = _random_bits(dtype, RANDOM_COUNT, tag).view(dtype.numpy)
    # Random magnitudes of every bit length, so that every float rounding position is hit.
    rng = _rng(tag + "/lengths")
    lengths = rng.integers(1, dtype.bits + 1, size=RANDOM_COUNT).astype(np.uint64)
    spread = random.view(np.dtype(f"uint{dtype.bits}")).astype(np.uint64) >> (
        np.uint64(64) - lengths
    )
    spread = spread.astype(np.dtype(f"uint{dtype.bits}")).view(dtype.numpy)
    return np.concatenate([integer_specials(dtype), random, spread])


def inputs_for(dtype: DType, tag: str) -> np.ndarray:
    if dtype.is_complex:  # every pairing of hard real parts with hard imaginary parts
        real, imag = float_inputs(dtype.component, tag + "/re"), float_inputs(dtype.component, tag + "/im")
        count = min(len(real), len(imag))
        values = np.empty(count, dtype.numpy)
        values.real, values.imag = real[:count], np.roll(imag[:count], 7)
        return values
    return float_inputs(dtype, tag) if dtype.is_float else integer_inputs(dtype, tag)


def pairs(dtype: DType, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of special values, then random pairs."""
    specials = float_specials(dtype)
    a_special, b_special = (x.ravel() for x in np.meshgrid(specials, specials))
    a = np.concatenate([a_special, float_inputs(dtype, tag + "/a")])
    b = np.concatenate([b_special, float_inputs(dtype, tag + "/b")])
    return a, b


# --- object-file checks -------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_object_is_self_contained(target: str) -> None:
    symbols = elf_symbols(compiled(target))
    assert undefined_symbols(compiled(target)) == []
    global_names = {s.name for s in symbols if s.binding == STB_GLOBAL and s.defined}
    assert global_names == set(KERNELS)
    # Every helper is internal and inlined away: an out-of-line one would be a function
    # symbol of its own (ELF lists local functions too), so the code calls nothing.
    functions = {s.name for s in symbols if s.kind == STT_FUNC}
    assert functions == set(KERNELS)


def test_compilation_is_deterministic() -> None:
    config = TARGETS["v2"]
    assert compile_ir(module_ir(config), config) == compiled("v2")


def test_ir_has_no_fast_math_and_no_external_calls() -> None:
    for target, config in TARGETS.items():
        text = module_ir(config)
        for flag in ("fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "frem"):
            assert re.search(rf"\b{flag}\b", text) is None, (target, flag)
        declared = set(re.findall(r"^declare .*?@\"?([\w.]+)\"?\(", text, flags=re.M))
        assert all(name.startswith("llvm.") for name in declared), declared
        uses_fma = any(name.startswith("llvm.fma") for name in declared)
        assert uses_fma == config.has_fma, target


# --- primitives -------------------------------------------------------------------------------


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_canonicalize_nan(target: str, dtype: DType) -> None:
    x = float_inputs(dtype, "canon")
    expected = as_storage(floats.canonicalize_nans(as_values(x, dtype), dtype), dtype)
    assert_bits_equal(run(target, f"canon_{dtype}", x), expected, f"canonicalize {dtype}", x)


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", (F16, BF16), ids=str)
def test_widen_to_f32(target: str, dtype: DType) -> None:
    x = np.arange(1 << 16, dtype=np.uint16)  # every value
    expected = floats.to_f32(as_values(x, dtype), dtype)
    assert_bits_equal(run(target, f"widen_{dtype}", x), expected, f"widen {dtype}", x)


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", (F16, BF16, F32), ids=str)
def test_round_f32_to(target: str, dtype: DType) -> None:
    x = float_inputs(F32, "round").view(np.float32)
    # Every tie and its neighbours of f16 and bf16 in binary32.
    ties = np.concatenate(
        [float_specials(F16).view(np.uint16), float_specials(BF16).view(np.uint16)]
    )
    wide = np.concatenate(
        [
            floats.to_f32(as_values(ties[: len(ties) // 2], F16), F16).view(np.uint32),
            floats.to_f32(as_values(ties[len(ties) // 2 :], BF16), BF16).view(np.uint32),
        ]
    )
    around = (wide[:, None].astype(np.int64) + np.arange(-2, 3) * (1 << 12)).ravel() % (1 << 32)
    x = np.concatenate([x, around.astype(np.uint32).view(np.float32)])
    expected = as_storage(floats.round_from_f32(x, dtype), dtype)
    assert_bits_equal(run(target, f"round_{dtype}", x), expected, f"round f32 to {dtype}", x)


def fma_inputs(dtype: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triples of special values, random bit patterns, and constructed hard cases: cancellation
    (c close to -a*b), results around the subnormal range and the overflow threshold, ties."""
    specials = float_specials(dtype)[::2]
    a0, b0, c0 = (x.ravel() for x in np.meshgrid(specials, specials, specials[::3]))
    count = RANDOM_COUNT
    a1, b1, c1 = (float_inputs(dtype, f"fma/{k}") for k in "abc")
    f = dtype.numpy.type
    # Cancellation: c = -(a*b) rounded, nudged by a few ulps.
    a2 = _moderate(dtype, count, "fma/ca", -40, 40).view(f)
    b2 = _moderate(dtype, count, "fma/cb", -40, 40).view(f)
    with np.errstate(all="ignore"):
        c2 = -(a2 * b2)
        nudge = _rng("fma/nudge").integers(-3, 4, size=count)
        c2 = (c2.view(f"int{dtype.bits}") + nudge.astype(f"int{dtype.bits}")).view(f)
    # Products near the bottom and the top of the exponent range.
    emin, emax = (-126, 127) if dtype is F32 else (-1022, 1023)
    mantissa = dtype.float_layout.mantissa_bits
    a3 = _moderate(dtype, count, "fma/la", emin // 2 - mantissa // 2 - 2, emin // 2 + 4).view(f)
    b3 = _moderate(dtype, count, "fma/lb", emin // 2 - mantissa // 2 - 2, emin // 2 + 4).view(f)
    c3 = _moderate(dtype, count, "fma/lc", emin - mantissa - 1, emin + 3).view(f)
    a4 = _moderate(dtype, count, "fma/ha", emax // 2 - 1, emax // 2 + 1).view(f)
    b4 = _moderate(dtype, count, "fma/hb", emax // 2 - 1, emax // 2 + 1).view(f)
    c4 = _moderate(dtype, count, "fma/hc", emax - 3, emax + 1).view(f)
    # Ties: a*b has a tail of exactly half an ulp of c's precision (a = 1 + 2^-k, b = 1 + 2^-j).
    rng = _rng("fma/ties")
    k = rng.integers(1, mantissa + 1, size=count)
    j = rng.integers(1, mantissa + 1, size=count)
    a5 = (1 + np.exp2(-k.astype(float))).astype(f)
    b5 = (1 + np.exp2(-j.astype(float))).astype(f) * rng.choice([-1, 1], size=count).astype(f)
    c5 = (
        rng.choice([-1, 1, 0.5, -0.5], size=count)
        * np.exp2(-rng.integers(0, mantissa + 2, size=count))
    ).astype(f)
    a = np.concatenate([a0.view(f), a1.view(f), a2, a3, a4, a5])
    b = np.concatenate([b0.view(f), b1.view(f), b2, b3, b4, b5])
    c = np.concatenate([c0.view(f), c1.view(f), c2, c3, c4, c5])
    return a, b, c


def exact_fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fma by MPFR in an IEEE binary64 context (a second, independent oracle)."""
    with gmpy2.context(gmpy2.ieee(64)):
        results = [
            float(gmpy2.fma(x, y, z))
            for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
        ]
    return floats.canonicalize_nans(np.array(results, dtype=np.float64), F64)


@cache
def fma_case(dtype: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return _fma_case(dtype)


def _fma_case(dtype: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a, b, c = fma_inputs(dtype)
    expected = floats.fma_f32(a, b, c) if dtype is F32 else floats.fma_f64(a, b, c)
    return a, b, c, expected


def test_fma_f64_reference_agrees_with_mpfr() -> None:
    """The reference agrees with MPFR, an independent oracle, on every f64 case (overflowing
    products with an infinite addend and overflowing results included)."""
    a, b, c, expected = fma_case(F64)
    with np.errstate(all="ignore"):
        assert expected.tobytes() == exact_fma_f64(a, b, c).tobytes()


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", (F32, F64), ids=str)
@pytest.mark.parametrize("variant", ("fma", "fma_emulated"))
def test_fma(target: str, dtype: DType, variant: str) -> None:
    a, b, c, expected = fma_case(dtype)
    actual = run(target, f"{variant}_{dtype}", a, b, c)
    assert_bits_equal(actual, expected, f"{variant} {dtype} on {target}", a, b, c)


@pytest.mark.parametrize("dtype", (F32, F64), ids=str)
def test_fma_emulation_equals_hardware(dtype: DType) -> None:
    a, b, c, _ = fma_case(dtype)
    extra = [x.view(dtype.numpy) for x in (float_inputs(dtype, f"fma-hw/{k}") for k in "abc")]
    a, b, c = (np.concatenate([x, y]) for x, y in zip((a, b, c), extra, strict=True))
    emulated = run("v2", f"fma_{dtype}", a, b, c)
    hardware = run("v3", f"fma_{dtype}", a, b, c)
    assert_bits_equal(emulated, hardware, f"fma {dtype}: v2 (emulated) vs v3 (hardware)", a, b, c)
    if not HOST.can_run(TARGETS["v4"]):
        return
    assert_bits_equal(
        run("v4", f"fma_emulated_{dtype}", a, b, c),
        run("v4", f"fma_{dtype}", a, b, c),
        "v4",
        a,
        b,
        c,
    )


def fmod_inputs(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    a, b = pairs(dtype, "fmod")
    f = dtype.numpy.type
    emin, emax = (-149, 128) if dtype is F32 else (-1074, 1024)
    # Every exponent difference, including the largest (huge / smallest subnormal).
    count = RANDOM_COUNT
    a1 = _moderate(dtype, count, "fmod/a1", emin, emax).view(f)
    b1 = _moderate(dtype, count, "fmod/b1", emin, emax).view(f)
    # Small differences: the quotient has a few bits; results are often exact multiples.
    a2 = _moderate(dtype, count, "fmod/a2", -5, 5).view(f)
    b2 = _moderate(dtype, count, "fmod/b2", -5, 5).view(f)
    # Subnormal divisors and results.
    a3 = _moderate(dtype, count, "fmod/a3", emin, emin + 60).view(f)
    b3 = _moderate(dtype, count, "fmod/b3", emin, emin + 30).view(f)
    extremes = np.array(
        [np.finfo(f).max, np.finfo(f).smallest_subnormal, -np.finfo(f).max], dtype=f
    )
    a4, b4 = (x.ravel() for x in np.meshgrid(extremes, extremes))
    return (
        np.concatenate([a.view(f), a1, a2, a3, a4]),
        np.concatenate([b.view(f), b1, b2, b3, b4]),
    )


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", (F32, F64), ids=str)
def test_fmod(target: str, dtype: DType) -> None:
    a, b = fmod_inputs(dtype)
    with np.errstate(invalid="ignore"):
        expected = floats.canonicalize_nans(np.fmod(a, b), dtype)
    assert_bits_equal(run(target, f"fmod_{dtype}", a, b), expected, f"fmod {dtype}", a, b)


@pytest.mark.parametrize("target", RUN_TARGETS)
@pytest.mark.parametrize("dtype", (F32, F64), ids=str)
@pytest.mark.parametrize("is_max", (True, False), ids=("max", "min"))
def test_float_min_max(target: str, dtype: DType, is_max: bool) -> None:
    a, b = (x.view(dtype.numpy) for x in pairs(dtype, "minmax"))
    with np.errstate(invalid="ignore"):
        expected = (float_maximum if is_max else float_minimum)(a, b)
    expected = floats.canonicalize_nans(np.asarray(expected, dtype=dtype.numpy), dtype)
    name = f"{'max' if is_max else 'min'}_{dtype}"
    assert_bits_equal(run(target, name, a, b), expected, name, a, b)


@cache
def convert_case(source: DType, target: DType) -> tuple[np.ndarray, np.ndarray]:
    x = inputs_for(source, f"convert/{source}")
    with np.errstate(all="ignore"):
        expected = ref_convert.convert(as_values(x, source), source, target)
    return x, as_storage(expected, target)


# Every source type on the widest target this host runs (which also takes the separate
# conversions) and, in turn, on one of the others (harness/sampling.py).
CONVERT_CASES = [(RUN_TARGETS[-1], s) for s in ALL_DTYPES] + [(t, s) for s, t in one_each(ALL_DTYPES, RUN_TARGETS[:-1], "convert")] if RUN_TARGETS else []


@pytest.mark.parametrize(("target", "source"), CONVERT_CASES, ids=lambda v: str(v))
def test_convert(target: str, source: DType) -> None:
    for destination in (t for s, t in SWEPT_CONVERSIONS if s is source):
        if (source, destination) in SEPARATE_CONVERSIONS and target != RUN_TARGETS[-1]:
            continue
        x, expected = convert_case(source, destination)
        actual = run(target, f"convert_{source}_{destination}", x)
        assert_bits_equal(actual, expected, f"convert {source} -> {destination} on {target}", x)


def test_inputs_cover_the_hard_values() -> None:
    """The generated data holds the values around integer bounds that the conversions need."""
    f64 = float_specials(F64)
    minus_2_63_ulp = np.nextafter(-(2.0**63), -np.inf)
    for value in (2.0**31, 2.0**63, 2.0**64, -(2.0**63), minus_2_63_ulp, -0.0, np.inf):
        assert np.any(f64.view(np.uint64) == np.float64(value).view(np.uint64)), value
    f32 = float_specials(F32)
    assert np.any(f32 == np.nextafter(np.float32(2.0**31), np.float32(0)))
    s64 = integer_specials(S64)
    assert np.iinfo(np.int64).min in s64 and (1 << 53) + 1 in s64

"""The math library compiled from LLVM IR (compiler.codegen.mathlib_ir) against the reference.

Every function, in both precisions, is compiled into an array kernel (a loop of W-lane
vectors plus a scalar tail) for x86-64-v2, -v3 and -v4 and must return exactly the bits of
compiler.numerics.mathlib on special values and random bit patterns. The object code must
be self-contained (no calls, no undefined symbols) and reproducible.
"""

from __future__ import annotations

import ctypes
import math
import re
import struct
from functools import cache

import llvmlite.ir as ir
import numpy as np
import pytest

from compiler.codegen import mathlib_ir
from compiler.codegen.mathlib_ir import BINARY_FUNCTIONS, define_array_kernel, math_function
from compiler.codegen.target import assembly, compile_ir
from compiler.config import CompilerConfig
from compiler.numerics import mathlib
from compiler.numerics.mathlib.f32_exceptions import F32_EXCEPTIONS
from compiler.runtime.loader import LoadedObject, load_object
from harness.sampling import share_of
from harness.targets import CPUS as ALL_TARGETS
from harness.targets import DEFAULT, RUNNABLE, config
from tools import mathlib_accuracy as acc

UNARY = mathlib.UNARY_FUNCTIONS
ALL = UNARY + BINARY_FUNCTIONS
TARGETS = ALL_TARGETS
DTYPES = ("f32", "f64")
# Vector width per target and dtype: one native register.
WIDTHS = {(target, dtype): config(target).vector_bits // (32 if dtype == "f32" else 64) for target in TARGETS for dtype in DTYPES}
NP = {"f32": np.float32, "f64": np.float64}
UINT = {"f32": np.uint32, "f64": np.uint64}
INF = math.inf


def _module_text(target: str, dtype: str, width: int) -> str:
    target_config = config(target)
    module = ir.Module(name=f"mathlib_{dtype}")
    for name in ALL:
        define_array_kernel(module, f"k_{name}", name, dtype, width, target_config)
    return str(module)


@cache
def _compiled(target: str, dtype: str, width: int = 0) -> tuple[str, bytes]:
    text = _module_text(target, dtype, width or WIDTHS[target, dtype])
    return text, compile_ir(text, config(target))


@cache
def _loaded(target: str, dtype: str, width: int = 0) -> LoadedObject:
    return load_object(_compiled(target, dtype, width)[1], config(target))


def _run(target: str, dtype: str, name: str, *xs: np.ndarray, width: int = 0) -> np.ndarray:
    argtypes = [ctypes.c_void_p] * (len(xs) + 1) + [ctypes.c_int64]
    fn = _loaded(target, dtype, width).function(f"k_{name}", None, *argtypes)
    xs = tuple(np.ascontiguousarray(x, dtype=NP[dtype]) for x in xs)
    out = np.empty_like(xs[0])
    fn(*[x.ctypes.data for x in xs], out.ctypes.data, xs[0].size)
    return out


# --------------------------------------------------------------------------- inputs

SPECIAL = [
    0.0, 1.0, 0.5, 2.0, 3.0, 8.0, 27.0, 0.1, 1e-7, 1e-300, 5e-324, 2.2250738585072009e-308,
    2.2250738585072014e-308, 1.7976931348623157e308, 1.401298464324817e-45, 1.1754942e-38,
    3.4028234663852886e38, INF, 0.75, 1.25, 5.9, 6.0, 6.5, 3.92, 9.1, 17.4, 19.1, 22.0, 40.0,
    40.000000000000007, 44.0, 88.72284, 89.0, 103.97208, 104.0, 700.0, 709.79, 745.2, 746.0,
    800.0, 1000.0, 1000.0000000000001, 2.0**-7, 2.0**-900, 2.0**-901, 0.4999999999999999,
    math.pi / 4, math.pi / 2, math.pi, 2.0**20, 2.0**20 - 2.0**-32, 1e6, 1e22, 2.0**64, 1e300,
    6381956970095103.0 * 2.0**797, 3.4028235e38, 1.5707964, 4.712389, 0.9999999, 1.0000001,
    0.6931472, 0.4142135, 0.2928932, 0.999999, 2.0**53, 2.0**63, 2.0**64 + 2.0**12, 2.0**-1074,
]
F64_NAN_PATTERNS = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
                    0xFFFFFFFFFFFFFFFF, 0x7FF4000000000000, 0x7FFDEADBEEF00000]
F32_NAN_PATTERNS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FC12345, 0x7FA00000]


def _specials(dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        base = np.array(SPECIAL, dtype=np.float64).astype(NP[dtype])
    nans = np.array(F32_NAN_PATTERNS if dtype == "f32" else F64_NAN_PATTERNS,
                    dtype=UINT[dtype]).view(NP[dtype])
    return np.concatenate([base, -base, nans])


def _exception_inputs() -> np.ndarray:
    """Every input of every binary32 exception table, and its two neighbours."""
    bits = [x for table in F32_EXCEPTIONS.values() for x, _ in table]
    near = np.array(bits, dtype=np.int64)[:, None] + np.array([-1, 0, 1])[None, :]
    return (near.ravel() & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


@cache
def unary_inputs(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(20)
    if dtype == "f32":
        parts = [_specials(dtype), _exception_inputs(), acc.random_f32_bits(rng, 20_000),
                 acc.log_uniform(rng, 8_000, -30, 12).astype(np.float32),
                 acc.log_uniform(rng, 2_000, -149, 128).astype(np.float32)]
    else:
        parts = [_specials(dtype), acc.random_f64_bits(rng, 20_000),
                 acc.log_uniform(rng, 8_000, -30, 12), acc.log_uniform(rng, 2_000, -1074, 1024)]
    x = np.concatenate(parts).astype(NP[dtype])
    return x[: x.size - 1 if x.size % 2 == 0 else x.size]  # odd: the scalar tail runs


@cache
def binary_inputs(name: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([21, BINARY_FUNCTIONS.index(name)])
    s = _specials(dtype)
    with np.errstate(all="ignore"):
        a = [np.repeat(s, s.size), acc.random_f64_bits(rng, 8_000).astype(NP[dtype])]
        b = [np.tile(s, s.size), acc.random_f64_bits(rng, 8_000).astype(NP[dtype])]
    n = min(a[1].size, b[1].size)
    a[1], b[1] = a[1][:n], b[1][:n]
    for label, aa, bb in acc.binary_samples(name, rng, 3_000):
        del label
        with np.errstate(all="ignore"):
            a.append(aa.astype(NP[dtype]))
            b.append(bb.astype(NP[dtype]))
    return np.concatenate(a), np.concatenate(b)


@cache
def reference(name: str, dtype: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # widening a signaling NaN raises the flag
        if name in BINARY_FUNCTIONS:
            fn = mathlib.power if name == "power" else mathlib.atan2
            return fn(*binary_inputs(name, dtype))
        return mathlib.unary(name, unary_inputs(dtype))


# --------------------------------------------------------------------------- results


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ALL)
def test_bits_equal_reference(name: str, dtype: str, target: str) -> None:
    xs = binary_inputs(name, dtype) if name in BINARY_FUNCTIONS else (unary_inputs(dtype),)
    got = _run(target, dtype, name, *xs).view(UINT[dtype])
    want = reference(name, dtype).view(UINT[dtype])
    bad = np.flatnonzero(got != want)
    shown = [(tuple(float(x[i]).hex() for x in xs), hex(got[i]), hex(want[i])) for i in bad[:5]]
    assert bad.size == 0, shown


@pytest.mark.parametrize(("dtype", "target"), [(d, t) for d in DTYPES for t in share_of(TARGETS, 2, d)])
def test_a_second_compile_gives_the_same_bytes(dtype: str, target: str) -> None:
    """Each dtype on a rotating half of the targets, run or not (harness/sampling.py; the
    symbol and instruction checks below cover every target)."""
    assert compile_ir(_compiled(target, dtype)[0], config(target)) == _compiled(target, dtype)[1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ALL)
def test_scalar_functions_equal_reference(name: str, dtype: str) -> None:
    """Width 1 (scalar code, real branches): every element through the scalar function."""
    xs = binary_inputs(name, dtype) if name in BINARY_FUNCTIONS else (unary_inputs(dtype),)
    got = _run(DEFAULT, dtype, name, *xs, width=1).view(UINT[dtype])
    bad = np.flatnonzero(got != reference(name, dtype).view(UINT[dtype]))
    assert bad.size == 0, [tuple(float(x[i]).hex() for x in xs) for i in bad[:5]]


def test_exception_tables_are_applied() -> None:
    """The compiled binary32 functions return the table's value at every exception."""
    for name, table in F32_EXCEPTIONS.items():
        if not table:
            continue
        x = np.array([t[0] for t in table], dtype=np.uint32).view(np.float32)
        want = np.array([t[1] for t in table], dtype=np.uint32)
        got = _run(DEFAULT, "f32", name, x).view(np.uint32)
        assert got.tolist() == want.tolist(), name


# --------------------------------------------------------------------------- object code


def _undefined_symbols(obj: bytes) -> list[str]:
    """Names of the undefined symbols of an ELF64 little-endian object (a tiny reader)."""
    assert obj[:4] == b"\x7fELF" and obj[4] == 2 and obj[5] == 1, "not ELF64 little-endian"
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)

    def section(i: int) -> tuple[int, int, int, int, int]:
        # sh_type, sh_offset, sh_size, sh_link, sh_entsize
        base = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", obj, base + 4)
        offset, size, link = struct.unpack_from("<QQI", obj, base + 0x18)
        entsize, = struct.unpack_from("<Q", obj, base + 0x38)
        return sh_type, offset, size, link, entsize

    names = []
    for i in range(shnum):
        sh_type, offset, size, link, entsize = section(i)
        if sh_type != 2:  # SHT_SYMTAB
            continue
        _, str_off, _, _, _ = section(link)
        for k in range(1, size // entsize):  # entry 0 is the null symbol
            st_name, _info, _other, st_shndx = struct.unpack_from("<IBBH", obj, offset + k * entsize)
            if st_shndx == 0:  # SHN_UNDEF
                end = obj.index(b"\0", str_off + st_name)
                names.append(obj[str_off + st_name : end].decode())
    return names


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_object_has_no_undefined_symbols(dtype: str, target: str) -> None:
    assert _undefined_symbols(_compiled(target, dtype)[1]) == []


@pytest.mark.parametrize("target", TARGETS)
def test_assembly_calls_nothing_but_exact_paths_and_has_no_fma(target: str) -> None:
    """The f32 kernels inline the f64 functions too, so they show all the code. The only
    calls are those of a fast path to its own function's exact path (out of line, since it
    runs once in about 10**4 vectors), defined in the same object."""
    asm = assembly(_compiled(target, "f32")[0], config(target))
    lines = [line.split() for line in asm.splitlines()
             if line.startswith("\t") and not line.lstrip().startswith(".")]
    instructions = [line[0] for line in lines]
    assert len(instructions) > 1000
    aarch64 = config(target).arch == "aarch64"
    calls = [line for line in lines if line[0] in (("bl", "blr", "br") if aarch64 else ("callq", "call", "jmpq", "jmp"))
             and (aarch64 or line[0].startswith("call") or "*" in line[-1])]
    exact = re.compile(r"vxla\.math\.[a-z0-9]+\.f32\.w\d+\.exact$")
    assert calls and all(len(c) == 2 and exact.match(c[1]) for c in calls), calls[:3]
    assert all(re.search(rf"^{re.escape(c[1])}:", asm, re.M) for c in calls)
    if aarch64:
        # No fused multiply-add (fmadd/fmsub/fnmadd/fnmsub scalar, fmla/fmls vector).
        assert not [i for i in instructions if re.match(r"fn?m(add|sub)|fml[as]", i)]
        return
    # No fused multiply-add: the contract forbids contraction.
    assert not [i for i in instructions if re.match(r"v?f(n)?m(add|sub)", i)]


def test_elf_reader_finds_undefined_symbols() -> None:
    module = ir.Module()
    ext = ir.Function(module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "sin")
    fn = ir.Function(module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.call(ext, [fn.args[0]]))
    assert _undefined_symbols(compile_ir(str(module), CompilerConfig())) == ["sin"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_ir_has_no_forbidden_constructs(dtype: str) -> None:
    text, _ = _compiled("x86-64-v3", dtype)
    allowed = re.compile(r'@"?(llvm\.(fabs|copysign|sqrt|roundeven|floor)\.[a-z0-9]+|'
                         r'llvm\.masked\.gather\.[a-z0-9.]+|'
                         r'vxla\.math\.[a-z0-9]+\.f(32|64)\.w\d+(\.exact)?)"?\(')
    for line in text.splitlines():
        if " call " in line:
            assert allowed.search(line), line
        assert not re.search(r"\b(fast|nnan|ninf|nsz|arcp|contract|afn|reassoc)\b", line), line
        assert not re.search(r"\b(frem|fptosi|sitofp|fma)\b", line), line


def test_compilation_is_reproducible() -> None:
    text, obj = _compiled("x86-64-v3", "f64")
    assert _module_text("x86-64-v3", "f64", WIDTHS["x86-64-v3", "f64"]) == text
    assert compile_ir(text, CompilerConfig(cpu="x86-64-v3")) == obj


# --------------------------------------------------------------------------- API


def test_math_function_declares_once() -> None:
    config = CompilerConfig()
    module = ir.Module()
    f = math_function(module, "exp", "f32", 8, config)
    assert math_function(module, "exp", "f32", 8, config) is f
    assert f.name == "vxla.math.exp.f32.w8"
    assert f.linkage == "internal"
    assert str(f.function_type) == "<8 x float> (<8 x float>)"
    g = math_function(module, "atan2", "f64", 1, config)
    assert str(g.function_type) == "double (double, double)"
    # The f32 function uses the f64 one of the same width; tables are shared.
    assert "vxla.math.exp.f64.w8" in module.globals
    math_function(module, "exp", "f64", 4, config)
    tables = sorted(n for n in module.globals if n.startswith("vxla.math.table."))
    assert tables == [f"vxla.math.table.{t}" for t in ("atan_hi", "atan_lo", "exp_t_hi", "exp_t_lo")]


def test_math_function_rejects_unknown_arguments() -> None:
    module = ir.Module()
    with pytest.raises(ValueError):
        math_function(module, "tan", "f64", 1, CompilerConfig())
    with pytest.raises(ValueError):
        math_function(module, "exp", "f16", 1, CompilerConfig())
    with pytest.raises(ValueError):
        math_function(module, "exp", "f64", 0, CompilerConfig())


def test_shift_amounts_must_be_constant() -> None:
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)]), "f")
    ops = mathlib_ir.IROps(ir.IRBuilder(fn.append_basic_block()), 1)
    v = mathlib_ir.IntValue(ops, fn.args[0])
    with pytest.raises(ValueError):
        v << 64
    with pytest.raises(ValueError):
        v >> v

#!/usr/bin/env python3
"""XLA's own test modules as a conformance check of vxla.

Given a checkout of openxla/xla (or a fork with the same layout), extracts the HLO modules
its tests hold (raw strings in `xla/tests/*.cc`, `xla/service/**`, `xla/backends/cpu/**`,
`xla/hlo/**`, and standalone `.hlo` files, split at `// -----`), and for each:

1. parses it with XLA's parser (modules XLA refuses are not counted);
2. parses and verifies it with vxla: parsed, refused (an op or type outside the contract,
   with the reason), a parse or verify error (with the message), or a crash;
3. where XLA:CPU compiles and runs it on random inputs, runs vxla's reference evaluator and
   LLVM backend on the same inputs: the backend must give the reference's bits, and the
   reference must agree with XLA:CPU within a tolerance (exact for integers and pred).

Every module runs in a worker process with a time limit, so a crash or a hang is recorded
as such and the run goes on. The report gives counts by outcome, the most frequent reasons,
and every crash, hang and mismatch with its source location; `--json` writes it all.

Development tool only: it needs JAX's jaxlib (XLA:CPU) beside vxla, as in .venv-bench
(`make conformance XLA=path/to/xla`).

    .venv-bench/bin/python tools/xla_conformance.py path/to/xla [--limit N] [--json report.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # bench/xla_cpu.py, the XLA:CPU glue it shares with the benchmarks
    sys.path.insert(0, str(REPO_ROOT))

SOURCE_GLOBS = ("xla/tests/*.cc", "xla/service/**/*.cc", "xla/backends/cpu/**/*.cc", "xla/hlo/**/*.cc", "xla/**/*.hlo")
# R"(...)" and R"delimiter(...)delimiter" raw strings.
RAW_STRING = re.compile(r'R"(?P<delimiter>[A-Za-z_]{0,16})\((?P<body>.*?)\)(?P=delimiter)"', re.DOTALL)
# absl::Substitute and StrFormat placeholders: the text is a template, not a module.
TEMPLATE = re.compile(r"\$\d|\$\{|%[sdx](?![\w.\-])")
# Ops whose modules XLA:CPU cannot run alone: it would block waiting for the host.
HOST_TRANSFER = re.compile(r"\b(infeed|outfeed|send|recv|send-done|recv-done)\(")
MAX_ELEMENTS = 1 << 22
# Estimated operations (compiler/hlo/cost.py) beyond which the reference evaluator is not
# run (the backend's result is compared with XLA:CPU alone), and beyond which nothing is.
REFERENCE_FLOPS = 5e7
BACKEND_FLOPS = 2e9
MAX_OUTPUT_BYTES = 1 << 29
FLOAT_TOLERANCE = {"f16": 1e-2, "bf16": 3e-2, "f32": 2e-4, "f64": 1e-9}

# Outcomes, by what they say about vxla.
NOT_COUNTED = ("template", "xla-rejects", "xla-crashes", "xla-hangs")
PROBLEMS = ("crash", "hang", "backends-differ")


@dataclass
class Candidate:
    """One HLO module found in the checkout."""

    source: str  # path:line
    text: str


@dataclass
class Result:
    source: str
    outcome: str
    detail: str = ""
    ran_on_xla: bool = False
    timings: dict[str, float] = field(default_factory=dict)


def extract_modules(root: Path) -> list[Candidate]:
    """Every HLO module text in the checkout's test sources, in path order."""
    candidates: list[Candidate] = []
    paths = sorted({p for pattern in SOURCE_GLOBS for p in root.glob(pattern) if p.is_file()})
    for path in paths:
        relative = path.relative_to(root).as_posix()
        try:
            content = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if path.suffix == ".hlo":
            offset = 0
            for chunk in re.split(r"^// -----.*$", content, flags=re.MULTILINE):
                if "HloModule" in chunk:
                    line = content.count("\n", 0, content.find(chunk, offset)) + 1
                    candidates.append(Candidate(f"{relative}:{line}", chunk))
                offset += len(chunk)
            continue
        for match in RAW_STRING.finditer(content):
            body = match.group("body")
            if "HloModule" in body and "ENTRY" in body:
                line = content.count("\n", 0, match.start()) + 1
                candidates.append(Candidate(f"{relative}:{line}", body))
    return candidates


# --- the worker: one module at a time ---------------------------------------------------------


def entry_parameter_types(xla_text: str) -> list[tuple[str, tuple[int, ...]]] | None:
    """(element type, dims) of each entry parameter, read from the ENTRY line of XLA's own
    printing of the module; None when a parameter is a tuple."""
    match = re.search(r"^ENTRY %\S+ \((.*)\) -> ", xla_text, flags=re.MULTILINE)
    if match is None:
        return None
    parameters, depth, current = [], 0, ""
    for char in match.group(1):
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parameters.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parameters.append(current)
    types = []
    for parameter in parameters:
        shape = parameter.split(":", 1)[1].strip()
        array = re.fullmatch(r"(\w+)\[([\d,]*)\](\{.*\})?", shape)
        if array is None:
            return None
        types.append((array.group(1), tuple(int(d) for d in array.group(2).split(",") if d)))
    return types


def _random_input(dtype: str, dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    from core.dtypes import from_name

    element = from_name(dtype)
    if element.is_pred:
        return rng.random(dims) < 0.5
    if element.is_float:
        return rng.standard_normal(dims).astype(element.numpy)
    if element.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(element.numpy)
    numpy_type = element.numpy
    # Small non-negative integers: valid indices and trip counts for most tests.
    return rng.integers(0, 4, size=dims).astype(numpy_type)


def _as_xla_input(array: np.ndarray, dtype: str) -> np.ndarray:
    """An input as XLA takes it: s2, s4, u2 and u4 as ml_dtypes' int2, int4, uint2 and uint4
    (vxla takes the int8 and uint8 holding the same values)."""
    import ml_dtypes

    narrow = {"s2": ml_dtypes.int2, "s4": ml_dtypes.int4, "u2": ml_dtypes.uint2, "u4": ml_dtypes.uint4}
    return array.astype(narrow[dtype]) if dtype in narrow else array


def _identity(reducer, dtype: np.dtype) -> np.ndarray | None:  # noqa: ANN001 - vxla's Computation
    """The identity of a reducer that is one binary op (the registry's), as XLA's own test
    inputs use."""
    from compiler.api import identity_value
    from core.dtypes import from_numpy

    value = identity_value(reducer.root.opcode, from_numpy(dtype))
    return None if value is None else value.astype(dtype)


def constrain_inputs(module, arrays: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:  # noqa: ANN001 - vxla's Module
    """Inputs as XLA's tests make them (MakeFakeArguments): a parameter that is the init
    value of a reduction gets the reducer's identity (XLA:CPU may apply an init value more
    than once, which only an identity survives), and integer inputs of a module that sorts
    are distinct (XLA's sort is unstable unless is_stable is set), and a parameter that
    cholesky factors is symmetric positive definite (otherwise both results are
    implementation-defined NaNs)."""
    arrays = list(arrays)
    for computation in module.reachable_computations():
        for instruction in computation.post_order():
            operand = instruction.operands[0] if instruction.operands else None
            if instruction.opcode == "cholesky" and computation is module.entry and operand.opcode == "parameter":
                number = operand.parameter_number
                x = rng.standard_normal(arrays[number].shape)
                n = x.shape[-1]
                arrays[number] = (x @ np.swapaxes(x, -1, -2) / n + np.eye(n)).astype(arrays[number].dtype)
            inits: list = []
            if instruction.opcode in ("reduce", "reduce-window"):
                half = len(instruction.operands) // 2
                inits = [(op, instruction.attrs["to_apply"]) for op in instruction.operands[half:]]
            elif instruction.opcode == "select-and-scatter":
                inits = [(instruction.operands[2], instruction.attrs["scatter"])]
            for operand, reducer in inits:
                if computation is module.entry and operand.opcode == "parameter":
                    number = operand.parameter_number
                    identity = _identity(reducer, arrays[number].dtype)
                    if identity is not None:
                        arrays[number] = identity.reshape(arrays[number].shape)
    sorts = any(i.opcode == "sort" for c in module.reachable_computations() for i in c.post_order())
    if sorts:
        for number, array in enumerate(arrays):
            if array.dtype.kind in "iu" and array.size:
                span = min(array.size * 4, int(np.iinfo(array.dtype).max))
                distinct = rng.choice(span, size=array.size, replace=array.size > span)
                arrays[number] = distinct.astype(array.dtype).reshape(array.shape)
            elif array.dtype.kind == "f" and array.size:
                # Distinct values of the type (normal samples can repeat once rounded).
                steps = rng.permutation(array.size).astype(np.float64) / array.size
                arrays[number] = (steps * 8 - 4).astype(array.dtype).reshape(array.shape)
    return arrays


def explain_difference(module, text: str) -> str:  # noqa: ANN001 - vxla's Module
    """Why vxla's result may rightly differ from XLA:CPU's here, when a known cause is
    present (docs/numerics.md), else the empty string (an unexplained difference)."""
    from compiler.api import ORDER_FREE, ArrayShape, default_layout

    instructions = [i for c in module.reachable_computations() for i in c.post_order()]
    if "unique_indices=true" in text or "indices_are_sorted=true" in text:
        return "scatter or gather hints (unique_indices, indices_are_sorted) that random indices break: XLA:CPU trusts them, the contract has no hints"
    if "output_to_operand_aliasing" in text:
        return "buffer aliasing hints: XLA:CPU reuses an operand's buffer for an output; the contract has no buffer hints"
    laid_out = any(isinstance(i.shape, ArrayShape) and i.shape.minor_to_major != default_layout(i.shape.rank) for i in instructions)
    if laid_out and any(i.opcode == "bitcast" for i in instructions):
        return "layouts: XLA runs the module here through StableHLO, which has none; the contract's bitcast reinterprets memory under the written layouts (§4)"
    for instruction in instructions:
        if instruction.opcode == "bitcast-convert" and instruction.operands[0].array_shape.dtype.is_float and not instruction.array_shape.dtype.is_float:
            return "a float's bits as integers (bitcast-convert): NaN bits, where the contract's canonical NaN (positive, zero payload, §1) and XLA:CPU's (x86's default NaN, sign set) differ, and a float's last bits, which agree with XLA only to rounding"
        if instruction.opcode == "compare" and instruction.attrs.get("type") == "TOTALORDER":
            return "a total-order compare, which sees a NaN's sign: the contract's canonical NaN is positive (§1), XLA:CPU's (x86's default NaN) negative"
        if instruction.opcode == "abs" and not instruction.array_shape.dtype.is_float and instruction.operands[0].opcode == "multiply" and instruction.operands[0].operands[0] is instruction.operands[0].operands[1]:
            return "abs of an integer square: XLA:CPU's simplifier drops the abs (x*x is never negative without wrapping), the contract wraps the product, then takes abs (§2)"
        if instruction.opcode == "while" and _loops_narrow_arithmetic(instruction):
            return "f16 or bf16 arithmetic carried around a while loop: the contract rounds each op to the narrow type (§1), so an intermediate overflows to inf or underflows to 0, where XLA:CPU keeps it in f32"
        if instruction.opcode == "bitcast-convert" and instruction.array_shape.dtype.is_float and not instruction.operands[0].array_shape.dtype.is_float:
            return "integers' bits as floats (bitcast-convert): small integers are subnormals, which XLA:CPU flushes to zero and the contract keeps (§1)"
        if instruction.opcode == "convolution" and (re.search(r"pad=[^ ,]*[1-9]", text) or "lhs_dilate" in text):
            return "a convolution with padding or base dilation and non-finite kernel values: the contract's padding takes part (fma(+0, w, acc) is NaN for w = inf, §6), XLA:CPU skips it"
        if instruction.opcode == "divide" and instruction.array_shape.dtype.is_complex:
            return "complex division of infinite or NaN parts: the contract's repairs of Smith's formula (§2) give inf where XLA:CPU gives NaN for a numerator with a NaN part"
        if instruction.opcode == "sort":
            root = instruction.attrs["to_apply"].root
            numbers = sorted(op.parameter_number for op in root.operands if op.opcode == "parameter")
            if root.opcode == "compare" and len(numbers) == 2 and not (numbers[0] % 2 == 0 and numbers[1] == numbers[0] + 1):
                return "a comparator that is not a strict weak order (it mixes operands): XLA:CPU's std::sort is undefined then, the contract's merge sort defines one result (§7)"
            if not instruction.attrs.get("is_stable") and any(op.array_shape.dtype.bits <= 16 for op in instruction.operands):
                return "a sort without is_stable over narrow keys, which repeat: XLA:CPU may order equal keys either way, the contract's sort is stable (§7)"
        if instruction.opcode in ("reduce", "reduce-window"):
            root = instruction.attrs["to_apply"].root
            inits = instruction.operands[len(instruction.operands) // 2 :]
            if root.opcode not in ORDER_FREE:
                return f"a reducer ({root.opcode}) whose result depends on the order: the contract pins the order (§5), XLA:CPU uses its own"
            if any(op.opcode == "constant" for op in inits):
                return "an init value that is not the reducer's identity: the contract applies it once (§5), XLA:CPU once per partial result"
    return ""


def _loops_narrow_arithmetic(loop) -> bool:  # noqa: ANN001 - vxla's Instruction
    """Whether a while loop's body multiplies, adds or divides f16 or bf16 values."""
    body = loop.attrs["body"]
    return any(
        i.opcode in ("multiply", "add", "subtract", "divide", "power") and i.array_shape.dtype.name in ("f16", "bf16")
        for i in body.post_order()
    )


def _close(reference: np.ndarray, xla: np.ndarray, dtype_name: str) -> bool:
    if reference.shape != xla.shape:
        return False
    if dtype_name in ("c64", "c128"):
        part = "f32" if dtype_name == "c64" else "f64"
        return _close(reference.real, xla.real, part) and _close(reference.imag, xla.imag, part)
    if dtype_name.startswith("f8"):  # exact, any NaN equal to any NaN (the contract's is canonical)
        return bool(np.array_equal(reference.astype(np.float32), xla.astype(np.float32), equal_nan=True))
    if dtype_name not in FLOAT_TOLERANCE:
        return reference.tobytes() == xla.astype(reference.dtype).tobytes()
    a, b = reference.astype(np.float64), xla.astype(np.float64)
    tolerance = FLOAT_TOLERANCE[dtype_name]
    scale = max(1.0, float(np.nanmax(np.abs(b[np.isfinite(b)]), initial=0.0)))
    return bool(np.allclose(a, b, rtol=tolerance, atol=tolerance * scale, equal_nan=True))


class XlaFailed(Exception):
    """XLA refused or failed (its message)."""


class XlaDied(Exception):
    """The XLA process died (a crash inside XLA) or did not answer in time."""


def _xla_parse(text: str) -> str:
    from jax._src.lib import xla_client as xc

    return xc.hlo.hlo_module_from_text(text).to_string()


def _xla_server(connection: Connection) -> None:
    """Runs XLA's parser and XLA:CPU for the vxla worker, in a process of their own: XLA
    can corrupt its own memory (a sort with an inconsistent comparator does) and crash
    later, which must never be counted against vxla."""
    import os

    import jax

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # XLA logs and failed checks print on stderr
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", True)
    functions = {"parse": _xla_parse, "run": _xla_run}
    parent = os.getppid()
    while True:
        if not connection.poll(5):
            if os.getppid() != parent:
                return  # the vxla worker was killed: nobody will ask any more
            continue
        job = connection.recv()
        if job is None:
            return
        name, arguments = job
        try:
            connection.send(("ok", functions[name](*arguments)))
        except Exception as error:  # noqa: BLE001 - XLA reports every refusal as an exception
            connection.send(("error", str(error).splitlines()[0] if str(error) else type(error).__name__))


class XlaProcess:
    """The vxla worker's XLA: a child process, started on first use and after it dies."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.process: mp.process.BaseProcess | None = None
        self.connection: Connection | None = None

    def close(self) -> None:
        if self.process is not None and self.process.is_alive():
            assert self.connection is not None
            self.connection.send(None)
            self.process.join(5)

    def call(self, name: str, *arguments: object) -> object:
        if self.process is None or not self.process.is_alive():
            self.connection, child = mp.Pipe()
            self.process = mp.get_context("spawn").Process(target=_xla_server, args=(child,), daemon=True)
            self.process.start()
            child.close()
        assert self.connection is not None
        try:
            self.connection.send((name, arguments))
            if not self.connection.poll(self.timeout):
                self.process.kill()
                self.process.join()
                raise XlaDied(f"XLA gave no answer in {self.timeout:.0f} s")
            status, value = self.connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self.process.join(5)
            raise XlaDied(f"XLA died (exit {self.process.exitcode})") from None
        if status == "error":
            raise XlaFailed(str(value))
        return value


def _xla_run(text: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
    from bench.xla_cpu import compile_hlo_text

    return compile_hlo_text(text).run(arrays)


def check_module(
    text: str,
    seed: int,
    xla: XlaProcess,
    make_inputs: Callable[[list[tuple[str, tuple[int, ...]]], int], list[np.ndarray]] | None = None,
    parse_only: bool = False,
) -> Result:
    """The outcome of one module (source filled in by the caller); XLA runs in `xla`.
    `make_inputs(parameter types, seed)` makes the inputs instead of the benign random ones.
    With `parse_only`, a module vxla reads is not run by vxla (outcome "parsed")."""
    import compiler
    from compiler.api import (
        CompilerError,
        HloParseError,
        HloUnsupportedError,
        HloVerifyError,
        estimate_flops,
        evaluate,
        flatten,
        load_module,
    )
    from core.dtypes import BY_NAME

    timings: dict[str, float] = {}
    if TEMPLATE.search(text):
        return Result("", "template")
    try:
        xla_text = str(xla.call("parse", text))
    except XlaFailed as error:
        return Result("", "xla-rejects", str(error)[:200])
    except XlaDied as error:
        return Result("", "xla-crashes", str(error))
    started = time.perf_counter()
    module, refusal = None, None
    try:
        module = load_module(text)
    except HloUnsupportedError as error:
        refusal = Result("", "refused", _reason(str(error)))
    except HloParseError as error:
        refusal = Result("", "parse-error", _reason(str(error)))
    except HloVerifyError as error:
        refusal = Result("", "verify-error", _reason(str(error)))
    except Exception:  # noqa: BLE001 - anything else is a vxla bug, recorded with its traceback
        refusal = Result("", "crash", "parse: " + traceback.format_exc(limit=4)[-600:])
    timings["parse"] = time.perf_counter() - started
    # XLA:CPU on inputs made from its own reading of the module.
    types = entry_parameter_types(xla_text)
    expected: list[np.ndarray] | None = None
    why_not = ""
    if types is None:
        why_not = "tuple parameters"
    elif any(dtype not in BY_NAME for dtype, _ in types):
        why_not = "parameter types without random inputs here"
    elif any(int(np.prod(dims, dtype=np.int64)) > MAX_ELEMENTS for _, dims in types):
        why_not = "inputs too large"
    elif HOST_TRANSFER.search(text):
        why_not = "host transfers (XLA:CPU would wait for a host that never sends)"
    else:
        rng = np.random.default_rng(seed)
        if make_inputs is not None:
            arrays = make_inputs(types, seed)
        else:
            arrays = [_random_input(dtype, dims, rng) for dtype, dims in types]
            if module is not None:
                arrays = constrain_inputs(module, arrays, rng)
        try:
            xla_arrays = [_as_xla_input(a, dtype) for a, (dtype, _) in zip(arrays, types, strict=True)]
            expected = xla.call("run", text, xla_arrays)  # type: ignore[assignment]
        except XlaFailed as error:
            why_not = "XLA:CPU: " + str(error)[:160]
        except XlaDied as error:
            return Result("", "xla-crashes" if "died" in str(error) else "xla-hangs", str(error))
    if refusal is not None:
        refusal.ran_on_xla = expected is not None
        return refusal
    assert module is not None
    if expected is None:
        return Result("", "parsed-xla-cannot-run", why_not)
    if parse_only:
        return Result("", "parsed", ran_on_xla=True, timings=timings)
    result_types = [s.dtype.name for s in flatten(module.entry.root.shape)]
    all_instructions = [i for c in module.reachable_computations() for i in c.post_order()]
    work = estimate_flops(module)
    if work > BACKEND_FLOPS:
        return Result("", "too-large", f"about {work:.1e} operations", ran_on_xla=True)
    output_bytes = sum(shape.byte_size for shape in flatten(module.entry.root.shape))
    if output_bytes > MAX_OUTPUT_BYTES:
        return Result("", "too-large", f"{output_bytes / 2**30:.1f} GiB of outputs", ran_on_xla=True)
    reference: list[np.ndarray] | None = None
    if work <= REFERENCE_FLOPS:
        try:
            started = time.perf_counter()
            reference = evaluate(module, arrays, max_while_iterations=100_000)
            timings["reference"] = time.perf_counter() - started
        except CompilerError as error:
            return Result("", "reference-refused", _reason(str(error)), ran_on_xla=True)
        except Exception:  # noqa: BLE001
            return Result("", "crash", "reference: " + traceback.format_exc(limit=4)[-600:], ran_on_xla=True)
    try:
        started = time.perf_counter()
        executable = compiler.compile(text, cache_dir=False)
        timings["compile"] = time.perf_counter() - started
        started = time.perf_counter()
        got = executable.run(*arrays, threads=1)
        timings["run"] = time.perf_counter() - started
    except CompilerError as error:
        return Result("", "backend-refused", _reason(str(error)), ran_on_xla=True)
    except Exception:  # noqa: BLE001
        return Result("", "crash", "backend: " + traceback.format_exc(limit=4)[-600:], ran_on_xla=True)
    if reference is None:
        # Too much work for the reference's numpy loops: the backend's bits stand for them
        # (the backend equals the reference wherever both run).
        reference = got
    for number, (g, r) in enumerate(zip(got, reference, strict=True)):
        if g.dtype != r.dtype or g.shape != r.shape or g.tobytes() != r.tobytes():
            return Result("", "backends-differ", f"out{number}", ran_on_xla=True, timings=timings)
    if len(expected) != len(reference):
        return Result("", "xla-differs", f"{len(reference)} outputs, XLA gives {len(expected)}", ran_on_xla=True, timings=timings)
    # A module that computes in bf16 or f16 agrees with XLA to that precision at best, also
    # in its f32 results (a bf16 dot converted to f32 carries the dot's rounding).
    narrow = [t for t in ("bf16", "f16") if any(s.dtype.name == t for i in all_instructions for s in flatten(i.shape))]
    for number, (r, e, name) in enumerate(zip(reference, expected, result_types, strict=True)):
        if not _close(np.asarray(r), np.asarray(e), narrow[0] if narrow and name in FLOAT_TOLERANCE else name):
            why = explain_difference(module, text)
            return Result("", "xla-differs", f"out{number} ({name})" + (f"; explained: {why}" if why else ""), ran_on_xla=True, timings=timings)
    return Result("", "match", ran_on_xla=True, timings=timings)


def _reason(message: str) -> str:
    """The message without the location prefix (so equal reasons group)."""
    first = message.splitlines()[0]
    return re.sub(r"^.*?line \d+, column \d+: ", "", first)[:200]


def _worker(connection: Connection, xla_timeout: float, parse_only: bool) -> None:
    xla = XlaProcess(xla_timeout)
    while True:
        job = connection.recv()
        if job is None:
            xla.close()
            return
        text, seed = job
        try:
            result = check_module(text, seed, xla, parse_only=parse_only)
        except Exception:  # noqa: BLE001 - the tool's own failure, reported as a crash
            result = Result("", "crash", "tool: " + traceback.format_exc(limit=4)[-600:])
        connection.send(result)


class Worker:
    """A child process that checks modules with vxla (XLA runs in a process of its own);
    replaced after a hang or a hard crash, which are then vxla's."""

    def __init__(self, timeout: float, parse_only: bool = False) -> None:
        self.timeout = timeout
        self.parse_only = parse_only
        self.connection, child = mp.Pipe()
        # Not a daemon: it starts the XLA process (which exits when it is gone).
        self.process = mp.get_context("spawn").Process(target=_worker, args=(child, timeout / 2, parse_only))
        self.process.start()
        child.close()  # so a dead worker reads as EOF here, not as silence

    def check(self, candidate: Candidate, seed: int) -> Result:
        try:
            self.connection.send((candidate.text, seed))
            if not self.connection.poll(self.timeout):
                self.process.kill()
                self.process.join()
                return Result(candidate.source, "hang", f"no answer in {self.timeout:.0f} s", ran_on_xla=True)
            result = self.connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self.process.join(5)
            return Result(candidate.source, "crash", f"the vxla worker died (exit {self.process.exitcode})", ran_on_xla=True)
        result.source = candidate.source
        return result

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def close(self) -> None:
        if self.alive:
            self.connection.send(None)
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()


NOT_PARSED = ("parse-error", "verify-error")


def _parsed(result: Result) -> bool:
    """Whether vxla's parser and verifier took the module (refusing an op counts as parsed:
    the text was read, and the message names what is missing)."""
    return result.outcome not in NOT_PARSED and not (result.outcome == "crash" and result.detail.startswith("parse"))


def summarize(results: list[Result]) -> str:
    """The report: counts by outcome, for all modules XLA parses and for those XLA:CPU runs,
    the most frequent reasons of each kind of refusal, and every problem with its source."""
    counted = [r for r in results if r.outcome not in NOT_COUNTED]
    outcomes = Counter(r.outcome for r in results)
    ran = [r for r in counted if r.ran_on_xla or r.outcome == "hang"]
    lines = [f"modules found: {len(results)} (templates {outcomes['template']}, XLA's parser rejects {outcomes['xla-rejects']})"]
    for title, group in (("XLA parses", counted), ("XLA:CPU runs", ran)):
        if not group:
            continue
        parsed = sum(_parsed(r) for r in group)
        supported = sum(r.outcome not in (*NOT_PARSED, "refused", "reference-refused", "backend-refused") for r in group)
        local = Counter(r.outcome for r in group)
        explained = sum(r.outcome == "xla-differs" and "explained:" in r.detail for r in group)
        lines.append(
            f"{title}: {len(group)}; vxla parses {parsed} ({100 * parsed / len(group):.1f}%), runs {supported} ({100 * supported / len(group):.1f}%); "
            f"match {local['match']}, XLA differs {local['xla-differs']} ({explained} explained), backends differ {local['backends-differ']}, "
            f"crash {local['crash']}, hang {local['hang']}"
        )
    lines.append("")
    lines.append("outcome                count  (of them XLA:CPU runs)")
    for outcome, count in sorted(outcomes.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"  {outcome:21s} {count:5d}  {sum(1 for r in ran if r.outcome == outcome):5d}")
    for outcome in ("refused", "parse-error", "verify-error", "reference-refused", "backend-refused", "parsed-xla-cannot-run"):
        reasons = Counter(_group(r.detail) for r in results if r.outcome == outcome)
        if reasons:
            lines.append(f"\n{outcome}, most frequent reasons:")
            lines.extend(f"  {count:5d}  {reason}" for reason, count in reasons.most_common(20))
    for outcome in (*PROBLEMS, "xla-differs"):
        listed = [r for r in results if r.outcome == outcome]
        if listed:
            lines.append(f"\n{outcome} ({len(listed)}):")
            lines.extend(f"  {r.source}: {r.detail.strip().splitlines()[-1] if r.detail.strip() else ''}" for r in listed)
    return "\n".join(lines)


def _group(reason: str) -> str:
    """Reasons with names and numbers blanked, so one cause counts once."""
    reason = re.sub(r"%[\w.\-]+", "%_", reason)
    return re.sub(r"\d+", "N", reason)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a checkout of openxla/xla (or a fork with its layout)")
    parser.add_argument("--limit", type=int, default=0, help="check only the first N modules found (0: all)")
    parser.add_argument("--only", default="", help="check only modules whose source path contains this")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per module before it counts as a hang (default 120)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    parser.add_argument("--shard", default="0/1", metavar="K/N", help="check only every N-th module from the K-th (run N processes for N cores)")
    parser.add_argument("--parse-only", action="store_true", help="vxla only parses and verifies each module (XLA:CPU still runs it, so the report counts the modules it runs): a quick coverage census")
    parser.add_argument("--recheck", type=Path, metavar="REPORT.json", help="check only the modules an earlier --json report gave one of --outcomes")
    parser.add_argument("--outcomes", default="crash,hang,backends-differ,xla-differs,parse-error,verify-error", help="with --recheck: the outcomes to check again (comma-separated)")
    args = parser.parse_args()
    if not (args.checkout / "xla").is_dir():
        print(f"xla_conformance: {args.checkout} is not an XLA checkout (no xla/ folder)", file=sys.stderr)
        return 2
    candidates = [c for c in extract_modules(args.checkout) if args.only in c.source]
    if args.recheck:
        wanted = set(args.outcomes.split(","))
        again = {r["source"] for r in json.loads(args.recheck.read_text()) if r["outcome"] in wanted}
        candidates = [c for c in candidates if c.source in again]
    shard, shards = (int(part) for part in args.shard.split("/"))
    candidates = candidates[shard::shards]
    if args.limit:
        candidates = candidates[: args.limit]
    print(f"checking {len(candidates)} modules", file=sys.stderr)
    results: list[Result] = []
    worker = Worker(args.timeout, args.parse_only)
    started = time.monotonic()
    try:
        for number, candidate in enumerate(candidates):
            if not worker.alive:
                worker = Worker(args.timeout, args.parse_only)
            # The inputs depend on the module's source location only, so a recheck sees them again.
            seed = args.seed + zlib.crc32(candidate.source.encode("utf-8"))
            results.append(worker.check(candidate, seed))
            if not worker.alive:
                worker = Worker(args.timeout, args.parse_only)
            if (number + 1) % 50 == 0:
                print(f"  {number + 1}/{len(candidates)} in {time.monotonic() - started:.0f} s", file=sys.stderr)
                if args.json:  # a report so far, should the run be stopped
                    args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    finally:
        worker.close()
    print(summarize(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whole models through vxla, the same math written eagerly in numpy, and (when JAX is
installed) jax.jit on CPU, in one process; prints times and ratios.

Models: the fixtures mlp_softmax, cnn and transformer_block (tests/fixtures, exported from
JAX by tools/export_fixtures.py), the 4M-element f32 elementwise chain of
bench/backend_vs_numpy.py and its transcendental chain (tanh, exp and the mean of 2048x2048
f32).

Before anything is timed, every model's numpy equivalent (and JAX's result, when JAX runs)
is checked against vxla's outputs (|a - b| <= atol + rtol * |b|, elementwise); a
disagreement stops the run with an error, so every ratio compares the same computation.

Timing: one warm-up call, then --repeat samples per backend; a sample is as many calls as
it takes to last --min-sample-ms (so microsecond-scale runs are not timer noise), and the
reported time is per call: the median (and the min) over the samples. vxla's compile time
(parse, verify, optimize, LLVM) is measured once, separately, and never counts as run time;
JAX's first call (trace and compile) is reported the same way. JAX inputs are put on the
device once beforehand and each call waits with block_until_ready. --threads sets vxla's
worker threads only: numpy's BLAS and XLA:CPU pick their own thread counts.

Ratios are other / vxla of the medians: above 1 means vxla is faster.

    python bench/models.py [--threads N] [--repeat R] [--models NAME ...] [--json [PATH]]

`--json` alone prints JSON to stdout instead of the table; `--json PATH` writes it to PATH
as well as printing the table. Progress goes to stderr. `make bench` runs this in
.venv-bench, which has JAX.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as a script, only bench/ is on the path; the fixtures (tests/) and the chain's module
# (bench/) are imported as packages from the repository root.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.backend_vs_numpy import ELEMENTWISE_CHAIN, TRANSCENDENTAL_CHAIN  # noqa: E402
from bench.target import add_target_argument, resolve_target  # noqa: E402
from compiler.api import CompilerConfig, Executable, compile_program, load_program  # noqa: E402
from harness.fixture_data import Fixture  # noqa: E402

try:  # what a numpy user reaches for; the test environment has no scipy (see erfc below)
    from scipy.special import erfc as _scipy_erfc
except ImportError:
    _scipy_erfc = None

Arrays = tuple[np.ndarray, ...]

# Default tolerance of the equivalence check: f32 results computed in a different order
# (BLAS blocking, pairwise sums) agree to a few ulps relative, or absolutely near zero.
RTOL = 1e-4
ATOL = 1e-5

CHAIN_ELEMENTS = 4194304


# --------------------------------------------------------------------------
# numpy-eager equivalents: op by op, as the JAX sources in tools/export_fixtures.py have them
# --------------------------------------------------------------------------


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """jax.nn.softmax: subtract the max for range, exponentiate, normalize."""
    unnormalized = np.exp(x - x.max(axis=axis, keepdims=True))
    return unnormalized / unnormalized.sum(axis=axis, keepdims=True)


def erfc_numpy(x: np.ndarray) -> np.ndarray:
    """erfc from numpy ufuncs (numpy has no erf): the Chebyshev fit of Numerical Recipes
    (2nd ed., 6.2), fractional error below 1.2e-7 everywhere, so erfc(-x) keeps its relative
    accuracy where exact GELU's x * erfc(-x / sqrt 2) / 2 is tiny (large negative x)."""
    z = np.abs(x)
    t = 1 / (1 + 0.5 * z)
    poly = -0.82215223 + t * 0.17087277
    for c in (1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223):
        poly = c + t * poly
    tail = t * np.exp(-z * z + poly)
    return np.where(x >= 0, tail, 2 - tail)


def erfc(x: np.ndarray) -> np.ndarray:
    """scipy.special.erfc where scipy is installed (as in .venv-bench, which JAX pulls it
    into), else erfc_numpy; both are checked against vxla before any timing."""
    return _scipy_erfc(x) if _scipy_erfc is not None else erfc_numpy(x)


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """jax.nn.gelu(approximate=False): x * erfc(-x / sqrt 2) / 2."""
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return 0.5 * x * erfc(-x * sqrt_half)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """jax.nn.gelu(approximate=True)."""
    sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
    return x * (0.5 * (1.0 + np.tanh(sqrt_2_over_pi * (x + 0.044715 * (x**3)))))


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = np.square(x - mu).mean(axis=-1, keepdims=True)
    return (x - mu) * (1 / np.sqrt(var + eps)) * gamma + beta


def conv2d_nhwc(x: np.ndarray, kernel: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """NHWC x HWIO convolution as im2col + one matmul (how numpy code usually does it)."""
    kh, kw, cin, cout = kernel.shape
    padded = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    # (n, ho, wo, cin, kh, kw): a view, the copy happens in the reshape below.
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    n, ho, wo = windows.shape[:3]
    columns = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, kh * kw * cin)
    return (columns @ kernel.reshape(kh * kw * cin, cout)).reshape(n, ho, wo, cout)


def pool_2x2(x: np.ndarray, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    """A 2x2, stride 2, VALID window reduction over H and W of NHWC."""
    n, h, w, c = x.shape
    return reduce(x.reshape(n, h // 2, 2, w // 2, 2, c), axis=(2, 4))


def mlp_softmax(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> Arrays:
    h = relu(x @ w1 + b1)
    logits = h @ w2 + b2
    return logits, softmax(logits, axis=-1)


def cnn(x: np.ndarray, k: np.ndarray, kb: np.ndarray, w: np.ndarray, b: np.ndarray) -> Arrays:
    y = relu(conv2d_nhwc(x, k, stride=2, padding=1) + kb)  # (2, 8, 8, 8)
    y = pool_2x2(y, np.max)  # 4x4
    y = pool_2x2(y, np.sum) / 4.0  # 2x2
    y = y.reshape(y.shape[0], -1)  # (2, 32)
    return (y @ w + b,)


TRANSFORMER_HEADS = 4  # fixed by the fixture (not recoverable from the input shapes)


def transformer_block(
    x: np.ndarray,
    g1: np.ndarray,
    be1: np.ndarray,
    wqkv: np.ndarray,
    bqkv: np.ndarray,
    wo: np.ndarray,
    bo: np.ndarray,
    g2: np.ndarray,
    be2: np.ndarray,
    w1: np.ndarray,
    b1: np.ndarray,
    w2: np.ndarray,
    b2: np.ndarray,
    wp: np.ndarray,
) -> Arrays:
    b, t, d = x.shape
    h = TRANSFORMER_HEADS
    y = layernorm(x, g1, be1)
    qkv = y @ wqkv + bqkv
    # (b, h, t, d/h): batched matmuls instead of einsum, since plain np.einsum does not use BLAS.
    q, k, v = (a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
    s = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(d // h))
    causal = np.tril(np.ones((t, t), dtype=bool))
    s = np.where(causal, s, np.float32(-1e30))
    p = softmax(s, axis=-1)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    x = x + o @ wo + bo
    y = layernorm(x, g2, be2)
    y = gelu_exact(y @ w1 + b1) @ w2 + b2
    x = x + y
    pooled = gelu_tanh(x.mean(axis=1) @ wp)
    return x, pooled


def transcendental_chain(x: np.ndarray) -> Arrays:
    """bench/backend_vs_numpy.py's TRANSCENDENTAL_CHAIN: mean(tanh(x) * exp(tanh(x)))."""
    t = np.tanh(x)
    return (np.mean(t * np.exp(t), dtype=np.float32),)


def elementwise_chain(x: np.ndarray, y: np.ndarray) -> Arrays:
    """bench/backend_vs_numpy.py's ELEMENTWISE_CHAIN, one numpy op per HLO instruction."""
    a = x * y
    b = a + x
    c = np.maximum(b, y)
    d = c - a
    return (d * d,)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """One benchmarked program: its HLO, inputs and numpy equivalent; `expected` holds the
    XLA:CPU outputs stored with a fixture (None for the chain, which has none)."""

    name: str
    description: str
    module_text: str
    inputs: Arrays
    numpy_fn: Callable[..., Arrays]
    expected: Arrays | None


NUMPY_EQUIVALENTS: dict[str, Callable[..., Arrays]] = {
    "mlp_softmax": mlp_softmax,
    "cnn": cnn,
    "transformer_block": transformer_block,
    "elementwise_chain": elementwise_chain,
    "transcendental_chain": transcendental_chain,
}
MODEL_NAMES: tuple[str, ...] = tuple(NUMPY_EQUIVALENTS)


def load_model(name: str) -> Model:
    """The model called `name` (one of MODEL_NAMES), inputs loaded."""
    if name == "elementwise_chain":
        # The same inputs as bench/backend_vs_numpy.py's chain case.
        x, y = np.random.default_rng(0).standard_normal((2, CHAIN_ELEMENTS), dtype=np.float32)
        description = f"elementwise chain, 5 ops on {CHAIN_ELEMENTS} f32"
        return Model(name, description, ELEMENTWISE_CHAIN, (x, y), elementwise_chain, None)
    if name == "transcendental_chain":
        x = np.random.default_rng(1).standard_normal((2048, 2048), dtype=np.float32)
        description = "tanh, exp, multiply and mean of 2048x2048 f32"
        return Model(name, description, TRANSCENDENTAL_CHAIN, (x,), transcendental_chain, None)
    fixture = Fixture(name)
    return Model(
        name,
        fixture.meta["description"],
        fixture.module_text,
        tuple(fixture.inputs()),
        NUMPY_EQUIVALENTS[name],
        tuple(fixture.xla_outputs()),
    )


# --------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------


class EquivalenceError(AssertionError):
    """Two backends disagree beyond the tolerance: their timings would not be comparable."""


def max_difference(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float:
    """The largest |a - b| over all outputs (0.0 for none)."""
    return max((float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0)) for a, b in zip(outputs, expected, strict=True)), default=0.0)


def check_close(label: str, outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float = RTOL, atol: float = ATOL) -> None:
    """Raises EquivalenceError unless the outputs match `expected` in number, shape and dtype
    and, elementwise, |a - b| <= atol + rtol * |b| (NaNs must match NaNs)."""
    if len(outputs) != len(expected):
        raise EquivalenceError(f"{label}: {len(outputs)} outputs, expected {len(expected)}")
    for index, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        got = np.asarray(got)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise EquivalenceError(f"{label} out{index}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}")
        a, b = got.astype(np.float64), want.astype(np.float64)
        bad = ~(np.abs(a - b) <= atol + rtol * np.abs(b)) & ~(np.isnan(a) & np.isnan(b))
        if bad.any():
            where = np.flatnonzero(bad.reshape(-1))
            raise EquivalenceError(
                f"{label} out{index}: {where.size} of {bad.size} elements differ beyond rtol={rtol} atol={atol}; "
                f"first at flat index {where[:5].tolist()}: got {a.reshape(-1)[where[:5]]}, expected {b.reshape(-1)[where[:5]]}"
            )


# --------------------------------------------------------------------------
# JAX (optional)
# --------------------------------------------------------------------------


def _load_export_tool() -> ModuleType:
    """tools/export_fixtures.py, loaded by path (tools/ is not a package, and a `tools`
    package elsewhere on the path must not shadow it)."""
    path = REPO_ROOT / "tools" / "export_fixtures.py"
    spec = importlib.util.spec_from_file_location("_vxla_export_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def jax_functions() -> dict[str, Callable] | None:
    """The JAX function of every model, un-jitted (None when JAX is not installed): the
    fixtures' own functions from tools/export_fixtures.py, and the chain op by op."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")
    tool = _load_export_tool()
    functions: dict[str, Callable] = {}
    for fixture in tool.FIXTURES:
        if fixture.name in NUMPY_EQUIVALENTS and not fixture.x64:
            functions[fixture.name] = fixture.build()[0]

    def chain(x, y):
        a = x * y
        b = a + x
        c = jax.numpy.maximum(b, y)
        d = c - a
        return d * d

    def transcendental(x):
        t = jax.numpy.tanh(x)
        return jax.numpy.mean(t * jax.numpy.exp(t))

    functions["elementwise_chain"] = chain
    functions["transcendental_chain"] = transcendental
    return functions


def jax_version() -> str | None:
    try:
        import jax
    except ImportError:
        return None
    return jax.__version__


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Per-call seconds over `samples` samples of `calls_per_sample` calls each."""

    median_s: float
    min_s: float
    samples: int
    calls_per_sample: int


def _time_calls(function: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return time.perf_counter() - start


def measure(function: Callable[[], object], repeat: int, min_sample_s: float) -> Timing:
    """Warms up, doubles the calls per sample until a sample lasts min_sample_s, then takes
    `repeat` samples; the garbage collector is off while timing (as in timeit), so a
    collection triggered by one backend's garbage is not billed to another."""
    function()
    calls = 1
    enabled = gc.isenabled()
    gc.disable()
    try:
        while _time_calls(function, calls) < min_sample_s and calls < 1 << 20:
            calls *= 2
        per_call = [_time_calls(function, calls) / calls for _ in range(repeat)]
    finally:
        if enabled:
            gc.enable()
    return Timing(statistics.median(per_call), min(per_call), repeat, calls)


@dataclass
class Result:
    """One model's measurements; times in ms, ratios other/vxla (None where JAX did not run)."""

    model: str
    description: str
    compile_ms: float
    vxla: Timing
    numpy: Timing
    jax: Timing | None
    jax_compile_ms: float | None
    numpy_max_abs_diff: float
    jax_max_abs_diff: float | None

    @property
    def numpy_ratio(self) -> float:
        return self.numpy.median_s / self.vxla.median_s

    @property
    def jax_ratio(self) -> float | None:
        return self.jax.median_s / self.vxla.median_s if self.jax else None

    def as_json(self) -> dict:
        data = asdict(self)
        for backend in ("vxla", "numpy", "jax"):
            timing = getattr(self, backend)
            data[backend] = None if timing is None else {"median_ms": timing.median_s * 1e3, "min_ms": timing.min_s * 1e3, "samples": timing.samples, "calls_per_sample": timing.calls_per_sample}
        data["numpy_over_vxla"] = self.numpy_ratio
        data["jax_over_vxla"] = self.jax_ratio
        return data


def compile_model(model: Model, config: CompilerConfig, threads: int) -> tuple[Executable, float]:
    """The model's executable (no compile cache: compile time is always a real compile) and
    the seconds that took, parse and verify included."""
    start = time.perf_counter()
    executable = compile_program(load_program(model.module_text), config, threads=threads, cache_dir=False)
    return executable, time.perf_counter() - start


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bench_model(model: Model, config: CompilerConfig, threads: int, repeat: int, min_sample_s: float, jax_fn: Callable | None, rtol: float, atol: float) -> Result:
    """Compiles, checks every backend against vxla's outputs, then times each one."""
    progress(f"{model.name}: compiling")
    executable, compile_s = compile_model(model, config, threads)
    ours = executable.run(*model.inputs)
    theirs = model.numpy_fn(*model.inputs)
    check_close(f"{model.name}: numpy vs vxla", theirs, ours, rtol, atol)
    jax_call, jax_compile_s, jax_diff = None, None, None
    if jax_fn is not None:
        import jax

        jitted = jax.jit(jax_fn)
        arguments = [jax.device_put(a) for a in model.inputs]
        start = time.perf_counter()
        first = jax.block_until_ready(jitted(*arguments))
        jax_compile_s = time.perf_counter() - start
        outputs = [np.asarray(o) for o in jax.tree_util.tree_leaves(first)]
        check_close(f"{model.name}: jax vs vxla", outputs, ours, rtol, atol)
        jax_diff = max_difference(outputs, ours)

        def jax_call() -> object:
            return jax.block_until_ready(jitted(*arguments))

    progress(f"{model.name}: timing vxla")
    vxla_timing = measure(lambda: executable.run(*model.inputs), repeat, min_sample_s)
    progress(f"{model.name}: timing numpy")
    numpy_timing = measure(lambda: model.numpy_fn(*model.inputs), repeat, min_sample_s)
    jax_timing = None
    if jax_call is not None:
        progress(f"{model.name}: timing jax")
        jax_timing = measure(jax_call, repeat, min_sample_s)
    return Result(
        model.name,
        model.description,
        compile_s * 1e3,
        vxla_timing,
        numpy_timing,
        jax_timing,
        None if jax_compile_s is None else jax_compile_s * 1e3,
        max_difference(theirs, ours),
        jax_diff,
    )


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def _ms(timing: Timing | None) -> str:
    return f"{timing.median_s * 1e3:10.3f} {timing.min_s * 1e3:10.3f}" if timing else f"{'-':>10} {'-':>10}"


def table(results: Sequence[Result], header: str) -> str:
    lines = [
        header,
        "times per call in ms: median and min over the samples; ratio = other median / vxla median (>1: vxla faster)",
        f"{'model':<18} {'compile':>9} {'vxla med':>10} {'vxla min':>10} {'numpy med':>10} {'numpy min':>10} {'jax med':>10} {'jax min':>10} {'numpy/vxla':>10} {'jax/vxla':>9}",
    ]
    for r in results:
        jax_ratio = f"{r.jax_ratio:9.2f}" if r.jax_ratio is not None else f"{'-':>9}"
        lines.append(f"{r.model:<18} {r.compile_ms:9.1f} {_ms(r.vxla)} {_ms(r.numpy)} {_ms(r.jax)} {r.numpy_ratio:10.2f} {jax_ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="vxla worker threads (default: os.cpu_count(), here %(default)s)")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per backend (default %(default)s)")
    parser.add_argument("--min-sample-ms", type=float, default=20.0, help="shortest sample: calls are batched until one lasts this long (default %(default)s)")
    parser.add_argument("--models", nargs="+", choices=MODEL_NAMES, default=list(MODEL_NAMES), metavar="NAME", help=f"models to run (default: all of {', '.join(MODEL_NAMES)})")
    parser.add_argument("--no-jax", action="store_true", help="skip jax.jit even when JAX is installed")
    parser.add_argument("--rtol", type=float, default=RTOL, help="equivalence check: relative tolerance (default %(default)s)")
    parser.add_argument("--atol", type=float, default=ATOL, help="equivalence check: absolute tolerance (default %(default)s)")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH", help="write the results as JSON to PATH; alone (or '-'): JSON on stdout instead of the table")
    add_target_argument(parser)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeat < 1:
        parser.error("--threads and --repeat must be at least 1")

    config = resolve_target(args.target)
    functions = None if args.no_jax else jax_functions()
    progress("jax: not installed, or --no-jax; its columns stay empty" if functions is None else f"jax {jax_version()}: jax.jit on CPU")
    results = []
    for name in args.models:
        model = load_model(name)
        jax_fn = functions.get(name) if functions is not None else None
        results.append(bench_model(model, config, args.threads, args.repeat, args.min_sample_ms / 1e3, jax_fn, args.rtol, args.atol))

    header = (
        f"vxla threads={args.threads} (cpu={config.cpu}, pipeline={config.pipeline}); os.cpu_count()={os.cpu_count()}; "
        f"numpy {np.__version__}; jax {jax_version() if functions is not None else '-'}; {args.repeat} samples of >= {args.min_sample_ms:g} ms"
    )
    report = {
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy_version": np.__version__,
        "jax_version": jax_version() if functions is not None else None,
        "target_cpu": config.cpu,
        "pipeline": config.pipeline,
        "repeat": args.repeat,
        "min_sample_ms": args.min_sample_ms,
        "rtol": args.rtol,
        "atol": args.atol,
        "results": [r.as_json() for r in results],
    }
    text = json.dumps(report, indent=2, allow_nan=False) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
        return 0
    if args.json is not None:
        Path(args.json).write_text(text)
    print(table(results, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

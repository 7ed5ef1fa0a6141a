"""The differential fuzzer's modules on XLA:CPU: random valid HLO modules
(harness/program_generator.py) run on vxla's reference evaluator, its LLVM backend and XLA:CPU
(jaxlib), compared as `tools/xla_conformance.py` compares XLA's own test modules: the backend
must give the reference's bits, the reference must agree with XLA:CPU within a tolerance
(exact for integers and pred). A difference with a cause the contract documents
(docs/numerics.md §11) is counted as explained; any other is listed with its module.

Development tool only: it needs JAX's jaxlib beside vxla, as in .venv-bench.

    .venv-bench/bin/python tools/fuzz_vs_xla.py --modules 500 [--save DIR] [--seed N]

Inputs are the conformance tool's (normal floats, small non-negative integers), which compare
the ops themselves; `--special-inputs` takes the fuzzer's instead (NaN, infinities, -0,
subnormals and extreme integers mixed in), which compare what each does at the edges, where
the contract defines its own results. Exit status 0 when nothing unexplained differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from harness.fuzzing import fuzz_settings  # noqa: E402
from harness.program_generator import inputs, programs  # noqa: E402
from tools.xla_conformance import XlaProcess, check_module  # noqa: E402


def flushed_inputs(types: list[tuple[str, tuple[int, ...]]], seed: int) -> list[np.ndarray]:
    """The fuzzer's inputs with every subnormal replaced by a zero of its sign."""
    arrays = []
    for array in inputs(types, seed):
        if array.dtype.kind == "f" or array.dtype.name == "bfloat16":
            tiny = float(ml_dtypes.finfo(array.dtype).smallest_normal)
            wide = array.astype(np.float64)
            array = np.where(np.abs(wide) < tiny, np.copysign(0.0, wide), wide).astype(array.dtype)
        arrays.append(array)
    return arrays


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=200, help="modules to generate and compare (default 200)")
    parser.add_argument("--save", type=Path, help="directory for the modules whose difference is unexplained")
    parser.add_argument("--special-inputs", action="store_true", help="the fuzzer's inputs: NaN, inf, -0, subnormals, extreme integers")
    parser.add_argument("--derandomize", action="store_true", help="the fixed modules of the fuzzer's test, extended")
    args = parser.parse_args(argv)
    if args.modules < 1:
        parser.error("--modules must be at least 1")
    xla = XlaProcess(timeout=120.0)
    outcomes: Counter[str] = Counter()
    explained: Counter[str] = Counter()
    unexplained: list[tuple[str, str]] = []
    started = time.monotonic()

    @fuzz_settings(args.modules, args.derandomize)
    @given(programs(), st.integers(0, 2**32 - 1))
    def campaign(text: str, seed: int) -> None:
        result = check_module(text, seed, xla, inputs if args.special_inputs else None)
        # XLA:CPU runs with subnormals flushed to zero; the contract keeps them (§1).
        if (
            args.special_inputs and result.outcome == "xla-differs" and "explained:" not in result.detail
            and check_module(text, seed, xla, flushed_inputs).outcome == "match"
        ):
            result.detail += "; explained: subnormal inputs, which XLA:CPU flushes to zero (FTZ/DAZ) and the contract keeps"
        outcomes[result.outcome] += 1
        if result.outcome == "xla-differs":
            if "explained:" in result.detail:
                explained[result.detail.split("explained:", 1)[1].strip().split(":")[0]] += 1
            else:
                unexplained.append((result.detail, text))
        elif result.outcome in ("crash", "backends-differ", "reference-refused", "backend-refused"):
            unexplained.append((f"{result.outcome}: {result.detail}", text))
        done = sum(outcomes.values())
        if done % 50 == 0:
            print(f"{done} modules ({done / (time.monotonic() - started):.1f}/s): {dict(outcomes)}", file=sys.stderr, flush=True)

    try:
        campaign()
    finally:
        xla.close()
    print(f"{sum(outcomes.values())} modules in {time.monotonic() - started:.0f} s: {dict(sorted(outcomes.items()))}")
    for cause, count in explained.most_common():
        print(f"  explained ({count}): {cause}")
    for number, (detail, text) in enumerate(unexplained):
        print(f"\nunexplained {number}: {detail}\n{text}")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"xla_differs_{number}.hlo").write_text(text)
    return 0 if not unexplained else 1


if __name__ == "__main__":
    sys.exit(main())

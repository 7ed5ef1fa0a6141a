"""Finds, exhaustively, the binary32 inputs where fptrunc(pinned_f64(x)) is not correctly rounded.

The compiled binary32 functions compute RN32(pinned_f64(x)) and patch the few inputs where
that double rounding differs from the correctly rounded result (the reference's
`mathlib.unary`). This tool finds those inputs among all 2**32 bit patterns: each chunk is
evaluated with the numpy pinned binary64 algorithm, and the elements whose binary64 value
lies within the reference's ambiguity band of a binary32 rounding boundary (exact
midpoints included) are recomputed with MPFR, exactly as the reference does. Every other
element is, by the reference's own definition, RN32(pinned_f64(x)).

The scan also records the SHA-256 of the reference's output bits (little-endian uint32,
canonical NaN) of every chunk of 2**24 consecutive inputs, and the function's reference
digest, the SHA-256 of those 256 chunk digests in input order; tools/check_f32_exhaustive.py
compares compiled code against them.

Progress is saved per function and chunk under --state-dir (resumable: rerun the same
command). When every chunk of a function is done, the generated module
compiler/numerics/mathlib/f32_exceptions.py is rewritten with the tables and reference
digests of all completed functions.

  python tools/find_f32_exceptions.py --function exp --workers 2
  python tools/find_f32_exceptions.py --all --workers 2
  python tools/find_f32_exceptions.py --write-module    # only regenerate from saved state
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attest.digests import digest_of_digests, sha256_hex  # noqa: E402
from compiler.numerics import mathlib  # noqa: E402
from compiler.numerics.mathlib import _chunked  # noqa: E402
from compiler.numerics.mathlib.correctly_rounded import ambiguous  # noqa: E402
from compiler.numerics.mathlib.mpfr_reference import correctly_rounded_f32  # noqa: E402
from compiler.numerics.mathlib.pinned_f64 import PINNED_F64  # noqa: E402
from core.dtypes import F32  # noqa: E402

MODULE_PATH = ROOT / "compiler" / "numerics" / "mathlib" / "f32_exceptions.py"
DEFAULT_STATE_DIR = ROOT / "build" / "f32_exceptions"
TOTAL = 1 << 32
DIGEST_CHUNK = 1 << 24  # inputs per chunk digest (and per scanned chunk)
F32_NAN_BITS = F32.float_layout.canonical_nan


def chunk_inputs(start: int, stop: int) -> np.ndarray:
    """The binary32 inputs with bit patterns start .. stop - 1, as a uint32 array."""
    return np.arange(start, stop, dtype=np.uint64).astype(np.uint32)


def scan_chunk(name: str, start: int, stop: int) -> tuple[list[list[int]], int, str]:
    """For a range of bit patterns: ([[input bits, correct output bits], ...], the number of
    ambiguous elements, SHA-256 hex of the reference's output bits)."""
    bits = chunk_inputs(start, stop)
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        v = _chunked(PINNED_F64[name], np.dtype(np.float64), x.astype(np.float64))
        r = v.astype(np.float32)
        hard = np.flatnonzero(ambiguous(v, r))
    out = r.view(np.uint32).copy()
    out[np.isnan(r)] = F32_NAN_BITS
    found = []
    for i in hard.tolist():
        want = np.float32(correctly_rounded_f32(name, float(x[i])))
        want_bits = F32_NAN_BITS if np.isnan(want) else int(want.view(np.uint32))
        if want_bits != int(out[i]):
            found.append([int(bits[i]), want_bits])
            out[i] = want_bits
    return found, int(hard.size), sha256_hex(out.tobytes())


def _task(args: tuple[str, int, int]) -> tuple[int, list[list[int]], int, str]:
    name, start, stop = args
    return start, *scan_chunk(name, start, stop)


def function_digest(chunk_digests: list[str]) -> str:
    """The reference digest of a function: SHA-256 of its chunk digests in input order."""
    return digest_of_digests(chunk_digests)


def _state_path(state_dir: Path, name: str) -> Path:
    return state_dir / f"{name}.json"


def load_state(state_dir: Path, name: str) -> dict:
    """The saved progress of `name` (a fresh one if none)."""
    path = _state_path(state_dir, name)
    if path.exists():
        return json.loads(path.read_text())
    return {"function": name, "chunk": DIGEST_CHUNK, "done": {}, "complete": False}


def save_state(state_dir: Path, state: dict) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = _state_path(state_dir, state["function"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, sort_keys=True))
    tmp.replace(path)


def run_function(name: str, workers: int, state_dir: Path) -> dict:
    """Scans every chunk of `name` not yet done; returns the final state."""
    chunk = DIGEST_CHUNK
    state = load_state(state_dir, name)
    todo = [s for s in range(0, TOTAL, chunk) if str(s) not in state["done"]]
    print(f"{name}: {len(todo)} of {TOTAL // chunk} chunks to scan on {workers} workers",
          flush=True)
    t0 = time.time()
    last_save = t0
    tasks = [(name, s, s + chunk) for s in todo]
    with multiprocessing.Pool(workers) as pool:
        for k, (start, found, hard, digest) in enumerate(pool.imap_unordered(_task, tasks), 1):
            state["done"][str(start)] = {"exceptions": found, "ambiguous": hard, "digest": digest}
            now = time.time()
            if now - last_save > 30 or k == len(tasks):
                save_state(state_dir, state)
                last_save = now
            if k % max(1, len(tasks) // 64) == 0 or k == len(tasks):
                rate = k * chunk / (now - t0)
                n_exc = sum(len(d["exceptions"]) for d in state["done"].values())
                print(f"  {name}: {len(state['done'])}/{TOTAL // chunk} chunks, "
                      f"{n_exc} exceptions so far, {rate / 1e6:.1f} M/s, "
                      f"eta {(len(tasks) - k) * chunk / rate / 60:.1f} min", flush=True)
    state["complete"] = len(state["done"]) == TOTAL // chunk
    state["seconds"] = state.get("seconds", 0.0) + (time.time() - t0)
    save_state(state_dir, state)
    return state


def exceptions_of(state: dict) -> list[tuple[int, int]]:
    """The sorted (input bits, output bits) pairs of a completed state."""
    pairs = [tuple(p) for d in state["done"].values() for p in d["exceptions"]]
    return sorted(pairs)


def chunk_digests(state: dict) -> list[str]:
    """The chunk digests of a completed state, in input order."""
    return [state["done"][str(s)]["digest"] for s in range(0, TOTAL, DIGEST_CHUNK)]


def generate_module(
    tables: dict[str, list[tuple[int, int]]], ambiguous: dict[str, int], digests: dict[str, str]
) -> str:
    """The source of compiler/numerics/mathlib/f32_exceptions.py."""
    lines = [
        '"""Binary32 inputs where RN32(pinned_f64(x)) is not the correctly rounded result.',
        "",
        "GENERATED by tools/find_f32_exceptions.py from an exhaustive scan of all 2**32 inputs",
        "per function; do not edit. For each function: (input bits, correctly rounded output",
        "bits) pairs, sorted by input bits. The compiled binary32 functions return",
        "RN32(pinned_f64(x)) patched with these entries, which is the reference's result.",
        "AMBIGUOUS_COUNTS: how many inputs of the scan were recomputed with MPFR.",
        "F32_REFERENCE_DIGESTS: SHA-256 of the 256 SHA-256 digests, in input order, of the",
        "reference's output bits (little-endian uint32, canonical NaN) for the inputs",
        "k * 2**24 .. (k + 1) * 2**24 - 1 (bit patterns), k = 0 .. 255.",
        '"""',
        "",
        "F32_EXCEPTIONS: dict[str, tuple[tuple[int, int], ...]] = {",
    ]
    for name in mathlib.UNARY_FUNCTIONS:
        if name not in tables:
            continue
        if not tables[name]:
            lines.append(f'    "{name}": (),')
            continue
        lines.append(f'    "{name}": (')
        lines += [f"        (0x{a:08X}, 0x{b:08X})," for a, b in tables[name]]
        lines.append("    ),")
    lines.append("}")
    lines.append("")
    lines += _per_function_dict("AMBIGUOUS_COUNTS: dict[str, int]", {n: str(c) for n, c in ambiguous.items()})
    lines.append("")
    lines += _per_function_dict("F32_REFERENCE_DIGESTS: dict[str, str]", {n: f'"{d}"' for n, d in digests.items()})
    return "\n".join(lines) + "\n"


def _per_function_dict(declaration: str, values: dict[str, str]) -> list[str]:
    """The lines of the dict literal `declaration = {...}`: one `"name": value,` entry (the
    value already written as source) per function of `values`, in the mathlib's order so
    that the generated module does not depend on the order of the scan."""
    entries = [f'    "{name}": {values[name]},' for name in mathlib.UNARY_FUNCTIONS if name in values]
    return [f"{declaration} = {{", *entries, "}"]


def write_module(state_dir: Path) -> list[str]:
    """Rewrites the generated module from every completed state; returns their names."""
    tables: dict[str, list[tuple[int, int]]] = {}
    counts: dict[str, int] = {}
    digests: dict[str, str] = {}
    for name in mathlib.UNARY_FUNCTIONS:
        path = _state_path(state_dir, name)
        if not path.exists():
            continue
        state = json.loads(path.read_text())
        if not state.get("complete"):
            continue
        tables[name] = exceptions_of(state)
        counts[name] = sum(d["ambiguous"] for d in state["done"].values())
        digests[name] = function_digest(chunk_digests(state))
    MODULE_PATH.write_text(generate_module(tables, counts, digests))
    return list(tables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function", action="append", choices=mathlib.UNARY_FUNCTIONS)
    parser.add_argument("--all", action="store_true", help="every unary function")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument("--write-module", action="store_true",
                        help="only regenerate the module from the saved state")
    args = parser.parse_args(argv)
    names = list(mathlib.UNARY_FUNCTIONS) if args.all else (args.function or [])
    if not names and not args.write_module:
        parser.error("give --function NAME, --all or --write-module")
    for name in names:
        state = run_function(name, args.workers, args.state_dir)
        n_amb = sum(d["ambiguous"] for d in state["done"].values())
        print(f"{name}: {len(exceptions_of(state))} exceptions, {n_amb} ambiguous inputs "
              f"checked with MPFR, {state['seconds'] / 60:.1f} min", flush=True)
    written = write_module(args.state_dir)
    print(f"wrote {MODULE_PATH.relative_to(ROOT)} ({', '.join(written) or 'no functions'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

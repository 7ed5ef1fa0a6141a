"""Gas of the contract's scalar evaluator (contracts/src/ScalarEval.sol), per operation, on
anvil (the pinned build): a typical case and the worst case found, each measured alone.

    python bench/scalar_gas.py [--search 3000] [--seed N] [--json OUT.json]

"evaluate" is the gas of ScalarEval.evaluate inside the call (gasleft before and after, the
harness's measure); "tx" is eth_estimateGas of a transaction calling the harness's evaluate
with that one case (21,000, the calldata and the call's dispatch included). The worst case
of each row is the most expensive of its edge cases, its hand-made boundary cases (fma with
a large exponent gap, fmod with the largest gap, subnormal results, ...) and --search random
cases (measured in batches, then measured alone). Gas is deterministic for the committed
artifacts: the figures change only with the contract.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

# Run from a checkout without installing: the repository root holds the packages.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eth_utils import function_signature_to_4byte_selector  # noqa: E402

from compiler.api import SCALAR_TYPE_CODES as TYPE_CODES  # noqa: E402
from compiler.api import ScalarOp as Op  # noqa: E402
from harness import scalar_eval as se  # noqa: E402
from harness.anvil import running_anvil  # noqa: E402

_MEASURE_BATCH = function_signature_to_4byte_selector("measureBatch(uint256[])")


def _f(name: str, value: float) -> int:
    return se.to_float_bits(se.dtype(name), value)


def _rows() -> list[tuple[Op, str, str | None, tuple[int, int, int]]]:
    """(op, type, target, typical operands) of each row of the table."""
    rows: list[tuple[Op, str, str | None, tuple[int, int, int]]] = []
    for name in ("f32", "f64"):
        x, y, z = _f(name, 1.1), _f(name, 2.3), _f(name, -0.7)
        for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.FMA, Op.SQRT, Op.MIN, Op.MAX):
            rows.append((op, name, None, (y if op is Op.REM else x, x if op is Op.REM else y, z)))
        for op in (Op.NEG, Op.ABS, Op.SIGN, Op.FLOOR, Op.CEIL, Op.RINT, Op.TRUNC, Op.IS_NAN):
            rows.append((op, name, None, (_f(name, -2.5), 0, 0)))
        rows += [
            (Op.COPYSIGN, name, None, (x, z, 0)),
            (Op.TOTAL_KEY, name, None, (z, 0, 0)),
            (Op.LT, name, None, (x, y, 0)),
            (Op.EQ, name, None, (x, y, 0)),
        ]
    rows.append((Op.ROUND_F32_CR, "f64", None, (_f("f64", 1.1), 0, 0)))
    for name in ("s32", "u64", "s4"):
        dt = se.dtype(name)
        a, b = se.hold(dt, -5 if dt.is_signed else 5), se.hold(dt, 3)
        for op in (
            Op.ADD,
            Op.MUL,
            Op.DIV,
            Op.REM,
            Op.FLOOR_DIV,
            Op.SHL,
            Op.SHR_ARITH,
            Op.POPCNT,
            Op.CLZ,
            Op.POW,
            Op.LT,
        ):
            rows.append((op, name, None, (a, b, 0)))
    rows += [
        (Op.AND, "pred", None, (1, 0, 0)),
        (Op.SELECT, "f32", None, (1, _f("f32", 1.1), _f("f32", 2.3))),
        (Op.COMPLEX, "f64", None, (_f("f64", 1.1), _f("f64", 2.3), 0)),
        (Op.REAL, "c128", None, (_f("f64", 1.1) | _f("f64", 2.3) << 64, 0, 0)),
        (Op.EQ, "c128", None, (_f("f64", 1.1) | _f("f64", 2.3) << 64, _f("f64", 1.1), 0)),
        (Op.BITCAST, "f32", "s32", (_f("f32", 1.1), 0, 0)),
    ]
    conversions = [
        ("f64", "f32", 1.1),
        ("f32", "f64", 1.1),
        ("f32", "f16", 1.1),
        ("f32", "bf16", 1.1),
        ("f64", "f8e4m3fn", 1.1),
        ("f8e5m2", "f32", 1.5),
        ("s64", "f32", -123456789),
        ("u64", "f16", 1234),
        ("f64", "s64", -1.5e10),
        ("f32", "u8", 300.5),
        ("s32", "s4", 9),
        ("pred", "f32", 1),
        ("c64", "c128", 1.1),
    ]
    for source, target, value in conversions:
        dt = se.dtype(source)
        if dt.is_float:
            a = _f(source, value)
        elif dt.is_complex:
            part = _f(dt.component.name, value)
            a = part | part << dt.component.bits
        else:
            a = se.hold(dt, int(value))
        rows.append((Op.CONVERT, source, target, (a, 0, 0)))
    return rows


def _measure_batch(evaluator: se.Evaluator, cases: list[se.Case]) -> list[int]:
    out: list[int] = []
    size = 150 if cases and cases[0][0] == Op.ROUND_F32_CR else 500  # within the call's gas
    for start in range(0, len(cases), size):
        chunk = cases[start : start + size]
        words = se.returned_words(evaluator.batch_call(_MEASURE_BATCH, chunk))
        assert len(words) == len(chunk)
        out += words
    return out


def _candidates(
    op: Op, name: str, target: str | None, rng: random.Random, search: int
) -> list[se.Case]:
    dt = se.dtype(name)
    if op is Op.CONVERT or op is Op.BITCAST:
        t = se.dtype(target) if target else None
        values = se.conversion_values(dt, t, rng, search // 4) if op is Op.CONVERT else se.edges(dt)
        return list(se.unary_cases(op, dt, values, t))
    if op is Op.ROUND_F32_CR:
        return se.round_f32_cr_cases(rng, search)
    return (
        se.edge_cases(op, dt, limit=search, rng=rng)
        + se.special_cases(op, dt)
        + se.random_cases(op, dt, rng, search)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", type=int, default=3_000, help="random cases searched per row")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    table = []
    print(
        f"{'op':<13} {'type':<14} {'typical':>7} {'tx':>8} {'worst':>8} {'tx':>8}  worst operands"
    )
    with running_anvil() as (w3, _):
        evaluator = se.Evaluator(w3, se.deploy(w3))
        for op, name, target, operands in _rows():
            code, t = TYPE_CODES[name], TYPE_CODES[target] if target else 0
            typical: se.Case = (int(op), code, t, *operands)
            candidates = _candidates(op, name, target, rng, args.search)
            gas = _measure_batch(evaluator, candidates)
            worst = candidates[max(range(len(candidates)), key=gas.__getitem__)]
            row = {"op": op.name, "type": name if target is None else f"{name}->{target}"}
            for label, case in (("typical", typical), ("worst", worst)):
                used, status, _ = evaluator.measure(case)
                row[label] = used
                row[f"{label}_tx"] = evaluator.transaction_gas(case)
                row[f"{label}_case"] = [hex(v) for v in case[3 : 3 + max(se.scalar.arity(op), 1)]]
                row[f"{label}_status"] = se.STATUS_NAMES[status]
            row["searched"] = len(candidates)
            table.append(row)
            print(
                f"{row['op']:<13} {row['type']:<14} {row['typical']:>7,} {row['typical_tx']:>8,}"
                f" {row['worst']:>8,} {row['worst_tx']:>8,}  {' '.join(row['worst_case'])}"
                + ("" if row["worst_status"] == "decided" else f" ({row['worst_status']})"),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

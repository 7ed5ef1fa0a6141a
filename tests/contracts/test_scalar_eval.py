"""The contract's scalar evaluator (contracts/src/ScalarEval.sol) against its definition,
compiler.reference.scalar.evaluate, bit for bit and status for status: a sample of edge
cases and random values for every op on every type it is defined on, every conversion, the
undecidable band of ROUND_F32_CR, and every op and type code (tools/scalar_campaign.py runs
millions). On anvil, whose eth_call takes a batch of hundreds of cases at a time."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from compiler.reference.scalar import TYPE_CODES, TYPES_BY_CODE, Op, arity
from harness import scalar_eval as se
from harness.anvil import running_anvil

SOURCE = Path(__file__).resolve().parents[2] / "contracts" / "src" / "ScalarEval.sol"
SEED = 20_251_206


@pytest.fixture(scope="module")
def evaluator() -> Iterator[se.Evaluator]:
    with running_anvil() as (w3, _):
        yield se.Evaluator(w3, se.deploy(w3))


def _check(evaluator: se.Evaluator, cases: list[se.Case]) -> list[tuple[int, int]]:
    want = [se.expected(case) for case in cases]
    got = evaluator.evaluate_batch(cases)
    mismatches = se.compare(cases, got, want)
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ:\n" + "\n".join(
        m.describe() for m in mismatches[:20]
    )
    return want


def test_op_and_type_codes_are_the_python_ones() -> None:
    """Every Op and TYPE_CODES entry of scalar.py is a constant of the library with the same
    number (types by their upper-cased names), and the library has no other."""
    constants = dict(re.findall(r"uint8 internal constant (\w+) = (\d+);", SOURCE.read_text()))
    statuses = {"DECIDED": se.DECIDED, "UNDECIDABLE": se.UNDECIDABLE, "MALFORMED": se.MALFORMED}
    python = (
        {op.name: int(op) for op in Op} | {n.upper(): c for n, c in TYPE_CODES.items()} | statuses
    )
    assert {name: int(value) for name, value in constants.items()} == python


def test_every_op_type_and_target_code(evaluator: se.Evaluator) -> None:
    """Each op code (unknown ones too) on each type code (and out of range), each target for
    CONVERT and BITCAST: defined exactly where scalar.evaluate is (contract_rejects aside),
    with the same bits, for zero operands and for other values of the type."""
    rng = random.Random(SEED)
    ops = [*range(0, 70), 255]
    types = [*sorted(TYPES_BY_CODE), len(TYPES_BY_CODE), 255]
    cases = []
    for dt in types:
        dtype = TYPES_BY_CODE.get(dt)
        operand_sets = [(0, 0, 0)]
        if dtype is not None:
            operand_sets.append(tuple(se.random_bits(rng, dtype) for _ in range(3)))
        for op in ops:
            targets = types if op in (Op.CONVERT, Op.BITCAST) else [0]
            for target in targets:
                for a, b, c in operand_sets:
                    cases.append((op, dt, target, a & 1 if op == Op.SELECT else a, b, c))
    want = _check(evaluator, cases)
    decided = {
        (op, dt, t)
        for (op, dt, t, *_), (status, _) in zip(cases, want, strict=True)
        if status == se.DECIDED
    }
    # The matrix is not empty where the contract defines things: every op is defined on some type.
    assert {op for op, _, _ in decided} == {int(op) for op in Op}
    assert len({(dt, t) for op, dt, t in decided if op == Op.CONVERT}) == 26 * 26 - 2 * 24


@pytest.mark.parametrize("type_name", list(TYPE_CODES))
def test_edge_cases_of_every_op(evaluator: se.Evaluator, type_name: str) -> None:
    """Every op the type admits (but CONVERT and BITCAST, below) on the type's edge values
    (pairs and, sampled, triples), the hand-made rounding, overflow, underflow and shift
    cases, and random operands."""
    dtype = se.dtype(type_name)
    rng = random.Random(f"{SEED}{type_name}")
    cases: list[se.Case] = []
    wide = type_name in se.FLOAT_ARITHMETIC
    for op in se.ops_for(dtype):
        limit = 1_200 if wide else 300
        cases += se.edge_cases(op, dtype, limit=limit, rng=rng)
        cases += se.special_cases(op, dtype)
        cases += se.random_cases(op, dtype, rng, 100 if wide else 16)
    assert cases or type_name not in ("f32", "f64", "s32", "pred")
    if cases:
        _check(evaluator, cases)


def test_conversions(evaluator: se.Evaluator) -> None:
    """CONVERT between every pair of types (complex to real: malformed), from the source's
    edges and the values at the target's rounding, overflow and saturation boundaries;
    BITCAST between every pair (same storage width only)."""
    rng = random.Random(SEED + 1)
    cases: list[se.Case] = []
    for source in se.all_types():
        for target in se.all_types():
            values = se.conversion_values(source, target, rng, 4)
            cases += list(
                se.unary_cases(Op.CONVERT, source, rng.sample(values, min(len(values), 45)), target)
            )
            cases += list(se.unary_cases(Op.BITCAST, source, se.edges(source)[:6], target))
    _check(evaluator, cases)


def test_round_f32_cr_decides_outside_the_band(evaluator: se.Evaluator) -> None:
    """ROUND_F32_CR is decided, to the same f32, exactly where `ambiguous` is false, and
    undecidable exactly where it is true (midpoints, the overflow threshold, the subnormal
    grid), with the f64 arithmetic of the library."""
    rng = random.Random(SEED + 2)
    cases = se.round_f32_cr_cases(rng, 2_000)
    statuses = {status for status, _ in _check(evaluator, cases)}
    assert statuses == {se.DECIDED, se.UNDECIDABLE}


def test_operands_out_of_range_are_malformed(evaluator: se.Evaluator) -> None:
    """Bits that are no value of the operand's type make any op malformed: pred above 1, an
    s2/s4 byte that is not sign-extended, u2/u4 beyond their bits, anything beyond the
    width; in each operand position the op reads, and a SELECT predicate above 1."""
    rng = random.Random(SEED + 3)
    cases = []
    for dtype in se.all_types():
        code = TYPE_CODES[dtype.name]
        width = dtype.storage_bits
        bad = {1 << width, (1 << 256) - 1, (1 << width) + 1}
        bad |= {v for v in range(256) if width == 8 and not se.valid_bits(dtype, v)}
        bad = set(rng.sample(sorted(bad), min(len(bad), 8)))
        good = se.edges(dtype)[0]
        for op in se.ops_for(dtype) + [Op.CONVERT]:
            n = 3 if op is Op.SELECT else arity(op)
            for position in range(1 if op is Op.SELECT else 0, n):
                for value in bad:
                    operands = [good] * 3
                    if op is Op.SELECT:
                        operands[0] = 1
                    operands[position] = value
                    cases.append((int(op), code, code, *operands))
        cases.append((int(Op.SELECT), code, 0, 2, good, good))
    want = _check(evaluator, cases)
    assert {status for status, _ in want} == {se.MALFORMED}

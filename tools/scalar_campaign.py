"""The long campaign of the contract's scalar evaluator (contracts/src/ScalarEval.sol) on
anvil (the pinned build) against compiler.reference.scalar.evaluate, bit for bit and status
for status: for each op and each type it is defined on, the type's edge cases (every pair,
every FMA triple) and the hand-made boundary cases, then random operands up to --count
(random bit patterns, random exponents, sparse significands that make ties, values near the
subnormal range and the overflow threshold, related operands for cancellations and big
exponent gaps); CONVERT for every pair of types from values at the target's rounding,
overflow and saturation boundaries; BITCAST for every pair. `make test` runs a sample
(tests/contracts/test_scalar_eval.py).

  .venv/bin/python tools/scalar_campaign.py --count 100000 [--ops ADD,FMA] [--types f32,f64] [--seed N]

The expected results are computed by --jobs processes (at most 2) while anvil evaluates the
previous chunk. Prints progress, a table (op, type, cases, decided, undecidable, malformed,
mismatches) and the first mismatches with their operands; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field

from compiler.api import SCALAR_TYPE_CODES as TYPE_CODES
from compiler.api import ScalarOp as Op
from harness import scalar_eval as se
from harness.anvil import running_anvil

CHUNK = 20_000  # cases a worker makes and checks at a time


@dataclass(frozen=True)
class Group:
    """The cases of one op on one type (one pair of types for CONVERT and BITCAST)."""

    op: Op
    dtype: str
    target: str | None
    count: int

    @property
    def label(self) -> tuple[str, str]:
        types = self.dtype if self.target is None else f"{self.dtype}->{self.target}"
        return self.op.name, types


@dataclass
class Tally:
    cases: int = 0
    statuses: list[int] = field(default_factory=lambda: [0, 0, 0])
    mismatches: int = 0


def _fixed_cases(group: Group, seed: int) -> list[se.Case]:
    """The group's edge and boundary cases (the same list in every process)."""
    rng = random.Random(f"{seed}/{group.op.name}/{group.dtype}/{group.target}/fixed")
    dtype = se.dtype(group.dtype)
    target = se.dtype(group.target) if group.target else None
    if group.op is Op.CONVERT:
        assert target is not None
        values = se.conversion_values(dtype, target, rng, max(group.count // 8, 8))
        return list(se.unary_cases(Op.CONVERT, dtype, values, target))
    if group.op is Op.BITCAST:
        return list(se.unary_cases(Op.BITCAST, dtype, se.edges(dtype), target))
    if group.op is Op.ROUND_F32_CR:
        return se.round_f32_cr_cases(rng, group.count // 2)
    return se.edge_cases(
        group.op, dtype, limit=max(group.count // 2, 1), rng=rng
    ) + se.special_cases(group.op, dtype)


def chunks(group: Group, seed: int) -> list[tuple[str, int, int]]:
    """The group's work in chunks of at most CHUNK cases: ("fixed", start, n) slices of the
    edge and boundary cases, then ("random", i, n) with random operands (each chunk drawn
    from its own seed), up to the group's count (at least the fixed cases)."""
    fixed = len(_fixed_cases(group, seed))
    out = [("fixed", start, min(CHUNK, fixed - start)) for start in range(0, fixed, CHUNK)]
    left = group.count - fixed
    i = 0
    while left > 0:
        out.append(("random", i, min(left, CHUNK)))
        left -= CHUNK
        i += 1
    return out


def chunk_cases(group: Group, seed: int, kind: str, index: int, n: int) -> list[se.Case]:
    if kind == "fixed":
        return _fixed_cases(group, seed)[index : index + n]
    rng = random.Random(f"{seed}/{group.op.name}/{group.dtype}/{group.target}/{index}")
    dtype = se.dtype(group.dtype)
    if group.op is Op.ROUND_F32_CR:
        return se.round_f32_cr_cases(rng, n)[-n:]
    if group.op in (Op.CONVERT, Op.BITCAST):
        target = se.dtype(group.target) if group.target else None
        return list(
            se.unary_cases(group.op, dtype, (se.random_bits(rng, dtype) for _ in range(n)), target)
        )
    return se.random_cases(group.op, dtype, rng, n)


def _work(
    item: tuple[int, Group, int, str, int, int],
) -> tuple[int, list[se.Case], list[tuple[int, int]]]:
    """A worker: one chunk's cases and their expected results."""
    index, group, seed, kind, start, n = item
    cases = chunk_cases(group, seed, kind, start, n)
    return index, cases, [se.expected(case) for case in cases]


def plan(ops: list[Op], types: list[str] | None, count: int, pair_count: int) -> list[Group]:
    groups = []
    for op in ops:
        for dtype in se.all_types():
            if types and dtype.name not in types:
                continue
            if op in (Op.CONVERT, Op.BITCAST):
                for target in se.all_types():
                    if types and target.name not in types:
                        continue
                    if se.admitted(op, dtype, target) or op is Op.CONVERT:
                        groups.append(Group(op, dtype.name, target.name, pair_count))
            elif se.admitted(op, dtype):
                groups.append(Group(op, dtype.name, None, count))
    return groups


def _parse_ops(text: str | None) -> list[Op]:
    if not text:
        return list(Op)
    try:
        return [Op[name.strip().upper()] for name in text.split(",") if name.strip()]
    except KeyError as e:
        raise SystemExit(f"unknown op {e}; ops: {', '.join(op.name for op in Op)}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated Op names (default: every op)")
    parser.add_argument(
        "--types", help="comma-separated type names (default: every type the op admits)"
    )
    parser.add_argument(
        "--count", type=int, default=100_000, help="cases per op and type (default 100000)"
    )
    parser.add_argument(
        "--pair-count",
        type=int,
        default=None,
        help="cases per pair of types of CONVERT and BITCAST (default count/20)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="draw from this seed (default: a fresh one, printed)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        choices=(1, 2),
        help="processes computing the expected results",
    )
    parser.add_argument("--show", type=int, default=20, help="mismatches to print (default 20)")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    ops = _parse_ops(args.ops)
    types = [t.strip() for t in args.types.split(",")] if args.types else None
    if types and (unknown := [t for t in types if t not in TYPE_CODES]):
        parser.error(f"unknown types {unknown}")
    pair_count = args.pair_count if args.pair_count is not None else max(args.count // 20, 1)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    groups = plan(ops, types, args.count, pair_count)
    print(
        f"seed {seed}; {len(groups)} groups (op and type), up to {args.count:,} cases each ({pair_count:,} a type pair)",
        flush=True,
    )

    tallies = {g.label: Tally() for g in groups}
    first: list[se.Mismatch] = []
    started = last_report = time.monotonic()
    total = 0
    work = ((i, g, seed, *c) for i, g in enumerate(groups) for c in chunks(g, seed))
    with running_anvil() as (w3, _), multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        evaluator = se.Evaluator(w3, se.deploy(w3))
        pending: deque = deque()
        while True:
            while len(pending) < 2 * args.jobs and (item := next(work, None)) is not None:
                pending.append(pool.apply_async(_work, (item,)))
            if not pending:
                break
            index, cases, want = pending.popleft().get()
            group = groups[index]
            got = evaluator.evaluate_batch(cases)
            mismatches = se.compare(cases, got, want)
            tally = tallies[group.label]
            tally.cases += len(cases)
            tally.mismatches += len(mismatches)
            for status, _ in want:
                tally.statuses[status] += 1
            first += mismatches[: max(args.show - len(first), 0)]
            total += len(cases)
            now = time.monotonic()
            if now - last_report >= 10 or not pending:
                last_report = now
                op, types_label = group.label
                print(
                    f"[group {index + 1}/{len(groups)}] {op} {types_label}: {tally.cases:,} cases, {tally.mismatches} mismatches"
                    f" | all: {total:,} cases, {sum(t.mismatches for t in tallies.values())} mismatches,"
                    f" {now - started:.0f} s ({total / max(now - started, 1e-9):,.0f}/s)",
                    flush=True,
                )
    elapsed = time.monotonic() - started
    print()
    print(
        f"{'op':<13} {'type':<26} {'cases':>12} {'decided':>12} {'undecidable':>11} {'malformed':>10} {'mismatches':>10}"
    )
    for (op, types_label), t in tallies.items():
        print(
            f"{op:<13} {types_label:<26} {t.cases:>12,} {t.statuses[0]:>12,} {t.statuses[1]:>11,} {t.statuses[2]:>10,} {t.mismatches:>10,}"
        )
    bad = sum(t.mismatches for t in tallies.values())
    print(
        f"\n{total:,} cases in {len(groups)} groups, {elapsed:.0f} s ({total / max(elapsed, 1e-9):,.0f}/s), seed {seed}: {bad:,} mismatches"
    )
    for mismatch in first:
        print("  " + mismatch.describe())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

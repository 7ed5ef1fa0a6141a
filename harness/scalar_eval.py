"""The scalar evaluator on chain (contracts/src/ScalarEval.sol) against its definition,
compiler.reference.scalar: deploying the harness contract, evaluating cases in batches, the
expected (status, bits) of each case from scalar.evaluate, and the case generators (edge
cases and random values, per op and type). Shared by the sample in `make test`
(tests/contracts/test_scalar_eval.py), the long campaign on anvil (tools/scalar_campaign.py)
and the gas bench (bench/scalar_gas.py).

A case is (op, dtype, target, a, b, c): codes of scalar.Op and scalar.TYPE_CODES, the
result type (read by CONVERT and BITCAST only) and three operands' bits (an op reads as
many as its arity; the others are ignored by both sides).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from eth_utils import function_signature_to_4byte_selector
from web3 import Web3

from compiler.numerics import integers
from compiler.reference import scalar
from compiler.reference.scalar import TYPE_CODES, TYPES_BY_CODE, Op, ScalarError, Undecidable
from core.dtypes import DType
from node.chain import load_artifact

DECIDED, UNDECIDABLE, MALFORMED = 0, 1, 2
STATUS_NAMES = {DECIDED: "decided", UNDECIDABLE: "undecidable", MALFORMED: "malformed"}
HARNESS = "ScalarMachine"
# One eth_call: at most BATCH cases and about BATCH_GAS gas by GAS_ESTIMATE (a case's cost
# with a margin; the call's cap is CALL_GAS, and a batch that runs out is halved).
BATCH = 1_500
BATCH_GAS = 20_000_000
CALL_GAS = 30_000_000
GAS_ESTIMATE = {
    int(Op.ROUND_F32_CR): 110_000,
    int(Op.POW): 25_000,
    int(Op.FMA): 20_000,
    int(Op.REM): 20_000,
}
DEFAULT_GAS = 15_000

Case = tuple[int, int, int, int, int, int]

FLOAT_ARITHMETIC = ("f32", "f64")
INTEGER_NAMES = ("s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64")


def dtype(name: str) -> DType:
    return TYPES_BY_CODE[TYPE_CODES[name]]


# --- the contract ---------------------------------------------------------------------------


def deploy(w3: Web3, sender: str | None = None) -> str:
    """Deploys the harness (no constructor arguments); returns its address."""
    sender = sender or w3.eth.accounts[0]
    tx = w3.eth.send_transaction(
        {"from": sender, "data": load_artifact(HARNESS).bytecode, "gas": 5_000_000}
    )
    receipt = w3.eth.wait_for_transaction_receipt(tx)
    assert receipt["status"] == 1, "the harness deployment failed"
    return receipt["contractAddress"]


class Evaluator:
    """The deployed harness. evaluate_batch sends evaluateBatch through eth_call with the
    calldata encoded here (web3's contract layer costs more than the EVM), in batches of at
    most BATCH cases and about BATCH_GAS gas (each op's cost estimated by GAS_ESTIMATE)."""

    def __init__(self, w3: Web3, address: str) -> None:
        self.w3 = w3
        self.address = address
        self.contract = w3.eth.contract(address=address, abi=load_artifact(HARNESS).abi)

    def evaluate(self, case: Case) -> tuple[int, int]:
        status, bits = self.contract.functions.evaluate(*case).call({"gas": CALL_GAS})
        return int(status), int(bits)

    def evaluate_batch(self, cases: Sequence[Case]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        start = 0
        while start < len(cases):
            end, gas = start, 0
            while end < len(cases) and end - start < BATCH and gas < BATCH_GAS:
                gas += GAS_ESTIMATE.get(cases[end][0], DEFAULT_GAS)
                end += 1
            out += self._call(cases[start:end])
            start = end
        return out

    def _call(self, cases: Sequence[Case]) -> list[tuple[int, int]]:
        response = self.batch_call(_EVALUATE_BATCH, cases)
        if "result" not in response:
            if len(cases) > 1:  # out of gas, most likely: halve the batch
                half = len(cases) // 2
                return self._call(cases[:half]) + self._call(cases[half:])
            raise RuntimeError(f"evaluateBatch failed on {cases[0]}: {response.get('error')}")
        words_out = returned_words(response)
        assert len(words_out) == len(cases)
        return [(r >> 248, r & ((1 << 248) - 1)) for r in words_out]

    def batch_call(self, selector: bytes, cases: Sequence[Case]) -> dict:
        """The raw eth_call response of the harness's batch function `selector` (one taking
        a uint256[]) given `cases`, each as four words: op, element type and target packed
        in one, then the three operands."""
        words = [0x20, 4 * len(cases)]
        for op, dt, target, a, b, c in cases:
            words += [op | dt << 8 | target << 16, a, b, c]
        data = selector + b"".join(w.to_bytes(32, "big") for w in words)
        return self.w3.provider.make_request(
            "eth_call",
            [{"to": self.address, "data": "0x" + data.hex(), "gas": hex(CALL_GAS)}, "latest"],
        )

    def measure(self, case: Case) -> tuple[int, int, int]:
        """(gas the evaluation used inside the call, status, bits)."""
        gas, status, bits = self.contract.functions.measure(*case).call({"gas": CALL_GAS})
        return int(gas), int(status), int(bits)

    def transaction_gas(self, case: Case) -> int:
        """eth_estimateGas of a transaction calling evaluate(case): what a contract calling
        the evaluator once would pay for it, with the call's 21,000 and its calldata."""
        return int(self.contract.functions.evaluate(*case).estimate_gas({"gas": CALL_GAS}))


_EVALUATE_BATCH = function_signature_to_4byte_selector("evaluateBatch(uint256[])")


def returned_words(response: dict) -> list[int]:
    """The uint256[] a successful eth_call response returns (ABI-encoded: offset, length,
    then the words)."""
    result = bytes.fromhex(response["result"][2:])
    count = int.from_bytes(result[32:64], "big")
    return [int.from_bytes(result[64 + 32 * i : 96 + 32 * i], "big") for i in range(count)]


# --- the definition ---------------------------------------------------------------------------


def contract_rejects(case: Case) -> bool:
    """Cases the contract refuses (MALFORMED) where scalar.evaluate gives a value:
    - CONVERT from a complex type to a real one, which docs/numerics.md §2 rejects ("take
      real first") and which scalar.py computes by numpy's casts (the imaginary part
      dropped; an OverflowError or TypeError for some values);
    - COMPLEX of parts other than f32 or f64, where scalar.py joins any type's bits (two
      c128 operands make a 256-bit "c128")."""
    op, dt, target = case[:3]
    if dt not in TYPES_BY_CODE:
        return False
    source = TYPES_BY_CODE[dt]
    if op == Op.COMPLEX:
        return source.name not in FLOAT_ARITHMETIC
    return (
        op == Op.CONVERT
        and source.is_complex
        and target in TYPES_BY_CODE
        and not TYPES_BY_CODE[target].is_complex
    )


def valid_bits(dt: DType, bits: int) -> bool:
    """Whether `bits` is a value of `dt` as held (scalar.py's convention): pred 0 or 1, an
    integer's value within its bounds (s2/s4 sign-extended in their byte), any pattern of a
    float's or complex type's width."""
    if bits < 0:
        return False
    if dt.is_pred:
        return bits <= 1
    if dt.is_integer:
        if bits >= 1 << dt.storage_bits:
            return False
        value = (
            bits - (1 << dt.storage_bits)
            if dt.is_signed and bits >> (dt.storage_bits - 1)
            else bits
        )
        low, high = dt.integer_bounds
        return low <= value <= high
    return bits < 1 << dt.bits


def expected(case: Case) -> tuple[int, int]:
    """(status, bits) that the contract must give: scalar.evaluate's bits (DECIDED), or
    UNDECIDABLE where it raises Undecidable, or MALFORMED where the op is not defined on the
    types (ScalarError; also the other ValueErrors and KeyErrors scalar.py raises for a type
    it has no definition for, such as REAL of a real type or TOTAL_KEY of s4), where an
    operand is out of range, or where contract_rejects."""
    op, dt, target, *operands = case
    if op not in Op._value2member_map_ or dt not in TYPES_BY_CODE:
        return MALFORMED, 0
    operation = Op(op)
    source = TYPES_BY_CODE[dt]
    n = scalar.arity(operation)
    args = list(operands[:n])
    kinds = [scalar.PRED, source, source] if operation is Op.SELECT else [source] * n
    if not all(valid_bits(kind, bits) for kind, bits in zip(kinds, args, strict=False)):
        return MALFORMED, 0
    if operation in (Op.CONVERT, Op.BITCAST) and target not in TYPES_BY_CODE:
        return MALFORMED, 0
    if contract_rejects(case):
        return MALFORMED, 0
    result_dtype = TYPES_BY_CODE.get(target) if operation in (Op.CONVERT, Op.BITCAST) else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bits = scalar.evaluate(operation, source, args, result_dtype)
        return DECIDED, held_exactly(scalar.result_type(operation, source, result_dtype), bits)
    except Undecidable:
        return UNDECIDABLE, 0
    except (ScalarError, ValueError, KeyError):
        return MALFORMED, 0


def held_exactly(dt: DType, bits: int) -> int:
    """`bits` (a byte of storage) held as the reference evaluator holds every value of `dt`
    (compiler/reference/evaluator.py _held_exactly: integers.wrap for the sub-byte types;
    numpy's bool for pred). scalar.evaluate holds its sub-byte results itself now (BITCAST
    s4 -> u4, FLOOR_DIV and COPYSIGN on sub-byte types once returned them unwrapped); this
    stays as the contract's rule, and leaves every other result unchanged."""
    if dt.is_pred:
        return int(bits != 0)
    if dt.is_integer and dt.is_sub_byte:
        held = integers.wrap(np.array([bits], np.uint8).view(dt.numpy), dt)
        return int(np.asarray(held).view(np.uint8)[0])
    return bits


def admitted(op: Op, dt: DType, target: DType | None = None) -> bool:
    """Whether the contract defines `op` on `dt` (to `target`): scalar.evaluate gives a
    value for all-zero operands, and contract_rejects does not hold."""
    case = (int(op), TYPE_CODES[dt.name], TYPE_CODES[target.name] if target else 0, 0, 0, 0)
    return expected(case)[0] == DECIDED


@dataclass
class Mismatch:
    case: Case
    want: tuple[int, int]
    got: tuple[int, int]

    def describe(self) -> str:
        op, dt, target, a, b, c = self.case
        name = Op(op).name if op in Op._value2member_map_ else f"op{op}"
        types = TYPES_BY_CODE[dt].name if dt in TYPES_BY_CODE else f"type{dt}"
        if op in (Op.CONVERT, Op.BITCAST):
            types += "->" + (
                TYPES_BY_CODE[target].name if target in TYPES_BY_CODE else f"type{target}"
            )
        return (
            f"{name} {types} a={a:#x} b={b:#x} c={c:#x}: "
            f"python {STATUS_NAMES[self.want[0]]} {self.want[1]:#x}, "
            f"contract {STATUS_NAMES.get(self.got[0], self.got[0])} {self.got[1]:#x}"
        )


def compare(
    cases: Sequence[Case], got: Sequence[tuple[int, int]], want: Sequence[tuple[int, int]]
) -> list[Mismatch]:
    return [Mismatch(case, w, g) for case, w, g in zip(cases, want, got, strict=True) if w != g]


# --- values -----------------------------------------------------------------------------------


def float_edges(dt: DType) -> list[int]:
    """Bit patterns of the edge cases of a float type: ±0, ±inf (where the format has one),
    NaNs (canonical, negative, signalling, payloads; every NaN pattern of the 8-bit formats
    with few), the smallest and largest subnormals, the smallest normal, the largest finite,
    1 and its neighbours, 0.5, 1.5, 2.5, and the first value whose ulp is 1 and 2."""
    layout = dt.float_layout
    m, bits = layout.mantissa_bits, layout.bits
    sign = layout.sign_mask
    exp_one = layout.bias << m  # 1.0
    magnitudes = {
        0,
        1,
        2,
        layout.mantissa_mask,  # largest subnormal
        layout.mantissa_mask - 1,
        1 << m,  # smallest normal
        (1 << m) + 1,
        exp_one,
        exp_one + 1,
        exp_one - 1,  # 1 - ulp/2
        exp_one - (1 << m),  # 0.5
        exp_one + (1 << (m - 1)),  # 1.5
        exp_one + (1 << m) + (1 << (m - 2)) if m >= 2 else exp_one + (1 << m),  # 2.5
        exp_one + (m << m),  # 2^m: the ulp is 1
        exp_one + ((m + 1) << m),
        exp_one + ((m + 1) << m) - 1,
    }
    if layout.specials == "ieee":
        magnitudes |= {
            layout.inf_bits,
            layout.inf_bits - 1,
            layout.inf_bits - 2,
            layout.inf_bits - (1 << m),
        }
        nans = {
            layout.canonical_nan,
            layout.inf_bits + 1,
            layout.abs_mask,
            layout.canonical_nan + 1,
        }
    elif layout.specials == "fn":
        magnitudes |= {layout.abs_mask - 1, layout.abs_mask - 2}
        nans = {layout.abs_mask}
    else:
        magnitudes |= {layout.abs_mask, layout.abs_mask - 1}
        nans = set()
    values = set()
    for magnitude in magnitudes:
        values |= {magnitude, magnitude | sign}
    values |= nans | {n | sign for n in nans}
    if layout.specials == "fnuz":
        values.add(sign)  # the one NaN (and no -0)
    return sorted(v for v in values if v < 1 << bits)


def integer_edges(dt: DType) -> list[int]:
    """Held bits of an integer type's edge values: 0, ±1, ±2, MIN, MIN+1, MAX, MAX-1, and
    the width's neighbours (shift amounts at and past the width)."""
    low, high = dt.integer_bounds
    values = {
        0,
        1,
        2,
        -1,
        -2,
        low,
        low + 1,
        high,
        high - 1,
        dt.bits - 1,
        dt.bits,
        dt.bits + 1,
        3,
        7,
    }
    return sorted({hold(dt, v) for v in values if low <= v <= high})


def edges(dt: DType) -> list[int]:
    if dt.is_pred:
        return [0, 1]
    if dt.is_integer:
        return integer_edges(dt)
    if dt.is_complex:
        part = float_edges(dt.component)
        picks = [0, 1, len(part) // 2, len(part) - 1, len(part) - 3]
        w = dt.component.bits
        return sorted(
            {part[i] | part[j] << w for i in picks for j in picks} | {p | p << w for p in part}
        )
    return float_edges(dt)


def hold(dt: DType, value: int) -> int:
    """The held bits of an integer value of `dt` (wrapped into the type)."""
    if dt.is_pred:
        return int(value != 0)
    value %= 1 << dt.bits
    if dt.is_signed and value >> (dt.bits - 1):
        value -= 1 << dt.bits
    return value % (1 << dt.storage_bits)


def random_float_bits(rng: random.Random, dt: DType) -> int:
    """A float pattern from a mix of distributions: uniform bits; a random exponent with a
    random or a sparse significand (sparse significands make exact halves, the ties of
    rounding, frequent); near the subnormal range; near the top; small integers and halves."""
    layout = dt.float_layout
    m, bits = layout.mantissa_bits, layout.bits
    exponents = (1 << layout.exponent_bits) - 1
    kind = rng.randrange(8)
    sign = rng.getrandbits(1) << (bits - 1)
    if kind == 0:
        return rng.getrandbits(bits)
    if kind in (1, 2):
        mantissa = rng.getrandbits(m) if kind == 1 else _sparse(rng, m)
        return sign | rng.randrange(exponents + 1) << m | mantissa
    if kind == 3:  # subnormal or just normal
        return (
            sign
            | rng.randrange(3) << m
            | (_sparse(rng, m) if rng.random() < 0.5 else rng.getrandbits(m))
        )
    if kind == 4:  # near overflow
        return sign | rng.randrange(max(exponents - 3, 0), exponents + 1) << m | rng.getrandbits(m)
    if kind == 5:  # near 1 (exponents around the bias)
        e = layout.bias + rng.randrange(-m - 3, m + 4)
        return sign | max(0, min(e, exponents)) << m | _sparse(rng, m)
    if kind == 6:  # a small integer or half-integer, exactly
        value = rng.randrange(-64, 65) / (2 if rng.random() < 0.5 else 1)
        return to_float_bits(dt, value)
    e = layout.bias + rng.randrange(-8, 9)
    return sign | max(0, min(e, exponents)) << m | rng.getrandbits(m)


def _sparse(rng: random.Random, m: int) -> int:
    """A significand with one to three bits set (or none)."""
    value = 0
    for _ in range(rng.randrange(4)):
        value |= 1 << rng.randrange(m)
    return value


def to_float_bits(dt: DType, value: float) -> int:
    """The bits of `value` (exactly representable or rounded by numpy/ml_dtypes) in float
    type `dt`."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        array = np.array([value], dtype=np.float64).astype(dt.numpy)
    return int(array.view(f"<u{dt.bits // 8}")[0])


def from_float_bits(dt: DType, bits: int) -> float:
    array = np.array([bits], dtype=f"<u{dt.bits // 8}").view(dt.numpy)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return float(array.astype(np.float64)[0])


def random_integer_bits(rng: random.Random, dt: DType) -> int:
    low, high = dt.integer_bounds
    kind = rng.randrange(4)
    if kind == 0:
        value = rng.randrange(low, high + 1)
    elif kind == 1:
        value = rng.randrange(-9, 10)
    elif kind == 2:
        value = rng.choice((low, high)) + rng.randrange(-3, 4)
    else:
        value = rng.getrandbits(rng.randrange(1, dt.bits + 1)) * rng.choice((1, -1))
    return hold(dt, value)


def random_bits(rng: random.Random, dt: DType) -> int:
    if dt.is_pred:
        return rng.getrandbits(1)
    if dt.is_integer:
        return random_integer_bits(rng, dt)
    if dt.is_complex:
        w = dt.component.bits
        return random_float_bits(rng, dt.component) | random_float_bits(rng, dt.component) << w
    return random_float_bits(rng, dt)


# --- cases ------------------------------------------------------------------------------------


def unary_cases(
    op: Op, dt: DType, values: Iterable[int], target: DType | None = None
) -> Iterator[Case]:
    code, t = TYPE_CODES[dt.name], TYPE_CODES[target.name] if target else 0
    for a in values:
        yield (int(op), code, t, a, 0, 0)


def edge_cases(
    op: Op,
    dt: DType,
    target: DType | None = None,
    limit: int | None = None,
    rng: random.Random | None = None,
) -> list[Case]:
    """The edge cases of `op` on `dt`: every edge value (unary ops), every pair of edge
    values (binary ops), and for FMA and SELECT triples (all of them, or `limit` drawn)."""
    code, t = TYPE_CODES[dt.name], TYPE_CODES[target.name] if target else 0
    values = edges(dt)
    if op is Op.SELECT:
        cases = [
            (int(op), code, t, p, a, b) for p in (0, 1) for a in values[:8] for b in values[-8:]
        ]
    elif scalar.arity(op) == 1:
        cases = [(int(op), code, t, a, 0, 0) for a in values]
    elif scalar.arity(op) == 2:
        cases = [(int(op), code, t, a, b, 0) for a in values for b in values]
    else:
        cases = [(int(op), code, t, a, b, c) for a in values for b in values for c in values]
    if limit is not None and len(cases) > limit:
        cases = (rng or random.Random(0)).sample(cases, limit)
    return cases


def special_cases(op: Op, dt: DType) -> list[Case]:
    """Hand-made cases at the rounding, overflow and underflow boundaries of f32 and f64
    arithmetic, integer shifts at and past the width, and ties of the integral roundings."""
    code = TYPE_CODES[dt.name]
    out: list[tuple[int, int, int]] = []
    if dt.is_float and dt.name in FLOAT_ARITHMETIC:
        f = dt.float_layout
        m = f.mantissa_bits
        one = f.bias << m
        sign = f.sign_mask
        big = f.inf_bits - 1  # largest finite
        half_ulp_of_max = (f.inf_bits - (2 + m) * (1 << m)) if f.inf_bits > (2 + m) << m else 1
        tiny = 1

        def bits(value: float) -> int:
            return to_float_bits(dt, value)

        if op in (Op.ADD, Op.SUB):
            out += [
                (one, (f.bias - m - 1) << m, 0),  # 1 + ulp/2: a tie to even (down)
                (one + 1, (f.bias - m - 1) << m, 0),  # 1+ulp + ulp/2: a tie to even (up)
                (one, ((f.bias - m - 1) << m) + 1, 0),  # just above the tie
                (big, half_ulp_of_max, 0),  # MAX + ulp/2: overflows (MAX is odd)
                (big, half_ulp_of_max - 1, 0),  # just below: MAX
                (1 << m, sign | 1, 0),  # smallest normal - smallest subnormal
                (one, sign | one, 0),  # exact zero: +0
                (sign, sign, 0),
                (tiny, sign | tiny, 0),
                (big, sign | (big - 1), 0),  # cancellation
                (one, 1, 0),  # a tiny addend: sticky
                (sign | one, 1, 0),
            ]
        if op is Op.MUL:
            out += [
                (bits(1.0 + 2.0 ** -(m // 2 + 1)), bits(1.0 + 2.0 ** -(m // 2 + 1)), 0),
                ((1 << m), (f.bias - 1) << m, 0),  # min normal * 0.5: exact subnormal
                (1, (f.bias - 1) << m, 0),  # min subnormal * 0.5: a tie to 0
                (1, ((f.bias - 1) << m) + 1, 0),  # just above: the min subnormal
                (3, (f.bias - 1) << m, 0),  # 1.5 units: a tie to 2
                (big, bits(2.0), 0),
                (big, one + 1, 0),
                ((f.bias + (f.bias // 2)) << m, (f.bias + (f.bias // 2)) << m, 0),
            ]
        if op is Op.DIV:
            out += [
                (one, bits(3.0), 0),
                (1, bits(2.0), 0),  # a tie to 0
                (3, bits(2.0), 0),  # a tie to 2
                (big, bits(0.5), 0),
                (1, big, 0),
                (one, 1, 0),  # 1 / min subnormal: overflow
            ]
        if op is Op.REM:
            out += [
                (big, 1, 0),  # the largest exponent gap
                (sign | big, 1, 0),
                (big, 3, 0),
                (big, bits(3.0), 0),
                (bits(7.5), bits(2.0), 0),
                (sign | bits(7.5), bits(2.5), 0),
                (bits(6.0), bits(3.0), 0),  # exact zero, dividend's sign
                (sign | bits(6.0), bits(3.0), 0),
                (1, big, 0),
                (big - 1, big, 0),
            ]
        if op is Op.FMA:
            out += [
                (big, bits(2.0), sign | big),  # product beyond the range, then back
                (big, bits(2.0), f.inf_bits | sign),
                (1, 1, one),  # the product far below c: sticky
                (1, 1, sign | one),
                (one, one, sign | one),  # exact zero: +0
                (sign | 1, 1, 0),
                (1, 1, sign),  # a tiny product + -0
                (sign, one, sign),  # -0 + -0
                (bits(1.0 + 2.0**-m), bits(1.0 - 2.0 ** -(m + 1)), sign | one),  # cancellation
                (big, big, sign | f.inf_bits),
                (1, (f.bias - 1) << m, 0),  # min subnormal * 0.5 + 0
                (1, (f.bias - 1) << m, 1),  # + min subnormal: 1.5 units, a tie to 2
            ]
        if op is Op.SQRT:
            out += [
                (1, 0, 0),
                (f.mantissa_mask, 0, 0),
                (bits(2.0), 0, 0),
                (big, 0, 0),
                (sign | 1, 0, 0),
            ]
        if op in (Op.FLOOR, Op.CEIL, Op.RINT, Op.TRUNC):
            for value in (
                0.5,
                1.5,
                2.5,
                3.5,
                0.49999997,
                2.0**m - 0.5,
                2.0**m + 1,
                2.0 ** (m - 1) + 0.5,
            ):
                out += [(bits(value), 0, 0), (bits(value) | sign, 0, 0)]
    if dt.is_integer and op in (Op.SHL, Op.SHR_LOGICAL, Op.SHR_ARITH):
        for x in integer_edges(dt):
            for amount in {
                0,
                1,
                dt.bits - 1,
                dt.bits,
                dt.bits + 1,
                -1,
                dt.integer_bounds[1],
                dt.integer_bounds[0],
            }:
                if dt.integer_bounds[0] <= amount <= dt.integer_bounds[1]:
                    out.append((x, hold(dt, amount), 0))
    return [(int(op), code, 0, a, b, c) for a, b, c in out]


def conversion_values(source: DType, target: DType, rng: random.Random, count: int) -> list[int]:
    """Operand bits for CONVERT source -> target: the source's edges, values at the
    target's rounding boundaries (the target's values, the midpoints between neighbours, and
    the source's neighbours of both), at its saturation bounds for an integer target, and
    random ones."""
    values = set(edges(source))
    if source.is_complex:
        values |= {random_bits(rng, source) for _ in range(count)}
        return sorted(values)
    points: list[float] = []
    if target.is_float and not target.is_complex:
        t = target if not target.is_complex else target.component
        points += _float_boundaries(t, rng, count)
    elif target.is_complex:
        points += _float_boundaries(target.component, rng, count)
    elif target.is_integer:
        low, high = target.integer_bounds
        for edge in (low, high, high + 1, low - 1, 0):
            points += [edge - 0.5, edge, edge + 0.5, edge - 1, edge + 1]
    for point in points:
        values |= set(_near(source, point))
    values |= {random_bits(rng, source) for _ in range(count)}
    return sorted(v for v in values if valid_bits(source, v))


def _float_boundaries(t: DType, rng: random.Random, count: int) -> list[float]:
    """Values of float type `t` and the midpoints above them: its largest finite value, the
    overflow midpoint, the smallest normal and subnormals, and `count` random ones."""
    layout = t.float_layout
    top = layout.max_finite
    patterns = [
        1,
        2,
        3,
        layout.mantissa_mask,
        1 << layout.mantissa_bits,
        layout.bias << layout.mantissa_bits,
    ]
    patterns += [rng.getrandbits(layout.bits - 1) for _ in range(count)]
    points = [top, top * (1 + 2.0 ** -(layout.mantissa_bits + 1))]
    for p in patterns:
        value = from_float_bits(t, p)
        if math.isfinite(value):
            nxt = from_float_bits(t, p + 1)
            points.append(value)
            if math.isfinite(nxt):
                points.append((value + nxt) / 2)
    return points + [-p for p in points]


def _near(dt: DType, value: float) -> list[int]:
    """`value` in float or integer type `dt` and its neighbours (the held bits)."""
    if dt.is_pred:
        return [int(value != 0)]
    if dt.is_integer:
        low, high = dt.integer_bounds
        if not math.isfinite(value):
            return []
        out = []
        for v in (math.floor(value), math.ceil(value), math.floor(value) - 1, math.ceil(value) + 1):
            if low <= v <= high:
                out.append(hold(dt, v))
        return out
    if not math.isfinite(value):
        return []
    bits = to_float_bits(dt, value)
    mask = (1 << dt.bits) - 1
    return [bits, (bits + 1) & mask, (bits - 1) & mask]


def random_cases(
    op: Op, dt: DType, rng: random.Random, count: int, target: DType | None = None
) -> list[Case]:
    """`count` random cases: operands from random_bits, with related operands for a third
    of the binary float cases (b within a few ulps of ±a or of a scaled by a power of two,
    the cancellations and exact quotients) and, for FMA, c near -(a*b)."""
    code, t = TYPE_CODES[dt.name], TYPE_CODES[target.name] if target else 0
    n = scalar.arity(op)
    cases = []
    for _ in range(count):
        if op is Op.SELECT:
            cases.append(
                (int(op), code, t, rng.getrandbits(1), random_bits(rng, dt), random_bits(rng, dt))
            )
            continue
        a, b, c = (random_bits(rng, dt) for _ in range(3))
        if dt.is_float and n >= 2 and rng.random() < 0.35:
            b = _related(rng, dt, a)
        if op is Op.FMA and rng.random() < 0.5:
            c = _near_negated_product(rng, dt, a, b)
        unused = rng.getrandbits(dt.bits) if rng.random() < 0.1 else 0
        cases.append((int(op), code, t, a, b if n >= 2 else unused, c if n >= 3 else unused))
    return cases


def _related(rng: random.Random, dt: DType, a: int) -> int:
    mask = (1 << dt.bits) - 1
    kind = rng.randrange(3)
    if kind == 0:  # a few ulps away, either sign
        b = (a + rng.randrange(-3, 4)) & mask
    elif kind == 1:  # a scaled by a power of two (exponent field moved)
        m = dt.float_layout.mantissa_bits
        b = (a + (rng.randrange(-70, 71) << m)) & mask
    else:  # a with a far exponent (fmod's big gaps, fma's)
        m = dt.float_layout.mantissa_bits
        b = (a & ~(((1 << dt.float_layout.exponent_bits) - 1) << m)) | (
            rng.randrange(1 << dt.float_layout.exponent_bits) << m
        )
    if rng.random() < 0.5:
        b ^= dt.float_layout.sign_mask
    return b


def _near_negated_product(rng: random.Random, dt: DType, a: int, b: int) -> int:
    with np.errstate(all="ignore"):
        product = np.array([a], f"<u{dt.bits // 8}").view(dt.numpy) * np.array(
            [b], f"<u{dt.bits // 8}"
        ).view(dt.numpy)
    bits = int((-product).view(f"<u{dt.bits // 8}")[0])
    return (bits + rng.randrange(-2, 3)) & ((1 << dt.bits) - 1)


def round_f32_cr_cases(rng: random.Random, count: int) -> list[Case]:
    """ROUND_F32_CR operands: binary64 values at, near and away from binary32 midpoints
    (both inside and outside the ambiguity band of 2**-40 relative), at the overflow
    threshold, in the subnormal range, and random."""
    code = TYPE_CODES["f64"]
    f32, f64 = dtype("f32"), dtype("f64")
    cases = [(int(Op.ROUND_F32_CR), code, 0, a, 0, 0) for a in float_edges(f64)]
    for _ in range(count):
        kind = rng.randrange(4)
        if kind == 0:
            cases.append((int(Op.ROUND_F32_CR), code, 0, random_float_bits(rng, f64), 0, 0))
            continue
        r = random_float_bits(rng, f32) & 0x7FFFFFFF
        if r >= 0x7F800000:
            r = 0x7F7FFFFF
        low = from_float_bits(f32, r)
        high = from_float_bits(f32, r + 1) if r + 1 < 0x7F800000 else 2.0**128
        mid = (low + high) / 2
        bits = to_float_bits(f64, mid)
        if kind == 1:  # a few binary64 ulps from the midpoint
            bits += rng.randrange(-4, 5)
        elif kind == 2:  # about the band's width away: 2**-40 relative is 2**12 binary64 ulps
            bits += rng.choice((-1, 1)) * (rng.randrange(1 << 11, 1 << 13))
        else:  # anywhere between the two binary32 values
            bits = to_float_bits(f64, low + (high - low) * rng.random())
        if rng.random() < 0.5:
            bits |= 1 << 63
        cases.append((int(Op.ROUND_F32_CR), code, 0, bits & ((1 << 64) - 1), 0, 0))
    return cases


def ops_for(dt: DType) -> list[Op]:
    """The ops (but CONVERT and BITCAST) the contract defines on `dt`."""
    return [op for op in Op if op not in (Op.CONVERT, Op.BITCAST) and admitted(op, dt)]


def all_types() -> list[DType]:
    return [TYPES_BY_CODE[code] for code in sorted(TYPES_BY_CODE)]

"""The HLO opcodes: the registry of those the numerics contract defines (each with its op
family and the properties the passes, the reference evaluator and the backend ask about), and
those XLA has that it does not.

Every per-opcode list in the compiler derives from OPCODES. The op families name the modules
that implement them, the same in compiler/hlo/verifier/, compiler/reference/ and
compiler/codegen/; tests/hlo/test_opcodes.py checks that all three cover the same opcodes
under the same family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from compiler.hlo.attributes import custom_call_target
from compiler.hlo.errors import HloUnsupportedError
from core.dtypes import DType

if TYPE_CHECKING:
    from compiler.hlo.ir import Instruction

# The op families, by the name of their module in reference/ and codegen/.
FAMILIES = ("elementwise", "data_movement", "reductions", "dot_conv", "control_flow", "sort_gather_scatter", "random_bits", "batch_norm", "linalg", "fft")


# The element types a law holds on, bit for bit under the contract: "integer" (wrapping
# two's complement), "bits" (integers and pred) or "any".
_LAW_TYPES = ("integer", "bits", "any")


@dataclass(frozen=True)
class Algebra:
    """The laws of a binary op, each exact bit for bit under the numerics contract.

    identity: e with `x op e = e op x = x`; right_identity: e with `x op e = x` only.
      "zero", "one", "ones" (every bit set; true for pred), "lowest" or "highest" (the
      type's least and greatest value: -inf and +inf for floats).
    absorbing: z with `x op z = z op x = z`.
    idempotent: `x op x = x`.
    laws_on: the types on which identity, absorbing and idempotent hold exactly (floats
      fail them: `-0 + 0` is `+0`, a NaN's payload is not kept).
    order_free: the types on which the op is associative and commutative exactly, so a
      reduction by it gives the same bits in any order and grouping (docs/numerics.md §5):
      "any" for maximum and minimum, "bits" for wrapping integer arithmetic and the bitwise ops.
    """

    identity: str | None = None
    right_identity: str | None = None
    absorbing: str | None = None
    idempotent: bool = False
    laws_on: str = "bits"
    order_free: str | None = None

    def __post_init__(self) -> None:
        assert self.laws_on in _LAW_TYPES and self.order_free in (None, *_LAW_TYPES)


def holds_on(types: str | None, dtype: DType) -> bool:
    """Whether a law stated for `types` ("integer", "bits", "any" or None) holds on `dtype`."""
    if types == "any":
        return True
    if types == "bits":
        return dtype.is_integer or dtype.is_pred
    return types == "integer" and dtype.is_integer


# The classes of element types an opcode computes on (Opcode.operand_types), each checked by
# the verifier (compiler/hlo/verifier/checks.py): "numeric" is every type but pred,
# "complex_parts" the types a complex number is made of (f32 and f64).
OPERAND_TYPES = ("any", "numeric", "float", "integer", "pred_or_integer", "complex_or_float", "complex_parts")


@dataclass(frozen=True)
class Opcode:
    """One opcode of the contract.

    scalar_op: each output element is one scalar operation on the operands' elements at the
      same index (what the element emitter computes and the reference applies to whole arrays).
    operands: the operand count of an elementwise opcode (None: not fixed, or not elementwise).
    index_mapping: the output only maps its index to operand indices (or makes a value from
      the index), computing nothing.
    aliases: the value is another value or fixed data, so it gets no buffer of its own to
      compute: "operands" (tuple plumbing, a copy, opt-barrier: its operands' storage) or
      "fixed" (a parameter, a constant).
    traced: it computes a value of its own, which op-level traces digest.
    operand_types: the element types it computes on (OPERAND_TYPES; iota's is its result's);
      opcodes with finer rules (conversions, dot, fft, linalg, batch norm) check them in
      their shape rules and say "any".
    float8: it takes or makes 8-bit float values (docs/numerics.md §1).
    float8_results: with float8, whether its results may be 8-bit floats too (dot's may not:
      the contract multiplies 8-bit floats only into a wider result).
    complex: it takes or makes complex values (docs/numerics.md, "Complex numbers").
    algebra: the laws of a binary op that passes rewrite and reorder by (Algebra).
    folded: constant folding evaluates it when its operands are constants (not: values that
      only alias, control flow, broadcast and iota, whose constant would only be larger, and
      random bits).
    distinct: two instances with the same operands are still two values, never merged
      (parameters are distinct inputs; random draws are kept apart).
    contraction: a product over dimensions its `*_contracting_dimensions` and
      `*_batch_dimensions` attributes name (dot): transposes fold into its operands
      (transpose_folding.py), its operands may swap (dot_orientation.py), an elementwise
      epilogue fuses into it (epilogue_fusion.py), and the backend runs it as a gemm.
    window: its `window` attribute is required (the windowed reductions; a convolution's
      window is optional).
    """

    name: str
    family: str
    scalar_op: bool = False
    operands: int | None = None
    index_mapping: bool = False
    aliases: str | None = None
    traced: bool = True
    operand_types: str = "any"
    float8: bool = False
    complex: bool = False
    algebra: Algebra | None = None
    folded: bool = True
    distinct: bool = False
    float8_results: bool = True
    contraction: bool = False
    window: bool = False


def _elementwise(names: str, operands: int, operand_types: str = "any", *, float8: bool = False, complex: bool = False) -> list[Opcode]:
    return [Opcode(name, "elementwise", scalar_op=True, operands=operands, operand_types=operand_types, float8=float8, complex=complex, algebra=_ALGEBRA.get(name)) for name in names.split()]


_FLOAT_FUNCTIONS = (
    "floor ceil round-nearest-even round-nearest-afz exponential exponential-minus-one log "
    "log-plus-one tanh logistic sqrt rsqrt cbrt erf sine cosine"
)
_INDEX_MAPPING = "broadcast reshape transpose reverse slice concatenate pad"

# The binary ops' laws (the passes' rewrites and the backend's reduction orders read them).
_ALGEBRA: dict[str, Algebra] = {
    "add": Algebra(identity="zero", laws_on="integer", order_free="bits"),
    "multiply": Algebra(identity="one", absorbing="zero", laws_on="integer", order_free="bits"),
    "subtract": Algebra(right_identity="zero", laws_on="integer"),
    "divide": Algebra(right_identity="one", laws_on="integer"),
    "shift-left": Algebra(right_identity="zero", laws_on="integer"),
    "shift-right-logical": Algebra(right_identity="zero", laws_on="integer"),
    "shift-right-arithmetic": Algebra(right_identity="zero", laws_on="integer"),
    "and": Algebra(identity="ones", absorbing="zero", idempotent=True, order_free="bits"),
    "or": Algebra(identity="zero", absorbing="ones", idempotent=True, order_free="bits"),
    "xor": Algebra(identity="zero", order_free="bits"),
    "maximum": Algebra(identity="lowest", idempotent=True, order_free="any"),
    "minimum": Algebra(identity="highest", idempotent=True, order_free="any"),
}

OPCODES: dict[str, Opcode] = {
    op.name: op
    for op in (
        # Each elementwise opcode with the element types it computes on; the complex
        # arithmetic the contract defines and the ops that only move values take complex
        # values, conversions and moves 8-bit floats.
        *_elementwise("negate abs sign", 1, "numeric", complex=True),
        *_elementwise(_FLOAT_FUNCTIONS, 1, "float"),
        *_elementwise("not", 1, "pred_or_integer"),
        *_elementwise("is-finite", 1, "float"),
        *_elementwise("convert", 1, float8=True, complex=True),
        *_elementwise("real imag", 1, "complex_or_float", complex=True),
        *_elementwise("reduce-precision", 1, "float"),
        *_elementwise("popcnt count-leading-zeros", 1, "integer"),
        # On pred, add is or and multiply is and (as XLA's evaluator).
        *_elementwise("add", 2, complex=True),
        *_elementwise("subtract", 2, "numeric", complex=True),
        *_elementwise("multiply", 2, complex=True),
        *_elementwise("divide", 2, "numeric", complex=True),
        *_elementwise("remainder", 2, "numeric"),
        *_elementwise("maximum minimum", 2),
        *_elementwise("power", 2, "numeric"),
        *_elementwise("atan2", 2, "float"),
        *_elementwise("and or xor", 2, "pred_or_integer"),
        *_elementwise("shift-left shift-right-logical shift-right-arithmetic", 2, "integer"),
        *_elementwise("compare", 2, complex=True),
        *_elementwise("complex", 2, "complex_parts", complex=True),
        *_elementwise("select", 3, float8=True, complex=True),
        *_elementwise("clamp", 3, "numeric"),
        # Between types of equal width it is a scalar op; between widths it reshapes.
        Opcode("bitcast-convert", "elementwise", operands=1, float8=True),
        Opcode("copy", "elementwise", scalar_op=True, operands=1, aliases="operands", float8=True, complex=True),
        Opcode("map", "elementwise"),
        # XLA's decomposition into elementwise ops (compiler/hlo/stochastic_convert.py).
        Opcode("stochastic-convert", "elementwise", operand_types="float"),
        *(Opcode(name, "data_movement", index_mapping=True, float8=True, complex=True, folded=name != "broadcast") for name in _INDEX_MAPPING.split()),
        # It makes numbers from its index: never 8-bit floats or complex values.
        Opcode("iota", "data_movement", index_mapping=True, operand_types="numeric", folded=False),
        *(Opcode(name, "data_movement", float8=True, complex=True) for name in ("bitcast", "dynamic-slice", "dynamic-update-slice")),
        Opcode("reduce", "reductions", complex=True),
        Opcode("reduce-window", "reductions", window=True, complex=True),  # with a reducer of the complex ops (cumulative sums and products)
        Opcode("select-and-scatter", "reductions", window=True),
        Opcode("dot", "dot_conv", float8=True, float8_results=False, complex=True, contraction=True),
        Opcode("convolution", "dot_conv"),
        Opcode("parameter", "control_flow", aliases="fixed", traced=False, folded=False, distinct=True, float8=True, complex=True),
        Opcode("constant", "control_flow", aliases="fixed", traced=False, folded=False, float8=True, complex=True),
        *(Opcode(name, "control_flow", aliases="operands", traced=False, folded=False, float8=True, complex=True) for name in ("tuple", "get-tuple-element")),
        # Identity on its operand (a tuple); the passes see no further (jax.checkpoint).
        Opcode("opt-barrier", "control_flow", aliases="operands", traced=False, folded=False, float8=True, complex=True),
        *(Opcode(name, "control_flow", folded=False, float8=True, complex=True) for name in ("call", "fusion", "while", "conditional")),
        Opcode("scan", "control_flow"),
        Opcode("sort", "sort_gather_scatter", complex=True),  # its comparator orders complex values by their parts
        Opcode("gather", "sort_gather_scatter", float8=True, complex=True),
        Opcode("scatter", "sort_gather_scatter"),
        Opcode("topk", "sort_gather_scatter"),  # pred too: false < true, as XLA orders it
        Opcode("rng-bit-generator", "random_bits", folded=False, distinct=True),
        # XLA's expansion into elementwise ops and reduces (compiler/hlo/batch_norm.py).
        *(Opcode(name, "batch_norm") for name in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad")),
        Opcode("cholesky", "linalg"),
        Opcode("triangular-solve", "linalg"),
        Opcode("fft", "fft", complex=True),
    )
}


def opcodes_where(**properties: object) -> frozenset[str]:
    """The opcodes whose registry entries have all the given property values, e.g.
    `opcodes_where(family="reductions")` or `opcodes_where(index_mapping=True)`."""
    return frozenset(op.name for op in OPCODES.values() if all(getattr(op, key) == value for key, value in properties.items()))


SUPPORTED = frozenset(OPCODES)
# The sets the compiler asks about most, derived once.
INDEX_MAPPING = opcodes_where(index_mapping=True)
ALIASING = frozenset(op.name for op in OPCODES.values() if op.aliases is not None)
# Values held in their operands' storage (what the scheduler follows to a buffer's owner).
OPERAND_ALIASING = opcodes_where(aliases="operands")
NOT_TRACED = opcodes_where(traced=False)
# Opcodes that compute each output element from the operands' elements at the same index:
# the scalar ops that compute (copy only aliases) and bitcast-convert, which is one only
# between types of equal width (its users check the widths).
COMPUTED_PER_ELEMENT = (opcodes_where(scalar_op=True) - ALIASING) | {"bitcast-convert"}
UNARY_ELEMENTWISE = tuple(op.name for op in OPCODES.values() if op.family == "elementwise" and op.operands == 1)
BINARY_ELEMENTWISE = tuple(op.name for op in OPCODES.values() if op.family == "elementwise" and op.operands == 2)

# Opcodes XLA knows that vxla does not execute, each with the reason a user reads.
UNSUPPORTED_REASONS: dict[str, str] = {
    "custom-call": "custom calls run opaque host code that the numerics contract cannot pin",
    "rng": "rng draws from an unnamed generator XLA leaves unspecified; use rng-bit-generator with an explicit algorithm (jax.random with the rbg or threefry implementation), or pass random values as inputs",
    "rng-get-and-update-state": "random number generation is not supported",
    "all-reduce": "collectives are not supported (vxla executes single-device programs)",
    "all-reduce-start": "collectives are not supported",
    "all-reduce-done": "collectives are not supported",
    "all-gather": "collectives are not supported",
    "all-gather-start": "collectives are not supported",
    "all-gather-done": "collectives are not supported",
    "all-to-all": "collectives are not supported",
    "collective-permute": "collectives are not supported",
    "collective-permute-start": "collectives are not supported",
    "collective-permute-done": "collectives are not supported",
    "collective-broadcast": "collectives are not supported",
    "reduce-scatter": "collectives are not supported",
    "partition-id": "collectives are not supported",
    "replica-id": "collectives are not supported",
    "send": "host transfers are not supported",
    "send-done": "host transfers are not supported",
    "recv": "host transfers are not supported",
    "recv-done": "host transfers are not supported",
    "infeed": "host transfers are not supported",
    "outfeed": "host transfers are not supported",
    "after-all": "tokens and side effects are not supported",
    "add-dependency": "tokens and side effects are not supported",
    "async-start": "asynchronous ops are not supported",
    "async-update": "asynchronous ops are not supported",
    "async-done": "asynchronous ops are not supported",
    "copy-start": "asynchronous copies are not supported",
    "copy-done": "asynchronous copies are not supported",
    "domain": "sharding domains are not supported",
    "get-dimension-size": "dynamic shapes are not supported",
    "set-dimension-size": "dynamic shapes are not supported",
    "dynamic-reshape": "dynamic shapes are not supported",
    "tan": "tan is not in the numerics contract",
    "ragged-all-to-all": "collectives are not supported",
    "ragged-dot": "ragged-dot is not in the numerics contract",
    "composite": "composite ops are not supported",
}

KNOWN = SUPPORTED | frozenset(UNSUPPORTED_REASONS)

# The LAPACK routines JAX's CPU lowering calls as custom calls (`lapack_sgetrf_ffi`: the
# element type's letter, the routine, `_ffi`), each with what it computes and the JAX
# functions that emit it, so that a refusal says what the user's code asked for.
LAPACK_ROUTINES: dict[str, str] = {
    "getrf": "LU factorization with partial pivoting, which JAX emits for jnp.linalg.inv, solve, det and slogdet and jax.scipy.linalg.lu and lu_factor",
    "getrs": "a solve with an LU factorization (jax.scipy.linalg.lu_solve)",
    "potrf": "Cholesky factorization (jnp.linalg.cholesky, jax.scipy.linalg.cholesky and cho_factor)",
    "trsm": "triangular solve (jax.scipy.linalg.solve_triangular, and inside solve, inv and cho_solve)",
    "geqrf": "QR factorization by Householder reflections (jnp.linalg.qr)",
    "geqp3": "QR factorization with column pivoting (jax.scipy.linalg.qr with pivoting=True)",
    "orgqr": "the Q of a QR factorization (jnp.linalg.qr)",
    "ungqr": "the Q of a complex QR factorization (jnp.linalg.qr)",
    "syevd": "symmetric eigendecomposition (jnp.linalg.eigh and eigvalsh)",
    "heevd": "Hermitian eigendecomposition (jnp.linalg.eigh and eigvalsh)",
    "gesdd": "singular value decomposition (jnp.linalg.svd, pinv, matrix_rank and norm(ord=2))",
    "gesvd": "singular value decomposition (jnp.linalg.svd)",
    "geev": "general eigendecomposition (jnp.linalg.eig and eigvals)",
    "gees": "Schur decomposition (jax.scipy.linalg.schur)",
    "gehrd": "Hessenberg reduction (jax.scipy.linalg.hessenberg)",
    "sytrd": "tridiagonal reduction (jax.lax.linalg.tridiagonal)",
    "hetrd": "tridiagonal reduction (jax.lax.linalg.tridiagonal)",
    "gtsv": "a tridiagonal solve (jax.lax.linalg.tridiagonal_solve)",
}
_LAPACK_TARGET = re.compile(r"lapack_[sdcz]([a-z0-9]+?)(?:_ffi)?")


def unsupported_error(instruction: Instruction) -> HloUnsupportedError:
    """The refusal of an instruction whose opcode vxla does not execute, saying why."""
    reason = unsupported_reason(instruction.opcode, custom_call_target(instruction.attrs))
    return HloUnsupportedError(f"opcode {instruction.opcode} is not supported: {reason}", instruction.location, instruction.name)


def unsupported_reason(opcode: str, custom_call_target: str | None = None) -> str:
    """Why `opcode` is refused, in the user's terms: for a custom call, its target named and,
    for the LAPACK routines JAX emits on CPU, what the routine computes and which JAX
    functions emit it."""
    if opcode == "custom-call" and custom_call_target:
        lapack = _LAPACK_TARGET.fullmatch(custom_call_target)
        if lapack is not None and lapack.group(1) in LAPACK_ROUTINES:
            return (f"custom call {custom_call_target} is LAPACK's {LAPACK_ROUTINES[lapack.group(1)]}: not in the numerics contract yet "
                    "(a LAPACK call runs host code whose results vary with the library, its version and the machine)")  # fmt: skip
        return f"custom call {custom_call_target} runs opaque host code that the numerics contract cannot pin"
    return UNSUPPORTED_REASONS.get(opcode, "not supported")

# What the passes leave alone. The opcodes outside the contract never get past the frontend;
# they are named too, so that a pass stays safe should one ever reach it.
NOT_FOLDED = opcodes_where(folded=False) | frozenset(UNSUPPORTED_REASONS)
NEVER_MERGED = opcodes_where(distinct=True) | frozenset(UNSUPPORTED_REASONS)
# Reducers whose result is the same bits for every order and grouping, on some types.
ORDER_FREE = frozenset(op.name for op in OPCODES.values() if op.algebra and op.algebra.order_free)


def family_modules(*modules: ModuleType) -> dict[str, ModuleType]:
    """The module of each op family by family name, in FAMILIES order: `modules` are those a
    caller imports statically (the verifier, the reference, the backend), each named as its
    family; every family must have one."""
    by_family = {module.__name__.rsplit(".", 1)[-1]: module for module in modules}
    if sorted(by_family) != sorted(FAMILIES) or len(modules) != len(FAMILIES):
        missing, extra = sorted(set(FAMILIES) - set(by_family)), sorted(set(by_family) - set(FAMILIES))
        raise LookupError(f"op family modules: missing {missing}, not families {extra}")
    return {family: by_family[family] for family in FAMILIES}


def family_opcodes(family: str) -> tuple[str, ...]:
    """The opcodes of one op family, in the registry's order."""
    return tuple(op.name for op in OPCODES.values() if op.family == family)


def algebra(opcode: str) -> Algebra:
    """The laws of `opcode` (none for an opcode without any)."""
    entry = OPCODES.get(opcode)
    return entry.algebra if entry and entry.algebra else _NO_LAWS


_NO_LAWS = Algebra()


def is_order_free(opcode: str, dtype: DType) -> bool:
    """Whether a reduction by `opcode` on `dtype` gives the same bits in every order."""
    return holds_on(algebra(opcode).order_free, dtype)


def law_value(kind: str, dtype: DType) -> np.ndarray | None:
    """The scalar of `dtype` that a law's element name stands for ("zero", "one", "ones",
    "lowest", "highest"), or None where the type has no such element (every bit set in a
    float)."""
    numpy = dtype.numpy
    if kind in ("zero", "one"):
        return np.array(0 if kind == "zero" else 1).astype(numpy)
    if dtype.is_pred:
        return np.array(kind in ("ones", "highest"), dtype=np.bool_)
    if dtype.is_integer:
        low, high = dtype.integer_bounds
        return np.array({"ones": -1 if dtype.is_signed else high, "lowest": low, "highest": high}[kind]).astype(numpy)
    if dtype.is_float and kind in ("lowest", "highest"):
        return np.array(-np.inf if kind == "lowest" else np.inf).astype(numpy)
    return None


def identity_value(opcode: str, dtype: DType) -> np.ndarray | None:
    """The identity element of a reducer `opcode` on `dtype` as a scalar, or None."""
    kind = algebra(opcode).identity
    return law_value(kind, dtype) if kind else None

# The opcodes that take or make 8-bit float values (docs/numerics.md §1): conversions, the
# ops that only move values, and dot's operands (its result is wider). Arithmetic on them is
# outside the contract: XLA itself computes it in a wider type.
FLOAT8_OPCODES = opcodes_where(float8=True)

# The opcodes that take or make complex values (docs/numerics.md, "Complex numbers"): the
# arithmetic the contract defines for them, and every op that only moves values.
COMPLEX_OPCODES = opcodes_where(complex=True)
# Products over named dimensions (Opcode.contraction), and the opcodes whose window is required.
CONTRACTIONS = opcodes_where(contraction=True)
WINDOWED = opcodes_where(window=True)

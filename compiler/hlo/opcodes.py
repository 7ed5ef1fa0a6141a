"""The HLO opcodes: the registry of those the numerics contract defines (each with its op
family and the properties the passes, the reference evaluator and the backend ask about), and
those XLA has that it does not.

Every per-opcode list in the compiler derives from OPCODES. The op families name the modules
that implement them, the same in compiler/reference/ and compiler/codegen/ (and the sections
of compiler/hlo/verifier.py); tests/hlo/test_opcodes.py checks that all three cover the same
opcodes under the same family.
"""

from __future__ import annotations

from dataclasses import dataclass

# The op families, by the name of their module in reference/ and codegen/.
FAMILIES = ("elementwise", "data_movement", "reductions", "dot_conv", "control_flow", "sort_gather_scatter", "random_bits", "batch_norm", "linalg", "fft")


@dataclass(frozen=True)
class Opcode:
    """One opcode of the contract.

    scalar_op: each output element is one scalar operation on the operands' elements at the
      same index (what the element emitter computes and the reference applies to whole arrays).
    operands: the operand count of an elementwise opcode (None: not fixed, or not elementwise).
    index_mapping: the output only maps its index to operand indices (or makes a value from
      the index), computing nothing.
    aliases: the value is another value or fixed data (a parameter, a constant, tuple
      plumbing, a copy): it gets no buffer of its own to compute.
    traced: it computes a value of its own, which op-level traces digest.
    """

    name: str
    family: str
    scalar_op: bool = False
    operands: int | None = None
    index_mapping: bool = False
    aliases: bool = False
    traced: bool = True


def _elementwise(names: str, operands: int) -> list[Opcode]:
    return [Opcode(name, "elementwise", scalar_op=True, operands=operands) for name in names.split()]


_UNARY = (
    "negate abs sign floor ceil round-nearest-even round-nearest-afz exponential "
    "exponential-minus-one log log-plus-one tanh logistic sqrt rsqrt cbrt erf sine cosine not "
    "is-finite convert real imag reduce-precision popcnt count-leading-zeros"
)
_BINARY = (
    "add subtract multiply divide remainder maximum minimum power atan2 and or xor shift-left "
    "shift-right-logical shift-right-arithmetic compare complex"
)
_INDEX_MAPPING = "broadcast reshape transpose reverse slice concatenate pad iota"

OPCODES: dict[str, Opcode] = {
    op.name: op
    for op in (
        *_elementwise(_UNARY, 1),
        *_elementwise(_BINARY, 2),
        *_elementwise("select clamp", 3),
        # Between types of equal width it is a scalar op; between widths it reshapes.
        Opcode("bitcast-convert", "elementwise", operands=1),
        Opcode("copy", "elementwise", scalar_op=True, operands=1, aliases=True),
        Opcode("map", "elementwise"),
        # XLA's decomposition into elementwise ops (compiler/hlo/stochastic_convert.py).
        Opcode("stochastic-convert", "elementwise"),
        *(Opcode(name, "data_movement", index_mapping=True) for name in _INDEX_MAPPING.split()),
        *(Opcode(name, "data_movement") for name in ("bitcast", "dynamic-slice", "dynamic-update-slice")),
        Opcode("reduce", "reductions"),
        Opcode("reduce-window", "reductions"),
        Opcode("select-and-scatter", "reductions"),
        Opcode("dot", "dot_conv"),
        Opcode("convolution", "dot_conv"),
        *(Opcode(name, "control_flow", aliases=True, traced=False) for name in ("parameter", "constant", "tuple", "get-tuple-element")),
        # Identity on its operand (a tuple); the passes see no further (jax.checkpoint).
        Opcode("opt-barrier", "control_flow", aliases=True, traced=False),
        *(Opcode(name, "control_flow") for name in ("call", "fusion", "while", "conditional", "scan")),
        Opcode("sort", "sort_gather_scatter"),
        Opcode("gather", "sort_gather_scatter"),
        Opcode("scatter", "sort_gather_scatter"),
        Opcode("topk", "sort_gather_scatter"),
        Opcode("rng-bit-generator", "random_bits"),
        # XLA's expansion into elementwise ops and reduces (compiler/hlo/batch_norm.py).
        *(Opcode(name, "batch_norm") for name in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad")),
        Opcode("cholesky", "linalg"),
        Opcode("triangular-solve", "linalg"),
        Opcode("fft", "fft"),
    )
}


def opcodes_where(**properties: object) -> frozenset[str]:
    """The opcodes whose registry entries have all the given property values, e.g.
    `opcodes_where(family="reductions")` or `opcodes_where(index_mapping=True)`."""
    return frozenset(op.name for op in OPCODES.values() if all(getattr(op, key) == value for key, value in properties.items()))


SUPPORTED = frozenset(OPCODES)
# The sets the compiler asks about most, derived once.
INDEX_MAPPING = opcodes_where(index_mapping=True)
ALIASING = opcodes_where(aliases=True)
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

# The opcodes that take or make 8-bit float values (docs/numerics.md §1): conversions, the
# ops that only move values, and dot's operands (its result is wider). Arithmetic on them is
# outside the contract: XLA itself computes it in a wider type.
FLOAT8_OPCODES = frozenset(
    {
        "convert", "bitcast-convert", "copy", "select", "dot",
        "broadcast", "reshape", "transpose", "reverse", "slice", "concatenate", "pad", "bitcast",
        "dynamic-slice", "dynamic-update-slice", "gather",
        "parameter", "constant", "tuple", "get-tuple-element", "opt-barrier", "call", "while",
        "conditional", "fusion",
    }
)  # fmt: skip

# The opcodes that take or make complex values (docs/numerics.md, "Complex numbers"): the
# arithmetic the contract defines for them, and every op that only moves values.
COMPLEX_OPCODES = frozenset(
    {
        "add", "subtract", "multiply", "divide", "negate", "abs", "real", "imag", "complex",
        "compare", "select", "convert", "copy", "dot", "reduce", "fft",
        "broadcast", "reshape", "transpose", "reverse", "slice", "concatenate", "pad", "bitcast",
        "dynamic-slice", "dynamic-update-slice", "gather",
        "parameter", "constant", "tuple", "get-tuple-element", "opt-barrier", "call", "while",
        "conditional", "fusion",
    }
)  # fmt: skip

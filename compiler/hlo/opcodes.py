"""The HLO opcodes: those the numerics contract defines, and those XLA has that it does not."""

from __future__ import annotations

UNARY_ELEMENTWISE = (
    "negate", "abs", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz",
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt",
    "rsqrt", "cbrt", "erf", "sine", "cosine", "not", "is-finite", "convert", "bitcast-convert",
    "copy",
)  # fmt: skip

BINARY_ELEMENTWISE = (
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic",
    "compare",
)  # fmt: skip

SUPPORTED = frozenset(
    UNARY_ELEMENTWISE
    + BINARY_ELEMENTWISE
    + (
        "parameter", "constant", "tuple", "get-tuple-element", "call", "while", "conditional",
        "fusion", "select", "clamp", "broadcast", "reshape", "bitcast", "transpose", "reverse",
        "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "iota", "reduce",
        "reduce-window", "dot", "convolution", "gather", "scatter", "sort", "map",
    )
)  # fmt: skip

# Opcodes XLA knows that vxla does not execute, each with the reason a user reads.
UNSUPPORTED_REASONS: dict[str, str] = {
    "custom-call": "custom calls run opaque host code that the numerics contract cannot pin",
    "rng": "random number generation is not reproducible; pass random values as inputs",
    "rng-bit-generator": "random number generation is not supported; pass random values as inputs",
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
    "optimization-barrier": "optimization barriers are not supported",
    "async-start": "asynchronous ops are not supported",
    "async-update": "asynchronous ops are not supported",
    "async-done": "asynchronous ops are not supported",
    "copy-start": "asynchronous copies are not supported",
    "copy-done": "asynchronous copies are not supported",
    "domain": "sharding domains are not supported",
    "get-dimension-size": "dynamic shapes are not supported",
    "set-dimension-size": "dynamic shapes are not supported",
    "dynamic-reshape": "dynamic shapes are not supported",
    "batch-norm-training": "batch-norm ops are not supported; export with XLA's batch-norm expander",
    "batch-norm-inference": "batch-norm ops are not supported",
    "batch-norm-grad": "batch-norm ops are not supported",
    "fft": "fft is not in the numerics contract",
    "triangular-solve": "triangular-solve is not in the numerics contract",
    "cholesky": "cholesky is not in the numerics contract",
    "reduce-precision": "reduce-precision is not in the numerics contract",
    "select-and-scatter": "select-and-scatter is not in the numerics contract",
    "stochastic-convert": "stochastic-convert is not reproducible",
    "real": "complex numbers are not supported",
    "imag": "complex numbers are not supported",
    "complex": "complex numbers are not supported",
    "popcnt": "popcnt is not in the numerics contract",
    "count-leading-zeros": "count-leading-zeros is not in the numerics contract",
    "tan": "tan is not in the numerics contract",
    "topk": "topk is not in the numerics contract; use sort",
    "ragged-all-to-all": "collectives are not supported",
    "ragged-dot": "ragged-dot is not in the numerics contract",
    "composite": "composite ops are not supported",
}

KNOWN = SUPPORTED | frozenset(UNSUPPORTED_REASONS)

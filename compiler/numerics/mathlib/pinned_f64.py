"""Registries of the pinned binary64 algorithms.

UNARY_ALGORITHMS and BINARY_ALGORITHMS hold the DSL functions (`fn(ops, x)`,
`fn(ops, a, b)`), which every backend executes; PINNED_F64 binds the unary ones to the numpy
backend (1-D float64 array in, float64 array out).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from .algebraic import cbrt, rsqrt
from .atan2 import atan2
from .dsl import Ops, Value
from .erf import erf
from .exp_log import exp, expm1, log, log1p
from .hyperbolic import logistic, tanh
from .numpy_ops import NUMPY
from .power import power
from .trig import cos, sin

UnaryKernel = Callable[[np.ndarray], np.ndarray]

UNARY_ALGORITHMS: dict[str, Callable[[Ops, Value], Value]] = {
    "exp": exp,
    "expm1": expm1,
    "log": log,
    "log1p": log1p,
    "tanh": tanh,
    "logistic": logistic,
    "erf": erf,
    "sin": sin,
    "cos": cos,
    "rsqrt": rsqrt,
    "cbrt": cbrt,
}

BINARY_ALGORITHMS: dict[str, Callable[[Ops, Value, Value], Value]] = {
    "power": power,
    "atan2": atan2,
}

PINNED_F64: dict[str, UnaryKernel] = {
    name: partial(fn, NUMPY) for name, fn in UNARY_ALGORITHMS.items()
}

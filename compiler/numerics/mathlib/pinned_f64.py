"""Registry of the pinned binary64 unary algorithms (1-D float64 in, float64 out)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .algebraic import cbrt, rsqrt
from .erf import erf
from .exp_log import exp, expm1, log, log1p
from .hyperbolic import logistic, tanh
from .trig import cos, sin

UnaryKernel = Callable[[np.ndarray], np.ndarray]

PINNED_F64: dict[str, UnaryKernel] = {
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

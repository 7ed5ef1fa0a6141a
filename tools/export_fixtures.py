#!/usr/bin/env python3
"""Export real-model HLO fixtures from JAX (XLA:CPU) into tests/fixtures/.

Development tool only: JAX is *not* a runtime or test dependency of vxla.
The generated files are committed, so the test suite never needs JAX.

Usage (from the repository root):

    python3 -m venv .venv-tools
    .venv-tools/bin/pip install -r tools/requirements-fixtures.txt
    .venv-tools/bin/python tools/export_fixtures.py            # all fixtures
    .venv-tools/bin/python tools/export_fixtures.py cnn sort   # a subset

For every fixture ``tests/fixtures/<name>/`` receives:

* ``module.hlo``          pre-optimization HLO text (``lower(...).as_text(dialect="hlo")``)
* ``xla_optimized.hlo``   XLA:CPU optimized HLO (``compile().as_text()``), parser input only
* ``in0.npy``, ``in1.npy`` ... inputs in ENTRY parameter order (bf16 is stored as raw ``|V2``)
* ``xla.npz``             XLA:CPU outputs ``out0``, ``out1`` ... (flattened result tuple)
* ``fixture.json``        name, description, versions, input/output dtypes+shapes, opcodes

The output is a pure function of this script and the pinned package versions
(fixed seeds, fixed zip timestamps, source paths in metadata made relative), so
running it twice produces byte-identical files.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures"

try:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import jaxlib
    import ml_dtypes
    import optax
    from jax import lax
except ImportError as exc:  # pragma: no cover - tool-only dependency
    sys.exit(
        f"export_fixtures.py needs JAX ({exc}); install it with\n"
        "  python3 -m venv .venv-tools && "
        ".venv-tools/bin/pip install -r tools/requirements-fixtures.txt"
    )

jax.config.update("jax_platforms", "cpu")
# Source locations in HLO metadata: strip site-packages prefixes and the
# repository root so no machine-specific absolute path ends up in the files.
jax.config.update(
    "jax_hlo_source_file_canonicalization_regex",
    r"^.*/(site-packages|dist-packages)/|^" + re.escape(str(REPO_ROOT) + "/"),
)

BF16 = np.dtype(ml_dtypes.bfloat16)

# Opcodes the numerics contract defines (the compiler's registry): module.hlo stays inside it.
sys.path.insert(0, str(REPO_ROOT))
from compiler.api import SUPPORTED_OPCODES  # noqa: E402 - after the path

HLO_DTYPE = {
    np.dtype(np.bool_): "pred",
    np.dtype(np.int8): "s8",
    np.dtype(np.int16): "s16",
    np.dtype(np.int32): "s32",
    np.dtype(np.int64): "s64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    BF16: "bf16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(ml_dtypes.int4): "s4",
    np.dtype(ml_dtypes.uint4): "u4",
    np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn",
    np.dtype(ml_dtypes.float8_e5m2): "f8e5m2",
}

F32_MAX = np.finfo(np.float32).max
I32_MIN, I32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
NAN, INF = np.nan, np.inf


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    name: str
    description: str
    build: Callable[[], tuple[Callable, tuple[np.ndarray, ...]]]
    x64: bool = False


FIXTURES: list[Fixture] = []


def fixture(name: str, description: str, *, x64: bool = False):
    def register(build):
        FIXTURES.append(Fixture(name, description, build, x64))
        return build

    return register


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(r: np.random.Generator, shape, scale=1.0, dtype=np.float32) -> np.ndarray:
    return (r.standard_normal(shape) * scale).astype(dtype)


def f32(values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


@fixture("mlp_softmax", "2-layer MLP (dense, relu, dense) followed by softmax.")
def _mlp_softmax():
    r = rng(1)
    args = (
        normal(r, (8, 32)),
        normal(r, (32, 64), 32**-0.5),
        normal(r, (64,), 0.1),
        normal(r, (64, 10), 64**-0.5),
        normal(r, (10,), 0.1),
    )

    def mlp_softmax(x, w1, b1, w2, b2):
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return logits, jax.nn.softmax(logits, axis=-1)

    return mlp_softmax, args


@fixture(
    "mlp_train_step",
    "One SGD step of a 2-layer MLP with softmax cross-entropy (jax.value_and_grad backprop).",
)
def _mlp_train_step():
    r = rng(2)
    args = (
        normal(r, (8, 16)),
        r.integers(0, 5, size=(8,)).astype(np.int32),
        normal(r, (16, 32), 16**-0.5),
        np.zeros((32,), np.float32),
        normal(r, (32, 5), 32**-0.5),
        np.zeros((5,), np.float32),
    )

    def loss_fn(params, x, labels):
        w1, b1, w2, b2 = params
        h = jnp.tanh(x @ w1 + b1)
        logits = h @ w2 + b2
        logp = jax.nn.log_softmax(logits, axis=-1)
        onehot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
        return -jnp.mean(jnp.sum(onehot * logp, axis=-1))

    def mlp_train_step(x, labels, w1, b1, w2, b2):
        params = (w1, b1, w2, b2)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
        new = tuple(p - 0.1 * g for p, g in zip(params, grads, strict=True))
        return (loss, *new)

    return mlp_train_step, args


@fixture(
    "cnn",
    "NHWC conv2d (stride 2, explicit padding) + bias + relu, 2x2 max pool (reduce_window max), "
    "2x2 average pool (reduce_window add / 4), flatten, dense head.",
)
def _cnn():
    r = rng(3)
    args = (
        normal(r, (2, 16, 16, 3)),
        normal(r, (3, 3, 3, 8), (27) ** -0.5),  # HWIO
        normal(r, (8,), 0.1),
        normal(r, (32, 10), 32**-0.5),
        normal(r, (10,), 0.1),
    )

    def cnn(x, k, kb, w, b):
        y = lax.conv_general_dilated(
            x,
            k,
            window_strides=(2, 2),
            padding=((1, 1), (1, 1)),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        )  # (2, 8, 8, 8)
        y = jax.nn.relu(y + kb)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # 4x4
        y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0  # 2x2
        y = y.reshape(y.shape[0], -1)  # (2, 32)
        return y @ w + b

    return cnn, args


@fixture(
    "depthwise_conv",
    "NCHW depthwise conv (feature_group_count=8, rhs_dilation 2, padding 2) + "
    "a transposed-style conv with lhs_dilation 2 and stride 1.",
)
def _depthwise_conv():
    r = rng(4)
    args = (
        normal(r, (1, 8, 16, 16)),
        normal(r, (8, 1, 3, 3), 1 / 3),  # OIHW, I = C / groups = 1
        normal(r, (1, 4, 6, 6)),
        normal(r, (5, 4, 3, 3), 1 / 6),  # OIHW
    )

    def depthwise_conv(x, k, x2, k2):
        dn = ("NCHW", "OIHW", "NCHW")
        y = lax.conv_general_dilated(
            x,
            k,
            window_strides=(1, 1),
            padding=((2, 2), (2, 2)),
            rhs_dilation=(2, 2),
            dimension_numbers=dn,
            feature_group_count=8,
        )
        z = lax.conv_general_dilated(
            x2,
            k2,
            window_strides=(1, 1),
            padding=((2, 1), (1, 2)),
            lhs_dilation=(2, 2),
            dimension_numbers=dn,
        )
        return y, z

    return depthwise_conv, args


@fixture(
    "transformer_block",
    "Pre-LN transformer block: layernorm, causal 4-head self-attention (einsum), softmax, "
    "output projection, residual, layernorm, exact-GELU MLP, residual; plus a mean-pooled "
    "tanh-GELU head. Batch 2, seq 16, d_model 32.",
)
def _transformer_block():
    r = rng(5)
    b, t, d, h, f = 2, 16, 32, 4, 64
    args = (
        normal(r, (b, t, d)),
        1.0 + normal(r, (d,), 0.1),
        normal(r, (d,), 0.1),  # ln1 gamma, beta
        normal(r, (d, 3 * d), d**-0.5),
        normal(r, (3 * d,), 0.02),  # qkv
        normal(r, (d, d), d**-0.5),
        normal(r, (d,), 0.02),  # out proj
        1.0 + normal(r, (d,), 0.1),
        normal(r, (d,), 0.1),  # ln2 gamma, beta
        normal(r, (d, f), d**-0.5),
        normal(r, (f,), 0.02),  # mlp in
        normal(r, (f, d), f**-0.5),
        normal(r, (d,), 0.02),  # mlp out
        normal(r, (d, 8), d**-0.5),  # pooled head
    )

    def layernorm(x, g, beta, eps=1e-5):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + eps) * g + beta

    def transformer_block(x, g1, be1, wqkv, bqkv, wo, bo, g2, be2, w1, b1, w2, b2, wp):
        y = layernorm(x, g1, be1)
        qkv = y @ wqkv + bqkv
        q, k, v = jnp.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(b, t, h, d // h) for a in (q, k, v))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(d // h))
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        s = jnp.where(causal, s, np.float32(-1e30))
        p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, d)
        x = x + o @ wo + bo
        y = layernorm(x, g2, be2)
        y = jax.nn.gelu(y @ w1 + b1, approximate=False) @ w2 + b2
        x = x + y
        pooled = jax.nn.gelu(jnp.mean(x, axis=1) @ wp, approximate=True)
        return x, pooled

    return transformer_block, args


@fixture(
    "embedding_gather",
    "Token embedding lookup table[ids] (gather; ids include -1, normalised by jnp, and an "
    "out-of-range id that XLA gather clamps) plus learned positional embeddings.",
)
def _embedding_gather():
    r = rng(6)
    ids = r.integers(0, 50, size=(2, 16)).astype(np.int32)
    ids[0, 3] = -1
    ids[1, 7] = 57  # out of range: XLA gather clamps the start index to 49
    args = (normal(r, (50, 32)), ids, normal(r, (16, 32), 0.1))

    def embedding_gather(table, ids, pos):
        return table[ids] + pos[None, :, :]

    return embedding_gather, args


@fixture(
    "argmax",
    "jnp.argmax / jnp.argmin (variadic value+index reduce) over both axes of f32 data with "
    "NaN and ties, and argmax of int32 data.",
)
def _argmax():
    r = rng(7)
    x = r.integers(-4, 5, size=(8, 16)).astype(np.float32)  # many ties
    x[2, 5] = NAN
    x[5, 1] = NAN
    x[5, 9] = NAN
    x[6, :] = -INF
    x[7, 3] = INF
    xi = r.integers(-100, 100, size=(6, 10)).astype(np.int32)

    def argmax(x, xi):
        return (
            jnp.argmax(x, axis=1),
            jnp.argmax(x, axis=0),
            jnp.argmin(x, axis=1),
            jnp.argmin(x, axis=0),
            jnp.argmax(xi, axis=1),
            jnp.argmin(xi, axis=0),
        )

    return argmax, (x, xi)


@fixture(
    "fori_loop",
    "lax.fori_loop (HLO while): 10 power-iteration steps v <- Av/|Av| plus a logistic-map "
    "recurrence, with the trip count as a runtime input for a second loop.",
)
def _fori_loop():
    r = rng(8)
    a = normal(r, (16, 16), 0.25)
    a = (a + a.T) / 2
    args = (a, normal(r, (16,)), f32([0.1, 0.25, 0.5, 0.9]), np.array(7, np.int32))

    def fori_loop(a, v0, x0, n):
        def power_step(_, v):
            w = a @ v
            return w * lax.rsqrt(jnp.sum(w * w))

        v = lax.fori_loop(0, 10, power_step, v0)

        def logistic_step(i, carry):
            x, acc = carry
            x = 3.7 * x * (1.0 - x)
            return x, acc + x * i.astype(jnp.float32)

        x, acc = lax.fori_loop(0, n, logistic_step, (x0, jnp.zeros_like(x0)))
        return v, v @ (a @ v), x, acc

    return fori_loop, args


@fixture(
    "scan",
    "lax.scan Elman RNN cell h = tanh(x_t Wx + h Wh + b) over 16 time steps "
    "(HLO while with dynamic-slice / dynamic-update-slice), returning all states, the final "
    "state and a cumulative loss.",
)
def _scan():
    r = rng(9)
    args = (
        normal(r, (16, 2, 8)),
        normal(r, (8, 32), 8**-0.5),
        normal(r, (32, 32), 32**-0.5),
        normal(r, (32,), 0.1),
        normal(r, (2, 32), 0.5),
    )

    def scan(xs, wx, wh, b, h0):
        def cell(carry, x):
            h, loss = carry
            h = jnp.tanh(x @ wx + h @ wh + b)
            return (h, loss + jnp.sum(h * h)), h

        (h, loss), hs = lax.scan(cell, (h0, jnp.float32(0)), xs)
        return hs, h, loss

    return scan, args


@fixture(
    "gru_lm",
    "A GRU language model: each step embeds a token and computes the gates as W @ x.T and "
    "W @ h.T (equinox's orientation: a batch of 8 is the narrow side), scanned over 6 tokens; "
    "then logits of the last two steps against the tied 256 x 64 embedding (states @ E.T).",
)
def _gru_lm():
    r = rng(44)
    batch, steps, hidden, vocabulary = 8, 6, 64, 256
    args = (
        normal(r, (vocabulary, hidden), 0.5),
        normal(r, (3 * hidden, hidden), hidden**-0.5),
        normal(r, (3 * hidden, hidden), hidden**-0.5),
        normal(r, (3 * hidden,), 0.1),
        r.integers(0, vocabulary, (steps, batch)).astype(np.int32),
    )

    def gru_lm(embedding, wx, wh, b, tokens):
        def cell(h, token):
            x = embedding[token]
            gx = (wx @ x.T).T + b
            gh = (wh @ h.T).T
            reset = jax.nn.sigmoid(gx[:, :hidden] + gh[:, :hidden])
            update = jax.nn.sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
            candidate = jnp.tanh(gx[:, 2 * hidden :] + reset * gh[:, 2 * hidden :])
            h = (1.0 - update) * candidate + update * h
            return h, h

        h, hs = lax.scan(cell, jnp.zeros((batch, hidden), jnp.float32), tokens)
        logits = hs[-2:].reshape(2 * batch, hidden) @ embedding.T
        return h, logits

    return gru_lm, args


@fixture(
    "sort",
    "jnp.sort of f32 with NaN, -0.0, +0.0, +/-inf and duplicates; stable jnp.argsort along "
    "rows with ties (multi-operand sort with iota); int32 sort along axis 0; descending sort.",
)
def _sort():
    r = rng(10)
    a = r.integers(-5, 6, size=(40,)).astype(np.float32)
    a[[0, 7, 13]] = NAN
    a[[1, 20]] = -0.0
    a[[2, 21]] = 0.0
    a[[3, 30]] = INF
    a[[4, 31]] = -INF
    a[5] = 1e-40
    a[6] = -1e-45
    a[9] = -NAN
    b = r.integers(0, 4, size=(4, 16)).astype(np.float32)
    c = r.integers(-50, 50, size=(6, 5)).astype(np.int32)

    def sort(a, b, c):
        return (
            jnp.sort(a),
            jnp.argsort(b, axis=-1, stable=True),
            jnp.sort(c, axis=0),
            jnp.sort(a, descending=True),
        )

    return sort, (a, b, c)


@fixture(
    "cumsum",
    "jnp.cumsum / jnp.cumprod / lax.cummax on a vector and along both axes of a matrix, "
    "plus an int32 cumsum.",
)
def _cumsum():
    r = rng(11)
    args = (
        normal(r, (32,)),
        (1.0 + normal(r, (8, 16), 0.2)).astype(np.float32),
        r.integers(-1000, 1000, size=(24,)).astype(np.int32),
    )

    def cumsum(v, m, iv):
        return (
            jnp.cumsum(v),
            jnp.cumprod(v),
            jnp.cumsum(m, axis=0),
            jnp.cumprod(m, axis=1),
            lax.cummax(v, axis=0),
            jnp.cumsum(iv),
        )

    return cumsum, args


@fixture(
    "slicing",
    "concatenate, jnp.pad, lax.pad with interior and negative padding, strided slice, "
    "lax.dynamic_slice / dynamic_update_slice with start indices as inputs (some out of range "
    "so XLA clamps them; some with allow_negative_indices=False), reverse.",
)
def _slicing():
    r = rng(12)
    args = (
        normal(r, (8, 12)),
        normal(r, (8, 4)),
        normal(r, (3, 5)),
        normal(r, (3, 4)),
        np.array(2, np.int32),
        np.array(3, np.int32),  # in range
        np.array(7, np.int32),
        np.array(-3, np.int32),  # out of range / negative
        np.array(100, np.int32),
        np.array(-100, np.int32),  # far out of range
    )

    def slicing(a, b, c, u, i0, j0, i1, j1, i2, j2):
        return (
            jnp.concatenate([a, b, a[:, :2]], axis=1),
            jnp.pad(c, ((1, 2), (0, 3)), constant_values=7.0),
            jnp.pad(c, ((2, 1), (1, 1)), mode="edge"),
            lax.pad(c, np.float32(-1.0), ((1, -1, 1), (-2, 2, 2))),
            a[1:7:2, ::3],
            lax.dynamic_slice(a, (i0, j0), (4, 5)),
            lax.dynamic_slice(a, (i1, j1), (4, 5)),  # jnp-style negative normalisation
            lax.dynamic_slice(a, (i2, j2), (4, 5), allow_negative_indices=False),
            lax.dynamic_update_slice(a, u, (i0, j0)),
            lax.dynamic_update_slice(a, u, (i1, j1), allow_negative_indices=False),
            lax.dynamic_update_slice(a, u, (i2, j2), allow_negative_indices=False),
            jnp.flip(a, axis=(0, 1)),
            lax.rev(b, (1,)),
        )

    return slicing, args


@fixture(
    "integer_arith",
    "int32/uint32/int8/uint8 arithmetic: lax.div and lax.rem incl. x/0 and INT_MIN/-1, shifts "
    "by amounts incl. >= bit width and negative, wrapping add/sub/mul, bitwise and/or/xor/not, "
    "abs/negate of INT_MIN, signed/unsigned max/min/compare.",
)
def _integer_arith():
    specials = [I32_MIN, I32_MIN + 1, -7, -1, 0, 1, 7, I32_MAX, 2, -2, 3, 65536]
    av = []
    bv = []
    for x in specials:
        for y in specials:
            av.append(x)
            bv.append(y)
    a = np.array(av, np.int32)
    b = np.array(bv, np.int32)
    s = np.resize(np.array([0, 1, 5, 31, 32, 33, 63, 64, -1, -32, 100, I32_MIN], np.int32), a.shape)
    ua = a.view(np.uint32)
    ub = b.view(np.uint32)
    a8 = np.resize(np.array([-128, -127, -1, 0, 1, 100, 127, 64], np.int8), 64)
    b8 = np.resize(np.array([-1, 0, 3, -128, 127, 2, 7], np.int8), 64)
    u8a = a8.view(np.uint8)
    u8b = b8.view(np.uint8)

    def integer_arith(a, b, s, ua, ub, a8, b8, u8a, u8b):
        us = s.astype(jnp.uint32)
        return (
            lax.div(a, b),
            lax.rem(a, b),
            a + b,
            a - b,
            a * b,
            lax.shift_left(a, s),
            lax.shift_right_logical(a, s),
            lax.shift_right_arithmetic(a, s),
            a & b,
            a | b,
            a ^ b,
            ~a,
            lax.abs(a),
            -a,
            jnp.maximum(a, b),
            jnp.minimum(a, b),
            a < b,
            lax.div(ua, ub),
            lax.rem(ua, ub),
            ua + ub,
            ua * ub,
            ua - ub,
            lax.shift_left(ua, us),
            lax.shift_right_logical(ua, us),
            lax.shift_right_arithmetic(ua, us),
            ~ua,
            jnp.maximum(ua, ub),
            ua < ub,
            a8 + b8,
            a8 * b8,
            lax.div(a8, b8),
            lax.rem(a8, b8),
            u8a * u8b,
            lax.div(u8a, u8b),
            lax.rem(u8a, u8b),
            lax.shift_right_arithmetic(a8, b8),
        )

    return integer_arith, (a, b, s, ua, ub, a8, b8, u8a, u8b)


@fixture(
    "f16_bf16",
    "f32 -> f16 / bf16 converts (overflow, f16 subnormals, round-to-nearest-even ties) and "
    "back, f16 <-> bf16, and add/multiply/exp/tanh/divide/sqrt computed in f16 and bf16.",
)
def _f16_bf16():
    x = f32(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            1 / 3,
            65504.0,
            65519.0,
            65520.0,
            70000.0,
            -1e6,
            6e-5,
            6.1035156e-05,
            1e-5,
            5.9604645e-08,
            2.9802322e-08,
            2.9802326e-08,
            8.940697e-08,
            3e-8,
            1e-40,
            1 + 2**-11,
            1 + 3 * 2**-11,
            1 + 2**-11 + 2**-20,  # f16 ties
            1 + 2**-8,
            1 + 3 * 2**-8,
            1 + 2**-8 + 2**-20,  # bf16 ties
            3.3895314e38,
            F32_MAX,
            1e-38,
            NAN,
            INF,
            -INF,
        ]
    )
    r = rng(13)
    h = np.concatenate(
        [normal(r, (12,), 3.0, np.float16), np.array([65504, -0.0, 6e-8, 1e-4], np.float16)]
    )
    g = np.concatenate(
        [normal(r, (12,), 3.0).astype(BF16), np.array([3e38, -0.0, 1e-40, 100], BF16)]
    )

    def f16_bf16(x, h, g):
        xh = x.astype(jnp.float16)
        xb = x.astype(jnp.bfloat16)
        return (
            xh,
            xb,
            xh.astype(jnp.float32),
            xb.astype(jnp.float32),
            xh.astype(jnp.bfloat16),
            xb.astype(jnp.float16),
            h + h[::-1],
            h * h[::-1],
            jnp.exp(h),
            jnp.tanh(h),
            h / h[::-1],
            jnp.sqrt(jnp.abs(h)),
            g + g[::-1],
            g * g[::-1],
            jnp.exp(g),
            jnp.tanh(g),
            g / g[::-1],
            jnp.sqrt(jnp.abs(g)),
            jnp.sum(h),
            jnp.sum(g),
            h.astype(jnp.float32) * g.astype(jnp.float32),
        )

    return f16_bf16, (x, h, g)


@fixture(
    "bf16_mlp",
    "Mixed-precision MLP: bf16 activations/weights, dots accumulating in f32 "
    "(preferred_element_type), layer norm in f32, bf16 output.",
)
def _bf16_mlp():
    r = rng(14)
    args = (
        normal(r, (8, 32)).astype(BF16),
        normal(r, (32, 64), 32**-0.5).astype(BF16),
        normal(r, (64, 16), 64**-0.5).astype(BF16),
    )

    def bf16_mlp(x, w1, w2):
        h = jnp.dot(x, w1, preferred_element_type=jnp.float32)
        h = jax.nn.relu(h - jnp.mean(h, axis=-1, keepdims=True))
        h = h.astype(jnp.bfloat16)
        y = jnp.dot(h, w2, preferred_element_type=jnp.float32)
        return y.astype(jnp.bfloat16), y

    return bf16_mlp, args


def _special_grid():
    sv = [
        NAN,
        INF,
        -INF,
        0.0,
        -0.0,
        1e-40,
        -1e-45,
        F32_MAX,
        -F32_MAX,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        3.7,
        -3.7,
    ]
    x = np.repeat(f32(sv), len(sv))
    y = np.tile(f32(sv), len(sv))
    return x, y


@fixture(
    "special_values",
    "All pairs of f32 special values (NaN, +/-inf, +/-0, subnormals, FLT_MAX, halves) through "
    "add/sub/mul/div/rem/max/min/abs/neg/sign/floor/ceil/round (half-even and away-from-zero)/"
    "compare/select/is_finite/clamp.",
)
def _special_values():
    x, y = _special_grid()

    def special_values(x, y):
        return (
            x + y,
            x - y,
            x * y,
            x / y,
            lax.rem(x, y),
            jnp.maximum(x, y),
            jnp.minimum(x, y),
            jnp.abs(x),
            -x,
            jnp.sign(x),
            jnp.floor(x),
            jnp.ceil(x),
            jnp.round(x),
            lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
            x < y,
            x == y,
            x != y,
            x >= y,
            lax.select(x > y, x, y),
            jnp.isfinite(x),
            lax.clamp(np.float32(-1.0), x, np.float32(2.0)),
            lax.clamp(y, x, np.float32(1.0)),
        )

    return special_values, (x, y)


@fixture(
    "transcendentals",
    "exp, log, tanh, logistic, erf, expm1, log1p, sin, cos (incl. 1e30), sqrt, rsqrt, cbrt, pow, "
    "atan2 on f32 vectors spanning a wide range including special values.",
)
def _transcendentals():
    base = [
        NAN,
        INF,
        -INF,
        0.0,
        -0.0,
        1e-45,
        -1e-40,
        1e-30,
        1e-7,
        0.1,
        0.5,
        1.0,
        2.0,
        3.14159265,
        10.0,
        20.0,
        80.0,
        88.72,
        89.0,
        100.0,
        1e4,
        1e10,
        1e30,
        F32_MAX,
    ]
    x = np.concatenate([f32(base), -f32(base[3:]), np.linspace(-10, 10, 21, dtype=np.float32)])
    r = rng(15)
    y = np.concatenate(
        [
            f32([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.0, NAN, INF, -INF, 1e-40, 1e30, -1e30]),
            normal(r, (x.size - 14,), 4.0),
        ]
    )

    def transcendentals(x, y):
        return (
            jnp.exp(x),
            jnp.log(x),
            jnp.tanh(x),
            lax.logistic(x),
            jax.nn.sigmoid(x),
            lax.erf(x),
            jnp.expm1(x),
            jnp.log1p(x),
            jnp.sin(x),
            jnp.cos(x),
            jnp.sqrt(x),
            lax.rsqrt(x),
            jnp.cbrt(x),
            lax.pow(x, y),
            lax.pow(jnp.abs(x), y),
            jnp.arctan2(x, y),
            jnp.arctan2(y, x),
        )

    return transcendentals, (x, y)


@fixture(
    "scatter",
    "x.at[idx].add with repeated, negative and out-of-bounds (dropped) indices, x.at[idx].set "
    "with unique indices, x.at[idx].max / .min with repeats, and a 2-D row scatter-add.",
)
def _scatter():
    r = rng(16)
    x = normal(r, (16,))
    idx = np.array([1, 3, 3, 0, 15, 3, -1, 20], np.int32)
    v = normal(r, (8,))
    uidx = np.array([4, 0, 9, 2, 11, 7, 14, 5], np.int32)
    m = normal(r, (8, 6))
    rows = np.array([0, 2, 2, 7, 0], np.int32)
    rv = normal(r, (5, 6))

    def scatter(x, idx, v, uidx, m, rows, rv):
        return (
            x.at[idx].add(v),
            x.at[uidx].set(v),
            x.at[idx].max(v),
            x.at[idx].min(v),
            m.at[rows].add(rv),
            m.at[rows, 1].multiply(rv[:, 0]),
        )

    return scatter, (x, idx, v, uidx, m, rows, rv)


@fixture(
    "conditional",
    "lax.cond on a runtime predicate (both polarities) and lax.switch with in-range, "
    "too-large and negative runtime indices (XLA clamps the branch index).",
)
def _conditional():
    r = rng(17)
    args = (np.array(True), np.array(1, np.int32), normal(r, (8,)), normal(r, (8,)))

    def conditional(p, i, x, y):
        def t(x, y):
            return jnp.sin(x) * y, jnp.sum(x)

        def f(x, y):
            return x - y, jnp.max(y)

        branches = [
            lambda x, y: x + y,
            lambda x, y: jnp.exp(x) * y,
            lambda x, y: jnp.where(x > y, x, y * 2),
        ]
        return (
            lax.cond(p, t, f, x, y),
            lax.cond(jnp.logical_not(p), t, f, x, y),
            lax.switch(i, branches, x, y),
            lax.switch(i + 5, branches, x, y),
            lax.switch(i - 9, branches, x, y),
        )

    return conditional, args


@fixture(
    "large_constant",
    "x @ W + b with W a 256x384 (98304-element) f32 closure constant printed in full as an "
    "inline literal.",
)
def _large_constant():
    r = rng(18)
    w = normal(r, (256, 384), 256**-0.5)
    bias = normal(r, (384,), 0.1)
    x = normal(r, (4, 256))

    def large_constant(x):
        return jnp.tanh(x @ w + bias)

    return large_constant, (x,)


@fixture(
    "f64_math",
    "64-bit mode: f64 matmul + exp + log + logsumexp-style sums, and s64/u64 integer ops "
    "(wrapping multiply, div/rem, shifts by > 32, convert s64 -> f64).",
    x64=True,
)
def _f64_math():
    r = rng(19)
    i64 = np.iinfo(np.int64)
    a = r.standard_normal((8, 16))
    b = r.standard_normal((16, 8))
    ia = np.array(
        [i64.min, i64.max, -1, 0, 1, 2**40 + 3, -(2**35), 123456789012, 7, -7, 2**62, 3], np.int64
    )
    ib = np.array([-1, 2, 0, 5, -1, 2**33, 3, -98765, 0, 2, 4, i64.min], np.int64)
    sh = np.array([0, 1, 33, 63, 64, 40, -1, 5, 62, 2, 1, 70], np.int64)

    def f64_math(a, b, ia, ib, sh):
        c = a @ b
        e = jnp.exp(c * 0.25)
        lse = jnp.log(jnp.sum(e, axis=1))
        ua = ia.astype(jnp.uint64)
        return (
            c,
            lse,
            jnp.sum(jnp.log1p(jnp.abs(c))),
            ia * ib,
            ia + ib,
            lax.div(ia, ib),
            lax.rem(ia, ib),
            lax.shift_left(ia, sh),
            lax.shift_right_arithmetic(ia, sh),
            lax.shift_right_logical(ia, sh),
            ua * ua,
            ia.astype(jnp.float64),
            c.astype(jnp.float32),
            lse.astype(jnp.int64),
        )

    return f64_math, (a, b, ia, ib, sh)


@fixture(
    "bitcast_convert_iota",
    "bitcast_convert_type f32 <-> s32 and f32 -> u16[.., 2], iota / arange, broadcast_in_dim, "
    "transpose, reshape, clip, float -> int converts of out-of-range values and NaN, "
    "int -> float rounding.",
)
def _bitcast_convert_iota():
    x = f32(
        [
            NAN,
            INF,
            -INF,
            3e9,
            -3e9,
            2.5,
            -2.5,
            2147483520.0,
            2147483648.0,
            -2147483904.0,
            0.0,
            -0.0,
            1e-40,
            255.5,
            256.0,
            -1.0,
            65535.9,
            1e20,
            -0.9,
            0.99,
        ]
    )
    i = np.array(
        [
            0,
            1,
            -1,
            I32_MIN,
            I32_MAX,
            2**24 + 1,
            2**24 + 3,
            0x7FC00001,
            0x7F800000,
            -8388608,
            0x00000001,
            0x80000000 - 2**32,
            16777217,
            -16777219,
            123456789,
            0x3F800000,
            0x7FFFFFFF,
            -0x00400000,
            100,
            -100,
        ],
        np.int32,
    )
    m = normal(rng(20), (3, 4))

    def bitcast_convert_iota(x, i, m):
        io = lax.iota(jnp.int32, 12)
        bc = lax.broadcast_in_dim(m, (2, 3, 5, 4), (1, 3))
        return (
            lax.bitcast_convert_type(x, jnp.int32),
            lax.bitcast_convert_type(i, jnp.float32),
            lax.bitcast_convert_type(x, jnp.uint16),
            lax.bitcast_convert_type(i, jnp.uint32),
            io,
            jnp.arange(12.0, dtype=jnp.float32) * 0.5,
            io.reshape(3, 4).T,
            bc,
            jnp.transpose(bc, (3, 1, 0, 2)).reshape(4, 30),
            jnp.clip(x, -2.0, 300.0),
            jnp.clip(i, -5, 1000),
            x.astype(jnp.int32),
            x.astype(jnp.uint32),
            x.astype(jnp.uint8),
            x.astype(jnp.int8),
            x.astype(jnp.int16),
            x.astype(jnp.bool_),
            i.astype(jnp.float32),
            i.astype(jnp.float16),
            i.astype(jnp.uint8),
            i.astype(jnp.int16),
            i.astype(jnp.uint32).astype(jnp.float32),
            i.astype(jnp.bool_),
        )

    return bitcast_convert_iota, (x, i, m)


@fixture(
    "map_reduce_variants",
    "Reductions over different axes of a 3-D array: sum over a 5003-element axis, max, min, "
    "prod, any/all (pred or/and), mean, multi-axis sums, int sum; and lax.reduce_window sum "
    "and max with strides and padding.",
)
def _map_reduce_variants():
    r = rng(21)
    x = normal(r, (2, 3, 5003))
    y = normal(r, (8, 12))
    z = r.integers(-1000, 1000, size=(4, 5, 6)).astype(np.int32)

    def map_reduce_variants(x, y, z):
        xp = 1.0 + 0.01 * x[:, :, :40]
        return (
            jnp.sum(x, axis=2),
            jnp.max(x, axis=1),
            jnp.min(x, axis=0),
            jnp.prod(xp, axis=2),
            jnp.any(x > 3.5, axis=2),
            jnp.all(x > -3.0, axis=(0, 2)),
            jnp.mean(x, axis=(0, 2)),
            jnp.sum(x),
            jnp.sum(z, axis=(0, 2)),
            jnp.max(z, axis=1),
            jnp.min(z),
            lax.reduce_window(y, 0.0, lax.add, (3, 3), (2, 2), ((1, 1), (0, 2))),
            lax.reduce_window(y, -jnp.inf, lax.max, (2, 3), (1, 2), ((0, 1), (1, 1))),
            lax.reduce_window(z, 0, lax.add, (2, 2, 3), (1, 2, 3), "SAME"),
        )

    return map_reduce_variants, (x, y, z)


# --------------------------------------------------------------------------
# Training steps from the model libraries people use (flax, optax)
# --------------------------------------------------------------------------


def over_leaves(step, *trees):
    """`step` over the flattened leaves of `trees` (one HLO parameter per leaf, in
    jax.tree_util order), and those leaves as numpy arrays."""
    leaves, structure = jax.tree_util.tree_flatten(trees)

    def flat(*arrays):
        return step(*jax.tree_util.tree_unflatten(structure, list(arrays)))

    return flat, tuple(np.asarray(leaf) for leaf in leaves)


def _cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def optax_step(optimizer, loss_fn, params, state):
    """One optimizer step: the loss, the updated parameters and optimizer state."""
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, state = optimizer.update(grads, state, params)
    return loss, optax.apply_updates(params, updates), state


@fixture(
    "dropout_train_step",
    "One Adam step (optax) of a flax MLP with dropout drawn by jax.random (threefry, the key "
    "split per step): forward with dropout masks, backprop, Adam moments and update.",
)
def _dropout_train_step():
    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dropout(0.2, deterministic=not train)(nn.relu(nn.Dense(32)(x)))
            return nn.Dense(5)(nn.Dropout(0.1, deterministic=not train)(nn.relu(nn.Dense(32)(x))))

    r = rng(31)
    model = Mlp()
    x = normal(r, (16, 12))
    labels = r.integers(0, 5, size=(16,)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(0), x, train=False)
    optimizer = optax.adam(1e-2)
    state = optimizer.init(params)
    key = np.asarray(jax.random.PRNGKey(7))

    def step(params, state, key, x, labels):
        key, dropout_key = jax.random.split(key)

        def loss_fn(p):
            return _cross_entropy(model.apply(p, x, train=True, rngs={"dropout": dropout_key}), labels)

        return (*optax_step(optimizer, loss_fn, params, state), key)

    return over_leaves(step, params, state, key, x, labels)


@fixture(
    "cnn_maxpool_train_step",
    "One SGD-with-momentum step (optax) of a flax CNN: conv, relu, 2x2 max pooling (its "
    "gradient is select-and-scatter), conv, 3x3 stride-2 padded max pooling, dense head.",
)
def _cnn_maxpool_train_step():
    class Cnn(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.max_pool(nn.relu(nn.Conv(8, (3, 3))(x)), (2, 2), strides=(2, 2))
            x = nn.max_pool(nn.relu(nn.Conv(8, (3, 3))(x)), (3, 3), strides=(2, 2), padding="SAME")
            return nn.Dense(4)(x.reshape(x.shape[0], -1))

    r = rng(32)
    model = Cnn()
    x = normal(r, (4, 12, 12, 3))
    labels = r.integers(0, 4, size=(4,)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(1), x)
    optimizer = optax.sgd(0.05, momentum=0.9)
    state = optimizer.init(params)

    def step(params, state, x, labels):
        return optax_step(optimizer, lambda p: _cross_entropy(model.apply(p, x), labels), params, state)

    return over_leaves(step, params, state, x, labels)


@fixture(
    "remat_transformer_train_step",
    "One AdamW step (optax) of a flax pre-LN transformer block under nn.remat (jax.checkpoint: "
    "opt-barrier, the forward recomputed in the backward pass), causal self-attention, GELU MLP.",
)
def _remat_transformer_train_step():
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            t = x.shape[1]
            y = nn.LayerNorm()(x)
            mask = nn.make_causal_mask(jnp.ones((x.shape[0], t)))
            # No qkv bias: the key bias has a zero gradient (softmax ignores a shift), whose
            # rounding noise Adam would scale up to the learning rate.
            x = x + nn.SelfAttention(num_heads=4, qkv_features=32, use_bias=False)(y, mask=mask)
            y = nn.LayerNorm()(x)
            return x + nn.Dense(32)(nn.gelu(nn.Dense(64)(y)))

    r = rng(33)
    model = nn.remat(Block)()
    x = normal(r, (2, 8, 32))
    target = normal(r, (2, 8, 32))
    params = model.init(jax.random.PRNGKey(2), x)
    optimizer = optax.adamw(1e-3)
    state = optimizer.init(params)

    def step(params, state, x, target):
        return optax_step(optimizer, lambda p: jnp.mean(jnp.square(model.apply(p, x) - target)), params, state)

    return over_leaves(step, params, state, x, target)


@fixture(
    "topk_sampling",
    "Top-k sampling from a small language-model head: logits, lax.top_k (k=5), temperature, "
    "jax.random.categorical over the top 5 (threefry), and the chosen token ids.",
)
def _topk_sampling():
    r = rng(34)
    hidden = normal(r, (6, 24))
    head = normal(r, (24, 50), 24**-0.5)
    key = np.asarray(jax.random.PRNGKey(11))

    def sample(hidden, head, key):
        logits = hidden @ head
        values, indices = lax.top_k(logits, 5)
        choice = jax.random.categorical(key, values / 0.7, axis=-1)
        tokens = jnp.take_along_axis(indices, choice[:, None], axis=-1)[:, 0]
        return values, indices, tokens

    return sample, (hidden, head, key)


@fixture(
    "rbg_dropout",
    "Dropout with jax.random's rbg implementation (rng-bit-generator, XLA:CPU's default "
    "algorithm) and with an explicit Philox and ThreeFry rng_bit_generator: masks and values.",
)
def _rbg_dropout():
    r = rng(35)
    x = normal(r, (8, 40))
    key_data = r.integers(0, 2**32, size=(4,), dtype=np.uint32)
    state = r.integers(0, 2**32, size=(4,), dtype=np.uint32)

    def dropout(x, key_data, state):
        key = jax.random.wrap_key_data(key_data, impl="rbg")
        keep = jax.random.bernoulli(key, 0.8, x.shape)
        _, philox = lax.rng_bit_generator(state, (8, 40), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
        _, threefry = lax.rng_bit_generator(state, (5,), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
        return jnp.where(keep, x / 0.8, 0.0), philox, threefry

    return dropout, (x, key_data, state)


@fixture(
    "int4_matmul",
    "Int4 weights as quantized models ship them: a per-column scaled s4 weight dequantized "
    "into an f32 matmul, an s4 x s8 integer matmul accumulated in s32, and s4 arithmetic that wraps.",
)
def _int4_matmul():
    r = rng(36)
    x = normal(r, (8, 64))
    w = r.integers(-8, 8, size=(64, 32)).astype(ml_dtypes.int4)
    scale = np.abs(normal(r, (32,), 0.05)) + 0.01
    xq = r.integers(-128, 128, size=(8, 64)).astype(np.int8)
    a = r.integers(-8, 8, size=(64,)).astype(ml_dtypes.int4)
    b = r.integers(-8, 8, size=(64,)).astype(ml_dtypes.int4)

    def int4_matmul(x, w, scale, xq, a, b):
        dequantized = x @ (w.astype(jnp.float32) * scale)
        integer = lax.dot(xq, w.astype(jnp.int8), preferred_element_type=jnp.int32)
        return dequantized, integer, a + b, a * b

    return int4_matmul, (x, w, scale, xq, a, b)


@fixture(
    "fft_spectrogram",
    "jnp.fft as audio and imaging code uses it: the log power spectrum of Hann-windowed "
    "256-sample frames (rfft), a circular convolution of length-100 signals (rfft, product, "
    "irfft), fft2 and ifft2 of a complex image and an fftn over three axes; real and "
    "imaginary parts out.",
)
def _fft_spectrogram():
    r = rng(41)
    frames = normal(r, (8, 256))
    signal = normal(r, (4, 100))
    kernel = normal(r, (4, 100))
    image_re, image_im = normal(r, (2, 16, 12)), normal(r, (2, 16, 12))

    def fft_spectrogram(frames, signal, kernel, image_re, image_im):
        window = jnp.hanning(256).astype(jnp.float32)
        power = jnp.abs(jnp.fft.rfft(frames * window)) ** 2
        convolved = jnp.fft.irfft(jnp.fft.rfft(signal) * jnp.fft.rfft(kernel), n=100)
        image = lax.complex(image_re, image_im)
        spectrum = jnp.fft.fft2(image)
        back = jnp.fft.ifft2(spectrum * 0.5)
        volume = jnp.fft.fftn(image, axes=(0, 1, 2))
        parts = [part(z) for z in (spectrum, back, volume) for part in (jnp.real, jnp.imag)]
        return (jnp.log(power + 1e-6), convolved, *parts)

    return fft_spectrogram, (frames, signal, kernel, image_re, image_im)


@fixture(
    "fp8_matmul",
    "FP8 inference and training casts: activations scaled and cast to float8_e4m3fn, a matmul "
    "of float8_e4m3fn weights accumulated in f32 and rescaled, a gradient cast to float8_e5m2 "
    "and back, and values beyond the types' ranges (e4m3fn has no infinity: NaN).",
)
def _fp8_matmul():
    r = rng(43)
    x = normal(r, (16, 64), 4.0)
    w = normal(r, (64, 32), 0.5).astype(ml_dtypes.float8_e4m3fn)
    w_scale = np.float32(0.02)
    g = normal(r, (16, 32), 1e-3)
    extremes = f32([0.0, -0.0, 448.0, 464.0, 465.0, -1e6, 2.0**-9, 2.0**-10, 57344.0, 61440.0, NAN, INF])

    def fp8_matmul(x, w, w_scale, g, extremes):
        x_scale = jnp.max(jnp.abs(x)) / 448.0
        xq = (x / x_scale).astype(jnp.float8_e4m3fn)
        y = lax.dot(xq, w, preferred_element_type=jnp.float32) * (x_scale * w_scale)
        g8 = g.astype(jnp.float8_e5m2)
        return (
            y,
            xq,
            g8.astype(jnp.float32),
            extremes.astype(jnp.float8_e4m3fn).astype(jnp.float32),
            extremes.astype(jnp.float8_e5m2).astype(jnp.float32),
            w.astype(jnp.bfloat16),
        )

    return fp8_matmul, (x, w, w_scale, g, extremes)


# --------------------------------------------------------------------------
# HLO text helpers
# --------------------------------------------------------------------------

_INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$")
_ARRAY_SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\]")


def _split_shape(rest: str) -> tuple[str, str]:
    """Split 'SHAPE opcode(...)' into (SHAPE, remainder); SHAPE may be a tuple."""
    if rest.startswith("("):
        depth = 0
        for pos, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[: pos + 1], rest[pos + 1 :].lstrip()
        raise ValueError(f"unbalanced tuple shape: {rest[:80]}")
    shape, _, remainder = rest.partition(" ")
    return shape, remainder


def hlo_opcodes(text: str) -> list[str]:
    ops = set()
    for line in text.splitlines():
        m = _INSTR_RE.match(line)
        if not m:
            continue
        _, remainder = _split_shape(m.group(1))
        op = re.match(r"([a-z][a-z0-9\-]*)\(", remainder)
        if not op:
            raise ValueError(f"cannot find opcode in: {line[:120]}")
        ops.add(op.group(1))
    return sorted(ops)


def entry_parameters(text: str) -> list[tuple[int, str]]:
    """[(parameter_number, array shape string)] of the ENTRY computation."""
    entry = text[text.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    params = []
    for line in entry.splitlines():
        m = _INSTR_RE.match(line)
        if m and " parameter(" in m.group(1):
            shape, remainder = _split_shape(m.group(1))
            num = int(re.match(r"parameter\((\d+)\)", remainder).group(1))
            params.append((num, shape))
    return sorted(params)


def result_shapes(text: str) -> list[tuple[str, list[int]]]:
    layout = re.search(r"entry_computation_layout=\{\((.*)\)->(.*)\}", text.splitlines()[0])
    return [
        (d, [int(s) for s in dims.split(",") if s])
        for d, dims in _ARRAY_SHAPE_RE.findall(layout.group(2))
    ]


def shape_of(arr: np.ndarray) -> tuple[str, list[int]]:
    return HLO_DTYPE[np.dtype(arr.dtype)], [int(s) for s in arr.shape]


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def npy_bytes(arr: np.ndarray) -> bytes:
    """The .npy bytes of an array; s4 and u4 as the int8 and uint8 holding their values, the
    form vxla takes them in."""
    if arr.dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        arr = arr.astype(np.int8 if arr.dtype == np.dtype(ml_dtypes.int4) else np.uint8)
    buf = io.BytesIO()
    np.save(buf, np.require(arr, requirements="C"), allow_pickle=False)
    return buf.getvalue()


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez, but with fixed zip timestamps so the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, npy_bytes(arr))


def dump_json(meta: dict) -> str:
    """Indented JSON, but with each input/output descriptor on one line."""
    lines = ["{"]
    items = list(meta.items())
    for n, (key, value) in enumerate(items):
        comma = "," if n + 1 < len(items) else ""
        if key in ("inputs", "outputs") and value:
            body = ",\n".join("    " + json.dumps(v) for v in value)
            lines.append(f"  {json.dumps(key)}: [\n{body}\n  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == meta
    return text


def check_no_absolute_paths(text: str, what: str) -> None:
    for bad in (str(REPO_ROOT), "site-packages", "dist-packages", str(Path.home())):
        if bad and bad != "/" and bad in text:
            raise RuntimeError(f"{what} contains a machine-specific path ({bad!r})")
    for name in re.findall(r'^\d+ "([^"]*)"$', text, flags=re.M):
        if name.startswith("/"):
            raise RuntimeError(f"{what} contains an absolute source path {name!r}")


def export(fx: Fixture, out_root: Path) -> dict:
    fn, args = fx.build()
    args = tuple(np.asarray(a) for a in args)
    with jax.enable_x64(fx.x64):
        lowered = jax.jit(fn, keep_unused=True).lower(*args)
        module_text = lowered.as_text(dialect="hlo")
        compiled = lowered.compile()
        optimized_text = compiled.as_text()
        results = compiled(*args)
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(results)]

    opcodes = hlo_opcodes(module_text)
    unsupported = sorted(set(opcodes) - SUPPORTED_OPCODES)
    if unsupported:
        raise RuntimeError(f"{fx.name}: unsupported opcodes in module.hlo: {unsupported}")
    if "{...}" in module_text:
        raise RuntimeError(f"{fx.name}: module.hlo has an elided constant")

    in_shapes = [shape_of(a) for a in args]
    out_shapes = [shape_of(o) for o in outs]
    params = entry_parameters(module_text)
    if [n for n, _ in params] != list(range(len(args))):
        raise RuntimeError(f"{fx.name}: ENTRY parameters {params} vs {len(args)} inputs")
    for (num, shape), (dt, dims) in zip(params, in_shapes, strict=True):
        got = _ARRAY_SHAPE_RE.fullmatch(shape.split("{")[0])
        if not got or got.group(1) != dt or [int(s) for s in got.group(2).split(",") if s] != dims:
            raise RuntimeError(f"{fx.name}: parameter {num} is {shape}, input is {dt}{dims}")
    if result_shapes(module_text) != out_shapes:
        raise RuntimeError(f"{fx.name}: result layout does not match outputs {out_shapes}")
    check_no_absolute_paths(module_text, f"{fx.name}/module.hlo")
    check_no_absolute_paths(optimized_text, f"{fx.name}/xla_optimized.hlo")

    d = out_root / fx.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "module.hlo").write_text(module_text, encoding="utf-8")
    (d / "xla_optimized.hlo").write_text(optimized_text, encoding="utf-8")
    for k, a in enumerate(args):
        (d / f"in{k}.npy").write_bytes(npy_bytes(a))
    write_npz(d / "xla.npz", {f"out{k}": o for k, o in enumerate(outs)})
    meta = {
        "name": fx.name,
        "description": fx.description,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "inputs": [{"dtype": dt, "shape": dims} for dt, dims in in_shapes],
        "outputs": [{"dtype": dt, "shape": dims} for dt, dims in out_shapes],
        "opcodes": opcodes,
    }
    (d / "fixture.json").write_text(dump_json(meta), encoding="utf-8")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="fixtures to export (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    ns = parser.parse_args(argv)

    by_name = {fx.name: fx for fx in FIXTURES}
    if ns.list:
        print("\n".join(by_name))
        return 0
    unknown = [n for n in ns.names if n not in by_name]
    if unknown:
        parser.error(f"unknown fixtures: {unknown}; known: {sorted(by_name)}")
    selected = [by_name[n] for n in ns.names] if ns.names else FIXTURES
    for fx in selected:
        meta = export(fx, ns.out)
        print(
            f"{fx.name:22s} {len(meta['inputs']):2d} in {len(meta['outputs']):2d} out  "
            f"{' '.join(meta['opcodes'])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

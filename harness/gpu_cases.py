"""Fixed cases of every op family, with special values, sized so that work items do not line
up with a GPU block (odd extents, partial tiles): what the emulated grid (make test) and the
device check (tools/gpu_check.py) run besides the JAX fixtures."""

from __future__ import annotations

import numpy as np

F32_SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, 88.7, -103.9, 1e-8], dtype=np.float32)


def _floats(rng: np.random.Generator, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    size = int(np.prod(shape))
    values = (rng.standard_normal(size) * 10.0 ** rng.integers(-4, 5, size)).astype(dtype)
    mask = rng.random(size) < 0.25
    values[mask] = rng.choice(F32_SPECIALS.astype(dtype), mask.sum())
    return values.reshape(shape)


def _module(entry: str, extra: str = "") -> str:
    return f"HloModule m\n{extra}ENTRY e {{\n{entry}}}\n"


_ADD = "add_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
_MAX = "max_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\n"
_LESS = "less_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n"
_UPDATE = "update_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"

_UNARY = ("exponential", "log", "tanh", "logistic", "erf", "sqrt", "rsqrt", "cbrt", "sine", "cosine", "exponential-minus-one", "log-plus-one", "floor", "round-nearest-even", "negate", "abs", "sign")
_BINARY = ("add", "subtract", "multiply", "divide", "power", "atan2", "maximum", "minimum", "remainder")


def cases() -> list[tuple[str, str, list[np.ndarray]]]:
    rng = np.random.default_rng(34)
    out: list[tuple[str, str, list[np.ndarray]]] = []
    n = 1031  # 8 blocks of 128 and a partial one
    lines = [f"  x = f32[{n}] parameter(0)", f"  y = f32[{n}] parameter(1)"]
    lines += [f"  u{i} = f32[{n}] {op}(x)" for i, op in enumerate(_UNARY)]
    lines += [f"  b{i} = f32[{n}] {op}(x, y)" for i, op in enumerate(_BINARY)]
    names = [f"u{i}" for i in range(len(_UNARY))] + [f"b{i}" for i in range(len(_BINARY))]
    lines.append(f"  ROOT t = ({', '.join([f'f32[{n}]'] * len(names))}) tuple({', '.join(names)})")
    out.append(("family_elementwise_f32", _module("\n".join(lines) + "\n"), [_floats(rng, (n,)), _floats(rng, (n,))]))

    lines = [
        "  x = f64[515] parameter(0)",
        "  y = f64[515] parameter(1)",
        "  a = f64[515] divide(x, y)",
        "  b = f64[515] exponential(x)",
        "  c = f64[515] multiply(a, b)",
        "  h = f16[515] convert(x)",
        "  g = bf16[515] convert(y)",
        "  hh = f16[515] multiply(h, h)",
        "  gg = bf16[515] add(g, g)",
        "  s = s32[515] convert(x)",
        "  ROOT t = (f64[515], f16[515], bf16[515], s32[515]) tuple(c, hh, gg, s)",
    ]
    out.append(("family_f64_f16_bf16_convert", _module("\n".join(lines) + "\n"), [_floats(rng, (515,), np.float64), _floats(rng, (515,), np.float64)]))

    ints = rng.integers(-(2**31), 2**31, size=(2, 700), dtype=np.int64).astype(np.int32)
    ints[:, :8] = [[0, 1, -1, -(2**31), 2**31 - 1, 7, -7, 3]] * 2
    lines = [
        "  x = s32[700] parameter(0)",
        "  y = s32[700] parameter(1)",
        "  d = s32[700] divide(x, y)",
        "  r = s32[700] remainder(x, y)",
        "  k = s32[700] constant({...})".replace("{...}", "{" + ",".join(str(i % 33) for i in range(700)) + "}"),
        "  s = s32[700] shift-right-arithmetic(x, k)",
        "  l = s32[700] shift-left(y, k)",
        "  c = pred[700] compare(x, y), direction=GT",
        "  m = s32[700] select(c, d, r)",
        "  ROOT t = (s32[700], s32[700], s32[700]) tuple(m, s, l)",
    ]
    out.append(("family_integer", _module("\n".join(lines) + "\n"), [ints[0], ints[1]]))

    lines = [
        "  x = f32[37,517] parameter(0)",
        "  z = f32[] constant(0)",
        "  m = f32[] constant(-inf)",
        "  r = f32[37] reduce(x, z), dimensions={1}, to_apply=add_f32",
        "  c = f32[517] reduce(x, m), dimensions={0}, to_apply=max_f32",
        "  a = f32[] reduce(x, z), dimensions={0,1}, to_apply=add_f32",
        "  w = f32[37,172] reduce-window(x, z), window={size=1x5 stride=1x3 pad=0_0x1_1}, to_apply=add_f32",
        "  ROOT t = (f32[37], f32[517], f32[], f32[37,172]) tuple(r, c, a, w)",
    ]
    out.append(("family_reductions", _module("\n".join(lines) + "\n", _ADD + _MAX), [_floats(rng, (37, 517))]))

    lines = [
        "  a = f32[3,37,65] parameter(0)",
        "  b = f32[3,65,29] parameter(1)",
        "  c = f32[130,70] parameter(2)",
        "  d = f32[70,300] parameter(3)",
        "  e = f32[3,37,29] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        "  f = f32[130,300] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "  ROOT t = (f32[3,37,29], f32[130,300]) tuple(e, f)",
    ]
    dot_inputs = [rng.standard_normal(s).astype(np.float32) for s in ((3, 37, 65), (3, 65, 29), (130, 70), (70, 300))]
    dot_inputs[0][0, 0, :3] = [np.nan, np.inf, -0.0]
    out.append(("family_dot", _module("\n".join(lines) + "\n"), dot_inputs))

    lines = [
        "  x = f32[2,13,11,5] parameter(0)",
        "  k = f32[3,3,5,7] parameter(1)",
        "  ROOT c = f32[2,7,6,7] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
    ]
    out.append(("family_convolution", _module("\n".join(lines) + "\n"), [rng.standard_normal((2, 13, 11, 5)).astype(np.float32), rng.standard_normal((3, 3, 5, 7)).astype(np.float32)]))

    lines = [
        "  x = f32[29,43] parameter(0)",
        "  t = f32[43,29] transpose(x), dimensions={1,0}",
        "  s = f32[10,20] slice(x), slice={[3:23:2], [1:41:2]}",
        "  r = f32[29,43] reverse(x), dimensions={0,1}",
        "  c = f32[58,43] concatenate(x, r), dimensions={0}",
        "  z = f32[] constant(-0)",
        "  p = f32[33,50] pad(x, z), padding=2_2x3_4",
        "  b = f32[4,29,43] broadcast(x), dimensions={1,2}",
        "  i = s32[] constant(20)",
        "  j = s32[] constant(-3)",
        "  d = f32[9,9] dynamic-slice(x, i, j), dynamic_slice_sizes={9,9}",
        "  ROOT o = (f32[43,29], f32[10,20], f32[58,43], f32[33,50], f32[4,29,43], f32[9,9]) tuple(t, s, c, p, b, d)",
    ]
    out.append(("family_data_movement", _module("\n".join(lines) + "\n"), [_floats(rng, (29, 43))]))

    lines = [
        "  x = f32[5,301] parameter(0)",
        "  s = f32[5,301] sort(x), dimensions={1}, to_apply=less_f32",
        "  table = f32[50,7] parameter(1)",
        "  idx = s32[13,1] parameter(2)",
        "  g = f32[13,7] gather(table, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,7}",
        "  upd = f32[13,7] parameter(3)",
        "  sc = f32[50,7] scatter(table, idx, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=update_f32",
        "  ROOT t = (f32[5,301], f32[13,7], f32[50,7]) tuple(s, g, sc)",
    ]
    idx = rng.integers(-3, 53, size=(13, 1)).astype(np.int32)
    idx[:4, 0] = [5, 5, 49, 0]
    out.append(("family_sort_gather_scatter", _module("\n".join(lines) + "\n", _LESS + _UPDATE), [_floats(rng, (5, 301)), _floats(rng, (50, 7)), idx, _floats(rng, (13, 7))]))
    return out

"""The batch-norm ops as the numerics contract defines them (docs/numerics.md §5): the
sequence of elementwise ops, broadcasts and add-reduces that XLA's BatchNormExpander writes,
in the operand's type, as an HLO computation. The reference evaluator evaluates it and the
backend lowers it; neither has batch-norm arithmetic of its own.

The count of elements per feature is an s32 constant converted to the type, and epsilon is
the attribute's binary32 value converted to the type, as in the expander.
"""

from __future__ import annotations

from functools import cache

from compiler.hlo.ir import Computation, Instruction


def expansion(instruction: Instruction) -> Computation:
    """The computation that is `instruction`: its parameters are the instruction's operands,
    its root has the instruction's shape."""
    operand = instruction.operands[0].array_shape
    epsilon = instruction.attrs["epsilon"]
    feature = instruction.attrs["feature_index"]
    assert isinstance(epsilon, float) and isinstance(feature, int)
    return _expansion(instruction.opcode, str(operand), operand.dtype.name, operand.dims, epsilon, feature)


@cache  # a pure function of its arguments: the same op on the same shapes expands alike
def _expansion(opcode: str, operand: str, dtype: str, dims: tuple[int, ...], epsilon: float, feature: int) -> Computation:
    from compiler.hlo import load_module  # below this module in the import order at run time only

    return load_module(_TEXTS[opcode](operand, dtype, dims, epsilon, feature)).entry


def _common(dtype: str, dims: tuple[int, ...], epsilon: float, feature: int) -> dict[str, object]:
    count = 1
    for position, size in enumerate(dims):
        if position != feature:
            count *= size
    return {
        "T": dtype,
        "A": f"{dtype}[{','.join(str(d) for d in dims)}]",
        "F": f"{dtype}[{dims[feature]}]",
        "f": feature,
        "others": ",".join(str(d) for d in range(len(dims)) if d != feature),
        "eps": repr(epsilon),
        "N": count,
    }


_ADD = "add {{\n  p = {T}[] parameter(0)\n  q = {T}[] parameter(1)\n  ROOT s = {T}[] add(p, q)\n}}\n"


def _training(operand: str, dtype: str, dims: tuple[int, ...], epsilon: float, feature: int) -> str:
    v = _common(dtype, dims, epsilon, feature)
    return ("HloModule batch_norm_training\n" + _ADD + """ENTRY batch_norm_training {{
  x = {operand} parameter(0)
  scale = {F} parameter(1)
  offset = {F} parameter(2)
  zero = {T}[] constant(0)
  count = s32[] constant({N})
  n = {T}[] convert(count)
  n_f = {F} broadcast(n), dimensions={{}}
  eps = {T}[] constant({eps})
  eps_a = {A} broadcast(eps), dimensions={{}}
  squares = {A} multiply(x, x)
  sum = {F} reduce(x, zero), dimensions={{{others}}}, to_apply=add
  squares_sum = {F} reduce(squares, zero), dimensions={{{others}}}, to_apply=add
  mean = {F} divide(sum, n_f)
  squares_mean = {F} divide(squares_sum, n_f)
  mean_squared = {F} multiply(mean, mean)
  var = {F} subtract(squares_mean, mean_squared)
  var_a = {A} broadcast(var), dimensions={{{f}}}
  var_eps = {A} add(var_a, eps_a)
  rsqrt_var = {A} rsqrt(var_eps)
  mean_a = {A} broadcast(mean), dimensions={{{f}}}
  centered = {A} subtract(x, mean_a)
  normalized = {A} multiply(centered, rsqrt_var)
  scale_a = {A} broadcast(scale), dimensions={{{f}}}
  scaled = {A} multiply(normalized, scale_a)
  offset_a = {A} broadcast(offset), dimensions={{{f}}}
  shifted = {A} add(scaled, offset_a)
  ROOT result = ({A}, {F}, {F}) tuple(shifted, mean, var)
}}
""").format(operand=operand, **v)


def _inference(operand: str, dtype: str, dims: tuple[int, ...], epsilon: float, feature: int) -> str:
    v = _common(dtype, dims, epsilon, feature)
    return """HloModule batch_norm_inference
ENTRY batch_norm_inference {{
  x = {operand} parameter(0)
  scale = {F} parameter(1)
  offset = {F} parameter(2)
  mean = {F} parameter(3)
  var = {F} parameter(4)
  eps = {T}[] constant({eps})
  eps_f = {F} broadcast(eps), dimensions={{}}
  var_eps = {F} add(var, eps_f)
  rsqrt_var = {F} rsqrt(var_eps)
  true_scale = {F} multiply(scale, rsqrt_var)
  mean_scaled = {F} multiply(mean, true_scale)
  true_shift = {F} subtract(offset, mean_scaled)
  scale_a = {A} broadcast(true_scale), dimensions={{{f}}}
  scaled = {A} multiply(x, scale_a)
  shift_a = {A} broadcast(true_shift), dimensions={{{f}}}
  ROOT shifted = {A} add(scaled, shift_a)
}}
""".format(operand=operand, **v)


def _grad(operand: str, dtype: str, dims: tuple[int, ...], epsilon: float, feature: int) -> str:
    v = _common(dtype, dims, epsilon, feature)
    return ("HloModule batch_norm_grad\n" + _ADD + """ENTRY batch_norm_grad {{
  x = {operand} parameter(0)
  scale = {F} parameter(1)
  mean = {F} parameter(2)
  var = {F} parameter(3)
  grad = {A} parameter(4)
  count = s32[] constant({N})
  n = {T}[] convert(count)
  n_a = {A} broadcast(n), dimensions={{}}
  zero = {T}[] constant(0)
  eps = {T}[] constant({eps})
  eps_a = {A} broadcast(eps), dimensions={{}}
  eps_f = {F} broadcast(eps), dimensions={{}}
  scale_a = {A} broadcast(scale), dimensions={{{f}}}
  var_a = {A} broadcast(var), dimensions={{{f}}}
  mean_a = {A} broadcast(mean), dimensions={{{f}}}
  var_eps_a = {A} add(var_a, eps_a)
  rsqrt_var_a = {A} rsqrt(var_eps_a)
  var_eps_f = {F} add(var, eps_f)
  rsqrt_var_f = {F} rsqrt(var_eps_f)
  centered = {A} subtract(x, mean_a)
  grad_centered = {A} multiply(grad, centered)
  sum_grad_centered = {F} reduce(grad_centered, zero), dimensions={{{others}}}, to_apply=add
  grad_offset = {F} reduce(grad, zero), dimensions={{{others}}}, to_apply=add
  grad_scale = {F} multiply(sum_grad_centered, rsqrt_var_f)
  i2 = {A} broadcast(grad_offset), dimensions={{{f}}}
  i3 = {A} broadcast(sum_grad_centered), dimensions={{{f}}}
  i4 = {A} multiply(i3, centered)
  i5 = {A} divide(i4, var_eps_a)
  scale_rsqrt = {A} multiply(scale_a, rsqrt_var_a)
  scale_rsqrt_mean = {A} divide(scale_rsqrt, n_a)
  i1 = {A} multiply(grad, n_a)
  i1_i2 = {A} subtract(i1, i2)
  i6 = {A} subtract(i1_i2, i5)
  grad_x = {A} multiply(scale_rsqrt_mean, i6)
  ROOT result = ({A}, {F}, {F}) tuple(grad_x, grad_scale, grad_offset)
}}
""").format(operand=operand, **v)


_TEXTS = {"batch-norm-training": _training, "batch-norm-inference": _inference, "batch-norm-grad": _grad}

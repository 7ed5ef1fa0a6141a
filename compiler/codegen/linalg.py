"""cholesky and triangular-solve: one work item per matrix (cholesky) or per right-hand-side
vector (triangular-solve), each running the pinned loops of compiler/numerics/linalg.py in
scalar code, one fma per step, exactly as the reference does. Correct first: these ops are
rare in the programs vxla runs (JAX on CPU calls LAPACK instead)."""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.dot_conv import multiply_add  # the contract's one fma step
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I64, call_intrinsic, constant, storage_type
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.narrow_linalg import NARROW, in_f32
from compiler.numerics.linalg import TriangularSystem
from core.dtypes import DType


def _accumulate(kernel: Kernel, start: ir.Value, stop: ir.Value, initial: ir.Value, step, dtype: DType) -> ir.Value:
    """initial, then step(k, acc) for k = start..stop-1 in order, through a stack slot."""
    b = kernel.builder
    slot = kernel.alloca(storage_type(dtype))
    b.store(initial, slot)
    with kernel.loop(start, stop, 1, "k") as k:
        b.store(step(k, b.load(slot)), slot)
    return b.load(slot)


def _in_f32(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """An f16 or bf16 op: its computation in f32 (compiler/hlo/narrow_linalg.py)."""
    inner, result = lowering.lower_computation(in_f32(instruction), operands)
    steps.extend(inner)
    return result


def _emit_cholesky(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    if instruction.array_shape.dtype in NARROW:
        return _in_f32(lowering, instruction, operands, steps)
    shape = instruction.array_shape
    dtype, n = shape.dtype, shape.dims[-1]
    matrices = 1
    for size in shape.dims[:-2]:
        matrices *= size
    output = lowering.new_buffer(shape)
    if matrices * n == 0:
        return output
    strides = row_major_strides(shape.dims)
    lower = bool(instruction.attrs.get("lower", False))
    with lowering.kernels.kernel("cholesky") as kernel:
        b = kernel.builder
        source, target = kernel.buffer(operands[0]), kernel.buffer(output)  # type: ignore[arg-type]
        with kernel.loop(kernel.begin, kernel.end, 1, "matrix") as matrix:
            batch = unravel(b, matrix, shape.dims[:-2]) if shape.rank > 2 else []

            def at(i: ir.Value, j: ir.Value) -> ir.Value:  # element (i, j) of the lower form
                return ravel(b, [*batch, i, j] if lower else [*batch, j, i], strides)

            def factor(i: ir.Value, j: ir.Value) -> ir.Value:
                return kernel.load(target, dtype, at(i, j))

            zero = constant(storage_type(dtype), 0.0)
            with kernel.loop(I64(0), I64(n), 1, "i") as i, kernel.loop(I64(0), I64(n), 1, "j") as j:
                kernel.store(zero, target, dtype, at(i, j))
            with kernel.loop(I64(0), I64(n), 1, "j") as j:
                d = _accumulate(kernel, I64(0), j, kernel.load(source, dtype, at(j, j)),
                                lambda k, acc: multiply_add(kernel, b.fneg(factor(j, k)), factor(j, k), acc, dtype), dtype)  # fmt: skip
                diagonal = call_intrinsic(b, "llvm.sqrt", d)
                kernel.store(nir.canonicalize_nan(b, diagonal, dtype), target, dtype, at(j, j))
                with kernel.loop(b.add(j, I64(1)), I64(n), 1, "i") as i:
                    s = _accumulate(kernel, I64(0), j, kernel.load(source, dtype, at(i, j)),
                                    lambda k, acc: multiply_add(kernel, b.fneg(factor(i, k)), factor(j, k), acc, dtype), dtype)  # fmt: skip
                    kernel.store(nir.canonicalize_nan(b, b.fdiv(s, diagonal), dtype), target, dtype, at(i, j))
    steps.append(P.KernelStep(kernel.name, matrices, 1, instruction.name))
    return output


def _emit_triangular_solve(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    if instruction.array_shape.dtype in NARROW:
        return _in_f32(lowering, instruction, operands, steps)
    a_shape, shape = instruction.operands[0].array_shape, instruction.array_shape
    dtype, m = shape.dtype, a_shape.dims[-1]
    attrs = instruction.attrs
    system = TriangularSystem.of(bool(attrs.get("left_side", False)), bool(attrs.get("lower", False)),
                                 str(attrs.get("transpose_a", "NO_TRANSPOSE")), bool(attrs.get("unit_diagonal", False)))  # fmt: skip
    vectors = shape.dims[-2] if system.vectors_are_rows else shape.dims[-1]
    items = vectors
    for size in shape.dims[:-2]:
        items *= size
    output = lowering.new_buffer(shape)
    if items * m == 0:
        return output
    a_strides, b_strides = row_major_strides(a_shape.dims), row_major_strides(shape.dims)
    with lowering.kernels.kernel("triangular_solve") as kernel:
        b = kernel.builder
        matrix_buffer, rhs_buffer, target = (kernel.buffer(r) for r in (operands[0], operands[1], output))  # type: ignore[arg-type]
        with kernel.loop(kernel.begin, kernel.end, 1, "vector") as item:
            batch = unravel(b, b.udiv(item, I64(vectors)), shape.dims[:-2]) if shape.rank > 2 else []
            vector = b.urem(item, I64(vectors))

            def matrix(i: ir.Value, k: ir.Value) -> ir.Value:
                index = [*batch, k, i] if system.matrix_transposed else [*batch, i, k]
                return kernel.load(matrix_buffer, dtype, ravel(b, index, a_strides))

            def element(i: ir.Value) -> ir.Value:  # offset of element i of this vector in b and x
                return ravel(b, [*batch, vector, i] if system.vectors_are_rows else [*batch, i, vector], b_strides)

            with kernel.loop(I64(0), I64(m), 1, "t") as t:
                i = t if system.forward else b.sub(I64(m - 1), t)
                start, stop = (I64(0), i) if system.forward else (b.add(i, I64(1)), I64(m))
                s = _accumulate(kernel, start, stop, kernel.load(rhs_buffer, dtype, element(i)),
                                lambda k, acc: multiply_add(kernel, b.fneg(matrix(i, k)), kernel.load(target, dtype, element(k)), acc, dtype), dtype)  # fmt: skip
                solved = s if system.unit_diagonal else b.fdiv(s, matrix(i, i))
                kernel.store(nir.canonicalize_nan(b, solved, dtype), target, dtype, element(i))
    steps.append(P.KernelStep(kernel.name, items, 16, instruction.name))
    return output


EMITTERS = family_table("linalg", globals(), prefix="_emit_")

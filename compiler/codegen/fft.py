"""fft: the passes of compiler/numerics/fft.py, one kernel each, one work item per line.

A pass reads each line of its source (complex, real for an RFFT's first pass, a half
spectrum for an IRFFT's last), writes it into its destination buffer in the algorithm's
input order, then runs the butterfly stages there in place (a power of two), or writes the
direct sums (any other length). The twiddle factors are a constant buffer computed by the
numerics module. The products and sums are the contract's complex ops (complexes_ir), so the
bits are the reference's. Correct first: fft is rare in the programs vxla runs, and a pass
is scalar code.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen import complexes_ir as cir
from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I64, constant, storage_type
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.numerics import fft as transforms
from core.dtypes import DType


class _Line:
    """Offsets of one line's elements in a buffer of `dims` (row-major): element j of the
    line through multi-index `outer` (the other dimensions) lies at base + j*stride."""

    def __init__(self, kernel: Kernel, outer: list[ir.Value], dims: tuple[int, ...], axis: int) -> None:
        strides = row_major_strides(dims)
        b = kernel.builder
        self.builder = b
        self.base = ravel(b, outer, [s for d, s in enumerate(strides) if d != axis])
        self.stride = strides[axis]

    def at(self, j: ir.Value) -> ir.Value:
        return self.builder.add(self.base, self.builder.mul(j, I64(self.stride)))


def _reverse_bits(b: ir.IRBuilder, i: ir.Value, bits: int) -> ir.Value:
    reversed_ = I64(0)
    for bit in range(bits):
        taken = b.and_(b.lshr(i, I64(bit)), I64(1))
        reversed_ = b.or_(reversed_, b.shl(taken, I64(bits - 1 - bit)))
    return reversed_


def _emit_pass(lowering: Lowering, instruction: Instruction, step: transforms.FftPass, source: int, source_shape: ArrayShape,
               dtype: DType, steps: list[P.Step]) -> tuple[int, tuple[int, ...]]:  # fmt: skip
    """One pass; returns the destination buffer and its dimensions."""
    n, axis = step.length, step.axis
    dims = tuple(n if d == axis else size for d, size in enumerate(source_shape.dims))
    destination = lowering.new_buffer(ArrayShape.of(dtype, dims))
    outer_dims = tuple(size for d, size in enumerate(dims) if d != axis)
    lines = 1
    for size in outer_dims:
        lines *= size
    if lines * n == 0:
        return destination, dims
    table = transforms.twiddle_table(n, dtype, step.inverse)
    table_buffer = lowering.constant_buffer(ArrayShape.of(dtype, (n,)), table.tobytes(), "twiddles")
    component = dtype.component
    with lowering.kernels.kernel("fft_pass") as kernel:
        b = kernel.builder
        src, dst, twiddles = kernel.buffer(source), kernel.buffer(destination), kernel.buffer(table_buffer)
        with kernel.work_items(lines, "line") as line:
            outer = unravel(b, line, outer_dims) if outer_dims else []
            read, write = _Line(kernel, outer, source_shape.dims, axis), _Line(kernel, outer, dims, axis)

            def load_input(j: ir.Value) -> ir.Value:
                if step.real_input:
                    real = kernel.load(src, component, read.at(j))
                    return nir.make_complex(b, real, constant(real.type, 0.0), dtype)
                if not step.hermitian_input:
                    return kernel.load(src, dtype, read.at(j))
                stored = b.icmp_unsigned("<=", j, I64(n // 2))
                held = kernel.load(src, dtype, read.at(b.select(stored, j, b.sub(I64(n), j))))
                real, imag = nir.complex_parts(b, held, dtype)
                imag = b.select(stored, imag, b.fneg(imag))
                real_only = b.icmp_unsigned("==", j, I64(0))
                if n % 2 == 0:
                    real_only = b.or_(real_only, b.icmp_unsigned("==", j, I64(n // 2)))
                return nir.make_complex(b, real, b.select(real_only, constant(imag.type, 0.0), imag), dtype)

            if transforms.is_power_of_two(n):
                _radix_2(kernel, load_input, write, dst, twiddles, n, dtype)
            else:
                _direct(kernel, load_input, write, dst, twiddles, n, dtype)
            if step.inverse:
                with kernel.loop(I64(0), I64(n), 1, "scale") as i:
                    real, imag = nir.complex_parts(b, kernel.load(dst, dtype, write.at(i)), dtype)
                    size = constant(real.type, float(n))
                    kernel.store(nir.make_complex(b, b.fdiv(real, size), b.fdiv(imag, size), dtype), dst, dtype, write.at(i))
    steps.append(P.KernelStep(kernel.name, lines, 1, instruction.name))
    return destination, dims


def _radix_2(kernel: Kernel, load_input, write: _Line, dst: ir.Value, twiddles: ir.Value, n: int, dtype: DType) -> None:  # noqa: ANN001 - a closure
    b = kernel.builder
    with kernel.loop(I64(0), I64(n), 1, "reorder") as i:
        kernel.store(load_input(_reverse_bits(b, i, n.bit_length() - 1)), dst, dtype, write.at(i))
    span = 2
    while span <= n:
        half = span // 2
        with kernel.loop(I64(0), I64(n // span), 1, "group") as group, kernel.loop(I64(0), I64(half), 1, "butterfly") as j:
            w = kernel.load(twiddles, dtype, b.mul(j, I64(n // span)))
            even_at = write.at(b.add(b.mul(group, I64(span)), j))
            odd_at = b.add(even_at, I64(half * write.stride))
            even = kernel.load(dst, dtype, even_at)
            t = cir.binary(b, "multiply", w, kernel.load(dst, dtype, odd_at), dtype)
            kernel.store(cir.binary(b, "add", even, t, dtype), dst, dtype, even_at)
            kernel.store(cir.binary(b, "subtract", even, t, dtype), dst, dtype, odd_at)
        span *= 2


def _direct(kernel: Kernel, load_input, write: _Line, dst: ir.Value, twiddles: ir.Value, n: int, dtype: DType) -> None:  # noqa: ANN001 - a closure
    b = kernel.builder
    held = storage_type(dtype)
    slot = kernel.alloca(held)
    with kernel.loop(I64(0), I64(n), 1, "k") as k:
        b.store(constant(held, 0), slot)  # +0 + 0i
        with kernel.loop(I64(0), I64(n), 1, "j") as j:
            w = kernel.load(twiddles, dtype, b.urem(b.mul(j, k), I64(n)))
            product = cir.binary(b, "multiply", w, load_input(j), dtype)
            b.store(cir.binary(b, "add", b.load(slot), product, dtype), slot)
        kernel.store(b.load(slot), dst, dtype, write.at(k))


def _emit_take(lowering: Lowering, instruction: Instruction, source: int, source_dims: tuple[int, ...], dtype: DType,
               shape: ArrayShape, steps: list[P.Step]) -> int:  # fmt: skip
    """A buffer of `shape` holding the source's elements at the same multi-indices (the
    source is at least as large in every dimension): an RFFT's first n//2+1 values, or the
    real parts of an IRFFT's lines."""
    output = lowering.new_buffer(shape)
    if shape.element_count == 0:
        return output
    source_strides = row_major_strides(source_dims)
    with lowering.kernels.kernel("fft_take") as kernel:
        b = kernel.builder
        src, dst = kernel.buffer(source), kernel.buffer(output)
        with kernel.work_items(shape.element_count, "element") as element:
            value = kernel.load(src, dtype, ravel(b, unravel(b, element, shape.dims), source_strides))
            if not shape.dtype.is_complex:
                value = nir.complex_parts(b, value, dtype)[0]
            kernel.store(value, dst, shape.dtype, element)
    steps.append(P.KernelStep(kernel.name, shape.element_count, 1024, instruction.name))
    return output


def _emit_fft(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    fft_type = str(instruction.attrs["fft_type"])
    lengths = tuple(instruction.attrs["fft_length"])  # type: ignore[arg-type]
    operand, result = instruction.operands[0].array_shape, instruction.array_shape
    dtype = result.dtype if fft_type == "RFFT" else operand.dtype
    if result.element_count == 0:
        return lowering.new_buffer(result)
    current, shape = operands[0], operand
    assert isinstance(current, int)
    passes = transforms.pass_axes(fft_type, operand.rank, lengths)
    for step in passes:
        current, dims = _emit_pass(lowering, instruction, step, current, shape, dtype, steps)
        shape = ArrayShape.of(dtype, dims)
        if step.real_input and len(passes) > 1:
            kept = ArrayShape.of(dtype, (*dims[:-1], step.length // 2 + 1))
            current, shape = _emit_take(lowering, instruction, current, dims, dtype, kept, steps), kept
    if shape.dims != result.dims or shape.dtype != result.dtype:
        current = _emit_take(lowering, instruction, current, shape.dims, dtype, result, steps)
    return current


EMITTERS = family_table("fft", globals(), prefix="_emit_")

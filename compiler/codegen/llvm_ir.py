"""The LLVM IR idioms every emitter shares, defined once: the scalar types, how an element of
each HLO type is held, vector types, constants, intrinsic calls and counted loops.

Elements are held as their storage type: f32 and f64 as float and double, pred as i8, f16
and bf16 as their i16 bits (all their arithmetic goes through f32 with explicit rounding,
numerics_ir.py), integers as iN of their width, s4 and u4 as an i8 holding the value sign- or
zero-extended (every op that makes one keeps only its low 4 bits, numerics_ir.hold_sub_byte).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llvmlite import ir

from core.dtypes import F32, F64, DType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I128 = ir.IntType(128)
FLOAT = ir.FloatType()
DOUBLE = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def storage_type(dtype: DType) -> ir.Type:
    """The IR scalar type that holds one element of `dtype`."""
    if dtype is F32:
        return FLOAT
    if dtype is F64:
        return DOUBLE
    return ir.IntType(dtype.storage_bits)  # pred, s4 and u4 are 8 bits wide; f16 and bf16 their 16


def vector_of(element: ir.Type, width: int) -> ir.Type:
    """`element`, or a vector of `width` of them (width 1 means scalar)."""
    return element if width == 1 else ir.VectorType(element, width)


def shaped_like(like: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it with as many lanes as `like` has."""
    return ir.VectorType(element, like.count) if isinstance(like, ir.VectorType) else element


def scalar_type(type_: ir.Type) -> ir.Type:
    """The element type of a vector type; a scalar type itself."""
    return type_.element if isinstance(type_, ir.VectorType) else type_


def width_of(value: ir.Value) -> int:
    """The lanes of a value: its vector length, 1 for a scalar."""
    return value.type.count if isinstance(value.type, ir.VectorType) else 1


def constant(type_: ir.Type, value: int | float) -> ir.Constant:
    """A constant of a scalar or vector type (a vector gets the value in every lane).
    Integers may be given as Python ints of any sign: they are wrapped to the width, since
    the IR parser wants signed decimal literals."""
    element = scalar_type(type_)
    if isinstance(element, ir.IntType):
        value = int(value) & ((1 << element.width) - 1)
        if value >> (element.width - 1):
            value -= 1 << element.width
    scalar = ir.Constant(element, value)
    return ir.Constant(type_, [scalar] * type_.count) if isinstance(type_, ir.VectorType) else scalar


def intrinsic_suffix(type_: ir.Type) -> str:
    """The overload suffix of an intrinsic name for `type_`, as LLVM spells it (v8f32, i64)."""
    if isinstance(type_, ir.VectorType):
        return f"v{type_.count}{intrinsic_suffix(type_.element)}"
    if isinstance(type_, ir.IntType):
        return f"i{type_.width}"
    if isinstance(type_, ir.FloatType):
        return "f32"
    if isinstance(type_, ir.DoubleType):
        return "f64"
    raise TypeError(f"no intrinsic suffix for {type_}")


def declare_intrinsic(module: ir.Module, name: str, return_type: ir.Type, arg_types: list[ir.Type]) -> ir.Function:
    """The declaration of LLVM intrinsic `name` in `module`, made once."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(return_type, arg_types), name)


def call_intrinsic(builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Calls the overloaded intrinsic `name` (e.g. "llvm.fma") on `args`; it is overloaded on,
    and returns, the first argument's type."""
    type_ = args[0].type
    function = declare_intrinsic(builder.module, f"{name}.{intrinsic_suffix(type_)}", type_, [a.type for a in args])
    return builder.call(function, args)


def splat(builder: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """The scalar `value` in every one of `lanes` lanes: an insert into lane 0 and a
    shuffle of that lane everywhere (what LLVM matches to a broadcast)."""
    vector_type = ir.VectorType(value.type, lanes)
    single = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value, ir.Constant(ir.IntType(64), 0))
    return builder.shuffle_vector(single, ir.Constant(vector_type, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))


def gather(builder: ir.IRBuilder, table: ir.Value, index: ir.Value, element: ir.Type) -> ir.Value:
    """table[index[i]] in every lane i of the vector `index` (i64 lanes, each in range; `table`
    a global or any pointer to elements), as
    one llvm.masked.gather: a gather instruction where the target has one (AVX2, AVX-512,
    SVE), scalar loads elsewhere. The addresses are built as integers, since llvmlite does
    not type a getelementptr over a vector of indices."""
    lanes = index.type.count
    i64_lanes = ir.VectorType(ir.IntType(64), lanes)
    base = splat(builder, builder.ptrtoint(table, ir.IntType(64)), lanes)
    size = ir.Constant(i64_lanes, [_element_bytes(element)] * lanes)
    addresses = builder.inttoptr(builder.add(base, builder.mul(index, size)), ir.VectorType(ir.PointerType(), lanes))
    result = ir.VectorType(element, lanes)
    mask = ir.Constant(ir.VectorType(ir.IntType(1), lanes), [1] * lanes)
    name = f"llvm.masked.gather.{intrinsic_suffix(result)}.v{lanes}p0"
    function = declare_intrinsic(builder.module, name, result, [addresses.type, ir.IntType(32), mask.type, result])
    return builder.call(function, [addresses, ir.Constant(ir.IntType(32), _element_bytes(element)), mask, ir.Constant(result, None)])


def lanes_below(builder: ir.IRBuilder, count: ir.Value, lanes: int) -> ir.Value:
    """The mask <lanes x i1> whose lane i is i < `count` (an i64, any value: none below 0,
    all past `lanes`)."""
    lane_type = ir.VectorType(I64, lanes)
    return builder.icmp_signed("<", ir.Constant(lane_type, list(range(lanes))), splat(builder, count, lanes))


def masked_load(builder: ir.IRBuilder, pointer: ir.Value, vector_type: ir.VectorType, mask: ir.Value) -> ir.Value:
    """The lanes of `mask` loaded from consecutive elements at `pointer`, +0 in the others,
    which are never read (llvm.masked.load: a masked move on AVX and AVX-512, scalar loads
    elsewhere)."""
    name = f"llvm.masked.load.{intrinsic_suffix(vector_type)}.p0"
    function = declare_intrinsic(builder.module, name, vector_type, [PTR, I32, mask.type, vector_type])
    return builder.call(function, [pointer, I32(1), mask, ir.Constant(vector_type, None)])


def masked_store(builder: ir.IRBuilder, value: ir.Value, pointer: ir.Value, mask: ir.Value) -> None:
    """Stores the lanes of `mask` of `value` to consecutive elements at `pointer`; the other
    elements are not touched (llvm.masked.store)."""
    name = f"llvm.masked.store.{intrinsic_suffix(value.type)}.p0"
    function = declare_intrinsic(builder.module, name, VOID, [value.type, PTR, I32, mask.type])
    builder.call(function, [value, pointer, I32(1), mask])


def _element_bytes(element: ir.Type) -> int:
    return element.width // 8 if isinstance(element, ir.IntType) else {"double": 8, "float": 4}[str(element)]


class _FunctionPointer:
    """A function's address held in a value, with the function's type: what llvmlite reads
    from a callee (with opaque pointers the call site alone carries the type)."""

    def __init__(self, pointer: ir.Value, function_type: ir.FunctionType) -> None:
        self.pointer = pointer
        self.type = pointer.type
        self.function_type = function_type

    def get_reference(self) -> str:
        return self.pointer.get_reference()


def call_pointer(builder: ir.IRBuilder, pointer: ir.Value, function_type: ir.FunctionType, args: list[ir.Value]) -> ir.Value:
    """Calls the function at `pointer` (an address loaded from memory)."""
    return builder.call(_FunctionPointer(pointer, function_type), args)


@contextmanager
def counted_loop(builder: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: int = 1, name: str = "i") -> Iterator[ir.Value]:
    """for (i = start; i < stop; i += step): yields i (an i64) with the builder in the loop
    body, which the caller emits; leaves the builder after the loop."""
    preheader = builder.block
    header = builder.append_basic_block(f"{name}.header")
    body = builder.append_basic_block(f"{name}.body")
    exit_block = builder.append_basic_block(f"{name}.exit")
    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64, name=name)
    index.add_incoming(start, preheader)
    builder.cbranch(builder.icmp_signed("<", index, stop), body, exit_block)
    builder.position_at_end(body)
    yield index
    following = builder.add(index, I64(step), name=f"{name}.next")
    index.add_incoming(following, builder.block)
    builder.branch(header)
    builder.position_at_end(exit_block)

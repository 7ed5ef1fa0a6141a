"""Building kernels in LLVM IR.

Every kernel has one signature, `void kernel(ptr slots, i64 begin, i64 end)`: `slots` holds a
pointer per buffer the kernel touches, in the order the kernel first asked for them (the
step's `buffers`), and the kernel computes its work items [begin, end). Since a kernel names
no buffer of the plan, the kernels of identical layers are the same text: a kernel whose text
equals an earlier one's is dropped and its steps call the earlier one, so LLVM optimizes and
generates each distinct kernel once. Kernels are internal: the plan's entry (native_plan.py),
the one exported function, calls them, and `KernelModule.export` wraps it so it always runs
with the contract's floating-point environment (round to nearest, no flush-to-zero, no
denormals-are-zero; set as the target row says, fp_environment.py) and restores the caller's
environment afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.fp_environment import PINS
from compiler.codegen.kernel_library import LibraryUse
from compiler.codegen.llvm_ir import (
    I8,
    I64,
    PTR,
    VOID,
    counted_loop,
    storage_type,
    vector_of,
)
from compiler.config import CompilerConfig
from core.dtypes import DType

KERNEL_TYPE = ir.FunctionType(VOID, [PTR, I64, I64])

@dataclass
class KernelModule:
    """The LLVM module being built: kernels, constants and helper functions."""

    config: CompilerConfig
    module: ir.Module = field(default_factory=lambda: ir.Module(name="vxla"))
    # The distinct kernels in the module, in the order they were defined.
    kernel_names: list[str] = field(default_factory=list)
    # The functions compiled as units of their own when the module is split into parts
    # (partition.py): every distinct kernel, and the entry's pieces (native_plan.py), in the
    # order they were finished; `on_unit` is told of each then.
    units: list[str] = field(default_factory=list)
    unit_names: set[str] = field(default_factory=set)
    on_unit: Callable[[str], None] | None = None
    # The buffers each kernel step passes as its slots, by the name the kernel was given
    # (filled when a kernel is finished).
    kernel_buffers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # A dropped kernel's name -> the earlier kernel of the same text that its steps call.
    kernel_aliases: dict[str, str] = field(default_factory=dict)
    # The kernel libraries the kernels call, in the order of first use; `on_library` is told
    # of each then.
    libraries: list[LibraryUse] = field(default_factory=list)
    on_library: Callable[[LibraryUse], None] | None = None
    _kernel_texts: dict[str, str] = field(default_factory=dict)
    _printed: dict[str, str] = field(default_factory=dict)
    # Names taken so far (every name ends with its number: `unique`).
    counter: int = 0

    def __post_init__(self) -> None:
        self.module.triple = self.config.triple

    def ir_text(self) -> str:
        """The module's LLVM IR: its header, every global (`global_text`), its metadata."""
        lines = [self.global_text(value) for value in self.module.globals.values()]
        return "\n".join(self.header_lines() + lines + self.metadata_lines()) + "\n"

    def header_lines(self) -> list[str]:
        """The IR text before the globals: the module's name, triple and data layout, and
        its identified types."""
        module = self.module
        head = [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"', f'target datalayout = "{module.data_layout}"', ""]
        return head + [t.get_declaration() for t in module.get_identified_types().values()]

    def metadata_lines(self) -> list[str]:
        """The IR text after the globals: named and numbered metadata."""
        return self.module._get_metadata_lines()

    def global_text(self, value: ir.GlobalValue) -> str:
        """A global's IR text. Every function carries "no-builtins": otherwise LLVM turns
        fill and copy loops into calls to the host's memset/memcpy, symbols the object must
        not depend on (llvmlite cannot spell this string attribute, so it is added here)."""
        text = self._printed.get(value.name) or str(value)
        if not text.startswith("define "):
            return text
        first, newline, rest = text.partition("\n")
        return f'{first} "no-builtins"{newline}{rest}'

    def unique(self, hint: str) -> str:
        self.counter += 1
        clean = "".join(c if c.isalnum() else "_" for c in hint)
        return f"{clean}_{self.counter}"

    def constant_bytes(self, symbol: str, data: bytes) -> ir.GlobalVariable:
        """An exported, read-only global holding `data` (a constant buffer of the plan)."""
        type_ = ir.ArrayType(I8, max(len(data), 1))
        return self.global_constant(symbol, type_, ir.Constant(type_, bytearray(data or b"\0")))

    def global_constant(self, name: str, type_: ir.Type, value: ir.Constant) -> ir.GlobalVariable:
        variable = ir.GlobalVariable(self.module, type_, name)
        variable.global_constant = True
        variable.initializer = value
        variable.linkage = "internal" if name.startswith("vxla.") else ""
        variable.align = P.BUFFER_ALIGNMENT
        return variable

    @contextmanager
    def kernel(self, hint: str) -> Iterator[Kernel]:
        """Defines a kernel (an internal function the plan's entry calls, compiler/codegen/
        native_plan.py); yields its body builder positioned in the entry block. Kernels are
        never inlined into the entry: one function of every step's code would cost LLVM
        more time than it saves at run time."""
        name = self.unique(f"k_{hint}")
        body = ir.Function(self.module, KERNEL_TYPE, name)
        body.linkage = "internal"
        body.attributes.add("nounwind")
        body.attributes.add("noinline")
        kernel = Kernel(self, body)
        yield kernel
        kernel.finish()
        self.kernel_buffers[name] = tuple(kernel._pointers)
        # The name appears first in the define line: the text without it is the kernel.
        text = str(body)
        first = self._kernel_texts.setdefault(text.replace(name, "", 1), name)
        if first == name:
            self.kernel_names.append(name)
            self._printed[name] = text  # a finished kernel never changes: printed once
        else:
            del self.module.globals[name]
            self.kernel_aliases[name] = first
        kernel.name = name
        kernel.finished = True
        if first == name:
            self.add_unit(name)

    @contextmanager
    def library_function(self, name: str, function_type: ir.FunctionType) -> Iterator[Kernel]:
        """Defines the exported function `name` of a kernel library (kernel_library.py): a
        body built as a kernel's is, over the arguments of `function_type`."""
        body = ir.Function(self.module, function_type, name)
        body.attributes.add("nounwind")
        kernel = Kernel(self, body)
        yield kernel
        kernel.finish()
        kernel.name = name
        kernel.finished = True

    def use_library(self, library: LibraryUse, symbol: str, function_type: ir.FunctionType) -> ir.Function:
        """The declaration of `library`'s function `symbol`, which this module's kernels call;
        the library's object (compiled once per target, kernel_library.py) joins the
        program's objects."""
        if library.name not in {used.name for used in self.libraries}:
            self.libraries.append(library)
            if self.on_library is not None:
                self.on_library(library)
        existing = self.module.globals.get(symbol)
        return existing if existing is not None else ir.Function(self.module, function_type, symbol)

    def add_unit(self, name: str) -> None:
        """Records the finished function `name` as a unit of its own (see `units`)."""
        self.units.append(name)
        self.unit_names.add(name)
        if self.on_unit is not None:
            self.on_unit(name)

    def kernel_of(self, name: str) -> str:
        """The kernel a step of the kernel named `name` calls (itself, or the earlier
        kernel of the same text)."""
        return self.kernel_aliases.get(name, name)

    def export(self, name: str, body: ir.Function) -> None:
        """Exports `body` as `name`: a function of the same type that runs it inside the
        contract's floating-point environment, restores the caller's environment afterwards
        and returns what the body returns."""
        wrapper = ir.Function(self.module, body.function_type, name)
        wrapper.attributes.add("nounwind")
        builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
        restore = PINS[self.config.architecture.fp_environment](self.module, builder)
        result = builder.call(body, list(wrapper.args))
        restore(builder)
        if isinstance(body.function_type.return_type, ir.VoidType):
            builder.ret_void()
        else:
            builder.ret(result)


class Kernel:
    """One kernel body under construction.

    Buffer pointers and stack slots go into a prologue block that has its own builder, so
    they can be added at any time; `finish` joins the prologue to the body."""

    def __init__(self, owner: KernelModule, function: ir.Function) -> None:
        self.owner = owner
        self.function = function
        # A kernel's arguments; a library function (`KernelModule.library_function`) has
        # its own and reads them from `function.args`.
        self.slots, self.begin, self.end = function.args if function.function_type == KERNEL_TYPE else (None, None, None)
        self.prologue = function.append_basic_block("prologue")
        self._prologue_builder = ir.IRBuilder(self.prologue)
        self.entry = function.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self._pointers: dict[int, ir.Value] = {}
        self.name = ""
        self.finished = False

    @property
    def config(self) -> CompilerConfig:
        return self.owner.config

    def finish(self) -> None:
        self.builder.ret_void()
        self._prologue_builder.branch(self.entry)

    def buffer(self, buffer_id: int) -> ir.Value:
        """The pointer to buffer `buffer_id`: the kernel's next slot the first time it is
        asked for (loaded once, in the prologue)."""
        if buffer_id not in self._pointers:
            builder = self._prologue_builder
            number = len(self._pointers)
            slot = builder.gep(self.slots, [I64(number)], source_etype=PTR)
            self._pointers[buffer_id] = builder.load(slot, typ=PTR, name=f"slot{number}")
        return self._pointers[buffer_id]

    def element_pointer(self, base: ir.Value, element: ir.Type, index: ir.Value) -> ir.Value:
        return self.builder.gep(base, [index], source_etype=element)

    def load(self, base: ir.Value, dtype: DType, index: ir.Value, width: int = 1) -> ir.Value:
        """Loads `width` consecutive elements starting at `index` (see `alignment`)."""
        element = storage_type(dtype)
        pointer = self.element_pointer(base, element, index)
        return self.builder.load(pointer, typ=vector_of(element, width), align=self.alignment(dtype))

    def store(self, value: ir.Value, base: ir.Value, dtype: DType, index: ir.Value) -> None:
        pointer = self.element_pointer(base, storage_type(dtype), index)
        self.builder.store(value, pointer, align=self.alignment(dtype))

    def alignment(self, dtype: DType) -> int:
        """The alignment a load or store of `dtype` elements may assume. Every buffer starts
        aligned (plan.BUFFER_ALIGNMENT) and elements sit at multiples of their size, but CPU
        vector loads start at any element, so CPU targets assume nothing (they load unaligned
        at full speed). A GPU thread loads scalars, and its backend may split a load it may
        not assume aligned into single bytes: the target row says which (element_aligned_loads)."""
        return dtype.storage_bits // 8 if self.config.architecture.element_aligned_loads else 1

    @contextmanager
    def loop(self, start: ir.Value, stop: ir.Value, step: int = 1, name: str = "i") -> Iterator[ir.Value]:
        """for (i = start; i < stop; i += step): yields i; the body is emitted by the caller."""
        with counted_loop(self.builder, start, stop, step, name) as index:
            yield index

    @contextmanager
    def work_items(self, count: int, name: str = "item") -> Iterator[ir.Value]:
        """The kernel's work items [begin, end) of a step with `count` items: yields the item
        index; the body is emitted by the caller.

        A one-item step gets its body once, guarded by begin < end, and no loop. Such a body
        often reads only fixed addresses (a reduce to a scalar), and LLVM's loop vectorizer
        handed a loop whose whole body is loop-invariant spends time exponential in the depth
        of the body's expression graph: the f16 rounding steps of a reduce tree over a few
        elements took it minutes."""
        if count != 1:
            with self.loop(self.begin, self.end, 1, name) as index:
                yield index
            return
        with self.builder.if_then(self.builder.icmp_signed("<", self.begin, self.end)):
            yield self.begin

    def alloca(self, type_: ir.Type, count: int = 1, name: str = "") -> ir.Value:
        """Stack memory allocated in the prologue (so loops do not grow the stack)."""
        return self._prologue_builder.alloca(type_, size=I64(count) if count != 1 else None, name=name)


def unravel(builder: ir.IRBuilder, linear: ir.Value, dims: tuple[int, ...]) -> list[ir.Value]:
    """Row-major multi-index of a linear index (divisions by constants)."""
    indices: list[ir.Value] = [I64(0)] * len(dims)
    remaining = linear
    for axis in range(len(dims) - 1, -1, -1):
        size = dims[axis]
        if axis == 0:
            indices[axis] = remaining
        elif size == 1:
            indices[axis] = I64(0)
        else:
            indices[axis] = builder.urem(remaining, I64(size))
            remaining = builder.udiv(remaining, I64(size))
    return indices


def ravel(builder: ir.IRBuilder, indices: list[ir.Value], strides: list[int]) -> ir.Value:
    """Linear offset sum(indices[i] * strides[i])."""
    total: ir.Value | None = None
    for index, stride in zip(indices, strides, strict=True):
        if stride == 0:
            continue
        term = index if stride == 1 else builder.mul(index, I64(stride))
        total = term if total is None else builder.add(total, term)
    return total if total is not None else I64(0)


def pad_source(builder: ir.IRBuilder, multi: list[ir.Value], padding: object, dims: tuple[int, ...]) -> tuple[ir.Value, list[ir.Value]]:
    """Where a pad's output position `multi` reads its operand: (whether it is an operand
    element, not padding or an interior hole; the operand position, 0 where it is not)."""
    inside = ir.Constant(ir.IntType(1), 1)
    positions = []
    for m, p, size in zip(multi, padding, dims, strict=True):  # type: ignore[call-overload]
        shifted = builder.sub(m, I64(p.low))
        step = p.interior + 1
        position = builder.sdiv(shifted, I64(step)) if step > 1 else shifted
        on_grid = builder.icmp_signed("==", builder.srem(shifted, I64(step)), I64(0)) if step > 1 else ir.Constant(ir.IntType(1), 1)
        in_range = builder.and_(builder.icmp_signed(">=", shifted, I64(0)), builder.icmp_signed("<", position, I64(size)))
        inside = builder.and_(inside, builder.and_(on_grid, in_range))
        positions.append(position)
    return inside, [builder.select(inside, p, I64(0)) for p in positions]


def row_major_strides(dims: tuple[int, ...]) -> list[int]:
    strides = [1] * len(dims)
    for axis in range(len(dims) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * dims[axis + 1]
    return strides

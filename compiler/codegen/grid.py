"""The plan's kernels as grid kernels: the skeleton of every GPU target.

A CPU target runs a kernel's work items in loops on worker threads (native_plan.py); a GPU
runs them as a grid, one thread per work item. For each distinct kernel of the module this
adds one grid body,

    void vxla.grid.<kernel>(ptr slots, i64 extent, i64 block, i64 block_size, i64 thread)

which computes work item `block * block_size + thread` (nothing when that is `extent` or
more) by calling the kernel, unchanged, for [item, item + 1). The element arithmetic is
therefore the kernel's own, the same IR the CPU targets compile; only the loop around it
differs. A kernel computes each work item from its operands alone, at any split (the plan's
contract, which the schedule-perturbation tests hold every kernel to by running each item on
any worker in any order), so a grid gives the same bits at any block size and in any order
its threads run.

Where the indices come from is the one thing that differs between GPU targets, and between
a GPU and the host emulation that tests the grid logic without one: a `GridTarget` defines,
around each body, the exported entry the runtime launches (compiler/codegen/nvptx.py reads
NVIDIA's special registers; compiler/runtime/emulated_grid.py loops over blocks and threads
on the host). A third target (AMD's amdgcn) would plug in there, with its code-object
linker in compiler/codegen/backend.py.

Copies, while loops and conditionals are the runtime's (compiler/runtime/grid_runner.py): it
launches each kernel step as ceil(extent / GRID_BLOCK_SIZE) blocks of GRID_BLOCK_SIZE threads
(plan.py owns the launch convention: the block size and the entries' names), and
stages the copies that would overwrite a source before reading it through arena space
reserved here, as the CPU entry does.
"""

from __future__ import annotations

from typing import Protocol

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.kernel import KERNEL_TYPE, KernelModule
from compiler.codegen.llvm_ir import I64, PTR, VOID, counted_loop

GRID_BODY_TYPE = ir.FunctionType(VOID, [PTR, I64, I64, I64, I64])
# The parameters of every exported grid entry on a device: the step's slot table and its extent.
GRID_ENTRY_TYPE = ir.FunctionType(VOID, [PTR, I64])
HOST_ENTRY_TYPE = ir.FunctionType(VOID, [PTR, I64, I64, I64])


class GridTarget(Protocol):
    """What a GPU target (or the host emulation) adds around each grid body."""

    def define_entry(self, kernels: KernelModule, symbol: str, body: ir.Function) -> None:
        """Defines the exported function `symbol` that runs `body` for its thread."""
        ...


def grid_kernels(plan: P.Plan) -> list[str]:
    """The kernels the plan's steps launch (loops and branches included), each once, sorted
    by name: the module's grid entries."""
    return sorted({step.kernel for step in P.walk(plan.steps) if isinstance(step, P.KernelStep)})


def emit_grid(kernels: KernelModule, plan: P.Plan, target: GridTarget) -> None:
    """Adds a grid body and `target`'s entry for every kernel the plan launches, and reserves
    the arena space copies stage through."""
    staging = P.staging_bytes(plan)
    if staging:
        plan.arena_bytes = P.aligned_size(plan.arena_bytes) + staging
    for name in grid_kernels(plan):
        target.define_entry(kernels, P.grid_symbol(name), _grid_body(kernels, name))


def work_item(builder: ir.IRBuilder, block: ir.Value, block_size: ir.Value, thread: ir.Value) -> ir.Value:
    """The work item of a thread: blocks cover consecutive ranges of block_size items."""
    return builder.add(builder.mul(block, block_size), thread, name="item")


def _grid_body(kernels: KernelModule, name: str) -> ir.Function:
    kernel = kernels.module.globals[name]
    body = ir.Function(kernels.module, GRID_BODY_TYPE, f"vxla.grid.{name}")
    body.linkage = "internal"
    body.attributes.add("nounwind")
    slots, extent, block, block_size, thread = body.args
    builder = ir.IRBuilder(body.append_basic_block("entry"))
    item = work_item(builder, block, block_size, thread)
    with builder.if_then(builder.icmp_signed("<", item, extent)):
        builder.call(kernel, [slots, item, builder.add(item, I64(1))])
    builder.ret_void()
    assert kernel.function_type == KERNEL_TYPE
    return body


class HostGrid:
    """The host emulation's grid entries, `void (ptr slots, i64 extent, i64 blocks, i64
    block_size)`: every thread of every block run on the calling CPU thread, in descending
    order (block, then thread), calling the grid body with what the device's special
    registers would give (compiler/runtime/emulated_grid.py runs them)."""

    def define_entry(self, kernels: KernelModule, symbol: str, body: ir.Function) -> None:
        assert body.function_type == GRID_BODY_TYPE
        entry = ir.Function(kernels.module, HOST_ENTRY_TYPE, symbol)
        entry.attributes.add("nounwind")
        slots, extent, blocks, block_size = entry.args
        builder = ir.IRBuilder(entry.append_basic_block("entry"))
        with counted_loop(builder, I64(0), blocks, 1, "b") as block_step:
            block = builder.sub(builder.sub(blocks, I64(1)), block_step)
            with counted_loop(builder, I64(0), block_size, 1, "t") as thread_step:
                thread = builder.sub(builder.sub(block_size, I64(1)), thread_step)
                builder.call(body, [slots, extent, block, block_size, thread])
        builder.ret_void()

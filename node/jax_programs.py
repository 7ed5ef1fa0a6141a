"""JAX functions and JAX's program files as vxla programs, on the client side.

With the optional extra (`pip install 'vxla[jax]'`), a submitter hands the SDK a JAX
function and example arguments: `export_function` lowers it to HLO text (the program that is
hashed and run), flattens the arguments in parameter order, and keeps the output pytree so
results come back in the function's own structure. `hlo_text_of` turns the other forms JAX
writes, StableHLO text (`jax.jit(f).lower(...).as_text()`) and serialized `jax.export`
artifacts, into HLO text through jaxlib.

JAX is never needed to run or verify a program: nodes see only HLO text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.errors import NodeError

if TYPE_CHECKING:  # numpy is imported where JAX is: `vxla --help` reads JAX_EXTRA
    import numpy as np

JAX_EXTRA = "pip install 'vxla[jax]'"


class JaxNotInstalled(NodeError):
    """JAX (the optional extra) is needed and missing."""


class ProgramFormatError(NodeError, ValueError):
    """Bytes that are none of HLO text, StableHLO text or a jax.export artifact."""


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise JaxNotInstalled(f"this needs JAX, the optional extra of vxla: {JAX_EXTRA}") from None
    return jax


@dataclass
class ExportedFunction:
    """A JAX function lowered for its example arguments: the HLO text, the arguments
    flattened in the module's parameter order, and the structure of its outputs."""

    hlo_text: str
    arguments: list[np.ndarray]
    output_tree: Any  # a jax PyTreeDef
    output_dtypes: list[np.dtype]

    def unflatten(self, outputs: list[np.ndarray]) -> Any:
        """The flat outputs (in the module's result order) in the function's structure, each
        of the type JAX gives it (s4 and u4 come from a node as the int8 and uint8 holding
        them)."""
        jax = _jax()
        if len(outputs) != self.output_tree.num_leaves:
            raise ValueError(f"{len(outputs)} outputs, the function returns {self.output_tree.num_leaves} arrays")
        typed = [o.astype(d) if d.name in ("int4", "uint4") else o for o, d in zip(outputs, self.output_dtypes, strict=True)]
        return jax.tree_util.tree_unflatten(self.output_tree, typed)


def export_function(function: Callable[..., Any], *arguments: Any, debug_info: bool = False) -> ExportedFunction:
    """Lowers `function(*arguments)` (any pytrees of arrays and scalars) to HLO text; one
    parameter per leaf, in jax.tree_util's flattening order, unused ones kept, each named
    after its pytree path (`params['w']` becomes `params__w__`), so a node's listings and
    pages name the inputs as the user's code does. `debug_info`: also keep JAX's metadata
    (each instruction's op_name and the file and line of the user's code that made it), so
    that errors and pictures point at that code; off by default, since it shows the node the
    submitter's file paths and function names."""
    import numpy as np

    jax = _jax()
    leaves, in_tree = jax.tree_util.tree_flatten(arguments)
    # The arrays as JAX types them (float64 becomes float32 unless x64 is on), in the
    # arguments' own structure: JAX names each parameter by its path in it.
    arrays = [np.asarray(jax.numpy.asarray(leaf)) for leaf in leaves]
    structured = jax.tree_util.tree_unflatten(in_tree, arrays)
    # Lowered for the CPU whatever devices this process has (the user's JAX settings are
    # left alone): CPU lowering is what nodes and XLA:CPU reproduce.
    lowered = jax.jit(function, keep_unused=True).trace(*structured).lower(lowering_platforms=("cpu",))
    output_shapes, output_tree = jax.tree_util.tree_flatten(jax.eval_shape(function, *structured))
    dtypes = [np.dtype(shape.dtype) for shape in output_shapes]
    text = lowered.as_text(dialect="hlo", debug_info=True)
    from compiler.api import without_debug_info

    return ExportedFunction(text if debug_info else without_debug_info(text), arrays, output_tree, dtypes)



def is_jax_program(data: bytes) -> bool:
    """Whether `data` is what only JAX reads: StableHLO text (it has a `func.func`) or a
    binary jax.export artifact. Anything else is taken as HLO text, whose parser names
    what is wrong with it, line and column."""
    if data.lstrip()[:9] == b"HloModule":
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return "func.func" in text


def hlo_text_of(data: bytes) -> str:
    """HLO text for a program file's bytes: HLO text as it is; StableHLO text or a
    serialized jax.export artifact converted by jaxlib (the extra). ProgramFormatError when
    the bytes are none of these."""
    if not is_jax_program(data):
        return data.decode("utf-8")
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    jax = _jax()
    from jax._src.lib import _jax as jaxlib  # the converter jaxlib ships (TOOLCHAIN.md)

    if text is None:
        try:
            text = jax.export.deserialize(bytearray(data)).mlir_module()
        except Exception as error:  # noqa: BLE001 - the deserializer raises many kinds
            raise ProgramFormatError(f"not a jax.export artifact ({type(error).__name__}: {error})") from None
    try:
        computation = jaxlib.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    except Exception as error:  # noqa: BLE001 - jaxlib reports MLIR errors as generic exceptions
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ProgramFormatError(f"StableHLO that jaxlib cannot convert: {first}") from None
    # Large constants printed in full: elided ones ({...}) could not be hashed or run.
    return computation.as_hlo_text(print_large_constants=True)

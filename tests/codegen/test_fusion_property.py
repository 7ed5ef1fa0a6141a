"""Random fusible graphs: chains of slices, reshapes, broadcasts, transposes, reverses, pads,
concatenates, iotas and elementwise ops over f32, f64 or s32 values of rank 0 to 4 (sizes 1 to
33), with one result, several of one shape (rank 0 included) or a sum over some dimensions.
Each is run as the fusion passes form it and as one fusion written in the text, on every
target of the host's architecture it runs and with 1, 2 and 4 threads; the LLVM backend must
give the reference's bits. VXLA_FUSION_EXAMPLES sets the number of graphs (a longer search).

This is the whole class of what loop fusion codegen has to emit: any index map the passes
can form, in flat, row and scalar loops, with a vector body and a scalar tail."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.targets import run_everywhere
from tests.codegen.test_op_families import values

DTYPES = ["f32", "f64", "s32"]
# Elements per value: large enough for vector bodies, tails and several work items.
MAX_ELEMENTS = 3000
SETTINGS = settings(max_examples=int(os.environ.get("VXLA_FUSION_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@dataclass
class Graph:
    """An HLO computation under construction: instruction lines and each value's dims."""

    dtype: str
    parameters: list[tuple[int, ...]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    dims: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def type_of(self, dims: tuple[int, ...]) -> str:
        return f"{self.dtype}[{','.join(map(str, dims))}]"

    def add(self, dims: tuple[int, ...], expression: str) -> str:
        name = f"v{len(self.dims)}"
        self.lines.append(f"{name} = {self.type_of(dims)} {expression}")
        self.dims[name] = dims
        return name

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("f")


def _count(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _factorizations(n: int, rank: int) -> list[tuple[int, ...]]:
    """Shapes of `rank` dimensions, each 1 to 33, holding n elements."""
    if rank == 0:
        return [()] if n == 1 else []
    if rank == 1:
        return [(n,)] if n <= 33 else []
    shapes: list[tuple[int, ...]] = []
    for first in range(1, min(n, 33) + 1):
        if n % first == 0:
            shapes.extend((first, *rest) for rest in _factorizations(n // first, rank - 1))
            if len(shapes) > 64:
                break
    return shapes


def _slice(draw: st.DrawFn, graph: Graph, source: str) -> str:
    parts, dims = [], []
    for size in graph.dims[source]:
        start = draw(st.integers(0, size - 1))
        limit = draw(st.integers(start + 1, size))
        stride = draw(st.integers(1, 3))
        parts.append(f"[{start}:{limit}:{stride}]")
        dims.append(-(-(limit - start) // stride))
    return graph.add(tuple(dims), f"slice({source}), slice={{{','.join(parts)}}}")


def _reshape(draw: st.DrawFn, graph: Graph, source: str) -> str:
    n = _count(graph.dims[source])
    options = [shape for rank in range(5) for shape in _factorizations(n, rank)]
    if not options:
        return source
    return graph.add(draw(st.sampled_from(options)), f"reshape({source})")


def _broadcast(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    new = draw(st.lists(st.integers(1, 9), min_size=1, max_size=max(1, 4 - len(dims))))
    if len(dims) + len(new) > 4 or _count(dims) * _count(tuple(new)) > MAX_ELEMENTS:
        return source
    rank = len(dims) + len(new)
    kept = sorted(draw(st.permutations(range(rank)))[: len(dims)])
    out, fresh = [], iter(new)
    for position in range(rank):
        out.append(dims[kept.index(position)] if position in kept else next(fresh))
    return graph.add(tuple(out), f"broadcast({source}), dimensions={{{','.join(map(str, kept))}}}")


def _transpose(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    perm = draw(st.permutations(range(len(dims))))
    return graph.add(tuple(dims[p] for p in perm), f"transpose({source}), dimensions={{{','.join(map(str, perm))}}}")


def _reverse(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    flipped = sorted(draw(st.sets(st.integers(0, max(0, len(dims) - 1)), max_size=len(dims)))) if dims else []
    return graph.add(dims, f"reverse({source}), dimensions={{{','.join(map(str, flipped))}}}")


def _pad(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    value = draw(st.sampled_from(["0", "-1.5", "inf", "nan"] if graph.is_float else ["0", "-3", "7"]))
    parts, out = [], []
    for size in dims:
        low, high, interior = draw(st.integers(-2, 3)), draw(st.integers(-2, 3)), draw(st.integers(0, 2))
        grown = size + (size - 1) * interior
        low, high = max(low, -(grown - 1)), max(high, 0)
        parts.append(f"{low}_{high}_{interior}")
        out.append(grown + low + high)
    if _count(tuple(out)) > MAX_ELEMENTS or not dims:
        return source
    fill = graph.add((), f"constant({value})")
    return graph.add(tuple(out), f"pad({source}, {fill}), padding={'x'.join(parts)}")


def _concatenate(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    if not dims:
        return source
    axis = draw(st.integers(0, len(dims) - 1))
    partners = [name for name, d in graph.dims.items() if len(d) == len(dims) and all(a == b for i, (a, b) in enumerate(zip(d, dims, strict=True)) if i != axis)]
    other = draw(st.sampled_from(partners))
    out = list(dims)
    out[axis] += graph.dims[other][axis]
    if _count(tuple(out)) > MAX_ELEMENTS:
        return source
    return graph.add(tuple(out), f"concatenate({source}, {other}), dimensions={{{axis}}}")


def _elementwise(draw: st.DrawFn, graph: Graph, source: str) -> str:
    dims = graph.dims[source]
    partners = [name for name, d in graph.dims.items() if d == dims]
    choice = draw(st.sampled_from(["binary", "unary", "scalar", "iota"]))
    if choice == "binary":
        opcode = draw(st.sampled_from(["add", "multiply", "maximum", "subtract"]))
        return graph.add(dims, f"{opcode}({source}, {draw(st.sampled_from(partners))})")
    if choice == "unary":
        unary = ["negate", "abs", "floor"] if graph.is_float else ["negate", "abs", "not"]
        return graph.add(dims, f"{draw(st.sampled_from(unary))}({source})")
    if choice == "iota" and dims:
        iota = graph.add(dims, f"iota(), iota_dimension={draw(st.integers(0, len(dims) - 1))}")
        return graph.add(dims, f"add({source}, {iota})")
    scalars = [name for name, d in graph.dims.items() if d == ()]
    scalar = draw(st.sampled_from(scalars)) if scalars else graph.add((), "constant(0.25)" if graph.is_float else "constant(3)")
    broadcast = graph.add(dims, f"broadcast({scalar}), dimensions={{}}")
    return graph.add(dims, f"multiply({source}, {broadcast})")


def _element(draw: st.DrawFn, graph: Graph, source: str) -> str:
    """One element of a value as a rank-0 value (how JAX indexes an array with integers)."""
    dims = graph.dims[source]
    starts = [draw(st.integers(0, size - 1)) for size in dims]
    one = graph.add(tuple(1 for _ in dims), f"slice({source}), slice={{{','.join(f'[{s}:{s + 1}]' for s in starts)}}}")
    return graph.add((), f"reshape({one})")


STEPS = [_slice, _reshape, _broadcast, _transpose, _reverse, _pad, _concatenate, _elementwise]


@st.composite
def dims_strategy(draw: st.DrawFn, rank: int) -> tuple[int, ...]:
    """Dims of `rank` sizes from 1 to 33, at most MAX_ELEMENTS elements in all."""
    dims: list[int] = []
    for _ in range(rank):
        dims.append(draw(st.integers(1, max(1, min(33, MAX_ELEMENTS // max(1, _count(tuple(dims))))))))
    return tuple(dims)


@st.composite
def fusible_graphs(draw: st.DrawFn) -> tuple[Graph, list[str]]:
    """A random graph of index maps and elementwise ops, and its results: a chain from the
    first parameter, each step on the value before it or, now and then, on an earlier one
    (so values are shared and joined); then one result, several of one shape, or a sum
    over some dimensions (a reduction input fusion)."""
    graph = Graph(draw(st.sampled_from(DTYPES)))
    for number in range(draw(st.integers(1, 2))):
        dims = draw(dims_strategy(draw(st.integers(1, 4) if number == 0 else st.integers(0, 4))))
        graph.parameters.append(dims)
        graph.lines.append(f"p{number} = {graph.type_of(dims)} parameter({number})")
        graph.dims[f"p{number}"] = dims
    current = "p0"
    for _ in range(draw(st.integers(3, 9))):
        arrays = sorted(name for name, d in graph.dims.items() if d) or sorted(graph.dims)
        source = current if draw(st.integers(0, 3)) else draw(st.sampled_from(arrays))
        current = draw(st.sampled_from(STEPS))(draw, graph, source)
    if current.startswith("p"):
        current = graph.add(graph.dims[current], f"negate({current})")
    ending = draw(st.integers(0, 5))
    if ending == 0:
        current = _element(draw, graph, current)  # a rank-0 result
    elif ending == 1 and graph.dims[current]:
        return graph, [_sum(draw, graph, current)]
    results = [current]
    # A second result of the same shape (multi-output), when some other value has it.
    same = [name for name, d in graph.dims.items() if d == graph.dims[current] and name != current and not name.startswith("p")]
    if same and draw(st.booleans()):
        results.append(draw(st.sampled_from(same)))
    return graph, results


def _sum(draw: st.DrawFn, graph: Graph, source: str) -> str:
    """A reduce over some dimensions of `source` (in the contract's order of additions)."""
    dims = graph.dims[source]
    reduced = sorted(draw(st.sets(st.integers(0, len(dims) - 1), min_size=1, max_size=len(dims))))
    zero = graph.add((), "constant(0)")
    kept = tuple(d for i, d in enumerate(dims) if i not in reduced)
    return graph.add(kept, f"reduce({source}, {zero}), dimensions={{{','.join(map(str, reduced))}}}, to_apply=sum")


def _module(graph: Graph, results: list[str], as_fusion: bool) -> str:
    result_shapes = [graph.type_of(graph.dims[r]) for r in results]
    root_shape = result_shapes[0] if len(results) == 1 else f"({', '.join(result_shapes)})"
    body = list(graph.lines)
    root = results[0] if len(results) == 1 else "t"
    if len(results) > 1:
        body.append(f"t = {root_shape} tuple({', '.join(results)})")
    lines = ["ROOT " + line if line.startswith(root + " = ") else line for line in body]
    scalar = graph.type_of(())
    header = f"HloModule g\nsum {{\n  a = {scalar} parameter(0)\n  b = {scalar} parameter(1)\n  ROOT s = {scalar} add(a, b)\n}}\n"
    if not as_fusion:
        return header + "ENTRY e {\n  " + "\n  ".join(lines) + "\n}\n"
    params = [f"x{n} = {graph.type_of(d)} parameter({n})" for n, d in enumerate(graph.parameters)]
    arguments = ", ".join(f"x{n}" for n in range(len(graph.parameters)))
    kind = "kInput" if " reduce(" in body[-1] else "kLoop"
    return (
        header + "fused {\n  " + "\n  ".join(lines) + "\n}\n"
        "ENTRY e {\n  " + "\n  ".join(params) + f"\n  ROOT f = {root_shape} fusion({arguments}), kind={kind}, calls=fused\n}}\n"
    )


@SETTINGS
@given(fusible_graphs(), st.booleans(), st.integers(0, 2**32 - 1))
def test_random_fusible_graphs(case: tuple[Graph, list[str]], as_fusion: bool, seed: int) -> None:
    graph, results = case
    text = _module(graph, results, as_fusion)
    rng = np.random.default_rng(seed)
    run_everywhere(text, [values(rng, graph.dtype, dims) for dims in graph.parameters])


def test_scalar_results_sliced_from_a_vector() -> None:
    """What jax.jit(lambda k: (k[0], k[1])) exports (splitting an RNG key): two rank-0
    results of one multi-output fusion, each a slice reshaped to a scalar."""
    text = """HloModule m
ENTRY main.1 {
  k.1 = f32[2]{0} parameter(0)
  slice.2 = f32[1]{0} slice(k.1), slice={[0:1]}
  squeeze.2 = f32[] reshape(slice.2)
  slice.3 = f32[1]{0} slice(k.1), slice={[1:2]}
  squeeze.3 = f32[] reshape(slice.3)
  ROOT tuple.1 = (f32[], f32[]) tuple(squeeze.2, squeeze.3)
}
"""
    run_everywhere(text, [np.array([1.5, -2.5], np.float32)])

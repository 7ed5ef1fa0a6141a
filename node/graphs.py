"""The optimized graph as a picture: what `vxla graph` writes and a node's job page shows.

Graphviz (DOT, the format XLA's own dumps use) draws the graph the compiler runs, after its
passes: each entry instruction is a box named as in the optimized graph's canonical text
(the names op-level traces and divergence reports use), with its opcode and shape. A fusion
is a dashed cluster holding the operations it fuses. Values in the execution's arena are
filled with the colour of their place in it, so values that reuse the same memory share a
colour (the label says where: `@offset`, and `(output)` for a result); inputs and constants
are not filled. A highlighted instruction (the first divergence of two traces) is red, and
the path to it from a parameter is drawn bold red.
"""

from __future__ import annotations

import shutil
from collections import deque
from dataclasses import dataclass

import graphviz

from compiler.api import (
    CompilerConfig,
    Computation,
    Instruction,
    Module,
    Plan,
    Program,
    canonical_names,
    load_config,
    optimized_plan,
)
from node.errors import NodeError

# Fill colours of arena places (light, so labels stay readable), by place order.
PALETTE = ("#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc", "#e6e6e6", "#c9daf8")
HIGHLIGHT = "#cc0000"


class GraphvizMissing(NodeError):
    """Graphviz's `dot` program is not installed: an SVG cannot be drawn (DOT text can)."""

    def __init__(self) -> None:
        super().__init__("drawing the graph needs Graphviz's dot program (Debian: apt-get install graphviz)")


def require_graphviz() -> None:
    """GraphvizMissing unless `dot` is on PATH (where the graphviz package looks): checked
    before the work a picture needs, not after it."""
    if shutil.which("dot") is None:
        raise GraphvizMissing()


class UnknownInstruction(NodeError, ValueError):
    """No entry instruction has the name asked to be highlighted; `names` are the names it
    has (so a node can refuse other wrong names without drawing again)."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


@dataclass(frozen=True)
class GraphPicture:
    """The graph's DOT text, the instructions on the highlighted path (empty without), and
    the canonical names of every entry instruction (what may be highlighted)."""

    dot: str
    path: tuple[str, ...]
    names: tuple[str, ...] = ()

    def svg(self) -> bytes:
        """The picture as SVG, drawn by Graphviz's `dot`."""
        try:
            return graphviz.Source(self.dot).pipe(format="svg")
        except graphviz.ExecutableNotFound:
            raise GraphvizMissing() from None


def graph_picture(program: Program, config: CompilerConfig | None = None, highlight: str | None = None) -> GraphPicture:
    """The optimized graph of `program` for `config` (the node's default without one), with
    the entry instruction named `highlight` (canonical name, e.g. `fusion.7`) and the path
    to it from a parameter marked; UnknownInstruction (a NodeError and a ValueError) when no entry
    instruction has that name."""
    module, plan = optimized_plan(program, config or load_config())
    return _Drawing(module, plan).draw(highlight)


class _Drawing:
    def __init__(self, module: Module, plan: Plan) -> None:
        self.module = module
        self.plan = plan
        self.entry = module.entry
        self.names = canonical_names(self.entry)
        self.by_name = {self.names[id(i)]: i for i in self.entry.instructions}
        arena_places = sorted({b.offset for b in plan.buffers if b.kind == "arena"})
        self.colour_of_place = {offset: PALETTE[n % len(PALETTE)] for n, offset in enumerate(arena_places)}
        self.buffers_of = {point.name: point.buffers for point in plan.trace_points}
        self.outputs = set(plan.outputs)

    def draw(self, highlight: str | None) -> GraphPicture:
        path: list[str] = []
        if highlight is not None:
            if highlight not in self.by_name:
                some = ", ".join(list(self.by_name)[:12])
                message = f"no instruction {highlight!r} in the optimized graph; its instructions are named as in its canonical text: {some}, ..."
                raise UnknownInstruction(message, tuple(self.by_name))
            path = self._path_to(self.by_name[highlight])
        on_path = set(path)
        legend = ("fill: the value's place in the arena (one colour, one place: memory reused); "
                  "dashed box: a fusion; red: the highlighted instruction and its path from a parameter")
        graph = graphviz.Digraph(self.module.name, graph_attr={"rankdir": "TB", "fontname": "Helvetica", "fontsize": "10",
                                                               "label": f"{self.module.name}: {legend}", "labelloc": "b"},
                                 node_attr={"shape": "box", "fontname": "Helvetica", "fontsize": "9", "style": "rounded"},
                                 edge_attr={"arrowsize": "0.6"})  # fmt: skip
        for instruction in self.entry.execution_order():
            name = self.names[id(instruction)]
            fused = self._fused(instruction)
            if fused is not None:
                self._cluster(graph, instruction, fused, highlighted=name == highlight)
            else:
                graph.node(name, self._label(instruction, name), **self._look(name, highlighted=name == highlight))
            for number, operand in enumerate(instruction.operands):
                source = self._node_of(operand)
                target = name if fused is None else self._parameter_node(name, fused, number)
                bold = self.names[id(operand)] in on_path and name in on_path
                graph.edge(source, target, **({"color": HIGHLIGHT, "penwidth": "2.2"} if bold else {}))
        return GraphPicture(graph.source, tuple(path), tuple(self.by_name))

    def _fused(self, instruction: Instruction) -> Computation | None:
        called = instruction.attrs.get("calls")
        return called if instruction.opcode == "fusion" and isinstance(called, Computation) else None

    def _node_of(self, instruction: Instruction) -> str:
        """The node an edge from `instruction` leaves: a fusion's root inside its cluster."""
        name = self.names[id(instruction)]
        fused = self._fused(instruction)
        if fused is None:
            return name
        return f"{name}/{canonical_names(fused)[id(fused.root)]}"

    def _parameter_node(self, name: str, fused: Computation, number: int) -> str:
        """The node of parameter `number` inside fusion `name`'s cluster."""
        parameter = next(p for p in fused.parameters if p.parameter_number == number)
        return f"{name}/{canonical_names(fused)[id(parameter)]}"

    def _cluster(self, graph: graphviz.Digraph, instruction: Instruction, fused: Computation, highlighted: bool) -> None:
        name = self.names[id(instruction)]
        inner = canonical_names(fused)
        look = self._look(name, highlighted)
        kind = instruction.attrs.get("kind", "")
        with graph.subgraph(name=f"cluster_{name}") as cluster:
            cluster.attr(label=f"{name} {kind}".strip() + f"\n{self._place(name)}".rstrip(), style="dashed,rounded",
                         color=HIGHLIGHT if highlighted else "#555555", penwidth="2.2" if highlighted else "1", fontsize="9")  # fmt: skip
            for op in fused.execution_order():
                node = f"{name}/{inner[id(op)]}"
                label = f"param {op.parameter_number}" if op.opcode == "parameter" else f"{op.opcode}\n{op.shape}"
                attrs = look if op is fused.root else {"style": "rounded"}
                cluster.node(node, label, **attrs)
                for operand in op.operands:
                    cluster.edge(f"{name}/{inner[id(operand)]}", node)

    def _label(self, instruction: Instruction, name: str) -> str:
        place = self._place(name)
        return f"{name}\n{instruction.opcode} {instruction.shape}" + (f"\n{place}" if place else "")

    def _place(self, name: str) -> str:
        """Where the value lives: `@offset` in the arena, or input, constant, output."""
        places = []
        for buffer_id in self.buffers_of.get(name, ()):
            buffer = self.plan.buffers[buffer_id]
            places.append(f"@{buffer.offset}" if buffer.kind == "arena" else buffer.kind)
            if buffer_id in self.outputs:
                places[-1] += " (output)"
        return " ".join(places)

    def _look(self, name: str, highlighted: bool) -> dict[str, str]:
        look = {"style": "rounded"}
        arena = [self.plan.buffers[b] for b in self.buffers_of.get(name, ()) if self.plan.buffers[b].kind == "arena"]
        if arena:
            look = {"style": "rounded,filled", "fillcolor": self.colour_of_place[arena[0].offset]}
        if highlighted:
            look |= {"color": HIGHLIGHT, "penwidth": "2.5", "fontcolor": HIGHLIGHT}
        return look

    def _path_to(self, target: Instruction) -> list[str]:
        """Canonical names from a parameter to `target` along operands: the shortest such
        path, ties broken by operand order (from a constant or an iota when no parameter
        leads there)."""
        previous: dict[int, Instruction | None] = {id(target): None}
        queue = deque([target])
        start: Instruction | None = None
        while queue:
            instruction = queue.popleft()
            if instruction.opcode == "parameter":
                start = instruction
                break
            if not instruction.operands and start is None:
                start = instruction  # a leaf that is no parameter: kept unless one is found
            for operand in instruction.operands:
                if id(operand) not in previous:
                    previous[id(operand)] = instruction
                    queue.append(operand)
        if start is None:
            start = target
        path: list[str] = []
        step: Instruction | None = start
        while step is not None:
            path.append(self.names[id(step)])
            step = previous[id(step)]
        return path

"""The optimized graph as a picture: what `vxla graph` writes and a node's job page shows.

Graphviz (DOT, the format XLA's own dumps use) draws the graph the compiler runs, after its
passes: each entry instruction is a box named as in the optimized graph's canonical text
(the names op-level traces and divergence reports use), with its opcode, shape and where
its value lives (`@offset` in the arena, `(output)` for a result). Boxes are filled by op
family, as XLA's dumps colour by op kind, so that the matrix products and the repeated
layers around them stand out; inputs and constants are not filled. A fusion is a dashed
box holding the operations it fuses. Where the HLO's metadata names the user's source
(JAX's op_name and file:line), it is each box's tooltip. A highlighted instruction (the
first divergence of two traces) is red, and the path to it from a parameter is drawn bold
red.
"""

from __future__ import annotations

import html
import shutil
from collections import deque
from dataclasses import dataclass

import graphviz

from compiler.api import (
    FAMILIES,
    OPCODES,
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

# Fill colours by op family (compiler/hlo/opcodes.py), light so labels stay readable; inputs
# and constants are not filled. The legend under each graph is drawn from this table.
FAMILY_COLOURS = {
    "dot_conv": "#f4b6b6", "elementwise": "#cfe2f3", "reductions": "#d9ead3", "data_movement": "#ececec",
    "control_flow": "#d9d2e9", "sort_gather_scatter": "#fce5cd", "random_bits": "#fff2cc",
    "batch_norm": "#d0e0e3", "linalg": "#ead1dc", "fft": "#c9daf8",
}  # fmt: skip
assert set(FAMILY_COLOURS) == set(FAMILIES), "a colour for every op family"
UNFILLED = ("parameter", "constant")
HIGHLIGHT = "#cc0000"


def family_of(opcode: str) -> str | None:
    """The op family whose colour fills `opcode`'s box; None for an input or a constant."""
    known = OPCODES.get(opcode)
    return None if known is None or opcode in UNFILLED else known.family


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
    # Boxes drawn when grouped at each depth of the user's scopes (groups[d - 1] at depth d),
    # up to the deepest scope: empty when the HLO's metadata names no scope.
    groups: tuple[int, ...] = ()
    source: str = ""  # the highlighted instruction's user source, where the HLO's metadata says

    def svg(self) -> bytes:
        """The picture as SVG, drawn by Graphviz's `dot`."""
        try:
            return graphviz.Source(self.dot).pipe(format="svg")
        except graphviz.ExecutableNotFound:
            raise GraphvizMissing() from None


def graph_picture(program: Program, config: CompilerConfig | None = None, highlight: str | None = None, depth: int | None = None) -> GraphPicture:
    """The optimized graph of `program` for `config` (the node's default without one), with
    the entry instruction named `highlight` (canonical name, e.g. `fusion.7`) and the path
    to it from a parameter marked; UnknownInstruction (a NodeError and a ValueError) when no entry
    instruction has that name. `depth`: the instructions of each scope of the user's code
    that deep (JAX's op_name up to its `depth`th part: `jit(f)/Model/block_0` at 3) drawn as
    one box, so that a model's repeated layers read as a row of boxes."""
    module, plan = optimized_plan(program, config or load_config())
    return _Drawing(module, plan).draw(highlight, depth)


def scope_of(instruction: Instruction) -> tuple[str, ...]:
    """The scopes of the user's code `instruction` was made in, outermost first: its op_name
    without the op itself (`jit(f)/Model/block_0/Dense_0/dot_general` is in
    `jit(f)`, `Model`, `block_0`, `Dense_0`); none for an input or without metadata."""
    location = instruction.location
    if location is None or not location.op_name or instruction.opcode == "parameter":
        return ()
    return tuple(location.op_name.split("/")[:-1])


def _group_node(group: str) -> str:
    """The node of a scope's box (escaped: a `:` would be read as a port)."""
    return graphviz.escape(f"scope {group}")


class _Drawing:
    def __init__(self, module: Module, plan: Plan) -> None:
        self.module = module
        self.plan = plan
        self.entry = module.entry
        self.names = canonical_names(self.entry)
        self.by_name = {self.names[id(i)]: i for i in self.entry.instructions}
        self.buffers_of = {point.name: point.buffers for point in plan.trace_points}
        self.outputs = set(plan.outputs)

    def draw(self, highlight: str | None, depth: int | None = None) -> GraphPicture:
        path: list[str] = []
        if highlight is not None:
            if highlight not in self.by_name:
                some = ", ".join(list(self.by_name)[:12])
                message = f"no instruction {highlight!r} in the optimized graph; its instructions are named as in its canonical text: {some}, ..."
                raise UnknownInstruction(message, tuple(self.by_name))
            path = self._path_to(self.by_name[highlight])
        on_path = set(path)
        graph = graphviz.Digraph(self.module.name, graph_attr={"rankdir": "TB", "fontname": "Helvetica", "fontsize": "10",
                                                               "label": self._legend(), "labelloc": "b"},
                                 node_attr={"shape": "box", "fontname": "Helvetica", "fontsize": "9", "style": "rounded"},
                                 edge_attr={"arrowsize": "0.6"})  # fmt: skip
        group_of = self._groups(depth)
        drawn_groups: set[str] = set()
        drawn_edges: set[tuple[str, str]] = set()
        for instruction in self.entry.execution_order():
            name = self.names[id(instruction)]
            fused = self._fused(instruction)
            group = group_of.get(name)
            if group is not None:
                if group not in drawn_groups:
                    drawn_groups.add(group)
                    members = [n for n, g in group_of.items() if g == group]
                    self._group_box(graph, group, members, highlighted=highlight in members)
            elif fused is not None:
                self._cluster(graph, instruction, fused, highlighted=name == highlight)
            else:
                graph.node(name, self._label(instruction, name), **self._look(instruction, highlighted=name == highlight))
            for number, operand in enumerate(instruction.operands):
                operand_name = self.names[id(operand)]
                source = _group_node(group_of[operand_name]) if operand_name in group_of else self._node_of(operand)
                target = _group_node(group) if group is not None else name if fused is None else self._parameter_node(name, fused, number)
                if source == target or (group is not None and (source, target) in drawn_edges):
                    continue  # inside one box, or drawn once between boxes
                drawn_edges.add((source, target))
                bold = operand_name in on_path and name in on_path
                graph.edge(source, target, **({"color": HIGHLIGHT, "penwidth": "2.2"} if bold else {}))
        source = self._source(self.by_name[highlight]) if highlight is not None else ""
        return GraphPicture(graph.source, tuple(path), tuple(self.by_name), self._group_counts(), source)

    def _groups(self, depth: int | None) -> dict[str, str]:
        """The scope each entry instruction is drawn in at `depth` (those in none: absent)."""
        if depth is None:
            return {}
        scopes = {self.names[id(i)]: scope_of(i) for i in self.entry.instructions}
        return {name: "/".join(scope[:depth]) for name, scope in scopes.items() if len(scope) >= depth}

    def _group_counts(self) -> tuple[int, ...]:
        """Boxes drawn at each depth from 1 to the deepest scope."""
        deepest = max((len(scope_of(i)) for i in self.entry.instructions), default=0)
        counts = []
        for depth in range(1, deepest + 1):
            groups = self._groups(depth)
            counts.append(len(set(groups.values())) + len(self.entry.instructions) - len(groups))
        return tuple(counts)

    def _group_box(self, graph: graphviz.Digraph, group: str, members: list[str], highlighted: bool) -> None:
        """One box for the instructions of a scope, with how many and which kinds."""
        ops = [op for m in members for op in self._ops(self.by_name[m])]
        families = [f for f in FAMILIES if f in {family_of(op.opcode) for op in ops}]
        look = {"shape": "box3d", "style": "filled", "fillcolor": "#f6f6f6", "tooltip": f"{group}: {', '.join(members)}"}
        if highlighted:
            look |= {"color": HIGHLIGHT, "penwidth": "2.5", "fontcolor": HIGHLIGHT}
        graph.node(_group_node(group), f"{group}\n{len(members)} instructions\n{', '.join(f.replace('_', ' ') for f in families)}", **look)

    def _ops(self, instruction: Instruction) -> list[Instruction]:
        """The operations `instruction` computes: a fusion's fused ones, else itself."""
        fused = self._fused(instruction)
        return [instruction] if fused is None else [op for op in fused.instructions if op.opcode != "parameter"]

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
        kind = instruction.attrs.get("kind", "")
        with graph.subgraph(name=f"cluster_{name}") as cluster:
            cluster.attr(label=f"{name} {kind}".strip() + f"\n{self._place(name)}".rstrip(), style="dashed,rounded",
                         color=HIGHLIGHT if highlighted else "#555555", penwidth="2.2" if highlighted else "1", fontsize="9",
                         **({"tooltip": self._source(instruction)} if self._source(instruction) else {}))  # fmt: skip
            for op in fused.execution_order():
                node = f"{name}/{inner[id(op)]}"
                label = f"param {op.parameter_number}" if op.opcode == "parameter" else f"{op.opcode}\n{op.shape}"
                cluster.node(node, label, **self._look(op, highlighted and op is fused.root))
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

    def _look(self, instruction: Instruction, highlighted: bool) -> dict[str, str]:
        family = family_of(instruction.opcode)
        look = {"style": "rounded"} if family is None else {"style": "rounded,filled", "fillcolor": FAMILY_COLOURS[family]}
        source = self._source(instruction)
        if source:
            look["tooltip"] = source
        if highlighted:
            look |= {"color": HIGHLIGHT, "penwidth": "2.5", "fontcolor": HIGHLIGHT}
        return look

    @staticmethod
    def _source(instruction: Instruction) -> str:
        """The user's source of `instruction` as the HLO's metadata says (empty without)."""
        location = instruction.location
        return location.user if location is not None and location.user else ""

    def _legend(self) -> str:
        """The graph's caption: its name and a swatch per op family it holds (an HTML-like
        label, which Graphviz draws as a table)."""
        held = {family_of(i.opcode) for c in self.module.computations for i in c.instructions} - {None}
        swatches = "".join(f'<td bgcolor="{FAMILY_COLOURS[f]}">{f.replace("_", " ")}</td>' for f in FAMILIES if f in held)
        words = "dashed box: a fusion; red: the highlighted instruction and its path from a parameter"
        name = html.escape(self.module.name)
        return f'<<table border="0" cellspacing="4"><tr><td>{name}</td>{swatches}</tr><tr><td colspan="{len(held) + 1}">{words}</td></tr></table>>'

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

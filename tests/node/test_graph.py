"""`vxla graph`: the optimized graph drawn with Graphviz, named as traces name instructions,
fusions outlined, memory reuse coloured, and the first divergence of two traces highlighted
with its path from a parameter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attest import init_key_files
from compiler.config import load_config
from compiler.driver import optimized_plan
from compiler.hlo.printer import canonical_names
from compiler.program import load_program
from harness.fixture_data import Fixture
from harness.hlo_fragments import layered_module
from node.cli import main
from node.graphs import FAMILY_COLOURS, family_of, graph_picture, scope_of

MLP = Fixture("mlp_softmax")
MODULE = str(MLP.directory / "module.hlo")
INPUTS = [str(p) for p in MLP.input_paths()]


def test_the_picture_names_every_instruction_outlines_fusions_and_colours_by_op_family() -> None:
    program = load_program(MLP.module_text)
    module, plan = optimized_plan(program, load_config())
    picture = graph_picture(program)
    names = canonical_names(module.entry)
    fusions = [names[id(i)] for i in module.entry.instructions if i.opcode == "fusion"]
    assert fusions and all(f'subgraph "cluster_{name}" {{' in picture.dot for name in fusions)
    for instruction in module.entry.instructions:
        if instruction.opcode == "fusion":
            continue
        node = re.search(rf'^\s*"?{re.escape(names[id(instruction)])}"? \[(.*?)\]$', picture.dot, re.M | re.S)
        assert node, names[id(instruction)]
        # Filled by the op family's colour (XLA's dumps colour by op kind); inputs unfilled.
        family = family_of(instruction.opcode)
        if family is None:
            assert "fillcolor" not in node.group(1), node.group(0)
        else:
            assert f'fillcolor="{FAMILY_COLOURS[family]}"' in node.group(1), node.group(0)
    dots = [i for c in module.computations for i in c.instructions if i.opcode == "dot"]
    assert dots and all(family_of(i.opcode) == "dot_conv" for i in dots)
    assert picture.dot.count(FAMILY_COLOURS["dot_conv"]) >= len(dots) + 1  # each dot, and the legend's swatch
    # The labels say where each value lives: values given the same arena place share it.
    places: dict[int, set[str]] = {}
    for point in plan.trace_points:
        for buffer_id in point.buffers:
            if plan.buffers[buffer_id].kind == "arena":
                places.setdefault(plan.buffers[buffer_id].offset, set()).add(point.name)
    reused = [offset for offset, users in places.items() if len(users) > 1]
    assert reused, "the fixture reuses memory"
    assert picture.dot.count(f"@{reused[0]}") >= len(places[reused[0]])
    assert picture.path == ()


def test_each_box_s_tooltip_is_the_user_s_source_where_the_hlo_says() -> None:
    text = MLP.module_text
    program = load_program(text)
    module, _ = optimized_plan(program, load_config())
    sourced = [i for i in module.entry.instructions if i.opcode != "fusion" and i.location is not None and i.location.user]
    if not sourced:  # the fixture carries no metadata: give its first dot some, as JAX writes it
        text = re.sub(r"(= f32\[[^\]]*\]\{[^}]*\} dot\([^)]*\)[^\n]*?)(\n)", r'\1, metadata={op_name="jit(mlp)/dense/dot_general" source_file="mlp.py" source_line=7}\2', text, count=1)
        program = load_program(text)
        module, _ = optimized_plan(program, load_config())
    picture = graph_picture(program)
    users = [i.location.user for c in module.computations for i in c.instructions if i.location is not None and i.location.user]
    assert users, "the module carries the user's source"
    assert any(f'tooltip="{user}"' in picture.dot for user in users), users


def test_vxla_graph_highlights_the_first_divergence_of_two_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = init_key_files(tmp_path / "keys")
    honest, faulty = tmp_path / "honest.json", tmp_path / "faulty.json"
    program = load_program(MLP.module_text)
    module, _ = optimized_plan(program, load_config())
    names = canonical_names(module.entry)
    target = next(names[id(i)] for i in module.entry.execution_order() if i.opcode == "fusion")
    for trace, extra in ((honest, []), (faulty, ["--fault", f"{target}:3"])):
        assert main(["run", MODULE, *INPUTS, "--trace", str(trace), "--key", str(keys.private_path), "--op-level", "--json", *extra]) == 0
    capsys.readouterr()
    dot = tmp_path / "graph.dot"
    assert main(["graph", MODULE, "--traces", str(honest), str(faulty), "--dot", str(dot)]) == 0
    captured = capsys.readouterr()
    assert "first divergence: instruction" in captured.err and target in captured.err
    assert f"path         parameter.0 -> {target}" in captured.out or f"-> {target}" in captured.out
    text = dot.read_text()
    assert re.search(rf'"cluster_{re.escape(target)}" \{{\s*color="#cc0000"', text), "the divergent fusion is red"
    # The SVG needs Graphviz's dot, which make test installs (a missing one fails here, named).
    svg = tmp_path / "graph.svg"
    assert main(["graph", MODULE, "--highlight", target, "--svg", str(svg)]) == 0, capsys.readouterr().err
    assert svg.read_bytes().lstrip().startswith(b"<?xml") and b"<svg" in svg.read_bytes()


def test_vxla_graph_refuses_what_it_cannot_draw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", MODULE]) == 2
    assert "--svg OUT.svg and/or --dot OUT.dot" in capsys.readouterr().err
    assert main(["graph", MODULE, "--highlight", "fusion.999", "--dot", str(tmp_path / "g.dot")]) == 2
    assert "no instruction 'fusion.999' in the optimized graph; its instructions are named as in its canonical text: parameter.0" in capsys.readouterr().err
    assert not (tmp_path / "g.dot").exists()


def test_a_missing_graphviz_is_said_before_the_module_is_compiled(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `dot` on PATH, `vxla graph --svg` says so at once, before any compile (a large
    model's takes a while); --dot still works."""
    import node.graphs

    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there: no dot
    compiled: list[str] = []
    monkeypatch.setattr(node.graphs, "graph_picture", lambda *args: compiled.append("compiled"))
    assert main(["graph", MODULE, "--svg", str(tmp_path / "g.svg")]) == 2
    assert "--svg: drawing the graph needs Graphviz's dot program" in capsys.readouterr().err
    assert compiled == [] and not (tmp_path / "g.svg").exists()
    monkeypatch.undo()
    assert main(["graph", MODULE, "--dot", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


def test_a_model_s_layers_group_into_one_box_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = load_program(layered_module(3))
    module, _ = optimized_plan(program, load_config())
    whole = graph_picture(program)
    # Boxes at each depth of the scopes: 4 parameters beside jit(apply), then the blocks.
    assert whole.groups == (5, 5, 8)
    picture = graph_picture(program, depth=3)
    boxes = re.findall(r'^\s*"scope (jit\(apply\)/Model/block_\d)" \[label="([^"]*)"', picture.dot, re.M)
    assert [name for name, _ in boxes] == [f"jit(apply)/Model/block_{n}" for n in range(3)], picture.dot
    assert all("instructions" in label and "dot conv" in label for _, label in boxes), boxes
    for n in range(2):  # each block feeds the next, once
        assert picture.dot.count(f'"scope jit(apply)/Model/block_{n}" -> "scope jit(apply)/Model/block_{n + 1}"') == 1
    names = canonical_names(module.entry)
    members = [names[id(i)] for i in module.entry.instructions if scope_of(i)[:3] == ("jit(apply)", "Model", "block_1")]
    assert members
    # A highlighted instruction inside a box makes the box red.
    marked = graph_picture(program, depth=3, highlight=members[0])
    assert re.search(r'"scope jit\(apply\)/Model/block_1" \[[^\]]*color="#cc0000"', marked.dot, re.S), marked.dot
    # vxla graph --group-depth; a module without scopes says it cannot group.
    (tmp_path / "layers.hlo").write_text(layered_module(3))
    assert main(["graph", str(tmp_path / "layers.hlo"), "--group-depth", "3", "--dot", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text().count('[label="jit(apply)/Model/block_') == 3
    assert main(["graph", MODULE, "--group-depth", "2", "--dot", str(tmp_path / "m.dot")]) == 0
    assert "not grouped: the module's metadata names no scopes" in capsys.readouterr().err

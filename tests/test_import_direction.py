"""Imports point one way: core/ (element types, the exception root) imports nothing else of
vxla, attest/ imports only core/, every module of compiler/ and of node/ imports only its own
layer and those below it, and compiler/ never imports node/. Read from the source with ast, lazy (function-level) imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# compiler/, lowest layer first; a module may import its own layer and the ones before it.
COMPILER_LAYERS: tuple[tuple[str, ...], ...] = (
    ("compiler.errors", "compiler.atomic_files"),
    ("compiler.numerics",),
    ("compiler.hlo",),
    ("compiler.program",),
    ("compiler.reference",),
    ("compiler.passes",),
    ("compiler.config",),
    ("compiler.codegen",),
    ("compiler.runtime", "compiler.cache"),
    ("compiler.driver",),
    ("compiler",),  # the package's face: compiler.compile
)


# node/, lowest layer first. The SDK sits beside the daemon and may not import it: a client
# needs the protocol, traces and the chain bindings, never the daemon's internals.
NODE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("node.errors", "node.sqlite"),
    ("node.protocol", "node.tensors", "node.jax_programs", "node.devnet_state", "node.urls", "node.graphs"),
    ("node.tracing",),
    ("node.chain",),
    ("node.daemon", "node.sdk"),
    ("node.devnet",),
    ("node.cli",),
    ("node",),
)


def unit_of(module: str) -> str:
    """The layer unit a dotted module name belongs to (its package or module directly under
    compiler/ or node/, or the top-level module)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("compiler", "node") and len(parts) > 1 else parts[0]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in a file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names if node.module == "compiler")
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(unit: str) -> int:
    layers = NODE_LAYERS if unit.split(".")[0] == "node" else COMPILER_LAYERS
    for index, units in enumerate(layers):
        if unit in units:
            return index
    raise AssertionError(f"{unit} is in no layer")


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources("compiler"), ids=lambda p: str(p.relative_to(ROOT)))
def test_compiler_modules_import_only_their_layer_and_below(path: Path) -> None:
    here = unit_of(module_name(path))
    for line, module in imports(path):
        if module.split(".")[0] == "node":
            raise AssertionError(f"{path.relative_to(ROOT)}:{line} imports {module}: the compiler is below the node")
        if module.split(".")[0] != "compiler" or (module == "compiler" and here != "compiler"):
            continue
        target = unit_of(module)
        assert layer(target) <= layer(here), (
            f"{path.relative_to(ROOT)}:{line} imports {module}: {here} (layer {layer(here)}) may not import "
            f"{target} (layer {layer(target)})"
        )


@pytest.mark.parametrize("path", sources("node"), ids=lambda p: str(p.relative_to(ROOT)))
def test_node_modules_import_only_their_layer_and_below(path: Path) -> None:
    here = unit_of(module_name(path))
    for line, module in imports(path):
        if module.split(".")[0] != "node" or module == "node":
            continue
        target = unit_of(module)
        assert layer(target) <= layer(here), (
            f"{path.relative_to(ROOT)}:{line} imports {module}: {here} (layer {layer(here)}) may not import "
            f"{target} (layer {layer(target)})"
        )
        assert not (here == "node.sdk" and target == "node.daemon"), f"{path.relative_to(ROOT)}:{line}: the SDK imports the daemon"


PROJECT_PACKAGES = ("core", "attest", "compiler", "node")


@pytest.mark.parametrize("path", sources("attest"), ids=lambda p: str(p.relative_to(ROOT)))
def test_attest_imports_only_the_core(path: Path) -> None:
    for line, module in imports(path):
        assert module.split(".")[0] not in ("compiler", "node"), f"{path.relative_to(ROOT)}:{line} imports {module}"


@pytest.mark.parametrize("path", sources("core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_nothing_else_of_vxla(path: Path) -> None:
    for line, module in imports(path):
        top = module.split(".")[0]
        assert top == "core" or top not in PROJECT_PACKAGES, f"{path.relative_to(ROOT)}:{line} imports {module}"


def test_the_rules_the_architecture_names_hold_in_the_layers() -> None:
    # passes/ and reference/ below codegen/; runtime/ above codegen but not reading reference/
    # (checked by the source scan below, since both are below runtime in the layers).
    assert layer("compiler.passes") < layer("compiler.codegen")
    assert layer("compiler.reference") < layer("compiler.codegen")
    for path in sources("compiler/runtime"):
        for line, module in imports(path):
            assert unit_of(module) != "compiler.reference", f"{path.relative_to(ROOT)}:{line} imports {module}"


def test_the_scan_sees_a_back_edge(tmp_path: Path) -> None:
    # The checker itself: a lazy import of codegen inside a pass is found.
    source = tmp_path / "bad.py"
    source.write_text("def f():\n    from compiler.codegen.fusion import flat_identity\n")
    assert (2, "compiler.codegen.fusion") in imports(source)
    assert layer(unit_of("compiler.codegen.fusion")) > layer("compiler.passes")

"""Imports point one way: core/ (element types, the exception root) imports nothing else of
vxla, attest/ imports only core/, every module of compiler/ and of node/ imports only its own
layer and those below it, and compiler/ never imports node/; none of them imports the test
harness (harness/) or the tests, and the harness imports no test module. Read from the source
with ast, lazy (function-level) imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# compiler/, lowest layer first; a module may import its own layer and the ones before it.
COMPILER_LAYERS: tuple[tuple[str, ...], ...] = (
    ("compiler.errors", "compiler.fingerprint"),
    ("compiler.numerics",),
    ("compiler.hlo",),
    ("compiler.program",),
    ("compiler.reference",),
    ("compiler.passes",),
    ("compiler.targets", "compiler.config", "compiler.host"),
    ("compiler.codegen",),
    ("compiler.runtime", "compiler.cache"),
    ("compiler.driver",),
    ("compiler", "compiler.api"),  # the package's face: compiler.compile, and the public API
)


# node/, lowest layer first. The SDK sits beside the daemon and may not import it: a client
# needs the protocol, traces and the chain bindings, never the daemon's internals.
NODE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("node.errors", "node.sqlite", "node.version"),
    ("node.protocol", "node.tensors", "node.jax_programs", "node.devnet_state", "node.urls", "node.graphs", "node.transfers", "node.step_protocol"),
    ("node.step_holding",),
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


# What tests, tools and benchmarks use, never the project's packages.
TEST_ONLY = ("harness", "tests")


def assert_no_test_imports(path: Path) -> None:
    """A project module imports neither the test harness nor a test module."""
    for line, module in imports(path):
        assert module.split(".")[0] not in TEST_ONLY, f"{path.relative_to(ROOT)}:{line} imports {module}: the test harness is not part of vxla"


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
    assert_no_test_imports(path)
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
    assert_no_test_imports(path)
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
    assert_no_test_imports(path)
    for line, module in imports(path):
        assert module.split(".")[0] not in ("compiler", "node"), f"{path.relative_to(ROOT)}:{line} imports {module}"


@pytest.mark.parametrize("path", sources("core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_nothing_else_of_vxla(path: Path) -> None:
    assert_no_test_imports(path)
    for line, module in imports(path):
        top = module.split(".")[0]
        assert top == "core" or top not in PROJECT_PACKAGES, f"{path.relative_to(ROOT)}:{line} imports {module}"


def test_the_rules_the_architecture_names_hold_in_the_layers() -> None:
    # passes/ and reference/ below codegen/; neither codegen/ nor runtime/ reads reference/
    # (checked by the source scan below, since reference/ is below both in the layers):
    # what the backend needs of the reference's bits the passes have decided before it; the
    # harness never reads the tests.
    assert layer("compiler.passes") < layer("compiler.codegen")
    assert layer("compiler.reference") < layer("compiler.codegen")
    for path in sources("compiler/codegen") + sources("compiler/runtime"):
        for line, module in imports(path):
            assert unit_of(module) != "compiler.reference", f"{path.relative_to(ROOT)}:{line} imports {module}"
    # The harness is what tools/ and bench/ import without the tests on their path.
    for path in sources("harness"):
        for line, module in imports(path):
            assert module.split(".")[0] != "tests", f"{path.relative_to(ROOT)}:{line} imports {module}"


def test_the_scan_sees_a_back_edge(tmp_path: Path) -> None:
    # The checker itself: a lazy import of codegen inside a pass is found.
    source = tmp_path / "bad.py"
    source.write_text("def f():\n    from compiler.codegen.fusion import flat_identity\n")
    assert (2, "compiler.codegen.fusion") in imports(source)
    assert layer(unit_of("compiler.codegen.fusion")) > layer("compiler.passes")


# The compiler as its users see it: the node, the SDK, bench/ and tools/ import the public API
# (compiler/api.py) or the package's face (compiler.compile), nothing behind them.
PUBLIC_COMPILER = ("compiler", "compiler.api")
# Development tools that build or exhaustively check one room's internals, each the
# instrument of that room: they import past the API on purpose.
INSTRUMENTS = {
    "tools/find_f32_exceptions.py": "generates compiler/numerics/mathlib/f32_exceptions.py from the mathlib's algorithms",
    "tools/check_f32_exhaustive.py": "runs the mathlib's compiled kernels over all 2^32 inputs",
    "tools/mathlib_accuracy.py": "measures the mathlib's algorithms against MPFR",
    "tools/gpu_check.py": "builds and launches single kernels on a GPU to check the NVPTX codegen",
}


def _users_of_the_compiler() -> list[Path]:
    return [p for d in ("node", "bench", "tools") for p in sources(d) if str(p.relative_to(ROOT)) not in INSTRUMENTS]


@pytest.mark.parametrize("path", _users_of_the_compiler(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_node_bench_and_tools_use_only_the_public_compiler_api(path: Path) -> None:
    for line, module in imports(path):
        if module.split(".")[0] == "compiler":
            assert module in PUBLIC_COMPILER, f"{path.relative_to(ROOT)}:{line} imports {module}: use compiler.api"


def test_every_public_name_is_defined_where_the_api_says() -> None:
    import compiler.api as api

    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert set(INSTRUMENTS) <= {str(p.relative_to(ROOT)) for p in sources("tools")}


# Where each op family's table lives: (package, table name).
FAMILY_TABLES = (("compiler/hlo/verifier", "RULES"), ("compiler/reference", "HANDLERS"), ("compiler/codegen", "EMITTERS"))


@pytest.mark.parametrize(("package", "table"), FAMILY_TABLES)
def test_op_families_are_wired_one_way(package: str, table: str) -> None:
    """Each op family's module in the verifier, the reference and the backend builds its
    table with family_table (compiler/hlo/family_tables.py: the registry says which opcodes
    a family holds), and the modules are imported by name in the source, so import tools see
    every edge: no import_module in compiler/ but the public API's lazy exports."""
    from compiler.hlo.opcodes import FAMILIES

    for family in FAMILIES:
        tree = ast.parse((ROOT / package / f"{family}.py").read_text(encoding="utf-8"))
        built = [
            node.value
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and any(isinstance(t, ast.Name) and t.id == table for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
        ]
        assert len(built) == 1, f"{package}/{family}.py defines {table} {len(built)} times"
        call = built[0]
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "family_table", (
            f"{package}/{family}.py: {table} is not built by family_table"
        )
    for path in sources("compiler"):
        if path.relative_to(ROOT).as_posix() == "compiler/api.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert "import_module(" not in text and "__import__(" not in text, f"{path.relative_to(ROOT)} imports a module by a computed name"


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle between the project's modules (lazy and type-checking imports
    included): each module can be read knowing only the ones it imports."""
    names = {module_name(path): path for package in PROJECT_PACKAGES for path in sources(package)}

    def resolved(module: str) -> str | None:
        while module and module not in names:
            module = module.rpartition(".")[0]
        return module or None

    edges = {
        name: sorted({target for _, imported in imports(path) if (target := resolved(imported)) not in (None, name)})
        for name, path in names.items()
    }
    # A package's __init__ importing its own modules is how a package shows its face, not a
    # cycle of meaning: its modules' imports of the package name are left out.
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        trail.append(name)
        for target in edges[name]:
            if name.startswith(target + "."):
                continue  # a module importing its own package (its __init__)
            if state.get(target) == 1:
                cycle = trail[trail.index(target):] + [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        trail.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)

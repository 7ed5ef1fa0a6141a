"""The pinned pipeline: its id, its place in CompilerConfig, graph_hash stability, --dump-passes,
and outputs of the optimized compile bit-identical to the unoptimized one on every fixture."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attest.digests import text_digest
from compiler.config import CompilerConfig, ConfigError, load_config
from compiler.driver import compile_program, generate
from compiler.hlo.errors import HloVerifyError
from compiler.hlo.shape import ArrayShape
from compiler.passes.base import VERIFY_EACH_ENV, FixedPoint, Pipeline, SimplePass
from compiler.passes.pipeline import pipeline_named
from compiler.program import load_program
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.sampling import share_of
from harness.targets import session_cache
from node.cli import main
from tests.codegen.test_fixtures_backend import assert_identical, reference_outputs
from tests.hlo_variants import add_metadata, rename_instructions, reverse_independent_parameters


class _Counting(SimplePass, name="counting"):
    """Changes nothing but counts its runs; reports a change the first `changes` times."""

    def __init__(self, changes: int) -> None:
        self.changes = changes
        self.runs = 0

    def run(self, module) -> bool:  # noqa: ANN001
        self.runs += 1
        return self.runs <= self.changes


def test_pipeline_id_covers_names_versions_and_order() -> None:
    first, second = _Counting(0), _Counting(0)
    second.name = "other"
    base = Pipeline((first, second)).pipeline_id
    assert Pipeline((first, second)).pipeline_id == base
    assert Pipeline((second, first)).pipeline_id != base
    first.version = 2
    assert Pipeline((first, second)).pipeline_id != base
    assert Pipeline((FixedPoint("g", (first, second), 3),)).pipeline_id != Pipeline((FixedPoint("g", (first, second), 4),)).pipeline_id


def test_fixed_point_groups_stop_when_nothing_changes_and_are_bounded(tiny_module) -> None:  # noqa: ANN001
    settles, never = _Counting(2), _Counting(10**6)
    Pipeline((FixedPoint("settles", (settles,), 8),), verify_each=False).run(tiny_module)
    assert settles.runs == 3  # two changing rounds, then one that changes nothing
    Pipeline((FixedPoint("bounded", (never,), 5),), verify_each=False).run(tiny_module)
    assert never.runs == 5


@pytest.fixture
def tiny_module():
    return load_program("HloModule m\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }").module


class _Breaking(SimplePass, name="breaking"):
    """Gives the root a shape its operands cannot have (a pass with a bug)."""

    def run(self, module) -> bool:  # noqa: ANN001
        root = module.entry.root
        root.shape = ArrayShape.of(root.array_shape.dtype, (*root.array_shape.dims, 7))
        return True


def test_a_broken_module_is_refused_after_the_pass_or_at_the_end(tiny_module, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """By default the module is verified once, after the last pass; VXLA_VERIFY_EACH_PASS
    verifies after every changing pass, so the pass after the broken one never runs."""
    after = _Counting(0)
    with pytest.raises(HloVerifyError):
        Pipeline((_Breaking(), after), verify_each=False).run(copy.deepcopy(tiny_module))
    assert after.runs == 1
    with pytest.raises(HloVerifyError):
        Pipeline((_Breaking(), after), verify_each=True).run(copy.deepcopy(tiny_module))
    assert after.runs == 1
    monkeypatch.delenv(VERIFY_EACH_ENV, raising=False)
    assert not pipeline_named("default").verify_each
    monkeypatch.setenv(VERIFY_EACH_ENV, "1")
    assert pipeline_named("default").verify_each


def test_config_carries_the_pipeline_and_refuses_a_foreign_id(tmp_path: Path) -> None:
    config = load_config()
    assert config.pipeline == "default"
    assert config.pipeline_id == pipeline_named("default").pipeline_id
    assert config.with_pipeline("none").pipeline_id == pipeline_named("none").pipeline_id != config.pipeline_id
    assert CompilerConfig(**config.as_dict()) == config  # a recorded config is reproduced
    with pytest.raises(ConfigError, match="different vxla version"):
        CompilerConfig(**{**config.as_dict(), "pipeline_id": "0" * 64})
    bad = tmp_path / "c.toml"
    bad.write_text('[passes]\npipeline = "fastest"\n')
    with pytest.raises(ConfigError, match="passes.pipeline.*fastest"):
        load_config(bad)
    bad.write_text("[passes]\nlevel = 2\n")
    with pytest.raises(ConfigError, match="unknown key passes.level"):
        load_config(bad)


# A rotating third of the fixtures (harness/sampling.py): the optimized compile of every fixture
# is held against the reference on every target by tests/codegen/test_fixtures_backend.py.
@pytest.mark.parametrize("name", share_of(FIXTURE_NAMES, 3, "optimized against unoptimized"))
def test_optimized_outputs_equal_unoptimized_and_reference(name: str) -> None:
    fixture = Fixture(name)
    program = load_program(fixture.module_text)
    config = load_config()
    optimized = compile_program(program, config, cache_dir=session_cache()).run(*fixture.inputs())
    unoptimized = compile_program(program, config.with_pipeline("none"), cache_dir=session_cache()).run(*fixture.inputs())
    assert_identical(optimized, unoptimized, f"{name} default vs none")
    assert_identical(optimized, reference_outputs(fixture), f"{name} default vs reference")


def _graph_hash(text: str) -> str:
    return text_digest(generate(load_program(text), load_config())[2])


@pytest.mark.parametrize("name", ["transformer_block", "cnn", "mlp_train_step", "scan"])
def test_graph_hash_ignores_names_order_and_metadata(name: str) -> None:
    text = Fixture(name).module_text
    baseline = _graph_hash(text)
    for variant in (rename_instructions(text), reverse_independent_parameters(text), add_metadata(text)):
        assert _graph_hash(variant) == baseline


def test_graph_hash_is_the_same_in_another_process() -> None:
    fixture = Fixture("transformer_block")
    code = (
        "from attest.digests import text_digest\n"
        "from compiler.config import load_config\n"
        "from compiler.driver import generate\n"
        "from compiler.program import load_program\n"
        "from harness.fixture_data import Fixture\n"
        "print(text_digest(generate(load_program(Fixture('transformer_block').module_text), load_config())[2]))\n"
    )
    other = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert other.stdout.strip() == _graph_hash(fixture.module_text)


def test_dump_passes_writes_every_pass_and_the_hashed_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = Fixture("mlp_softmax").directory / "module.hlo"
    dump = tmp_path / "dump"
    assert main(["compile", str(module), "--dump-passes", str(dump), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = sorted(p.name for p in dump.iterdir())
    assert names[0] == "000-input.hlo" and "graph.txt" in names
    dumps = [n for n in names if n.endswith(".hlo")]
    assert [int(n[:3]) for n in dumps] == list(range(len(dumps)))  # numbered in pass order
    pass_names = {p.split("@")[0] for p in report["passes"]}
    assert {n[4:-4] for n in dumps[1:]} <= pass_names and len(dumps) > len(pass_names)
    assert hashlib.sha256((dump / "graph.txt").read_bytes()).hexdigest() == report["graph_hash"]
    for name in names:
        if name.endswith(".hlo"):
            load_program((dump / name).read_text())  # every dump is a valid module


def test_dump_passes_into_a_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = Fixture("mlp_softmax").directory / "module.hlo"
    occupied = tmp_path / "file"
    occupied.write_text("x")
    assert main(["compile", str(module), "--dump-passes", str(occupied)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert occupied.read_text() == "x"


def test_pipeline_none_compiles_the_module_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    module = Fixture("mlp_softmax").directory / "module.hlo"
    assert main(["compile", str(module), "--pipeline", "none", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passes"] == [] and report["config"]["pipeline"] == "none"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_a_pass_that_reports_no_change_changed_nothing(name: str) -> None:
    """The pipeline verifies the module after a pass only when the pass reports a change (and
    a fixed-point group stops on no change): each report must be true."""
    from compiler.hlo.printer import canonical_text

    module = load_program(Fixture(name).module_text).module
    texts = [canonical_text(module)]
    pipeline = pipeline_named(load_config().pipeline)
    first = len(pipeline.history)
    pipeline.run(module, observer=lambda _count, _name, changed_module: texts.append(canonical_text(changed_module)))
    history = pipeline.history[first:]
    assert len(history) == len(texts) - 1
    for (pass_name, changed), before, after in zip(history, texts[:-1], texts[1:], strict=True):
        if not changed:
            assert after == before, f"{name}: {pass_name} reported no change but changed the module"

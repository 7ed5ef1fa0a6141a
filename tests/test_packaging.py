"""vxla works installed from a wheel, outside the checkout: the pinned compiler configuration
and the contracts' ABIs are package data, not files found next to the source tree.

The wheel is built from this checkout and installed, without its dependencies, into a fresh
virtual environment whose only other path is this environment's site-packages (for numpy,
llvmlite, web3...); `vxla run` then runs a fixture from a directory outside the checkout and
must give the digests the checkout gives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from attest.digests import tensor_digest
from compiler import compile as compile_module
from tests.fixture_data import Fixture

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the vxla wheel installed; its bin directory."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the package is made of, so the build leaves nothing in the
    # checkout (setuptools writes build/ and egg-info beside the sources).
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("core", "compiler", "node", "attest"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source)],
        check=True, capture_output=True, text=True, cwd=base,
    )  # fmt: skip
    (wheel,) = wheels.glob("vxla-*.whl")
    environment = base / "env"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, cwd=base,
    )  # fmt: skip
    # The dependencies come from this environment; a plain path entry (not a site dir), so its
    # .pth files (among them the checkout's editable install) are not read.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "vxla-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return environment / "bin"


def run_installed(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VXLA_CACHE_DIR")}
    env["VXLA_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run([str(bin_dir / "vxla"), *args], capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_vxla_run_from_a_wheel_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    fixture = Fixture("mlp_softmax")
    where = subprocess.run(
        [str(installed / "python"), "-c", "import compiler, node.chain.artifacts as a; print(compiler.__file__); print(a.load_artifact('JobMarket').name)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout.split()  # fmt: skip
    assert not Path(where[0]).is_relative_to(ROOT), f"the checkout was imported: {where[0]}"
    assert where[1] == "JobMarket"
    result = run_installed(installed, "run", str(fixture.directory / "module.hlo"), *map(str, fixture.input_paths()), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    here = compile_module(fixture.module_text, cache_dir=False)
    assert {key: report[key] for key in here.hashes} == here.hashes
    assert [output["digest"] for output in report["outputs"]] == [tensor_digest(o) for o in here.run(*fixture.inputs())]


def test_an_installed_vxla_refuses_bad_input_the_same_way(installed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2] add(\n}\n")
    result = run_installed(installed, "inspect", str(bad), cwd=tmp_path)
    assert result.returncode == 2 and "line" in result.stderr

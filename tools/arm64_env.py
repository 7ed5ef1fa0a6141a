"""Prepares an emulated AArch64 Python for vxla under QEMU user mode (`make arm64`), by
itself and idempotently:

- Debian's qemu-user-static and mmdebstrap (apt, when missing);
- an arm64 Debian root with python3.11 (mmdebstrap --variant=extract: no arm64 code runs
  while unpacking, so binfmt_misc is not needed);
- the runtime dependencies as aarch64 wheels, installed by the host's pip into a site
  directory (nothing is built);
- `.arm64/bin/python` and `.arm64/bin/vxla`, which run the emulated interpreter and the vxla
  command line on this checkout, with the same arguments. QEMU_CPU passes through, e.g.
  `QEMU_CPU=max,sve-default-vector-length=32 .arm64/bin/vxla run ...` for 256-bit SVE.

Usage: python tools/arm64_env.py [DIR]   (default DIR: .arm64 in the checkout)
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = "bookworm"
PYTHON = "python3.11"
# What the emulated vxla and its emulated tests import, beyond the project's dependencies
# that the command line never loads (web3, FastAPI: the node daemon runs natively).
RUNTIME = ["numpy", "ml_dtypes", "gmpy2", "llvmlite", "cryptography"]
TEST_TOOLS = ["pytest>=8", "hypothesis>=6.100"]
PLATFORMS = ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"]


def _log(message: str) -> None:
    print(f"arm64: {message}", file=sys.stderr, flush=True)


def _run(command: list[str], **kwargs) -> None:
    subprocess.run(command, check=True, **kwargs)


def _ensure_debian_tools() -> None:
    missing = [pkg for tool, pkg in (("qemu-aarch64-static", "qemu-user-static"), ("mmdebstrap", "mmdebstrap")) if shutil.which(tool) is None]
    if not missing:
        return
    _log(f"installing {', '.join(missing)} with apt")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
    _run(["apt-get", "install", "-y", "-qq", *missing], env=env, stdout=subprocess.DEVNULL)


def _requirements() -> list[str]:
    """The pinned runtime requirements from pyproject.toml, plus the test tools."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {name.lower().replace("-", "_") for name in RUNTIME}
    pinned = [spec for spec in project["dependencies"] if spec.split("=")[0].split(">")[0].split("<")[0].strip().lower().replace("-", "_") in wanted]
    return pinned + TEST_TOOLS


def _make_root(root: Path) -> None:
    if (root / "usr" / "bin" / PYTHON).exists():
        return
    _log(f"unpacking an arm64 Debian {SUITE} root with {PYTHON}")
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _run(["mmdebstrap", "--quiet", "--arch=arm64", "--variant=extract", f"--include={PYTHON},libstdc++6", SUITE, str(partial)])
    # Under QEMU's -L prefix, paths that exist in the root hide the host's: the guest loader
    # must not read the host's ld.so.cache, and /tmp must be the host's.
    (partial / "etc" / "ld.so.cache").write_bytes(b"")
    shutil.rmtree(partial / "tmp", ignore_errors=True)
    partial.rename(root)


def _install_site(site: Path, stamp_text: str) -> None:
    stamp = site / ".requirements"
    if stamp.exists() and stamp.read_text() == stamp_text:
        return
    _log("installing aarch64 wheels: " + ", ".join(_requirements()))
    partial = site.with_name(site.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    _run([
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
        "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", *platforms,
        "--target", str(partial), *_requirements(),
    ])  # fmt: skip
    # The project itself runs from the checkout; its metadata makes importlib.metadata give
    # the same vxla version a native run records.
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    info = partial / f"vxla-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vxla\nVersion: {version}\n")
    (partial / ".requirements").write_text(stamp_text)
    shutil.rmtree(site, ignore_errors=True)
    partial.rename(site)


def _write_command(path: Path, body: str) -> None:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _write_commands(directory: Path) -> None:
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    # Paths are resolved at run time from the script's own location, so the directory and the
    # checkout can move together.
    python = f"""#!/usr/bin/env bash
# The emulated AArch64 Python with vxla's dependencies and this checkout on its path.
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")/.." && pwd)"
repo="$(cd "$here/.." && pwd)"
export QEMU_LD_PREFIX="$here/root" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$repo:$here/site${{PYTHONPATH:+:$PYTHONPATH}}"
exec qemu-aarch64-static "$here/root/usr/bin/{PYTHON}" "$@"
"""
    _write_command(bin_dir / "python", python)
    vxla = """#!/usr/bin/env bash
# The vxla command line under AArch64 emulation, with the same arguments.
exec "$(dirname "${BASH_SOURCE[0]}")/python" -m node.cli "$@"
"""
    _write_command(bin_dir / "vxla", vxla)


def main(argv: list[str]) -> int:
    directory = Path(argv[0]).resolve() if argv else REPO / ".arm64"
    directory.mkdir(parents=True, exist_ok=True)
    _ensure_debian_tools()
    _make_root(directory / "root")
    stamp_text = "\n".join(_requirements() + PLATFORMS) + "\n"
    _install_site(directory / "site", stamp_text)
    _write_commands(directory)
    probe = subprocess.run(
        [str(directory / "bin" / "python"), "-c", "import platform, numpy, llvmlite.binding; print(platform.machine(), numpy.__version__)"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0 or not probe.stdout.startswith("aarch64"):
        _log(f"the emulated Python does not start: {probe.stderr.strip()[-500:]}")
        return 1
    _log(f"ready: {directory / 'bin' / 'vxla'} ({probe.stdout.strip()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

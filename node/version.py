"""The installed vxla's version: what `vxla --version` prints and a trace records as
compiler.vxla_version. Its own module, so that `vxla --version` imports nothing else."""

from __future__ import annotations

import functools
from importlib import metadata


@functools.cache
def vxla_version() -> str:
    """The installed vxla version (what a trace records as compiler.vxla_version)."""
    # Cached: importlib.metadata parses the package's METADATA file on every call (about a
    # millisecond, more than a small model's whole run).
    try:
        return metadata.version("vxla")
    except metadata.PackageNotFoundError:
        return "0+unknown"

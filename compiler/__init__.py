"""The vxla compiler: HLO text in, bit-reproducible native code out.

    compiler.compile(text, **options) -> Executable
    Executable.run(*arrays) -> outputs;  Executable.hashes
    compiler.reference.evaluate(module, arrays) -> outputs
"""

from __future__ import annotations


def compile(source, **options):  # noqa: A001 - the public name the architecture promises
    """Compiles HLO text to an Executable (see compiler.driver.compile for the options)."""
    from compiler.driver import compile as _compile

    return _compile(source, **options)

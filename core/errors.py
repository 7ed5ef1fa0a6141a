"""The root of vxla's exception tree. Each part derives its own base from VxlaError
(compiler.errors.CompilerError, attest.errors.AttestError, node.errors.NodeError) and each
module its specific errors from those, so a user can catch everything vxla raises about its
input, a run, a trace or the node as one class, and a narrower one where it matters."""

from __future__ import annotations


class VxlaError(Exception):
    """Anything vxla refuses or cannot do; the message names the problem."""

"""Dead code elimination: drops instructions the root of their computation does not depend
on (parameters stay, so signatures never change) and computations the entry does not
(transitively) call. Pure: every supported op is free of side effects under the numerics
contract, so an unused value can always go."""

from __future__ import annotations

from compiler.hlo.editing import remove_dead, remove_unreachable_computations
from compiler.hlo.ir import Module
from compiler.passes.base import SimplePass


class DeadCodeElimination(SimplePass, name="dead-code-elimination", version=1):
    """Removes dead instructions and unreachable computations."""

    def run(self, module: Module) -> bool:
        """Removes what nothing needs; returns whether anything went."""
        changed = remove_unreachable_computations(module)
        for computation in module.computations:
            changed |= remove_dead(computation)
        return changed

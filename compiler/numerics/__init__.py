"""The numerics contract (docs/numerics.md): the exact result of every elementwise operation.

`floats` (rounding, canonical NaN, fma), `integers` (total integer semantics), `convert` and
`mathlib` (correctly rounded f32 functions, pinned f64 algorithms) are the one place these
definitions live; the reference evaluator applies them and the LLVM backend reproduces them.
"""

# Any change that can change a result bit is a new version; traces record it.
CONTRACT_VERSION = 1

"""The numerics contract (docs/numerics.md): the exact result of every elementwise operation.

`dtypes` (the element types, their float layouts and canonical NaNs), `floats` (rounding,
fma, total order), `integers` (total integer semantics), `convert`, `order` (the pinned
reduction and accumulation orders) and `mathlib` (correctly rounded f32 functions, pinned
f64 algorithms) are the one place these definitions live; the HLO frontend reads literals by
them, the reference evaluator applies them and the LLVM backend reproduces them. This package
imports nothing else of the compiler: it is the ground floor.
"""

# Any change that can change a result bit is a new version; traces record it.
CONTRACT_VERSION = 1

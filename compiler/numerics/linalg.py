"""The pinned algorithms of cholesky and triangular-solve (docs/numerics.md §7), as the facts
the reference evaluator and the backend share: which matrix a solve reads, which way it
substitutes. Both follow the same loops, one fma per step, in this order.

cholesky (lower): for j = 0..n-1: d = a[j,j]; for k < j: d = fma(-l[j,k], l[j,k], d);
l[j,j] = sqrt(d); for i > j: s = a[i,j]; for k < j: s = fma(-l[i,k], l[j,k], s);
l[i,j] = s / l[j,j]. The other triangle of the result is +0. Upper (lower=false) is the
same on the transpose: u[j,i] is l[i,j] of the matrix read as a[j,i].

triangular-solve: every case is one system M y = r per right-hand-side vector, solved by
substitution in M's own order: forward (i = 0..m-1) when M is lower triangular, backward
(i = m-1..0) when upper; s = r[i]; for each k of M's triangle beside i, increasing:
s = fma(-M[i,k], y[k], s); y[i] = s, or s / M[i,i] unless unit_diagonal.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSPOSES = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")  # ADJOINT is TRANSPOSE for real types


@dataclass(frozen=True)
class TriangularSystem:
    """A triangular-solve's attributes as the one system it solves. `matrix_transposed`:
    M is a's transpose; `forward`: M is lower triangular; `vectors_are_rows`: the
    right-hand sides are the rows of b (right_side), not its columns."""

    matrix_transposed: bool
    forward: bool
    vectors_are_rows: bool
    unit_diagonal: bool

    @staticmethod
    def of(left_side: bool, lower: bool, transpose_a: str, unit_diagonal: bool) -> TriangularSystem:
        transposed = transpose_a != "NO_TRANSPOSE"
        # x op(a) = b is op(a)^T x^T = b^T: the matrix flips once more, and b's rows are the
        # vectors.
        matrix_transposed = transposed != (not left_side)
        return TriangularSystem(matrix_transposed, lower != matrix_transposed, not left_side, unit_diagonal)

"""rng-bit-generator's definition, shared by the reference evaluator and the backend: XLA's
explicit algorithms ThreeFry-2x32 (20 rounds) and Philox-4x32 (10 rounds), which are pure
functions of a 64-bit key and a counter, and how their output blocks are laid out in the
result, as XLA's rng-bit-generator expander lays them out (docs/numerics.md §7).

The state operand is u64[2] for ThreeFry (key, counter) and u64[2] or u64[3] for Philox
(key, then the 128-bit counter: low word, high word; with u64[2] the high word is the key
itself, and only the low word is returned). `rng_default` is Philox, as XLA:CPU defines it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

THREEFRY = "rng_three_fry"
PHILOX = "rng_philox"
DEFAULT = "rng_default"
ALGORITHMS = (THREEFRY, PHILOX, DEFAULT)

THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
THREEFRY_PARITY = 0x1BD11BDA
THREEFRY_GROUPS = 5  # of four rounds each, with a key injection after each group

PHILOX_ROUNDS = 10
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF
# Element widths the generator fills (narrower ones take the low bits of 32).
ELEMENT_BITS = (8, 16, 32, 64)


def resolved(algorithm: str) -> str:
    """The algorithm that runs: rng_default is Philox."""
    return PHILOX if algorithm == DEFAULT else algorithm


def threefry_split_dimension(dims: tuple[int, ...]) -> int:
    """The dimension ThreeFry's two 32-bit output words alternate along: the first even
    one, else the first largest (-1 for rank 0, which takes word 0 of block 0 only)."""
    if not dims:
        return -1
    for axis, size in enumerate(dims):
        if size % 2 == 0:
            return axis
    return max(range(len(dims)), key=lambda axis: (dims[axis], -axis))


@dataclass(frozen=True)
class BlockLayout:
    """Which generator block, and which 32-bit words of it, make each result element."""

    algorithm: str  # THREEFRY or PHILOX
    dims: tuple[int, ...]
    bits: int

    @property
    def words_per_element(self) -> int:
        return 2 if self.bits == 64 else 1

    @property
    def block_words(self) -> int:
        return 2 if self.algorithm == THREEFRY else 4

    @property
    def split_dimension(self) -> int:
        return threefry_split_dimension(self.dims) if self.algorithm == THREEFRY and self.bits < 64 else -1

    @property
    def half_dims(self) -> tuple[int, ...]:
        """ThreeFry's block grid for 32-bit words: the split dimension halved (rounded up)."""
        split = self.split_dimension
        return tuple(-(-d // 2) if axis == split else d for axis, d in enumerate(self.dims))

    @property
    def block_count(self) -> int:
        """Blocks generated, which is what the counter advances by."""
        n = prod(self.dims)
        if self.algorithm == THREEFRY:
            return n if self.bits == 64 else prod(self.half_dims)
        return -(-(n * self.words_per_element) // 4)

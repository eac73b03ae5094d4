"""Bounded integer helpers (divisors, aligned divisors) shared by the expression language and derivations.

Bounded-work rule (issue 17): the work a helper does is O(sqrt(n)) at worst, and ``n`` has a ceiling
(``MAX_DIVISOR_INPUT``): a value past it raises ``ValueError`` naming the limit instead of running for
hours (``divisors(10**12 + 1)`` walked 10^12 integers before; now at most 2^20 steps, cached).
"""
from __future__ import annotations

from functools import lru_cache

MAX_DIVISOR_INPUT = 2**40  # ~1.1e12; sqrt: at most 2^20 trial divisions (~0.1 s), once per distinct n


@lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return tuple(small + large[::-1])


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n``, ascending; [] for n <= 0. O(sqrt(n)).

    Raises ValueError when ``n`` is over ``MAX_DIVISOR_INPUT`` or not an integer value.
    """
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        raise ValueError(f"divisors() needs an integer, found {type(n).__name__}")
    if isinstance(n, float):
        if not n.is_integer():
            raise ValueError(f"divisors() needs an integer, found {n!r}")
        if abs(n) > MAX_DIVISOR_INPUT:
            raise ValueError(f"divisors(): {n:g} is over the limit of {MAX_DIVISOR_INPUT:,}")
        n = int(n)
    if n <= 0:
        return []
    if n > MAX_DIVISOR_INPUT:
        shown = f"{n:,}" if n.bit_length() < 200 else f"a {int(n.bit_length() * 0.30103) + 1}-digit number"
        raise ValueError(f"divisors(): {shown} is over the limit of {MAX_DIVISOR_INPUT:,}")
    return list(_divisors(n))


def aligned_divisors(candidates: list[int], size: int, align: int) -> list[int]:
    """The candidates d (e.g. valid tp sizes) for which size / d is a whole multiple of align.

    Used for sharding checks such as "intermediate_size / tp_size must be a multiple of the
    quantisation group": aligned_divisors([1, 2, 4, 8], 1536, 128) == [1, 2, 4]. O(len(candidates)).
    """
    if not isinstance(candidates, (list, tuple, set)) or len(candidates) > 100_000:
        raise ValueError("aligned_divisors() needs a list of at most 100,000 candidates")
    align = int(align)
    if align <= 0:
        return [int(d) for d in candidates if d > 0 and size % d == 0]
    return [int(d) for d in candidates if d > 0 and size % (int(d) * align) == 0]

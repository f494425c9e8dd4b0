"""Double-double arithmetic on numpy arrays: a value is ``hi + lo``, about 106 bits of precision.

Used where a power ``M**k`` of a small matrix must stay exact for any ``k``
(and, for sums of many terms, :func:`row_sums`):
binary powering rounds once per squaring, so in plain float64 the relative
error grows like ``log2(k)`` roundings of every entry -- and, worse, an entry
such as ``1 - lr * weight_decay`` is rounded before it is raised to the power
``k``, which multiplies its rounding error by ``k``. In double-double the
entries are formed without rounding and each operation loses about ``2**-104``,
so 63 squarings stay far below float64's own rounding.

The error-free transformations are Knuth's ``two_sum`` and Dekker's
``two_prod`` (with Veltkamp splitting, since numpy has no fused multiply-add);
see Dekker, "A floating-point technique for extending the available precision"
(1971), and Hida, Li & Bailey, "Library for double-double and quad-double
arithmetic" (2007). :func:`row_sums` is the first step of Rump, Ogita & Oishi,
"Accurate floating-point summation part I: faithful rounding" (SIAM J. Sci.
Comput. 31, 2008).
"""

from __future__ import annotations

import functools
import math

import numpy as np

DD = tuple[np.ndarray, np.ndarray]

def two_sum(a: np.ndarray, b: np.ndarray) -> DD:
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


#: The low 27 bits of a float64's significand.
_LOW_BITS = np.int64((1 << 27) - 1)


def _split(a: np.ndarray) -> DD:
    """``(hi, lo)`` with ``hi + lo == a`` exactly and at most 26 significant bits in each, for any finite ``a``.

    ``hi`` is ``a`` with the low 27 bits of its significand cleared (a
    truncation, so it never rounds up past the largest float, as Veltkamp's
    ``(2**27 + 1) * a`` split overflows for ``|a| > 1.3e300``).
    """
    a = np.asarray(a, dtype=np.float64)
    hi = (a.view(np.int64) & ~_LOW_BITS).view(np.float64)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> DD:
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly.

    Exact whenever ``a * b`` is finite and not below ``2**-969`` in magnitude
    (below, ``e`` falls under float64's subnormal spacing and is rounded to it).
    """
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _renormalise(s: np.ndarray, e: np.ndarray) -> DD:
    hi = s + e
    return hi, e - (hi - s)


def dd_add(x: DD, y: DD) -> DD:
    """``x + y`` in double-double."""
    s, e = two_sum(x[0], y[0])
    return _renormalise(s, e + (x[1] + y[1]))


def dd_mul(x: DD, y: DD) -> DD:
    """``x * y`` in double-double."""
    p, e = two_prod(x[0], y[0])
    return _renormalise(p, e + (x[0] * y[1] + x[1] * y[0]))


def dd_matmul2(x: tuple[DD, DD, DD, DD], y: tuple[DD, DD, DD, DD]) -> tuple[DD, DD, DD, DD]:
    """The product of 2x2 matrices ``[[a, b], [c, d]]`` whose entries are double-doubles."""
    a, b, c, d = x
    e, f, g, h = y
    return (
        dd_add(dd_mul(a, e), dd_mul(b, g)),
        dd_add(dd_mul(a, f), dd_mul(b, h)),
        dd_add(dd_mul(c, e), dd_mul(d, g)),
        dd_add(dd_mul(c, f), dd_mul(d, h)),
    )


def dd_matpow2(m: tuple[DD, DD, DD, DD], k: np.ndarray) -> tuple[np.ndarray, ...]:
    """``m**k`` for each non-negative integer in ``k``, rounded to float64 at the end: entries ``(a, b, c, d)``.

    ``m`` holds double-doubles that broadcast against ``k``: scalars (0-d)
    shared by every ``k``, or one matrix per ``k``. Binary
    powering: at most ``k.max().bit_length()`` squarings, so the cost is bounded
    by 63 whatever ``k``. One matrix for every ``k`` (all entries 0-d) is
    raised through tables of its powers by byte (:func:`_byte_powers`, kept
    per matrix): ``m**k`` is the product of one table entry per byte of ``k``,
    at most 7 products whatever ``k`` (one for ``k < 2**16``).
    """
    if all(np.ndim(part) == 0 for entry in m for part in entry):
        with np.errstate(over="ignore", invalid="ignore"):
            tables = _byte_powers(tuple(float(part) for entry in m for part in entry))
        out = tuple((hi[k & 255], lo[k & 255]) for hi, lo in tables[0])
        for level in range(1, 8):
            digit = (k >> (8 * level)) & 255
            if digit.any():
                out = dd_matmul2(tuple((hi[digit], lo[digit]) for hi, lo in tables[level]), out)
        return tuple(hi + lo for hi, lo in out)
    zero, one = np.zeros(k.shape), np.ones(k.shape)
    out = ((one, zero), (zero, zero), (zero, zero), (one, zero))
    base = tuple((np.broadcast_to(hi, k.shape), np.broadcast_to(lo, k.shape)) for hi, lo in m)
    remaining = k.copy()
    while (remaining > 0).any():
        take = (remaining & 1).astype(bool)
        if take.any():
            product = dd_matmul2(out, base)
            out = tuple(tuple(np.where(take, new, old) for new, old in zip(pn, po)) for pn, po in zip(product, out))
        remaining >>= 1
        if (remaining > 0).any():
            base = dd_matmul2(base, base)
    return tuple(hi + lo for hi, lo in out)


@functools.lru_cache(maxsize=64)
def _byte_powers(key: tuple[float, ...]) -> list[tuple[DD, DD, DD, DD]]:
    """``B_l**j`` for ``j = 0 .. 255`` and ``B_l = m**(256**l)``, ``l = 0 .. 7``: the 2x2 matrix ``m`` given as its 8
    double-double parts ``key`` (each table a double-double matrix of 256-entry arrays).

    Each table doubles: ``B**(j + 2**n) = B**j B**(2**n)`` for the ``2**n``
    entries made so far; ``B_{l+1} = B_l**255 B_l``. 16 products a level, 128
    in all, once per matrix (kept for the 64 latest). The powers of a
    diverging matrix overflow in the high levels, which only gaps that large
    use (their maps are infinite anyway).
    """
    base = tuple((np.full(1, key[2 * e]), np.full(1, key[2 * e + 1])) for e in range(4))
    tables = []
    for _ in range(8):
        one, zero = np.ones(1), np.zeros(1)
        table = ((one, zero), (zero, zero), (zero, zero), (one, zero))
        square = base
        for _ in range(8):  # the entries so far, 0 .. 2**n - 1, times square = base**(2**n)
            spread = tuple((np.repeat(hi, table[0][0].size), np.repeat(lo, table[0][0].size)) for hi, lo in square)
            upper = dd_matmul2(spread, table)
            table = tuple((np.concatenate([t[0], u[0]]), np.concatenate([t[1], u[1]])) for t, u in zip(table, upper))
            square = dd_matmul2(square, square)
        tables.append(table)
        base = square  # base**256
    return tables


def row_sums(terms: np.ndarray) -> np.ndarray:
    """The sum of each row of the non-negative ``(R, C)`` float64 ``terms``, within one rounding of the exact sum.

    Each row's terms are split at ``sigma = 2**(M + e)``, ``2**e`` above the
    row's largest term and ``2**M >= C + 2``: ``hi = (sigma + t) - sigma`` and
    ``lo = t - hi`` are exact, the ``hi`` parts are multiples of ``ulp(sigma)``
    whose sum stays below ``2 sigma``, so it is exact too, and the ``lo`` parts
    (each below ``2**-53 sigma``) add at most ``C**2 2**-106 sigma`` of error,
    far below a rounding of the sum (which is at least the largest term,
    ``>= 2**-(M+1) sigma``). The result, ``sum(hi) + sum(lo)``, rounds once.
    Six passes over the terms, whatever their number (``math.fsum`` per row
    would be one Python call per term); rows whose ``sigma`` would overflow
    (terms near the largest float) go to ``math.fsum``.
    """
    _, e = np.frexp(terms.max(axis=1, initial=0.0))  # the largest term < 2**e
    with np.errstate(over="ignore", invalid="ignore"):  # (an infinite sigma: the row is summed below)
        sigma = np.ldexp(1.0, (e + math.ceil(math.log2(terms.shape[1] + 2))).astype(np.int32))[:, None]
        hi = (sigma + terms) - sigma
        out = hi.sum(axis=1) + (terms - hi).sum(axis=1)
    for r in np.flatnonzero(np.isinf(sigma[:, 0])):  # terms within 2**M of the largest float: summed exactly
        try:
            out[r] = math.fsum(terms[r].tolist())
        except OverflowError:  # the sum itself is beyond the largest float
            out[r] = math.inf
    return out

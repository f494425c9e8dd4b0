"""Double-double arithmetic on numpy arrays: a value is ``hi + lo``, about 106 bits of precision.

Used where a power ``M**k`` of a small matrix must stay exact for any ``k``:
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
arithmetic" (2007).
"""

from __future__ import annotations

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
    by 63 whatever ``k``.
    """
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

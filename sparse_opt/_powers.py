"""Powers of a factor over many steps, bit for bit as ``np.power``, without its slow path.

A catch-up raises the dormant factors (``beta1``, ``beta2``, ``1 - lr *
weight_decay``) and the bias corrections' betas to the gap or the step of
every row it brings current. Late in training those exponents are large:
``0.9**20000`` underflows, and the C library's ``pow`` takes a slow path for
every result that is subnormal or zero, about 25 times a plain power (a
thousand rows: 130 us instead of 5 us; glibc 2.36, numpy 2.4).

:func:`power` is ``d**k`` for a factor ``0 <= d <= 1`` and real exponents
``k``: where ``d**k <= 2**-1100`` it is 0 without calling ``pow`` (the exact
power is below ``2**-1076``, half the smallest subnormal, 2**24 times over, so
a correctly rounded ``pow`` and glibc's, within an ulp, give 0 there);
elsewhere ``np.power`` itself. The bias corrections ``1 - beta**j`` are ``1 -
power(beta, j)``, the same bits. :func:`steps_below` is where a power falls
below a level.
"""

from __future__ import annotations

import math

import numpy as np

#: ``log2`` of the largest power :func:`power` takes to be 0 without ``pow``.
ZERO_LOG2 = -1100.0


def steps_below(beta: float, level: float) -> int:
    """The first ``j`` with ``beta**j < level`` (1 when ``beta == 0``), with a step to spare for the logarithms' roundings."""
    if beta == 0.0:
        return 1
    return max(1, math.ceil(math.log(level) / math.log(beta)) + 1)


def power(d: float, k: np.ndarray) -> np.ndarray:
    """``np.power(d, k)`` in float64 for a factor ``0 <= d <= 1`` and real exponents ``k`` (any shape), the same bits.

    >>> power(0.9, np.array([0.0, 2.0, 1e5])).tolist()
    [1.0, 0.81, 0.0]
    """
    k = np.asarray(k, dtype=np.float64)
    if not 0.0 < d < 1.0:
        return np.power(d, k)
    zero = k >= ZERO_LOG2 * math.log(2.0) / math.log(d)
    if not zero.any():
        return np.power(d, k)
    return np.where(zero, 0.0, np.power(d, np.where(zero, 0.0, k)))

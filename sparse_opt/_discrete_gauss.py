r"""Gauss quadrature for sums over consecutive integers: ``sum_{j=0}^{n-1} f(j) ~ sum_q w_q f(x_q)``.

The counting measure on ``0 .. n-1`` has orthogonal polynomials of its own,
the discrete Chebyshev (Gram) polynomials. In ``y = (x - (n - 1) / 2) / (n /
2)`` their monic recurrence is::

    P_0 = 1,  P_1 = y,  P_{k+1}(y) = y P_k(y) - beta_k P_{k-1}(y),
    beta_k = k**2 (1 - k**2 / n**2) / (4 k**2 - 1),

with squared norms ``h_0 = n``, ``h_k = h_{k-1} beta_k`` (Gautschi,
*Orthogonal Polynomials: Computation and Approximation*, 2004, Table 1.2,
rescaled). The ``m`` zeros of ``P_m`` are the nodes of the ``m``-point Gauss
rule, and its weights are the Christoffel numbers ``w_q = 1 / sum_{k<m}
P_k(y_q)**2 / h_k``: positive, summing to ``n``, and the rule is exact for every
polynomial of degree ``<= 2m - 1``. So for any ``f``, with ``E`` its best
uniform approximation error by such polynomials on ``[0, n - 1]``::

    |sum_j f(j) - sum_q w_q f(x_q)| <= 2 n E,

and for ``f`` analytic and bounded by ``M`` inside the Bernstein ellipse of
``[0, n - 1]`` with parameter ``rho``, ``E <= 2 M rho**(1 - 2m) / (rho - 1)``
(Trefethen, *Approximation Theory and Approximation Practice*, Thm 8.2). This
turns a run of ``n`` steps of a smooth sum into ``m`` weighted pseudo-steps.

*Precision.* In float64 the nodes are determined only to about ``eps n``
(the recurrence cancels near a root), and the Christoffel function evaluated
at a node that far off moves the outer weights by ``m**2`` roundings or so (14
epsilons for ``n = 2**14``, ``m = 16``). So the rules are refined in
double-double (:mod:`sparse_opt._double_double`): the float64 Golub-Welsch
eigenvalues, then Newton steps and the weights in about 106 bits, rounded to
float64 at the end (a node within ``eps n`` of its exact value, a weight
within about an ulp). The ``beta_k`` and ``1 / h_k`` are exact ratios of
integers rounded to double-doubles. Rules are cached by ``(p, m)`` for ``n = 2**p``.
"""

from __future__ import annotations

import numpy as np

from sparse_opt._double_double import DD, dd_add, dd_mul

#: Computed rules by ``(p, m)``: ``(nodes in 0 .. 2**p - 1, weights)``, float64.
_RULES: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
#: Newton steps in double-double after the float64 eigenvalues (each doubles the correct bits).
NEWTON_STEPS = 2


def rules(wanted: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """The ``m``-point Gauss rules for the sums over ``0 .. 2**p - 1``, for each ``(p, m)`` of ``wanted``.

    Returns ``{(p, m): (x, w)}``: ``m`` nodes ascending in ``[0, 2**p - 1]``
    and their positive weights (summing to ``2**p``). Requires ``2 <= 2m <=
    2**p``. The missing rules are computed together (one vectorised pass)
    and cached for the process.
    """
    missing = sorted({key for key in wanted if key not in _RULES})
    if missing:
        _compute(missing)
    return {key: _RULES[key] for key in wanted}


def _ratio_dd(num: int, den: int) -> tuple[float, float]:
    """The integer ratio ``num / den`` as a double-double ``(hi, lo)``."""
    hi = num / den  # correctly rounded
    a, b = hi.as_integer_ratio()
    return hi, (num * b - a * den) / (den * b)


def _compute(keys: list[tuple[int, int]]) -> None:
    """Compute the rules ``keys`` (module docstring) and store them in :data:`_RULES`."""
    sizes = [m for _, m in keys]
    width = max(sizes)
    count = len(keys)
    # beta_k = k**2 (n**2 - k**2) / ((4 k**2 - 1) n**2) and 1 / h_k = prod_{l<=k} 1 / beta_l / n, per rule and k
    beta = np.zeros((2, count, width))
    inv_h = np.zeros((2, count, width))
    y0 = np.zeros((count, width))
    for r, (p, m) in enumerate(keys):
        n2 = 1 << (2 * p)
        num, den = 1, 1 << p  # 1 / h_0 = 1 / n
        inv_h[:, r, 0] = _ratio_dd(num, den)
        for k in range(1, m):
            b_num, b_den = k * k * (n2 - k * k), (4 * k * k - 1) * n2
            beta[:, r, k] = _ratio_dd(b_num, b_den)
            num, den = num * b_den, den * b_num
            inv_h[:, r, k] = _ratio_dd(num, den)
        off = np.sqrt(beta[0, r, 1:m])
        y0[r, :m] = np.linalg.eigvalsh(np.diag(off, 1) + np.diag(off, -1))
        y0[r, :m] = (y0[r, :m] - y0[r, m - 1 :: -1][:m]) / 2  # the rule is symmetric
    used = np.arange(width)[None, :] < np.array(sizes)[:, None]
    rows = np.repeat(np.arange(count), width).reshape(count, width)[used]
    y: DD = (y0[used], np.zeros(rows.size))
    b_dd = [(beta[0, rows, k], beta[1, rows, k]) for k in range(width)]
    m_of = np.array(sizes)[rows]

    def neg(x: DD) -> DD:
        return -x[0], -x[1]

    for _ in range(NEWTON_STEPS):
        # P_m and P_m' at every node of every rule, by the recurrence (each rule stops at its own m)
        p0, p1 = (np.ones(rows.size), np.zeros(rows.size)), y
        d0, d1 = (np.zeros(rows.size), np.zeros(rows.size)), (np.ones(rows.size), np.zeros(rows.size))
        for k in range(1, width):
            live = k < m_of
            p2 = dd_add(dd_mul(y, p1), neg(dd_mul(b_dd[k], p0)))
            d2 = dd_add(dd_add(p1, dd_mul(y, d1)), neg(dd_mul(b_dd[k], d0)))
            p0, p1 = _where(live, p1, p0), _where(live, p2, p1)
            d0, d1 = _where(live, d1, d0), _where(live, d2, d1)
        step = (p1[0] + p1[1]) / (d1[0] + d1[1])
        y = dd_add(y, (-step, np.zeros(rows.size)))
    # the Christoffel numbers: 1 / sum_{k<m} P_k(y)**2 / h_k
    one: DD = (np.ones(rows.size), np.zeros(rows.size))
    p0, p1 = one, y  # P_0, P_1
    total = (inv_h[0, rows, 0].copy(), inv_h[1, rows, 0].copy())
    for k in range(1, width):
        term = dd_mul(dd_mul(p1, p1), (inv_h[0, rows, k], inv_h[1, rows, k]))
        total = _where(k < m_of, dd_add(total, term), total)
        p0, p1 = p1, dd_add(dd_mul(y, p1), neg(dd_mul(b_dd[k], p0)))
    inverse = 1.0 / total[0]
    weights = inverse - inverse * (total[1] * inverse)
    start = 0
    for (p, m) in keys:
        half = float(1 << p) / 2  # x = (n - 1) / 2 + (n / 2) y, in double-double, then rounded
        x_hi, x_lo = dd_add((y[0][start : start + m] * half, y[1][start : start + m] * half), (np.full(m, half - 0.5), np.zeros(m)))
        _RULES[(p, m)] = ((x_hi + x_lo), weights[start : start + m].copy())
        start += m


def _where(mask: np.ndarray, a: DD, b: DD) -> DD:
    """Elementwise ``a`` where ``mask``, else ``b``, for double-doubles."""
    return np.where(mask, a[0], b[0]), np.where(mask, a[1], b[1])

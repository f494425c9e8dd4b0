"""Gauss rules for sums over consecutive integers (:mod:`sparse_opt._discrete_gauss`), against exact sums.

The catch-up sums long runs of dormant steps through these rules, so each rule
must be what its docstring says: ``m`` nodes in ``[0, n - 1]`` with positive
weights, exact (to float64 rounding of its nodes and weights) for every
polynomial of degree ``<= 2m - 1`` summed over ``0 .. n - 1``. The references
are exact integer power sums (``fractions``) and the same rule refined in
200-bit arithmetic (mpmath).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from sparse_opt._discrete_gauss import rules

mpmath = pytest.importorskip("mpmath")

EPS64 = float(np.finfo(np.float64).eps)
KEYS = [(5, 2), (5, 8), (6, 8), (8, 4), (10, 12), (14, 16), (20, 14), (30, 20), (40, 9), (62, 10)]


def exact_power_sum(n: int, d: int) -> Fraction:
    """``sum_{j=0}^{n-1} ((j - (n-1)/2) / (n/2))**d`` exactly, by the binomial expansion of Faulhaber's sums."""
    # (2j - (n - 1))**d / n**d; sum over j of (2j - (n-1))**d by expanding in powers of j
    total = Fraction(0)
    power_sums = _power_sums(n, d)
    for e in range(d + 1):
        total += Fraction(_binomial(d, e) * 2**e * (-(n - 1)) ** (d - e) * power_sums[e])
    return total / Fraction(n) ** d


def _binomial(d: int, e: int) -> int:
    out = 1
    for t in range(e):
        out = out * (d - t) // (t + 1)
    return out


def _power_sums(n: int, d: int) -> list[int]:
    """``[sum_{j<n} j**e for e in 0..d]`` exactly, by the recurrence on ``(j + 1)**(e+1) - j**(e+1)``."""
    sums: list[int] = []
    for e in range(d + 1):
        # n**(e+1) = sum_{f<=e} C(e+1, f) S_f
        rest = sum(_binomial(e + 1, f) * sums[f] for f in range(e))
        sums.append((n ** (e + 1) - rest) // (e + 1))
    return sums


@pytest.mark.parametrize(("p", "m"), KEYS)
def test_a_rule_has_positive_weights_summing_to_n_and_ascending_nodes_inside(p, m):
    x, w = rules([(p, m)])[(p, m)]
    n = 2**p
    assert x.shape == w.shape == (m,)
    assert np.all(np.diff(x) > 0) and x[0] > 0 and x[-1] < n - 1
    assert np.all(w > 0)
    assert abs(float(mpmath.fsum(w.tolist())) - n) <= 2 * EPS64 * n
    np.testing.assert_array_equal(x + x[::-1], np.full(m, float(n - 1)))  # symmetric about (n - 1) / 2


@pytest.mark.parametrize(("p", "m"), [key for key in KEYS if key[0] <= 30])
def test_a_rule_sums_every_polynomial_of_degree_below_2m_exactly(p, m):
    """``sum_q w_q y_q**d`` against the exact ``sum_j y_j**d`` (``y`` in ``[-1, 1]``), for ``d <= 2m - 1``: within
    a few float64 roundings of its scale. Degree ``2m`` is not summed exactly (it is the ``m``-point Gauss rule)."""
    x, w = rules([(p, m)])[(p, m)]
    n = 2**p
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    y = [(mp.mpf(float(xi)) - mp.mpf(n - 1) / 2) / (mp.mpf(n) / 2) for xi in x]
    for d in range(2 * m + 1):
        got = mp.fsum(mp.mpf(float(wi)) * yi**d for wi, yi in zip(w, y))
        exact = exact_power_sum(n, d)
        scale = mp.fsum(mp.mpf(float(wi)) * abs(yi) ** d for wi, yi in zip(w, y))
        err = abs(got - mp.mpf(exact.numerator) / exact.denominator) / (scale * EPS64)
        if d < 2 * m:
            assert err <= 2 + d, (d, float(err))
        elif n > 4 * m:
            assert err > 1e3, (d, float(err))


def _rule_in_200_bits(n: int, m: int, x: np.ndarray) -> list:
    """The ``m``-point rule's weights in 200-bit arithmetic, by Newton from ``x`` and the Christoffel numbers."""
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    beta = [mp.mpf(k * k) * (1 - mp.mpf(k * k) / n**2) / (4 * k * k - 1) for k in range(1, m)]
    weights = []
    for xi in x:
        y = (mp.mpf(float(xi)) - mp.mpf(n - 1) / 2) / (mp.mpf(n) / 2)
        for _ in range(6):
            p0, p1, d0, d1 = mp.mpf(1), y, mp.mpf(0), mp.mpf(1)
            for k in range(1, m):
                p0, p1, d0, d1 = p1, y * p1 - beta[k - 1] * p0, d1, p1 + y * d1 - beta[k - 1] * d0
            y -= p1 / d1
        p0, p1, h, total = mp.mpf(0), mp.mpf(1), mp.mpf(n), 1 / mp.mpf(n)
        for k in range(1, m):
            p0, p1 = p1, y * p1 - (beta[k - 2] if k >= 2 else 0) * p0
            h *= beta[k - 1]
            total += p1 * p1 / h
        weights.append(1 / total)
    return weights


@pytest.mark.parametrize(("p", "m"), [(6, 8), (14, 16), (20, 14), (30, 20)])
def test_weights_are_within_an_ulp_of_the_200_bit_rule(p, m):
    """The weights of the outer nodes are the sensitive ones: the Christoffel function evaluated in float64 at
    float64 nodes put them 14 epsilons off (n = 2**14, m = 16); refined in double-double they are within an ulp."""
    x, w = rules([(p, m)])[(p, m)]
    exact = _rule_in_200_bits(2**p, m, x)
    errors = [float(abs(mpmath.mpf(float(wi)) - ei) / ei) / EPS64 for wi, ei in zip(w, exact)]
    assert max(errors) <= 1.0, errors


def test_rules_asked_together_or_apart_are_the_same_bits():
    """A rule's bits depend on ``(p, m)`` alone, not on which rules were computed with it."""
    from sparse_opt import _discrete_gauss

    together = {key: tuple(a.copy() for a in value) for key, value in rules([(7, 5), (12, 9), (33, 3)]).items()}
    _discrete_gauss._RULES.clear()
    alone = rules([(12, 9)])[(12, 9)]
    np.testing.assert_array_equal(alone[0], together[(12, 9)][0])
    np.testing.assert_array_equal(alone[1], together[(12, 9)][1])

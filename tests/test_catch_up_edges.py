"""Edge cases of the DENSE_EQUIVALENT catch-up where it must still be dense training (issue 17's list).

- SGD with ``lr * weight_decay > 2`` or ``momentum > 1``: the dormant map's
  powers overflow, and ``0 * inf`` made a zero row NaN where dense SGD keeps it
  at zero (it multiplies the zero by finite factors each step).
- ``lr >= 1.4e300``: the double-double split of ``lr * weight_decay``
  overflowed (``2**27 * lr``); the product must be exact for every finite input.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt._double_double import two_prod


@pytest.mark.parametrize(
    ("lr", "weight_decay", "momentum"),
    [(1.0, 3.0, 0.0), (0.1, 0.0, 1.5), (1.0, 3.0, 0.9), (1.5e300, 1e-300, 0.9)],
)
def test_a_zero_row_stays_zero_whatever_the_dormant_map_does(lr, weight_decay, momentum):
    """200 dormant steps of a diverging (or huge-rate) SGD: the zero row is still exactly zero, as in dense SGD."""
    table = np.zeros((3, 2))
    cfg = so.SparseSgdConfig(lr=lr, weight_decay=weight_decay, momentum=momentum, mode="dense_equivalent")
    opt = so.SparseSgdTable(table, cfg)
    dense = np.zeros((3, 2))
    ref = so.SparseSgdTable(dense, so.SparseSgdConfig(lr=lr, weight_decay=weight_decay, momentum=momentum))
    with np.errstate(invalid="raise"):  # no 0 * inf: a NaN would raise here
        for _ in range(200):
            opt.step(so.CsrGradient.from_rows([], np.zeros((0, 2)), 3))
            ref.step(so.CsrGradient.from_rows([0], np.zeros((1, 2)), 3))  # dense: row 0 stepped with g = 0
        opt.catch_up([0])
    np.testing.assert_array_equal(table[0], dense[0])
    assert not np.signbit(table[0]).any() and (table[0] == 0).all()


@pytest.mark.parametrize("a", [1.5e300, 1.7976931348623157e308, -3e307, 3.0, 1e-310, 2.0**996 * 1.5])
@pytest.mark.parametrize("b", [1e-300, 0.5, 3.0, -1e-8])
def test_two_prod_is_exact_for_every_finite_input(a, b):
    """``p + e == a * b`` exactly (fractions), also where ``2**27 * a`` overflows; to the last subnormal below 2**-969."""
    with np.errstate(over="ignore", invalid="ignore"):  # an infinite product has inf - inf as its error
        exact = Fraction(a) * Fraction(b)
        p, e = two_prod(np.float64(a), np.float64(b))
    if not np.isfinite(p):  # the product itself overflows float64: nothing to represent
        assert abs(exact) > Fraction(np.finfo(np.float64).max)
        return
    error = abs(Fraction(float(p)) + Fraction(float(e)) - exact)
    if abs(exact) >= Fraction(2) ** -969:
        assert error == 0
    else:
        assert error <= Fraction(2) ** -1074

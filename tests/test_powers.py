"""Powers over many steps (:mod:`sparse_opt._powers`): the same bits as ``np.power``, and the exact values' zeros.

:func:`~sparse_opt._powers.power` skips ``pow`` where the result is 0, so it
is checked bit for bit against ``np.power``, which it replaces, over exponents
that cross the subnormal band and the zeros (and ``1 - power`` against ``1 -
beta**j``, the bias corrections), and the claim that the skipped powers are 0
against exact rational arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_opt._powers import ZERO_LOG2, power, steps_below

FACTORS = [0.0, 1e-300, 0.1, 0.5, 0.9, 0.999, 0.9999, 0.999999, 1.0 - 2.0**-40, 1.0 - 2.0**-52, 1.0]


def _crossing(d: float) -> np.ndarray:
    """Exponents around where ``d**k`` leaves the normal floats, turns 0 and passes ``2**ZERO_LOG2``, plus small ones."""
    small = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 17.5, 1000.0])
    if not 0.0 < d < 1.0:
        return np.concatenate([small, [1e6, 2.0**62]])
    scale = math.log(2.0) / -math.log(d)
    marks = np.array([1022.0, 1074.0, 1075.0, 1076.0, -ZERO_LOG2]) * scale
    around = (marks[:, None] * (1.0 + np.linspace(-1e-6, 1e-6, 41))[None, :]).ravel()
    return np.concatenate([small, around, np.ceil(around), [1e300, math.inf]])


@pytest.mark.parametrize("d", FACTORS)
def test_power_is_np_power_bit_for_bit(d: float) -> None:
    k = _crossing(d)
    with np.errstate(under="ignore"):
        expected = np.power(d, k)
    got = power(d, k)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("d", FACTORS)
def test_power_keeps_shape_and_negative_exponents(d: float) -> None:
    k = np.arange(-6.0, 6.0).reshape(3, 4)
    with np.errstate(divide="ignore", over="ignore"):
        np.testing.assert_array_equal(power(d, k), np.power(d, k))


@settings(max_examples=200, deadline=None)
@given(
    d=st.floats(min_value=2.0**-60, max_value=1.0 - 2.0**-52),
    k=st.floats(min_value=0.0, max_value=2.0**62),
)
def test_power_matches_np_power_anywhere(d: float, k: float) -> None:
    with np.errstate(under="ignore"):
        expected = np.power(d, np.array([k]))
    assert power(d, np.array([k])).view(np.int64)[0] == expected.view(np.int64)[0]


@pytest.mark.parametrize("d", [0.5, 0.9, 0.999, 1.0 - 2.0**-20])
def test_skipped_powers_are_below_a_quarter_of_the_smallest_subnormal(d: float) -> None:
    """The first exponent :func:`power` takes as 0: ``d**k < 2**-1076`` exactly, so round-to-nearest gives 0."""
    first = math.ceil(ZERO_LOG2 * math.log(2.0) / math.log(d))
    # (d as an exact fraction)**first against 2**-1076, compared through logarithms of exact integers' sizes
    exact = Fraction(d) ** first if first < 4000 else None
    if exact is not None:
        assert exact < Fraction(1, 2**1076)
    else:  # too large to raise exactly: a bound from the float's exact logarithm, far from the edge
        assert first * math.log2(d) < -1076 - 20
    assert power(d, np.array([float(first)]))[0] == 0.0


@pytest.mark.parametrize("beta", [0.5, 0.9, 0.999, 0.9999, 1.0 - 2.0**-30])
def test_one_minus_power_is_the_bias_correction(beta: float) -> None:
    j = np.concatenate([np.arange(0, 60), steps_below(beta, 2.0**-54) + np.arange(-40, 40), [10**6, 10**9, 2**62]])
    with np.errstate(under="ignore"):
        expected = 1.0 - beta ** j.astype(np.float64)
    np.testing.assert_array_equal((1.0 - power(beta, j)).view(np.int64), expected.view(np.int64))


def test_steps_below_is_the_first_step_below_the_level() -> None:
    """Against 60-digit powers (mpmath; exact fractions of ``beta**j`` would have millions of digits)."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(60):
        for beta in (0.5, 0.9, 0.999, 0.99999):
            for level in (2.0**-54, 2.0**-60, 1e-3):
                j = steps_below(beta, level)
                assert mpmath.mpf(beta) ** j < mpmath.mpf(level)
                # the step before is at most one past the exact first step (a step to spare for the logarithms)
                assert j - 2 < 1 or mpmath.mpf(beta) ** (j - 2) >= mpmath.mpf(level)
    assert steps_below(0.0, 0.5) == 1

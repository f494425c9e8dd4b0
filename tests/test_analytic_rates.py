"""The built-in schedules continued to real and complex steps (sparse_opt._analytic_rates), against the schedules.

The catch-up's Gauss rules evaluate a schedule's rate at real pseudo-steps and bound it on a Bernstein ellipse around
each piece of steps. Three facts carry that, each checked here against an independent evaluation: the segments tile
a window and each is one formula (:func:`continued` at integer steps is the schedule's own rate, to a few ulps), and
:func:`growth` bounds ``sup |lr(z)|`` on the ellipse over the least rate on the piece's steps (the supremum sampled on
the ellipse with the schedule's formula written in complex arithmetic here; the least rate from the schedule itself).
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_opt import _analytic_rates as ar
from sparse_opt import schedules

SCHEDULES = [
    schedules.constant(0.01),
    schedules.linear_warmup(0.05, 20_000),
    schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5),
    schedules.warmup_cosine(0.02, 50, 60_000, 0.0),
    schedules.warmup_cosine(1e-3, 10, 50_000, 5e-3),  # rises to final_lr
    schedules.warmup_cosine(0.1, 0, 5000, 0.0),  # no warm-up
    schedules.step_decay(0.01, 3000, 0.5),
    schedules.step_decay(0.01, 7, 0.99),
    schedules.step_decay(1.0, 40, 0.0),  # 0 from the second period on
    schedules.exponential(0.01, 0.9995),
    schedules.exponential(1.0, 0.5),  # rounds to 0 after about 1100 steps
]


def complex_rate(schedule, kind: int, z: complex) -> complex:
    """The schedule's formula on a segment of ``kind`` at the complex step ``z`` (written independently)."""
    if kind == ar.LINEAR:
        return schedule.lr * z / schedule.warmup_steps
    if kind == ar.COSINE:
        total, warm = schedule.total_steps, schedule.warmup_steps
        return schedule.final_lr + (schedule.lr - schedule.final_lr) * cmath.sin(math.pi * (total - z) / (2 * (total - warm))) ** 2
    if kind == ar.EXPONENTIAL:
        return schedule.lr * schedule.gamma ** (z - 1)
    raise AssertionError(kind)


windows = st.lists(
    st.tuples(st.one_of(st.integers(1, 5000), st.integers(1, 3_000_000)), st.integers(0, 200_000)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SCHEDULES), windows, st.lists(st.integers(1, 3_300_000), max_size=40))
def test_segments_tile_each_window_and_are_one_formula_each(schedule, spans, extra):
    """The segments of each window are contiguous, in order, cover it, start at each extra break inside it (the runs
    of one decay factor), and on each the continued rate at integer steps is the schedule's own (within 4 ulps:
    numpy's sin against math.sin, gamma**offset against the power)."""
    first = np.array([a for a, _ in spans], dtype=np.int64)
    last = first + np.array([n for _, n in spans], dtype=np.int64)
    extra = np.unique(np.array(extra, dtype=np.int64))
    window, lo, hi, kind, zero, rate = ar.segments(schedule, first, last, extra)
    for w in range(first.size):
        mine = window == w
        assert lo[mine][0] == first[w] and hi[mine][-1] == last[w]
        np.testing.assert_array_equal(lo[mine][1:], hi[mine][:-1] + 1)
        inside = extra[(extra > first[w]) & (extra <= last[w])]
        assert np.isin(inside, lo[mine]).all()
    assert (lo <= hi).all()
    assert ((zero > 0) == (kind == ar.COSINE)).all() and (zero[kind == ar.COSINE] > hi[kind == ar.COSINE]).all()
    rng = np.random.default_rng(len(spans))
    for a, b, kd in zip(lo.tolist(), hi.tolist(), kind.tolist()):
        steps = np.unique(np.concatenate([[a, b], rng.integers(a, b + 1, 20)]))
        got = ar.continued(schedule, np.full(steps.size, kd), np.full(steps.size, a), (steps - a).astype(np.float64))
        want = np.array([schedule(int(t)) for t in steps])
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float64).eps, atol=0)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([s for s in SCHEDULES if not isinstance(s, (schedules.Constant, schedules.StepDecay))]),
    st.integers(1, 3_000_000),
    st.integers(5, 12),
    st.sampled_from([0.5, 1.0, 2.5]),
)
def test_growth_bounds_the_rate_on_the_ellipse_over_its_least_value_on_the_piece(schedule, start, level, sigma):
    """For a piece of 2**level steps inside one segment (at least its length from step 0, and twice it before a
    cosine's end, as the catch-up plans them), the sampled sup of |lr(z)| on the ellipse over the least rate of the
    piece's steps is at most growth(); and growth() is not loose by more than a factor 8 (it costs nodes)."""
    n = 2**level
    start = max(start - start % n, 2 * n)
    window, lo, hi, kind, zero, _ = ar.segments(schedule, np.array([start]), np.array([start + n - 1]))
    if lo.size != 1 or (zero[0] and start + 3 * n > zero[0]):
        return  # the piece crosses a break, or lies too close to a cosine's end: the plan makes no such piece
    h = (n - 1) / 2
    centre, minor, major = start + h, sigma * h, h * math.sqrt(1 + sigma * sigma)
    if centre - major <= 0:
        return
    bound = float(ar.growth(schedule, kind, lo, np.array(float(n)), np.array(centre), np.array(major), np.array(minor))[0])
    rates = [schedule(t) for t in range(start, start + n)]
    least = min(rates)
    if kind[0] == ar.CONSTANT or least == 0.0:
        assert kind[0] == ar.CONSTANT or bound == math.inf or least > 0
        return
    theta = np.linspace(0, 2 * math.pi, 721)
    sup = max(abs(complex_rate(schedule, int(kind[0]), complex(centre + major * math.cos(t), minor * math.sin(t)))) for t in theta)
    assert sup / least <= bound * (1 + 1e-9), (sup / least, bound)
    assert bound <= 8 * sup / least, (sup / least, bound)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_continued_rates_are_smooth_between_the_steps(schedule):
    """At half steps the continued rate lies between its neighbours' (each kind is monotone on a segment)."""
    first, last = np.array([1]), np.array([120_000])
    _, lo, hi, kind, _, _ = ar.segments(schedule, first, last)
    for a, b, kd in zip(lo.tolist(), hi.tolist(), kind.tolist()):
        if b - a < 2:
            continue
        base = np.floor(np.linspace(0, b - a - 1, 50))
        mid = ar.continued(schedule, np.full(50, kd), np.full(50, a), base + 0.5)
        left = ar.continued(schedule, np.full(50, kd), np.full(50, a), base)
        right = ar.continued(schedule, np.full(50, kd), np.full(50, a), base + 1)
        tol = 8 * np.finfo(np.float64).eps * np.maximum(left, right)
        assert (mid >= np.minimum(left, right) - tol).all() and (mid <= np.maximum(left, right) + tol).all()

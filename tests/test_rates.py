"""``LearningRate.decay``: the decoupled decay of dormant steps under a schedule, against exact products.

The oracle is ``fractions.Fraction``: the exact product of the factors
``dtype(1 - lr_j * weight_decay)`` (each rounded as dense training rounds it,
then multiplied without rounding). The kit multiplies in float64, one rounding
per factor (a settled schedule's factors as one power, within one rounding), so
``n`` factors are within ``(n + 2) * 2**-53`` relative of the exact product.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_opt import _analytic_rates as analytic_rates
from sparse_opt import _rates as rates_module
from sparse_opt import schedules
from sparse_opt._rates import DECAY_BLOCK, LearningRate

U = 2.0**-53

SCHEDULES = {
    "warmup_cosine": schedules.warmup_cosine(0.3, 7, 60, final_lr=0.05),
    "linear_warmup": schedules.linear_warmup(0.4, 25),
    "step_decay": schedules.step_decay(0.5, 9, 0.5),
    "exponential": schedules.exponential(0.5, 0.25),  # its power rounds to 0 from step 551
    "callable": lambda t: 0.2 + 0.1 * ((t * 7919) % 13) / 13,
}


def exact_decay(rate: LearningRate, start: int, through: int, dtype: type) -> Fraction:
    """``prod_{j=start+1}^{through} dtype(1 - lr_j * wd)``, exactly."""
    product = Fraction(1)
    for j in range(start + 1, through + 1):
        product *= Fraction(float(dtype(1.0 - rate.at(j) * rate.weight_decay)))
    return product


def spy_on(monkeypatch: pytest.MonkeyPatch, method: str) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of every later call of ``LearningRate.<method>``, in order (the method still runs)."""
    calls: list[tuple[int, int]] = []
    original = getattr(LearningRate, method)

    def recording(self, start, stop):
        calls.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(LearningRate, method, recording)
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_decay_is_the_exact_product_of_the_rounded_factors(name, dtype, data):
    rate = LearningRate(SCHEDULES[name], weight_decay=data.draw(st.sampled_from([0.1, 1.0, 2.0])))
    through = data.draw(st.integers(1, 700))
    starts = np.array(data.draw(st.lists(st.integers(0, through), min_size=1, max_size=5)), dtype=np.int64)
    got = rate.decay(starts, through, np.dtype(dtype))
    for s, value in zip(starts.tolist(), got.tolist()):
        want = exact_decay(rate, s, through, dtype)
        bound = (through - s + 2) * U * want
        assert abs(Fraction(value) - want) <= bound, (s, through, value, float(want))


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_a_product_is_the_same_whatever_else_is_asked_with_it(name):
    """Each product depends on its own range alone (taken from ``through`` back): the same bits alone or in company."""
    rate = LearningRate(SCHEDULES[name], weight_decay=1.0)
    through = 3 * DECAY_BLOCK + 17
    starts = np.array([0, 5, DECAY_BLOCK - 1, DECAY_BLOCK, 2 * DECAY_BLOCK + 3, through - 1, through])
    together = rate.decay(starts, through)
    alone = np.array([rate.decay(np.array([s]), through)[0] for s in starts.tolist()])
    np.testing.assert_array_equal(together, alone)
    assert together[-1] == 1.0  # no step: an empty product


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_kept_products_are_the_same_floats_and_spare_the_rates(name, monkeypatch):
    """A call with the last call's ``through`` reuses the products it kept (chunks of 8 steps here, at most 24 kept):
    the same bits as a fresh learning rate's, whatever was asked before, and no rate asked again within them."""
    monkeypatch.setattr(rates_module, "DECAY_BLOCK", 8)
    monkeypatch.setattr(rates_module, "DECAY_MEMO", 24)
    asked = spy_on(monkeypatch, "over")
    rate = LearningRate(SCHEDULES[name], weight_decay=1.0)
    rng = np.random.default_rng(3)
    calls = [(50, [0, 3]), (50, [30]), (50, [45, 49]), (50, [10, 20]), (44, [1]), (50, [40]), (50, [0])]
    calls += [(int(t), rng.integers(0, t + 1, 3).tolist()) for t in rng.integers(1, 80, 25)]
    for through, starts in calls:
        for dtype in (np.float64, np.float32):
            asked.clear()
            got = rate.decay(np.array(starts), through, np.dtype(dtype))
            fresh = LearningRate(SCHEDULES[name], weight_decay=1.0).decay(np.array(starts), through, np.dtype(dtype))
            assert got.tobytes() == fresh.tobytes(), (through, starts, dtype)
    settled = schedules.constant_from(SCHEDULES[name])
    if rate.runs(np.dtype(np.float64)) is not None or (settled is not None and settled[0] <= 50):
        return  # products by runs, or one power from where the rate settles: no rates step by step to spare
    rate = LearningRate(SCHEDULES[name], weight_decay=1.0)
    rate.decay(np.array([10]), 50)  # steps 11 .. 50 in chunks from step 50 back: the first three kept (27 .. 50)
    asked.clear()
    rate.decay(np.array([30, 26]), 50)
    assert asked == []  # steps 27 .. 50: all kept
    rate.decay(np.array([30, 25]), 50)
    assert asked == [(26, 27)]  # step 26 alone is new
    rate.decay(np.array([30]), 49)
    assert asked[1:] == [(42, 50), (34, 42), (31, 34)]  # another through: nothing kept applies, 8 steps a chunk


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_kept_rates_are_the_same_floats_and_only_new_steps_are_evaluated(name, monkeypatch):
    """``over`` keeps one range of at most RATE_MEMO steps (40 here): any sequence of ``over`` and ``at_steps`` calls
    gives each step's own rate, bit for bit, and a range next to the kept one evaluates only its new steps (a
    built-in schedule's; any other callable is asked again)."""
    monkeypatch.setattr(rates_module, "RATE_MEMO", 40)
    evaluated = spy_on(monkeypatch, "_evaluate")
    rate = LearningRate(SCHEDULES[name], weight_decay=1.0)
    rng = np.random.default_rng(11)
    for _ in range(200):
        start = int(rng.integers(1, 120))
        if rng.random() < 0.5:
            stop = start + int(rng.integers(0, 60))
            got = rate.over(start, stop)
            steps = np.arange(start, stop)
        else:
            steps = start + rng.integers(0, int(rng.integers(1, 90)), int(rng.integers(1, 30)))
            got = rate.at_steps(steps)
        assert got.tobytes() == np.array([rate.at(int(t)) for t in steps]).tobytes()
        got[...] = -1.0  # the caller's own array: the kept rates are not changed
    if rate.constant is not None:
        return
    rate = LearningRate(SCHEDULES[name], weight_decay=1.0)
    evaluated.clear()
    rate.over(100, 120)
    rate.over(110, 125)  # steps 120 .. 124 are new
    if not analytic_rates.supports(SCHEDULES[name]):  # any other callable is asked again: it may not be pure
        assert evaluated == [(100, 120), (110, 125)]
        return
    rate.over(90, 100)  # and 90 .. 99
    rate.over(95, 125)  # kept
    assert evaluated == [(100, 120), (120, 125), (90, 100)]
    rate.over(200, 230)  # newer and too far to join (90 .. 229 > 40 steps): kept instead
    rate.over(80, 90)  # older and too far: evaluated, not kept
    rate.over(210, 220)
    assert evaluated[3:] == [(200, 230), (80, 90)]
    bad_at_7 = LearningRate(lambda t: 0.5 if t != 7 else -1.0)  # a callable is asked for its steps alone
    assert bad_at_7.at_steps(np.array([3, 5, 8, 9])).tolist() == [0.5] * 4


def test_a_settled_schedule_evaluates_only_the_steps_before_it_settles(monkeypatch):
    """warmup_cosine settles at total_steps: a gap of 10**12 steps asks for the rates up to there, then one power."""
    rate = LearningRate(schedules.warmup_cosine(0.3, 7, 60, final_lr=1e-15), weight_decay=1.0)
    asked = spy_on(monkeypatch, "over")
    through = 10**12
    got = rate.decay(np.array([3, 40]), through)
    assert sum(b - a for a, b in asked) == 60 - 4  # steps 4 .. 59; the tail from step 60 on is (1 - 1e-15)**(through - 59)
    tail = (1.0 - 1e-15) ** (through - 59)
    assert 0.99 < tail < 1.0
    assert got[0] == pytest.approx(float(exact_decay(rate, 3, 59, np.float64)) * tail, rel=1e-12)
    assert got[1] == pytest.approx(float(exact_decay(rate, 40, 59, np.float64)) * tail, rel=1e-12)


def test_a_factor_of_zero_makes_every_earlier_product_zero():
    """lr_j * wd = 1 on step 30 only: products over ranges that include it are 0, the others are not."""
    rate = LearningRate(lambda t: 1.0 if t == 30 else 0.5, weight_decay=1.0)
    got = rate.decay(np.array([0, 29, 30, 31]), 40)
    assert got[0] == got[1] == 0.0
    assert got[2] == got[3] * 0.5 == 0.5**10


# -- Runs of one factor (float32 factors of a built-in schedule with a small lr * weight_decay) ---------------------
#
# In float32, 1 - lr_j * wd takes few values (lr * wd = 1e-5 spans 168 float32 numbers below 1), and on each
# monotone stretch of a built-in schedule each value on one run of steps: a product over any gap is one power per run.

RUN_SCHEDULES = {
    "warmup_cosine": (schedules.warmup_cosine(0.3, 7, 2600, final_lr=0.05), 1e-4),
    "rising_cosine": (schedules.warmup_cosine(0.01, 0, 900, final_lr=0.05), 1e-3),
    "linear_warmup": (schedules.linear_warmup(0.4, 2500), 1e-4),
    "step_decay": (schedules.step_decay(0.5, 9, 0.5), 1e-3),
    "exponential": (schedules.exponential(0.5, 0.999), 1e-4),
    "to_zero": (schedules.step_decay(1.0, 50, 0.0), 1.0),  # lr * wd = 1: factors of 0, then of 1
}


@pytest.mark.parametrize("name", sorted(RUN_SCHEDULES))
def test_each_run_holds_one_factor_and_starts_where_the_factor_or_the_formula_changes(name):
    """Every step's own factor (sampled, and on both sides of every run start) is its run's."""
    schedule, wd = RUN_SCHEDULES[name]
    rate = LearningRate(schedule, weight_decay=wd)
    runs = rate.runs(np.dtype(np.float32))
    assert runs is not None
    starts, factors = runs
    assert starts[0] == 1 and (np.diff(starts) > 0).all()
    rng = np.random.default_rng(0)
    steps = np.unique(np.concatenate([starts, starts[1:] - 1, rng.integers(1, int(starts[-1]) + 5000, 3000)]))
    own = np.array([float(np.float32(1.0 - schedule(int(t)) * wd)) for t in steps])
    np.testing.assert_array_equal(own, factors[np.searchsorted(starts, steps, side="right") - 1])
    # a run starts where the factor changes, or at one of the schedule's breaks
    _, seg_lo, _, _, _, _ = analytic_rates.segments(schedule, np.array([1]), np.array([int(starts[-1])]))
    changed = factors[1:] != factors[:-1]
    assert (changed | np.isin(starts[1:], seg_lo)).all()


@pytest.mark.parametrize("name", sorted(RUN_SCHEDULES))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_a_product_by_runs_is_the_exact_product_of_the_rounded_factors(name, data):
    """Float32 factors: the products come from the runs (one power each) and are within (2 runs + 2) roundings of
    the exact product of every step's rounded factor."""
    schedule, wd = RUN_SCHEDULES[name]
    rate = LearningRate(schedule, weight_decay=wd)
    starts, _ = rate.runs(np.dtype(np.float32))
    through = data.draw(st.integers(1, 3000))
    last = np.array(data.draw(st.lists(st.integers(0, through), min_size=1, max_size=4)), dtype=np.int64)
    got = rate.decay(last, through, np.dtype(np.float32))
    for s, value in zip(last.tolist(), got.tolist()):
        want = exact_decay(rate, s, through, np.float32)
        runs = int(np.searchsorted(starts, through, side="right") - np.searchsorted(starts, s + 1, side="right")) + 1
        assert abs(Fraction(value) - want) <= (2 * runs + 2) * U * want, (s, through, value, float(want))


@pytest.mark.parametrize("name", sorted(RUN_SCHEDULES))
def test_a_product_by_runs_is_the_same_whatever_else_is_asked_with_it(name):
    """Each product by runs depends on ``(last, through)`` alone, as the step-by-step one."""
    schedule, wd = RUN_SCHEDULES[name]
    rate = LearningRate(schedule, weight_decay=wd)
    through = 10**9 + 7
    last = np.array([0, 5, 300, 2599, 2600, 10**6, through - 1, through])
    together = rate.decay(last, through, np.dtype(np.float32))
    alone = np.array([rate.decay(np.array([s]), through, np.dtype(np.float32))[0] for s in last.tolist()])
    np.testing.assert_array_equal(together, alone)
    assert together[-1] == 1.0


def test_float64_factors_are_too_many_runs_and_are_taken_step_by_step():
    """lr * wd = 1e-5 spans about 9 * 10**10 float64 values: no runs, the step-by-step product."""
    rate = LearningRate(schedules.warmup_cosine(1e-3, 10, 5000, 1e-5), weight_decay=0.01)
    assert rate.runs(np.dtype(np.float64)) is None
    assert rate.runs(np.dtype(np.float32)) is not None
    assert LearningRate(lambda t: 1e-3, weight_decay=0.01).runs(np.dtype(np.float32)) is None  # any other callable


@pytest.mark.parametrize(
    "schedule",
    [
        schedules.warmup_cosine(0.3, 7, 60, final_lr=0.05),
        schedules.warmup_cosine(0.01, 5, 90, final_lr=0.05),  # rising
        schedules.linear_warmup(0.4, 25),
        schedules.step_decay(0.5, 9, 0.5),
        schedules.exponential(0.5, 0.97),
        0.125,
    ],
)
def test_largest_rate_of_a_range_is_the_largest_of_its_steps(schedule):
    """The largest rate over any range of steps, from the ends of the segments it crosses, is the largest of the
    steps' own rates (every range within the first 120 steps, and ranges of 10**12 steps from the segment ends)."""
    rate = LearningRate(schedule)
    rates = np.array([rate.at(t) for t in range(1, 121)])
    for first in range(1, 121, 3):
        for last in range(first, 121, 7):
            assert rate.largest(first, last) == rates[first - 1 : last].max(), (first, last)
    assert rate.largest(100, 10**12) == max(rate.at(100), rate.at(10**12))  # monotone from step 100 on

"""The settled sum ``F(x) = sum_{i>=1} d1**i / (q**i x + eps)`` (:mod:`sparse_opt._settled_sum`) against exact sums.

The reference adds every term up to where the rest is below ``2**-60`` of
``F``, each term computed in float64 (within three roundings) and the terms
added exactly (:func:`math.fsum`): within ``5 u`` of ``F``, far below the
``1e-13`` or so that :meth:`SettledSum.error` claims. mpmath checks that
reference itself on a few points. The windows the catch-up takes from ``F``,
``S_K(x) = F(x) - d1**K F(q**K x)``, are checked the same way, and the
catch-up through them against the exact recurrence in ``test_catch_up_exact``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparse_opt as so
from sparse_opt import _adam_coasting, _settled_sum
from sparse_opt._adam_coasting import AdamCoasting, dormant_factors
from sparse_opt._rates import LearningRate
from sparse_opt._settled_sum import SettledSum, settled_sum

mpmath = pytest.importorskip("mpmath")

U = 2.0**-53


def exact_sum(d1: float, d2: float, eps: float, x: float, steps: int | None = None, c: float = 1.0) -> float:
    """``sum_{i=1..steps} c**(steps-i) d1**i / (d2**(i/2) x + eps)`` (every step that counts when ``steps`` is None,
    ``c = 1``), within ``5 u``."""
    if steps is None:
        # the rest after N steps is below d1**N / ((1 - d1) eps); F is above d1 / (sqrt(d2) x + eps)
        ratio = (math.sqrt(d2) * x + eps) / ((1.0 - d1) * eps * d1)
        steps = int((60 * math.log(2.0) + math.log(ratio)) / -math.log(d1)) + 2
    i = np.arange(1, steps + 1, dtype=np.float64)
    return math.fsum((np.power(c, steps - i) * np.power(d1, i) / (np.power(d2, i / 2) * x + eps)).tolist())


def mp_sum(d1: float, d2: float, eps: float, x: float) -> mpmath.mpf:
    """The same sum to 40 digits, every term until ``d1**i`` is below ``1e-25`` of the first."""
    with mpmath.workdps(40):
        a, q = mpmath.mpf(d1), mpmath.sqrt(mpmath.mpf(d2))
        total, i = mpmath.mpf(0), 1
        while True:
            term = a**i / (q**i * mpmath.mpf(x) + mpmath.mpf(eps))
            total += term
            if a**i < mpmath.mpf(10) ** -25:
                return total
            i += 1


def test_the_reference_is_mpmath_to_a_few_roundings():
    """The float64-terms, exact-sum reference against 40-digit sums (beta1 0.9 and 0.99, x on both sides of eps)."""
    for beta1 in (0.9, 0.99):
        d1, d2, _ = dormant_factors(beta1, 0.999, 1.0, np.dtype(np.float32))
        for x in (0.0, 1e-10, 3e-8, 1e-3, 10.0):
            ref = mp_sum(d1, d2, 1e-8, x)
            assert abs(exact_sum(d1, d2, 1e-8, x) - ref) <= 4 * U * ref, (beta1, x)


#: (beta1, beta2, eps) of the tables: the defaults, long memories, beta2 near its least, a large eps.
CASES = [
    (0.9, 0.999, 1e-8),
    (0.999, 0.999, 1e-8),
    (0.999, 0.9999, 1e-8),
    (0.9999, 0.999, 1e-8),
    (0.9999, 0.9999, 1e-12),
    (0.99, 0.5, 1e-8),
    (0.5, 0.99, 1e-3),
]


@pytest.mark.parametrize(("beta1", "beta2", "eps"), CASES)
def test_the_settled_sum_is_every_step_within_its_bound(beta1, beta2, eps):
    """F at x from far below eps (the series) to far above it (the pieces), and at 0, within SettledSum.error() of the
    exact sum (measured: at most 5e-15, against bounds of 7e-14 to 2e-12); the bound stays below 2e-12."""
    d1, d2, _ = dormant_factors(beta1, beta2, 1.0, np.dtype(np.float32))
    found = settled_sum(d1, d2, eps)
    assert found is not None and found.reach(1e4)
    rng = np.random.default_rng(int(beta1 * 1e4) + int(beta2 * 1e4))
    x = np.concatenate([[0.0, eps, eps * 2.0**-7, 1e4], np.exp(rng.uniform(math.log(eps * 1e-6), math.log(1e4), 40))])
    got = found(x.reshape(-1, 1))[:, 0]
    bound = found.error()
    assert bound < 2e-12
    for value, at in zip(got.tolist(), x.tolist()):
        ref = exact_sum(d1, d2, eps, at)
        assert abs(value - ref) <= (bound + 4 * U) * ref, (at, abs(value - ref) / ref, bound)


@settings(max_examples=30, deadline=None)
@given(
    st.floats(0.5, 0.9995),  # beta1
    st.floats(0.3, 0.99995),  # beta2
    st.floats(-12.0, -3.0),  # log10 eps
    st.lists(st.floats(-8.0, 14.0), min_size=1, max_size=6),  # log10 (x / eps)
)
def test_the_settled_sum_at_any_factors_is_every_step_within_its_bound(beta1, beta2, log_eps, log_x):
    """As above over drawn factors, eps and x; F is served wherever settled_sum applies (beta2 >= e**-8)."""
    eps = 10.0**log_eps
    d1, d2, _ = dormant_factors(beta1, beta2, 1.0, np.dtype(np.float32))
    found = settled_sum(d1, d2, eps)
    x = eps * 10.0 ** np.array(log_x)
    assert found is not None and found.reach(float(x.max()))
    got = found(x.reshape(-1, 1))[:, 0]
    bound = found.error()
    for value, at in zip(got.tolist(), x.tolist()):
        ref = exact_sum(d1, d2, eps, at)
        assert abs(value - ref) <= (bound + 4 * U) * ref, (at, abs(value - ref) / ref, bound)


def test_pieces_are_the_same_bits_in_whatever_order_they_are_built():
    """Pieces built at once, or a few at a time as larger x are asked for: the same coefficients, bit for bit (a
    catch-up resumed in a fresh process takes the same values)."""
    d1, d2, _ = dormant_factors(0.999, 0.9999, 1.0, np.dtype(np.float32))
    at_once, by_steps = SettledSum(d1, d2, 1e-8), SettledSum(d1, d2, 1e-8)
    at_once.reach(1e3)
    for x_max in (1e-9, 1e-7, 3e-4, 1e3):
        by_steps.reach(x_max)
    assert at_once.pieces == by_steps.pieces
    assert at_once.coef.tobytes() == by_steps.coef.tobytes()
    assert at_once.error() == by_steps.error()


def test_what_the_settled_sum_does_not_serve_is_declined():
    """No settled sum for d1 or d2 outside (0, 1), beta2 below e**-8, eps that is 0, infinite or so small that F(0)
    exceeds 2**1000; no pieces beyond MAX_PIECES or to an infinite x."""
    d1, d2, _ = dormant_factors(0.999, 0.999, 1.0, np.dtype(np.float32))
    assert settled_sum(1.0, d2, 1e-8) is None and settled_sum(0.0, d2, 1e-8) is None
    assert settled_sum(d1, 1.0, 1e-8) is None and settled_sum(d1, 1e-4, 1e-8) is None
    assert settled_sum(d1, d2, 0.0) is None and settled_sum(d1, d2, math.inf) is None
    assert settled_sum(d1, d2, 1e-300) is None
    found = settled_sum(d1, d2, 1e-8)
    assert found is not None and not found.reach(math.inf)
    assert not found.reach(math.exp(found.bottom + (_settled_sum.MAX_PIECES + 2) * found.width))
    assert found.reach(0.0)


@pytest.mark.parametrize(
    ("beta1", "beta2", "wd", "scale"),
    [(0.999, 0.999, 0.0, 1.0), (0.9999, 0.999, 0.0, 1e-6), (0.9, 0.9999, 0.0, 1e-3), (0.999, 0.9999, 0.01, 1e-6), (0.9, 0.999, 1.0, 1.0)],
)
def test_windows_of_every_length_are_exact_through_the_settled_sum(beta1, beta2, wd, scale, monkeypatch):
    """AdamCoasting._settled_sums for windows of 0 to 10**5 settled steps, at lr 1e-3 with or without weight decay (c
    = 1 - lr * wd: the sums of r = d1 / c, its rounding carried, times c**K). Where the terms rise along a window
    (beta1 > sqrt(beta2)) the windows F refuses are taken from the sum of the steps before them
    (AdamCoasting._sums_before). Those it takes from F or G, and those of 16 steps
    or fewer it sums step by step, are within a float32 rounding (the sums are returned in the dtype) plus an eighth
    of the catch-up's tolerance of the exact S_K at every entry; the windows the bound refuses that are longer go
    to the prefix sums or the blocks (their sums are checked through the catch-up, QUADRATURE_BOUND_EPS = 4 float32
    epsilons of the parameter's scale in test_catch_up_exact, and here within that). F takes most windows; those of
    QUICK_WINDOW (8) steps or fewer are summed step by step before it."""
    refused, before, short = [], [], []
    original_short = AdamCoasting._short_sums
    monkeypatch.setattr(AdamCoasting, "_short_sums", lambda self, x, s, k: short.append(k) or original_short(self, x, s, k))
    original_before = AdamCoasting._sums_before
    monkeypatch.setattr(AdamCoasting, "_sums_before", lambda self, *a: before.append(original_before(self, *a)) or before[-1])
    for name in ("_prefix_sums", "_sum_rows"):
        original = getattr(AdamCoasting, name)
        monkeypatch.setattr(AdamCoasting, name, lambda self, *a, _o=original, **kw: refused.append(a[3]) or _o(self, *a, **kw))
    coasting = AdamCoasting(1e-3, beta1, beta2, 1e-8, wd, np.float32)
    rng = np.random.default_rng(3)
    k = np.unique(np.concatenate([[0, 1, 2, 3, 5, 8, 16, 17, 40], rng.integers(1, 10**5, 120)]))
    s = 10**6 - k
    x = (scale * 10.0 ** rng.uniform(-2.0, 0.5, (k.size, 8))).astype(np.float32)
    acc, const = coasting._settled_sums(x, np.arange(k.size), s, k, x.min(axis=1), x.max(axis=1))
    others = set(np.concatenate(refused).tolist()) if refused else set()
    assert len(others) < k.size / 4
    d1, d2 = coasting.decay1, coasting.decay2
    for r in range(k.size):
        allowed = 4 * 2.0**-23 if int(k[r]) in others else 2.0**-24 + coasting.tol / 8
        for col in (0, 5):
            ref = exact_sum(d1, d2, 1e-8, float(x[r, col]), int(k[r]), coasting.c) if k[r] else 0.0
            got = float(acc[r, col]) + const[r] / 1e-8
            # (a sum below float32's normal range is returned as a subnormal: to 2**-149 at best)
            assert abs(got - ref) <= allowed * ref + 2.0**-149, (int(k[r]), abs(got - ref) / max(ref, 1e-300))
    assert np.array_equal(acc[k == 0], np.zeros((1, 8), dtype=np.float32))
    settled = _settled_sum.settled_sum(d1 / coasting.c, d2, 1e-8)
    assert settled is not None and settled.error() < 2e-12
    assert short and {1, 2, 3, 5, 8} <= set(np.concatenate(short).tolist())  # QUICK_WINDOW: always step by step
    if beta1 > math.sqrt(beta2):  # the rising windows F refuses: from the steps before them (the shortest step by step)
        assert before and before[0] is not None and before[0][1].any()
        assert short and set(np.concatenate(short).tolist()) <= {1, 2, 3, 5, 8, 16}  # F refused them, G is not tried
        assert not others, sorted(others)


def exact_complex_sum(d1: float, d2: float, eps: float, phase: float, x: float) -> tuple[complex, float]:
    """``sum_{i>=1} (d1 e**(i phase))**i / (q**i x + eps)`` and the sum of its terms' moduli, each part within ``5 u`` of
    the moduli: every term until the rest is below ``2**-60`` of them, its parts added exactly."""
    ratio = (math.sqrt(d2) * x + eps) / ((1.0 - d1) * eps * d1)
    steps = int((60 * math.log(2.0) + math.log(ratio)) / -math.log(d1)) + 2
    i = np.arange(1, steps + 1, dtype=np.float64)
    moduli = np.power(d1, i) / (np.power(d2, i / 2) * x + eps)
    terms = moduli * np.exp(1j * phase * i)
    return complex(math.fsum(terms.real.tolist()), math.fsum(terms.imag.tolist())), math.fsum(moduli.tolist())


#: (beta1, beta2, eps, phase): a cosine over two million steps (phase -2 omega), a short cosine, large phases.
COMPLEX_CASES = [
    (0.999, 0.999, 1e-8, -math.pi / 1_999_000),
    (0.9999, 0.9999, 1e-8, -math.pi / 1_999_000),
    (0.9, 0.999, 1e-8, -math.pi / 3000),
    (0.9999, 0.999, 1e-6, 0.01),
    (0.5, 0.9, 1e-3, 0.3),
]


@pytest.mark.parametrize(("beta1", "beta2", "eps", "phase"), COMPLEX_CASES)
def test_a_complex_factor_is_every_step_within_its_bound(beta1, beta2, eps, phase):
    """F of z = d1 e**(i phase) (the cosine's sequence under a schedule) from far below eps to far above it: each value
    within SettledSum.error() of |F|, the sum of the terms' moduli, from the exact sum (measured: at most 0.03 of the
    bound); the pieces are the same bits built at once or a few at a time."""
    d1, d2, _ = dormant_factors(beta1, beta2, 1.0, np.dtype(np.float32))
    found = SettledSum(d1, d2, eps, 0.0, phase)
    assert found.reach(1e3)
    rng = np.random.default_rng(int(beta1 * 1e4) + int(beta2 * 1e4))
    x = np.concatenate([[0.0, eps, eps * 2.0**-7, 1e3], np.exp(rng.uniform(math.log(eps * 1e-6), math.log(1e3), 24))])
    got = found(x.reshape(-1, 1))[:, 0]
    assert got.dtype == np.complex128
    bound = found.error()
    assert bound < 2e-11
    for value, at in zip(got.tolist(), x.tolist()):
        ref, moduli = exact_complex_sum(d1, d2, eps, phase, at)
        assert abs(value - ref) <= (bound + 8 * U) * moduli, (at, abs(value - ref) / moduli, bound)
    by_steps = SettledSum(d1, d2, eps, 0.0, phase)
    for x_max in (1e-9, 3e-4, 1e3):
        by_steps.reach(x_max)
    assert found.coef.tobytes() == by_steps.coef.tobytes() and found.error() == by_steps.error()


def test_a_phase_beyond_its_largest_is_declined():
    """settled_sum serves |phase| up to MAX_PHASE; a phase that turns fast makes its links short and its pieces
    narrow, so x far above eps is then beyond MAX_PIECES."""
    d1, d2, _ = dormant_factors(0.9999, 0.99999, 1.0, np.dtype(np.float32))
    assert settled_sum(d1, d2, 1e-8, 0.0, 0.6) is None and settled_sum(d1, d2, 1e-8, 0.0, math.nan) is None
    found = settled_sum(d1, d2, 1e-8, 0.0, 0.4)
    assert found is not None and found.link * 0.4 <= _settled_sum.LINK_TURN and not found.reach(10.0)


#: (schedule's total steps, final rate, beta1, beta2, gradient scale): cosines from 1e-3 after 1000 steps of warm-up.
#: (schedule, beta1, beta2, gradient scale, whether windows cross its breaks): late in training, windows to 10**6.
SCHEDULED_WINDOW_CASES = [
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 0.999, 0.999, 1e-6, False),
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 0.9999, 0.999, 1.0, False),  # terms that rise
    (so.schedules.warmup_cosine(1e-3, 1000, 1_100_000, 0.0), 0.9, 0.9999, 1e-3, False),  # falling to 0 later
    (so.schedules.warmup_cosine(1e-3, 1000, 3_000_000, 3e-3), 0.9999, 0.9999, 1e-6, False),  # a rising cosine
    (so.schedules.warmup_cosine(1e-3, 1000, 960_000, 1e-5), 0.999, 0.999, 1e-6, True),  # the cosine ends inside
    (so.schedules.exponential(1e-3, 0.999999), 0.999, 0.9999, 1e-6, False),
    (so.schedules.exponential(1e-3, 0.99999), 0.9999, 0.999, 1.0, False),  # terms that rise
    (so.schedules.step_decay(1e-3, 30_000, 0.5), 0.999, 0.999, 1e-6, True),  # up to four drops inside
    (so.schedules.step_decay(1e-2, 70_000, 0.1), 0.9999, 0.999, 1.0, True),  # one drop, 20,000 steps before
]


@pytest.mark.parametrize(("schedule", "beta1", "beta2", "scale", "breaks"), SCHEDULED_WINDOW_CASES)
def test_windows_under_a_schedule_are_exact_through_the_settled_sums(schedule, beta1, beta2, scale, breaks, monkeypatch):
    """AdamCoasting._settled_sums under a schedule for windows of 0 to 10**5 settled steps ending at step 10**6:
    sum_i lr(s + i) d1**i / (q**i x + eps), with lr(s + i) = A + Re(B_s e**(-2 i omega i)) on a cosine, lr(s + 1) /
    gamma gamma**i under an exponential decay, a constant in a step decay's period (AdamCoasting._settled_rates), from
    the settled sums of d1, d1 e**(-2 i omega) or d1 gamma, or from the steps before the window, or step by step:
    within a float32 rounding plus an eighth of the catch-up's tolerance of the exact sum with every step's own rate at
    every entry; a window across a break is cut into pieces (AdamCoasting._settled_pieces), each so, and their sum
    rounded once more (3 roundings); the others (the prefix sums or the blocks) within 4 float32 roundings. The settled
    sums take most windows."""
    refused = []
    for name in ("_prefix_sums", "_sum_rows"):
        original = getattr(AdamCoasting, name)
        monkeypatch.setattr(AdamCoasting, name, lambda self, *a, _o=original, **kw: refused.append(a[3]) or _o(self, *a, **kw))
    pieces = []
    original_pieces = AdamCoasting._settled_pieces
    monkeypatch.setattr(AdamCoasting, "_settled_pieces", lambda self, *a: pieces.append(original_pieces(self, *a)) or pieces[-1])
    coasting = AdamCoasting(LearningRate(schedule), beta1, beta2, 1e-8, 0.0, np.float32)
    rng = np.random.default_rng(4)
    k = np.unique(np.concatenate([[0, 1, 2, 3, 5, 8, 16, 17, 40], rng.integers(1, 10**5, 80)]))
    s = 10**6 - k
    x = (scale * 10.0 ** rng.uniform(-2.0, 0.5, (k.size, 6))).astype(np.float32)
    found = coasting._settled_sums(x, np.arange(k.size), s, k, x.min(axis=1), x.max(axis=1))
    assert found is not None
    acc, const = found
    others = set(np.concatenate(refused).tolist()) if refused else set()
    assert len(others) < k.size / 4
    assert any(p is not None for p in pieces) == breaks  # windows across a break: cut into pieces
    d1, d2 = coasting.decay1, coasting.decay2
    for r in np.flatnonzero(k).tolist():
        i = np.arange(1, int(k[r]) + 1, dtype=np.float64)
        rates = so.schedules.values_at(schedule, s[r] + np.arange(1, int(k[r]) + 1))
        allowed = 4 * 2.0**-23 if int(k[r]) in others else (3 if breaks else 1) * 2.0**-24 + coasting.tol / 8
        for col in (0, 5):
            terms = rates * np.power(d1, i) / (np.power(d2, i / 2) * float(x[r, col]) + 1e-8)
            ref = math.fsum(terms.tolist())
            got = float(acc[r, col]) + const[r] / 1e-8
            assert abs(got - ref) <= allowed * ref + 2.0**-149, (int(k[r]), abs(got - ref) / ref)
    assert np.array_equal(acc[k == 0], np.zeros((1, 6), dtype=np.float32))


@pytest.mark.parametrize("scheduled", [False, True])
def test_windows_no_settled_sum_serves_are_summed_step_by_step_up_to_step_window(scheduled, monkeypatch):
    """Where F refuses a window and the sum of the steps before it is not at hand (AdamCoasting._sums_before made to
    decline), the windows of STEP_WINDOW (64) steps or fewer are summed step by step, each step at its own rate
    under a cosine, and only the longer ones go to the prefix sums or the blocks: each within a float32 rounding of
    the exact sum (4 for the others)."""
    monkeypatch.setattr(AdamCoasting, "_sums_before", lambda self, *a: None)
    short, refused = [], []
    original_short = AdamCoasting._short_sums
    monkeypatch.setattr(AdamCoasting, "_short_sums", lambda self, x, s, k: short.append(k) or original_short(self, x, s, k))
    for name in ("_prefix_sums", "_sum_rows"):
        original = getattr(AdamCoasting, name)
        monkeypatch.setattr(AdamCoasting, name, lambda self, *a, _o=original, **kw: refused.append(a[3]) or _o(self, *a, **kw))
    schedule = so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5) if scheduled else so.schedules.constant(1e-3)
    coasting = AdamCoasting(LearningRate(schedule), 0.9999, 0.999, 1e-8, 0.0, np.float32)
    k = np.arange(1, 121)
    s = 10**6 - k
    x = np.full((k.size, 2), 1e-3, dtype=np.float32)  # far above eps: the terms rise along every window
    acc, const = coasting._settled_sums(x, np.arange(k.size), s, k, x.min(axis=1), x.max(axis=1))
    stepped = set(np.concatenate(short).tolist())
    others = set(np.concatenate(refused).tolist()) if refused else set()
    assert stepped and max(stepped) <= _adam_coasting.STEP_WINDOW < min(others, default=10**9)
    assert max(stepped) > _adam_coasting.SHORT_WINDOW
    d1, d2 = coasting.decay1, coasting.decay2
    lr = 1.0 if scheduled else coasting.lr
    for r in range(k.size):
        i = np.arange(1, int(k[r]) + 1, dtype=np.float64)
        rates = so.schedules.values_at(schedule, s[r] + np.arange(1, int(k[r]) + 1)) / lr
        ref = math.fsum((rates * np.power(d1, i) / (np.power(d2, i / 2) * float(x[r, 0]) + 1e-8)).tolist())
        got = float(acc[r, 0]) + const[r] / 1e-8
        allowed = 4 * 2.0**-23 if int(k[r]) in others else 2.0**-24 + coasting.tol / 8
        assert abs(got - ref) <= allowed * ref, (int(k[r]), abs(got - ref) / ref)


def test_the_rates_of_settled_windows_are_their_sequences_or_declined():
    """AdamCoasting._settled_rates: a cosine's windows take a constant and a complex sequence, after it one constant,
    an exponential decay's its gamma; windows across the cosine's end (cut into pieces before), in a warm-up, or AdamW
    under a schedule (its decay varies with the rate) are declined, and _settled_pieces declines the warm-up, AdamW
    and windows that cross no break."""
    cosine = so.schedules.warmup_cosine(1e-3, 1000, 1_000_000, 1e-5)
    k = np.array([10, 1000])
    for schedule, s, wd in [
        (cosine, 10**6 - k + 5, 0.0),  # the last window crosses the end
        (so.schedules.linear_warmup(1e-3, 2_000_000), 10**6 - k, 0.0),
        (cosine, 900_000 - k, 0.01),
    ]:
        coasting = AdamCoasting(LearningRate(schedule, wd), 0.9, 0.999, 1e-8, wd, np.float32)
        assert coasting._settled_rates(s, k) is None
    coasting = AdamCoasting(LearningRate(cosine), 0.9, 0.999, 1e-8, 0.0, np.float32)
    rates = coasting._settled_rates(900_000 - k, k)
    assert len(rates) == 2 and rates[1][1] == -math.pi / 999_000 and rates[1][0].dtype == np.complex128
    after = coasting._settled_rates(1_100_000 - k, k)
    assert after is not None and len(after) == 1 and np.all(after[0][0] == 1e-5) and after[0][1:] == (0.0, 1.0)
    decay = so.schedules.exponential(1e-3, 0.999999)
    rates = AdamCoasting(LearningRate(decay), 0.9, 0.999, 1e-8, 0.0, np.float32)._settled_rates(10**6 - k, k)
    assert len(rates) == 2 and rates[1][1:] == (0.0, 0.999999)
    np.testing.assert_allclose(rates[1][0] * 0.999999 ** k, decay(10**6) * 0.999999**0, rtol=1e-12)
    x = np.full((2, 3), 1e-6, dtype=np.float32)
    for schedule, s, wd in [(so.schedules.linear_warmup(1e-3, 2_000_000), 10**6 - k, 0.0), (cosine, 900_000 - k, 0.01), (cosine, 900_000 - k, 0.0)]:
        coasting = AdamCoasting(LearningRate(schedule, wd), 0.9, 0.999, 1e-8, wd, np.float32)
        assert coasting._settled_pieces(x, np.arange(2), s, k, x.min(axis=1), x.max(axis=1)) is None


def test_ratio_rounding_is_the_exact_relative_rounding():
    """ratio_rounding against exact rational arithmetic, for the ratios the catch-up rounds (d1 / c, sqrt(d2) c / d1)."""
    from fractions import Fraction

    rng = np.random.default_rng(9)
    for _ in range(200):
        num, den = int(rng.integers(1, 2**62)) * int(rng.integers(1, 2**40)), int(rng.integers(1, 2**62))
        value = num / den
        exact = (Fraction(num, den) - Fraction(value)) / Fraction(value)
        assert _settled_sum.ratio_rounding(value, num, den) == float(exact)
        assert abs(float(exact)) <= 2.0**-53

"""The DENSE_EQUIVALENT Adam(W) catch-up against an exact reference, at the precision it claims.

:mod:`sparse_opt._adam_coasting` aims every catch-up at a sixteenth of float64's
epsilon of the coasting sum (its ``tol``), so that the result is float64's
rounding of the exact dense recurrence. The golden tests compare with torch's
float64 Adam, which itself rounds at every dormant step, so they can only pin
1e-12; a catch-up that stopped 1000 times too early, or treated the bias
corrections as settled too soon, would still pass them. Here the reference is
dense AdamW fed zero gradients, evaluated in 200-bit binary floating point
(mpmath) from the same float64 state::

    m_j = beta1 m_{j-1},  v_j = beta2 v_{j-1},
    p_j = c p_{j-1} - lr (m_j / (1 - beta1**j)) / (sqrt(v_j / (1 - beta2**j)) + eps),

with ``beta1``, ``beta2``, ``lr``, ``eps`` and ``c = fl(1 - lr * weight_decay)``
the float64 numbers the optimizer holds (torch rounds ``c`` the same way). The
bound is in units of float64's epsilon of the result's *scale*, ``|c**k p_s| +
sum |coasting terms|``: cancellation between the decayed parameter and the
coasting cannot be resolved below that by any float64 result.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparse_opt as so
from sparse_opt import _adam_coasting
from sparse_opt import _log_chebyshev as log_chebyshev
from sparse_opt._adam_coasting import PIECE_WIDTH, AdamCoasting, stall_floor

mpmath = pytest.importorskip("mpmath")

EPS64 = float(np.finfo(np.float64).eps)
#: Error allowed on the parameter, in float64 epsilons of its scale. Measured on
#: 200 random cases (hyper-parameters as ``hyper`` below, s < 3000, k < 1500):
#: worst 33.4 (eps = 0, beta1 = 0.99, beta2 = 0.999: the coasting sums of ~1000
#: terms round at every addition; the truncation itself aims at 1/16). A replay
#: stop bound 1000 times looser gives 53-60 on the cases of ``REPLAY_CASES``.
BOUND_EPS = 40.0
#: On the replay cases, whose error is below 10 epsilons when correct.
REPLAY_BOUND_EPS = 16.0


def exact_dense(p, m, v, s, k, lr, beta1, beta2, eps, c):
    """Dense AdamW's zero-gradient steps ``s + 1 .. s + k`` in 200-bit arithmetic: ``(p, m, v, scale)``."""
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    f = mp.mpf
    p, m, v, lr, b1, b2, eps, c = (f(float(x)) for x in (p, m, v, lr, beta1, beta2, eps, c))
    scale_terms = f(0)
    b1j, b2j = b1**s, b2**s
    for _ in range(k):
        m, v = b1 * m, b2 * v
        b1j, b2j = b1j * b1, b2j * b2
        step = lr * (m / (1 - b1j)) / (mp.sqrt(v / (1 - b2j)) + eps)
        p = c * p - step
        scale_terms = c * scale_terms + abs(step)
    return p, m, v, scale_terms


def caught_up_all(p, m, v, last, through, cfg):
    """``SparseAdam`` in DENSE_EQUIVALENT over the float64 arrays ``p``, ``m``, ``v``, loaded at ``last_step = last``
    (an array, or one step for all) and ``step_count = through``, every coordinate caught up: the optimizer."""
    opt = so.SparseAdam(np.array(p, dtype=np.float64), cfg)
    state = opt.state_dict()
    last = np.broadcast_to(np.asarray(last, dtype=np.int64), np.shape(p)).copy()
    moments = {"m": np.array(m, dtype=np.float64), "v": np.array(v, dtype=np.float64)}
    state.update(step_count=np.int64(through), last_step=last, **moments)
    opt.load_state_dict(state)
    opt.catch_up(np.arange(np.size(p)))
    return opt


def caught_up(p, m, v, s, k, cfg):
    """``SparseAdam`` in DENSE_EQUIVALENT, loaded at ``last_step = s``, ``step_count = s + k``, caught up."""
    opt = caught_up_all([p], [m], [v], s, s + k, cfg)
    return float(opt.params[0]), float(opt.m[0]), float(opt.v[0])


def error_in_eps(p, m, v, s, k, lr, beta1, beta2, eps, wd):
    """The catch-up's error on ``p``, ``m``, ``v`` in float64 epsilons of each one's scale."""
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    c = 1.0 - lr * wd
    got_p, got_m, got_v = caught_up(p, m, v, s, k, cfg)
    ref_p, ref_m, ref_v, terms = exact_dense(p, m, v, s, k, lr, beta1, beta2, eps, c)
    scale_p = abs(mpmath.mpf(c) ** k * p) + terms
    out = [float(abs(mpmath.mpf(got_p) - ref_p) / (scale_p * EPS64))]
    # far below float64's normal range dense Adam's moments stall at a few of the smallest subnormals instead of
    # reaching the exact value (its own rounding; pinned against torch in test_catch_up_edges): an error up to
    # that stall counts as one unit
    floors = (stall_floor(1.0 - beta1, np.float64, lerp=True), stall_floor(beta2, np.float64, lerp=False))
    for got, ref, floor in ((got_m, ref_m, floors[0]), (got_v, ref_v, floors[1])):
        unit = max(abs(ref) * EPS64, mpmath.mpf(floor), mpmath.mpf(np.finfo(np.float64).smallest_subnormal))
        out.append(float(abs(mpmath.mpf(got) - ref) / unit))
    return out


hyper = st.fixed_dictionaries(
    {
        "lr": st.sampled_from([1e-3, 1e-2, 0.1, 0.5]),
        "beta1": st.sampled_from([0.0, 0.5, 0.9, 0.99]),
        "beta2": st.sampled_from([0.9, 0.99, 0.999, 0.9999]),
        "eps": st.sampled_from([0.0, 1e-12, 1e-8, 1e-3, 1.0]),
        "wd": st.sampled_from([0.0, 0.01, 1.0]),
    }
)
state = st.fixed_dictionaries(
    {
        "p": st.floats(-3, 3, allow_nan=False).filter(lambda x: abs(x) > 1e-3),
        "g": st.floats(1e-9, 10.0),  # the scale of the gradients that built m and v
        "sign": st.sampled_from([-1.0, 1.0]),
        "ratio": st.floats(0.05, 1.0),  # |m| / sqrt(v) as Adam's moments allow
        "s": st.integers(0, 3000),
        "k": st.integers(1, 1500),
    }
)


def _run(h, st_):
    v = st_["g"] ** 2
    m = st_["sign"] * st_["ratio"] * st_["g"]
    s = max(st_["s"], 1)
    return error_in_eps(st_["p"], m, v, s, st_["k"], h["lr"], h["beta1"], h["beta2"], h["eps"], h["wd"])


@settings(max_examples=30, deadline=None)
@given(hyper, state)
def test_catch_up_is_float64_rounding_of_the_exact_recurrence(h, st_):
    """Parameter, ``m`` and ``v`` within ``BOUND_EPS`` float64 epsilons of their exact values' scale."""
    err_p, err_m, err_v = _run(h, st_)
    assert err_p <= BOUND_EPS, (h, st_, err_p)
    assert err_m <= 2.0 and err_v <= 2.0, (h, st_, err_m, err_v)


@pytest.mark.parametrize(
    "case",
    [
        # (p, m, v, s, k, lr, beta1, beta2, eps, wd): long gaps, both sides of b x ~ eps, large eps
        (1.0, 0.3, 1.0, 10, 20_000, 0.01, 0.9, 0.999, 1e-8, 0.0),
        (1.0, 3e-7, 1e-12, 500, 5_000, 0.01, 0.9, 0.999, 1e-8, 0.1),
        (-2.0, 1e-4, 1e-8, 1, 3_000, 0.1, 0.9, 0.9999, 1e-3, 0.0),
        (0.5, -0.2, 0.5, 2_000, 4_000, 0.001, 0.99, 0.999, 1.0, 0.01),
        (0.5, 0.02, 4e-4, 50, 2_500, 0.05, 0.9, 0.99, 0.0, 0.0),
    ],
)
def test_long_gaps_against_the_exact_recurrence(case):
    """Gaps past the window and the replay's stopping point: still float64 rounding of the exact result."""
    err_p, err_m, err_v = error_in_eps(*case)
    assert err_p <= BOUND_EPS and err_m <= 2.0 and err_v <= 2.0, (err_p, err_m, err_v)


#: Cases the replay finishes (x near eps / b, or rho >= 1), found by the measurement above.
REPLAY_CASES = [
    (-2.176860266656331, 1.400624602821866e-08, 8.850693381150146e-15, 76, 591, 0.001, 0.9, 0.9, 1e-08, 1.0),
    (-2.7448449966703743, -2.7089149682149363, 7.835940181169302, 1757, 1488, 0.001, 0.9, 0.9, 0.0, 1.0),
    (-2.36453164853085, -1.7494976870807597e-09, 2.564373089517906e-17, 1036, 1087, 0.1, 0.9, 0.9, 1e-12, 0.0),
    (-2.0166827712132678, 0.5962158843258301, 0.4158549749039573, 2833, 383, 0.001, 0.9, 0.9, 0.001, 1.0),
    (-1.961161838556021, -7.996257451140357e-08, 6.550780469363938e-15, 1677, 929, 0.001, 0.9, 0.9, 1e-08, 0.0),
]


@pytest.mark.parametrize("case", REPLAY_CASES)
def test_replay_stops_only_when_the_rest_is_negligible(case):
    """Where the replay finishes the catch-up, it stops only once the rest is below its tolerance."""
    err_p, _, _ = error_in_eps(*case)
    assert err_p <= REPLAY_BOUND_EPS, err_p


# -- Every gradient scale, eps, beta1 and gap (issue 17: bounded cost for every input) -------------------------------
#
# The catch-up now sums the coasting by Chebyshev blocks wherever the expansion in eps / (b x) does not converge: x
# near or far below eps / b, eps large, beta1 up to 0.99999, and any gap. The reference below is the same 200-bit
# recurrence, stopped once the rest of the coasting is provably below 2**-80 of what is already there (and the rest
# of the decays then applied exactly), so that gaps up to 2**62 can be checked.

STOP = mpmath.mpf(2) ** -80


def exact_dense_long(p, m, v, s, k, lr, beta1, beta2, eps, c):
    """:func:`exact_dense` for any gap: ``(p, m, v, scale)``, or None where no bound lets it stop early and k is long.

    Dense Adam's own factors: ``m`` decays by ``1 - fl(1 - beta1)`` (torch's lerp) and the bias corrections are
    torch's float64 ``1 - beta1**j`` and ``sqrt(1 - beta2**j)``; with beta1 = 0.99999 each differs from the real
    ``beta1`` by a relative rounding that thousands of steps raise far above float64's epsilon.

    After step ``i`` the rest of the coasting, each term also decayed by ``c`` per step after it, is below
    ``lr |m_i| q / ((1 - q)(1 - beta1**(i+1)) eps)`` with ``q = beta1 / c`` (``eps > 0``), and below
    ``lr |m_i| / sqrt(v_i) * r / ((1 - r)(1 - beta1**(i+1)))`` with ``r = beta1 / (c sqrt(beta2))``, each relative to
    the ``c**(k-i)`` that multiplies what is there; once below ``STOP`` of that, the rest is negligible.
    """
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    f = mp.mpf
    p, m, v, lr, b2, eps, c = (f(float(x)) for x in (p, m, v, lr, beta2, eps, c))
    b1 = 1 - f(1.0 - beta1)  # torch's lerp(m, 0, 1 - beta1) multiplies m by 1 - fl(1 - beta1) (dormant_factors)
    q = b1 / c if c > 0 else mp.inf
    r = q / mp.sqrt(b2) if b2 > 0 else mp.inf
    scale_terms = f(0)
    i = 0
    while i < k:
        i += 1
        m, v = b1 * m, b2 * v
        # the bias corrections as torch computes them, in float64 (with beta1 = 0.99999, 1 - beta1**4 carries a
        # relative rounding of 3e-12 that dense Adam applies too)
        bc1, bc2_sqrt = 1.0 - beta1 ** (s + i), math.sqrt(1.0 - beta2 ** (s + i))
        step = lr * (m / f(bc1)) / (mp.sqrt(v) / f(bc2_sqrt) + eps)
        p = c * p - step
        scale_terms = c * scale_terms + abs(step)
        if m == 0:  # no coasting from here on: only the decays
            break
        if i % 32 == 0:
            rest = mp.inf
            if eps > 0 and q < 1:
                rest = lr * abs(m) * q / ((1 - q) * f(1.0 - beta1 ** (s + i + 1)) * eps)
            if r < 1 and v > 0:
                rest = min(rest, lr * abs(m) / mp.sqrt(v) * r / ((1 - r) * f(1.0 - beta1 ** (s + i + 1))))
            if rest <= STOP * (abs(p) + scale_terms):
                break
        if i >= 1_500_000:
            return None
    left = k - i
    p, scale_terms, m, v = p * c**left, scale_terms * c**left, m * b1**left, v * b2**left
    return p, m, v, scale_terms


def long_error_in_eps(p, m, v, s, k, lr, beta1, beta2, eps, wd):
    """:func:`error_in_eps` with :func:`exact_dense_long`; None where the reference cannot stop or underflows."""
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    c = 1.0 - lr * wd
    exact = exact_dense_long(p, m, v, s, k, lr, beta1, beta2, eps, c)
    if exact is None:
        return None
    ref_p, ref_m, ref_v, terms = exact
    scale_p = abs(mpmath.mpf(c) ** k * p) + terms
    if scale_p < 1e-280:  # the result is at float64's underflow: no relative error to speak of
        return [0.0, 0.0, 0.0]
    got_p, got_m, got_v = caught_up(p, m, v, s, k, cfg)
    out = [float(abs(mpmath.mpf(got_p) - ref_p) / (scale_p * EPS64))]
    floors = (stall_floor(1.0 - beta1, np.float64, lerp=True), stall_floor(beta2, np.float64, lerp=False))
    for got, ref, floor in ((got_m, ref_m, floors[0]), (got_v, ref_v, floors[1])):
        unit = max(abs(ref) * EPS64, mpmath.mpf(floor), mpmath.mpf(np.finfo(np.float64).smallest_subnormal))
        out.append(float(abs(mpmath.mpf(got) - ref) / unit))
    return out


every_input = st.fixed_dictionaries(
    {
        "lr": st.sampled_from([1e-3, 1e-2, 0.5]),
        "beta1": st.sampled_from([0.0, 0.5, 0.9, 0.99]),
        "beta2": st.sampled_from([0.5, 0.9, 0.999, 0.9999]),
        "eps": st.sampled_from([0.0, 1e-16, 1e-12, 1e-8, 1e-4, 1.0, 10.0]),
        "wd": st.sampled_from([0.0, 0.01, 0.1]),
        "scale": st.integers(-12, 0).map(lambda e: 10.0**e),  # the gradients that built m and v
        "factor": st.floats(0.1, 10.0),
        "ratio": st.floats(0.05, 1.0),
        "sign": st.sampled_from([-1.0, 1.0]),
        "p": st.floats(-3, 3).filter(lambda x: abs(x) > 1e-3),
        "s": st.one_of(st.integers(1, 3000), st.integers(1, 2**40)),
        "k": st.integers(0, 62).flatmap(lambda e: st.integers(2**e, 2 ** (e + 1) - 1)),
    }
)


@settings(max_examples=60, deadline=None)
@given(every_input)
def test_every_scale_eps_and_gap_is_float64_rounding_of_the_exact_recurrence(d):
    """Gradient scales 1 to 1e-12 (sqrt(v) far above, near and far below eps), eps 0 to 10, gaps to 2**62."""
    g = d["scale"] * d["factor"]
    v, m = g * g, d["sign"] * d["ratio"] * g
    if d["eps"] == 0.0 and d["beta2"] <= 0.5:  # dense Adam's v rounds to 0 and m / 0 is its NaN (test_dense_equivalent)
        d = {**d, "beta2": 0.9}
    q = d["beta1"] / (1.0 - d["lr"] * d["wd"])
    k = d["k"]
    if not (q < 1 and (d["eps"] > 0 or q < d["beta2"] ** 0.5)):  # no bound stops the reference: a gap it can walk
        k = min(k, 3000)
    errors = long_error_in_eps(d["p"], m, v, d["s"], k, d["lr"], d["beta1"], d["beta2"], d["eps"], d["wd"])
    assert errors is not None, d  # the reference stops (or walks the whole gap) and the result does not underflow
    err_p, err_m, err_v = errors
    assert err_p <= BOUND_EPS, (d, err_p)
    assert err_m <= 2.0 and err_v <= 2.0, (d, err_m, err_v)


@pytest.mark.parametrize(
    "case",
    [
        # (p, m, v, s, k, lr, beta1, beta2, eps, wd): beta1 close to 1, scales around and far below eps, long gaps
        (1.0, 3e-7, 1e-12, 20, 10**6, 1e-3, 0.999, 0.999, 1e-8, 0.0),
        (-0.5, -2e-9, 4e-18, 5, 2**40, 1e-3, 0.999, 0.9999, 1e-8, 0.0),
        (0.3, 1e-6, 1e-12, 100, 2**62, 1e-3, 0.9999, 0.999, 1e-8, 0.0),
        (0.3, 5e-13, 1e-24, 7, 300_000, 1e-3, 0.9999, 0.999, 1e-8, 0.001),
        (2.0, 0.05, 0.01, 1000, 20_000, 1e-2, 0.99999, 0.9999, 1e-8, 0.0),
        (2.0, 1e-10, 1e-20, 3, 5_000, 1e-3, 0.99999, 0.999, 1e-8, 0.0),
        # beta2 far below beta1: b x falls below eps within steps, and tens of thousands of weights w / eps add up
        # (summed one after the other they erred by 50 to 280 epsilons)
        (1.3, 2e-9, 4e-18, 121, 31_275, 1e-3, 0.999, 0.5, 1e-16, 0.1),
        (0.8, -3e-10, 1e-19, 1607, 43_603, 0.5, 0.999, 0.9, 1e-12, 0.0),
        (-1.1, 2.2, 18.5, 1802, 123_111, 1e-3, 0.999, 0.5, 1e-8, 0.01),
    ],
)
def test_beta1_near_one_and_long_gaps_against_the_exact_recurrence(case):
    """beta1 = 0.999 .. 0.99999 (windows of 10**4 to 10**6 steps), gradients near and far below eps."""
    errors = long_error_in_eps(*case)
    assert errors is not None
    err_p, err_m, err_v = errors
    assert err_p <= BOUND_EPS and err_m <= 2.0 and err_v <= 2.0, (err_p, err_m, err_v)


@pytest.mark.parametrize("beta1", [0.99, 0.999])
def test_rows_last_touched_at_different_steps_share_the_long_window_exactly(beta1):
    """Coordinates last current at different steps, caught up together after 10**6 steps: the steps after the
    latest last step are summed once for all of them (S(s, k) = c**tail S(s, head) + beta1**head S(latest, tail,
    beta2**(head/2) x)); each coordinate is still float64 rounding of its own exact recurrence."""
    lr, beta2, eps, wd = 1e-3, 0.999, 1e-8, 0.01
    last = np.array([3, 40, 41, 400, 2000], dtype=np.int64)
    p0 = np.array([0.7, -1.2, 0.4, 2.0, -0.3])
    m0 = np.array([3e-7, -2e-9, 5e-6, 1e-10, -4e-8])
    v0 = np.array([1e-12, 5e-18, 2e-11, 1e-19, 3e-15])
    through = 2000 + 10**6
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    params = caught_up_all(p0, m0, v0, last, through, cfg).params
    c = 1.0 - lr * wd
    for n in range(5):
        ref_p, _, _, terms = exact_dense_long(p0[n], m0[n], v0[n], int(last[n]), int(through - last[n]), lr, beta1, beta2, eps, c)
        scale = abs(mpmath.mpf(c) ** int(through - last[n]) * p0[n]) + terms
        err = float(abs(mpmath.mpf(float(params[n])) - ref_p) / (scale * EPS64))
        assert err <= BOUND_EPS, (n, err)


@pytest.mark.parametrize(("beta1", "beta2", "k"), [(0.99, 0.999, 20_000), (0.9, 0.9, 400), (0.999, 0.9999, 10**6)])
def test_a_window_of_many_blocks_sums_every_coordinate_through_its_log_x_pieces_exactly(beta1, beta2, k, monkeypatch):
    """A window whose b spans many factors of 2 (beta2**(k/2)) is summed through interpolants in log x, pieces
    of width PIECE_WIDTH from the blocks' values: coordinates whose sqrt(v) spans 1e-14 to 1 (far below, near and
    far above eps / b) each stay float64 rounding of their own exact recurrence."""
    pieces = []
    original = AdamCoasting._smooth_sums

    def spy(self, x, row_class, classes, blocks, x_min, x_max):
        pieces.append(int(np.ceil(np.log(x_max[classes] / np.maximum(x_min[classes], 1e-300)) / PIECE_WIDTH).max()))
        return original(self, x, row_class, classes, blocks, x_min, x_max)

    monkeypatch.setattr(AdamCoasting, "_smooth_sums", spy)
    lr, eps, wd, last, n = 1e-3, 1e-8, 0.01, 50, 2000  # entries enough for the pieces' nodes; 8 checked
    rng = np.random.default_rng(k)
    x0 = 10.0 ** np.linspace(-14, 0, n)
    p0 = rng.uniform(-2, 2, n)
    v0 = x0 * x0
    m0 = rng.choice([-1.0, 1.0], n) * x0 * rng.uniform(0.1, 1.0, n)
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    params = caught_up_all(p0, m0, v0, last, last + k, cfg).params
    assert pieces and max(pieces) > 10  # the interpolant took them, in many pieces
    c = 1.0 - lr * wd
    for i in np.linspace(0, n - 1, 8).astype(int).tolist():
        ref_p, _, _, terms = exact_dense_long(p0[i], m0[i], v0[i], last, k, lr, beta1, beta2, eps, c)
        scale = abs(mpmath.mpf(c) ** k * p0[i]) + terms
        err = float(abs(mpmath.mpf(float(params[i])) - ref_p) / (scale * EPS64))
        assert err <= BOUND_EPS, (i, err)


def test_coordinates_with_one_sqrt_v_through_many_blocks_take_one_node_each_exactly():
    """Forty coordinates with the same sqrt(v): their range of log x is a point, one piece of one node."""
    lr, beta1, beta2, eps, last, k, n = 1e-3, 0.9, 0.9, 1e-8, 50, 400, 40
    p0, m0, v0 = np.linspace(-1, 1, n), np.full(n, 3e-5), np.full(n, 1e-9)
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, mode="dense_equivalent")
    params = caught_up_all(p0, m0, v0, last, last + k, cfg).params
    coasted = params - p0
    assert np.ptp(coasted) <= 4 * EPS64 * np.abs(p0).max()  # one coasting for all, to the rounding of p0 + it
    ref_p, _, _, terms = exact_dense_long(p0[0], m0[0], v0[0], last, k, lr, beta1, beta2, eps, 1.0)
    assert float(abs(mpmath.mpf(float(params[0])) - ref_p) / ((abs(mpmath.mpf(p0[0])) + terms) * EPS64)) <= BOUND_EPS


@pytest.mark.parametrize(
    ("g", "k", "wd"),
    [(1e-3, 50_000, 1.0), (1e-6, 50_000, 1.0), (1.0, 20_000, 1.0), (1e-3, 50_000, 1.0001), (1e-3, 50_000, 0.9999)],
)
def test_adamw_with_decay_equal_to_beta1_sums_a_long_gap_at_once_exactly(g, k, wd, monkeypatch):
    """c = 1 - lr * wd = beta1 (0.99; or 1e-6 relative below or above it): every step of the gap weighs about the
    same, and the window is the whole gap. Past the steps where b x is below eps and the bias corrections are 1,
    the terms are c**(k-i) beta1**i / eps: one geometric sum. The steps summed before it are bounded (no replay),
    and the result is float64 rounding of the exact recurrence."""
    replays = []
    monkeypatch.setattr(AdamCoasting, "_replay", lambda *a: replays.append(1))
    errors = long_error_in_eps(0.7, 0.4 * g, g * g, 3, k, 0.01, 0.99, 0.9, 1e-8, wd)
    assert replays == []
    assert errors is not None
    err_p, err_m, err_v = errors
    assert err_p <= BOUND_EPS and err_m <= 2.0 and err_v <= 2.0, (err_p, err_m, err_v)


@pytest.mark.parametrize("e", [1, 423, 12_000])
@pytest.mark.parametrize(("beta1", "beta2", "wd"), [(0.99, 0.999, 0.0), (0.9, 0.9999, 0.1), (0.999, 0.99, 0.01)])
def test_the_expansion_raises_its_ratios_without_their_rounding(beta1, beta2, wd, e):
    """rho_n = beta1 / (c beta2**((n+1)/2)) rounded to float64 and raised to the e-th power erred by e times its
    rounding (185 epsilons at e = 423): every power is within 4 epsilons of the exact one."""
    coasting = AdamCoasting(0.01, beta1, beta2, 1e-8, wd, np.float64)
    got = coasting._rho_power(np.array([float(e)]))[:, 0]
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    for n, value in enumerate(got.tolist()):
        exact = (mp.mpf(coasting.decay1) / (mp.mpf(coasting.c) * mp.mpf(coasting.decay2) ** (mp.mpf(n + 1) / 2))) ** e
        if exact < np.finfo(np.float64).tiny:  # below float64's normal range: only its underflow can be asked
            assert value < np.finfo(np.float64).tiny
            continue
        assert abs(mp.mpf(value) - exact) <= 4 * EPS64 * exact, (n, float((mp.mpf(value) - exact) / exact) / EPS64)


def test_a_catch_up_by_the_expansion_after_hundreds_of_steps_is_float64_rounding():
    """lr 0.5, beta1 0.99, beta2 0.999, eps 1e-12, 423 dormant steps, sqrt(v) far above eps: the expansion's
    weights were 37 to 41 epsilons of the result's scale off (its ratios raised with their rounding); now
    within 8."""
    for x in (2.8e-7, 7.2e-8, 2e-5):
        errors = long_error_in_eps(0.9, 0.6 * x, x * x, 648, 423, 0.5, 0.99, 0.999, 1e-12, 0.0)
        assert errors is not None and errors[0] <= 8.0, (x, errors)


@pytest.mark.parametrize("eps", [1e-14, 1e-12, 1e-10, 1e-8])
@pytest.mark.parametrize(("beta2", "k"), [(0.9, 3), (0.9, 40), (0.999, 3), (0.999, 200)])
def test_coordinates_of_one_block_are_each_float64_rounding_of_their_own_recurrence(eps, beta2, k):
    """Failed before (363 epsilons, eps = 1e-12, beta2 = 0.9, k = 3): coordinates caught up together share one
    Chebyshev block over their t = b x / (b x + eps); its term count read the theorem's degree as the number of
    terms, so one constant stood for H on an interval 1e-10 wide, right for a coordinate alone and not for two."""
    lr, beta1, wd, last = 0.015625, 0.9, 0.0, 128
    rng = np.random.default_rng(int(-np.log10(eps)) * 1000 + k)
    n = 12
    p0 = rng.uniform(-3, 3, n)
    v0 = rng.uniform(0.5e-6, 2e-6, n)  # sqrt(v) from 7e-4 to 1.4e-3: eps / (b x) near 1e-9 at eps = 1e-12
    m0 = rng.choice([-1.0, 1.0], n) * np.sqrt(v0) * rng.uniform(0.3, 1.0, n)
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    params = caught_up_all(p0, m0, v0, last, last + k, cfg).params
    for i in range(n):
        ref_p, _, _, terms = exact_dense(p0[i], m0[i], v0[i], last, k, lr, beta1, beta2, eps, 1.0)
        err = float(abs(mpmath.mpf(float(params[i])) - ref_p) / ((abs(mpmath.mpf(p0[i])) + terms) * EPS64))
        assert err <= BOUND_EPS, (i, err)


def exact_dense_scheduled(p, m, v, s, k, rates, beta1, beta2, eps, factors):
    """:func:`exact_dense` with step ``s + i``'s own rate ``rates[i - 1]`` and decay factor ``factors[i - 1]``."""
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    f = mp.mpf
    p, m, v, b2, eps = (f(float(x)) for x in (p, m, v, beta2, eps))
    b1 = 1 - f(1.0 - beta1)  # torch's lerp (dormant_factors)
    scale_terms = f(0)
    for i in range(1, k + 1):
        m, v = b1 * m, b2 * v
        bc1, bc2_sqrt = 1.0 - beta1 ** (s + i), math.sqrt(1.0 - beta2 ** (s + i))  # as torch computes them
        step = f(rates[i - 1]) * (m / f(bc1)) / (mp.sqrt(v) / f(bc2_sqrt) + eps)
        c = f(factors[i - 1])
        p = c * p - step
        scale_terms = c * scale_terms + abs(step)
    return p, scale_terms


scheduled_input = st.fixed_dictionaries(
    {
        "schedule": st.sampled_from(
            [
                so.schedules.linear_warmup(0.05, 700),
                so.schedules.warmup_cosine(0.02, 50, 3000, 1e-4),
                so.schedules.step_decay(0.01, 400, 0.3),
                so.schedules.exponential(0.1, 0.999),
            ]
        ),
        "beta1": st.sampled_from([0.5, 0.9, 0.99, 0.999]),
        "beta2": st.sampled_from([0.9, 0.999, 0.9999]),
        "eps": st.sampled_from([1e-12, 1e-8, 1e-4, 1.0]),
        "wd": st.sampled_from([0.0, 0.01, 1.0]),
        "scale": st.integers(-12, 0).map(lambda e: 10.0**e),
        "ratio": st.floats(0.05, 1.0),
        "sign": st.sampled_from([-1.0, 1.0]),
        "p": st.floats(-3, 3).filter(lambda x: abs(x) > 1e-3),
        "s": st.integers(1, 2500),
        "k": st.integers(1, 4000),
    }
)


@settings(max_examples=25, deadline=None)
@given(scheduled_input)
def test_a_catch_up_under_a_schedule_is_float64_rounding_of_the_exact_recurrence(d):
    """Each dormant step at its own rate and decay, schedule changes inside the gap, by the blocks (no replay)."""
    g = d["scale"]
    v, m = g * g, d["sign"] * d["ratio"] * g
    s, k, wd, schedule = d["s"], d["k"], d["wd"], d["schedule"]
    cfg = so.SparseAdamConfig(
        lr=schedule, beta1=d["beta1"], beta2=d["beta2"], eps=d["eps"], weight_decay=wd, mode="dense_equivalent"
    )
    got, _, _ = caught_up(d["p"], m, v, s, k, cfg)
    rates = [schedule(t) for t in range(s + 1, s + k + 1)]
    factors = [1.0 - r * wd for r in rates]  # torch: Python floats
    ref, terms = exact_dense_scheduled(d["p"], m, v, s, k, rates, d["beta1"], d["beta2"], d["eps"], factors)
    decay = mpmath.mpf(1)
    for c in factors:
        decay *= mpmath.mpf(c)
    scale = abs(decay * d["p"]) + terms
    err = float(abs(mpmath.mpf(got) - ref) / (scale * EPS64))
    assert err <= BOUND_EPS, (d, err)


@pytest.mark.parametrize(
    "case",
    [
        # (p, m, v, s, k, lr, beta1, beta2, eps, wd): 1 - lr * wd <= beta1, the terms grow towards the gap's end
        (0.7, 1e-3, 1e-6, 3, 3000, 0.5, 0.9, 0.999, 1e-8, 0.5),  # c / beta1 = 0.83
        (-1.3, -2.0, 4.0, 40, 2000, 0.1, 0.9, 0.999, 1e-3, 1.0),  # c == beta1 in float64? (0.9 both)
        (0.2, 3e-7, 1e-12, 100, 5000, 1e-2, 0.999, 0.999, 1e-8, 0.1),  # c = 0.999 = beta1
        (1.5, 1e-9, 1e-18, 7, 20_000, 1e-3, 0.9999, 0.9999, 1e-8, 0.5),  # c / beta1 = 0.99959
        (0.4, 0.05, 0.01, 1, 50, 1.0, 0.9, 0.99, 1e-8, 1.0),  # c = 0: only the last step's term is left
    ],
)
def test_adamw_whose_decay_outpaces_beta1_against_the_exact_recurrence(case):
    """c = 1 - lr * wd <= beta1: the coasting's terms grow towards the end of the gap, and the window is cut from
    the end (sparse_opt._adam_coasting, *Terms that grow*); before, every such coordinate was replayed step by
    step until its m underflowed (O(gap), minutes for beta1 = 0.9999 after 10**6 steps)."""
    errors = long_error_in_eps(*case)
    assert errors is not None
    err_p, err_m, err_v = errors
    assert err_p <= BOUND_EPS and err_m <= 2.0 and err_v <= 2.0, (err_p, err_m, err_v)


# -- Long windows through Gauss rules on pieces of steps --------------------------------------------------------------
#
# A window of QUADRATURE_FROM steps or more (at a constant rate) is summed through pieces of consecutive steps, each
# an m-point Gauss rule for sums over integers (sparse_opt._discrete_gauss) with m from a bound on the terms on the
# piece's Bernstein ellipse. Measured on these cases: at most 1.8 epsilons; with every piece's m halved, 5.7 to 48.

def spy_on_nodes(monkeypatch) -> list[int]:
    """The pseudo-steps of each call of ``AdamCoasting._node_terms`` from now on: whether Gauss rules summed a window."""
    nodes: list[int] = []
    original = AdamCoasting._node_terms
    monkeypatch.setattr(AdamCoasting, "_node_terms", lambda self, *a: nodes.append(a[3].size) or original(self, *a))
    return nodes


#: Error allowed where the quadrature sums the window, in float64 epsilons of the parameter's scale.
QUADRATURE_BOUND_EPS = 4.0

QUADRATURE_CASES = [
    # (p, m, v, s, k, lr, beta1, beta2, eps, wd)
    (1.0, 3e-7, 1e-12, 20, 10**6, 1e-3, 0.999, 0.999, 1e-8, 0.0),
    (-0.5, -2e-9, 4e-18, 5, 2**40, 1e-3, 0.999, 0.9999, 1e-8, 0.0),
    (1.3, 2e-9, 4e-18, 121, 31_275, 1e-3, 0.999, 0.5, 1e-16, 0.1),
    (0.8, -3e-10, 1e-19, 1607, 43_603, 0.5, 0.999, 0.9, 1e-12, 0.0),
    (-1.1, 2.2, 18.5, 1802, 123_111, 1e-3, 0.999, 0.5, 1e-8, 0.01),
    (1.0, 1e-3, 1e-6, 10, 400_000, 1e-3, 0.9999, 0.9999, 1e-8, 0.0),
]


@pytest.mark.parametrize("case", QUADRATURE_CASES)
def test_long_windows_are_summed_through_gauss_rules_on_pieces_exactly(case, monkeypatch):
    """beta1 0.999 and 0.9999, windows of 10**4 to 4 * 10**5 steps, b x above, near and below eps: each summed
    through a few thousand pseudo-steps, and float64 rounding of the exact recurrence to a few epsilons."""
    nodes = spy_on_nodes(monkeypatch)
    errors = long_error_in_eps(*case)
    assert nodes, "the window was not summed through pieces"
    assert errors is not None
    err_p, err_m, err_v = errors
    assert err_p <= QUADRATURE_BOUND_EPS and err_m <= 2.0 and err_v <= 2.0, (err_p, err_m, err_v)


#: numpy's long double: x87 extended precision (64-bit significand) on x86-64 Linux, float64 elsewhere.
EXTENDED = np.finfo(np.longdouble).eps < 1e-18


def exact_dense_extended(p, m, v, s, k, lr, beta1, beta2, eps, c, chunk=1 << 20, schedule=None):
    """Dense AdamW's zero-gradient steps at a constant rate, summed in 80-bit extended precision: ``(p, scale)``.

    For windows of millions of steps, which the 200-bit recurrence would take minutes to walk: every term of the
    coasting ``lr c**(k-i) (b1**i m / bc1_j) / (sqrt(beta2**i v) / bc2_j + eps)`` (``bc1_j``, ``bc2_j`` torch's
    float64 bias corrections, by ``math.pow``) is computed vectorised in long double, the powers as
    ``exp(i log b)`` with ``log b`` from mpmath (each power within 1e-19 relative), and summed by numpy: against
    the 200-bit recurrence within 0.013 and 0.086 of a float64 epsilon of the scale on the cases below (the sums of
    tens of thousands of terms of one sign round a few hundred long-double ulps), ten times finer than the bounds
    it checks. With ``schedule`` (and ``c = 1``), each step's rate is the schedule's float64 value there instead of
    ``lr``.
    """
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    f = mp.mpf
    ld = np.longdouble
    log_b1 = ld(mpmath.nstr(mp.log(1 - f(1.0 - beta1)), 30))  # torch's lerp (dormant_factors)
    log_b2 = ld(mpmath.nstr(mp.log(f(beta2)) / 2, 30))
    log_c = ld(mpmath.nstr(mp.log(f(c)), 30))
    power = np.frompyfunc(math.pow, 2, 1)
    ones = [math.ceil(-54 / math.log2(b)) for b in (beta1, beta2)]  # from these steps on 1 - beta**j is 1.0
    total = absolute = ld(0)
    x = np.sqrt(ld(v))
    for lo in range(1, k + 1, chunk):
        i = np.arange(lo, min(k + 1, lo + chunk), dtype=np.int64)
        j = (s + i).astype(np.float64)
        bc1, bc2 = np.ones(i.size), np.ones(i.size)
        early = s + i < ones[0]
        bc1[early] = 1.0 - np.asarray(power(beta1, j[early]), dtype=np.float64)
        early = s + i < ones[1]
        bc2[early] = np.sqrt(1.0 - np.asarray(power(beta2, j[early]), dtype=np.float64))
        n = i.astype(ld)
        a = np.exp(n * log_b1) * ld(m) / bc1.astype(ld)
        b = np.exp(n * log_b2) * x / bc2.astype(ld)
        rate = ld(lr) if schedule is None else so.schedules.values_at(schedule, s + i).astype(ld)
        term = rate * np.exp((ld(k) - n) * log_c) * a / (b + ld(eps))
        total += term.sum()
        absolute += np.abs(term).sum()
    decayed = np.exp(ld(k) * log_c) * ld(p)
    return decayed - total, abs(decayed) + absolute


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(
    "case",
    [
        (1.0, 1e-3, 1e-6, 10, 20_000, 1e-3, 0.999, 0.999, 1e-8, 1.0),
        (-0.4, 2e-9, 4e-18, 300, 40_000, 1e-2, 0.9999, 0.9, 1e-12, 0.01),
    ],
)
def test_the_extended_precision_reference_agrees_with_the_200_bit_recurrence(case):
    """exact_dense_extended against exact_dense_long where both run: within a tenth of a float64 epsilon."""
    p, m, v, s, k, lr, beta1, beta2, eps, wd = case
    c = 1.0 - lr * wd
    ext, scale = exact_dense_extended(p, m, v, s, k, lr, beta1, beta2, eps, c)
    ref_p, _, _, terms = exact_dense_long(p, m, v, s, k, lr, beta1, beta2, eps, c)
    full = abs(mpmath.mpf(c) ** k * p) + terms
    assert abs(mpmath.mpf(str(ext)) - ref_p) / (full * EPS64) <= 0.1
    assert abs(mpmath.mpf(str(scale)) - full) / full <= 1e-15


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(
    "case",
    [
        # (p, m, v, s, k, lr, beta1, beta2, eps, wd): c = 1 - lr * wd equal to beta1 or 2e-6 below it, beta1 above
        # 0.99996: 3.7 million steps before the bias corrections settle (replayed before, O(gap): 117 to 220 s, and
        # 60 to 630 float64 epsilons off the exact recurrence, dense Adam's own roundings)
        (1.0, 1e-3, 1e-6, 10, 6_000_000, 1e-3, 0.99999, 0.999, 1e-8, 1e-2),
        (0.5, -3e-9, 1e-17, 100, 5_000_000, 1e-3, 0.99999, 0.9999, 1e-8, 1.2e-2),
        (1.0, 1e-3, 1e-6, 10, 3_000_000, 1e-3, 0.99998, 0.999, 1e-8, 2e-2),
    ],
)
def test_adamw_with_decay_near_beta1_above_0_99996_sums_millions_of_steps_exactly(case, monkeypatch):
    """Every step of the gap weighs about the same and the bias corrections take 3.7 million steps to settle: the
    window is summed through Gauss rules on pieces (no replay), float64 rounding of the exact recurrence."""
    replays = []
    monkeypatch.setattr(AdamCoasting, "_replay", lambda *a: replays.append(1))
    p, m, v, s, k, lr, beta1, beta2, eps, wd = case
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    got, _, _ = caught_up(p, m, v, s, k, cfg)
    ref, scale = exact_dense_extended(p, m, v, s, k, lr, beta1, beta2, eps, 1.0 - lr * wd)
    assert replays == []
    assert float(abs(np.longdouble(got) - ref) / (scale * np.longdouble(EPS64))) <= QUADRATURE_BOUND_EPS


ADAMW_SCHEDULED_CASES = [
    # (schedule, wd, dtype, m, v, s, k, beta1, beta2): decoupled decay under a schedule, whose factors come in runs of
    # one value (LearningRate.runs): float32 factors of lr * wd = 1e-5 (the decay after 10**6 steps about e**-7),
    # and float64 ones of lr * wd = 1e-13, so that the sum is checked at float64's precision too
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 1e-10, np.float64, 3e-7, 1e-12, 20, 10**6, 0.999, 0.999),
    (so.schedules.exponential(1e-2, 0.9995), 1e-11, np.float64, -1e-4, 1e-8, 7, 10**5, 0.999, 0.9999),
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 1e-2, np.float32, 3e-4, 1e-6, 20, 10**6, 0.999, 0.999),
    (so.schedules.linear_warmup(1e-3, 50_000), 5e-2, np.float32, -2e-5, 1e-9, 100, 300_000, 0.9999, 0.999),
]


@pytest.mark.parametrize("case", ADAMW_SCHEDULED_CASES)
def test_adamw_under_a_schedule_sums_long_windows_through_gauss_rules_exactly(case, monkeypatch):
    """The windows cut at the schedule's breaks and where the rounded decay factor changes; on each piece the decay
    after a pseudo-step is a power of its run's factor: the dtype's rounding of the exact recurrence, with pieces and
    no step-by-step pass over the gap. Float32: within QUADRATURE_BOUND_EPS float32 epsilons (measured 1.3 and 1.3).
    Float64: the decay product multiplies one power per run, one rounding each (1,800 runs over the cosine of the
    first case: the product within 10.6 epsilons of the exact one, where the step-by-step product of 10**6 factors
    was 13.3 off), so the bound of the scheduled catch-ups, BOUND_EPS (measured 6.8 and 0.9)."""
    schedule, wd, dtype, m, v, s, k, beta1, beta2 = case
    nodes, passes = spy_on_nodes(monkeypatch), []
    over = so._rates.LearningRate.over
    monkeypatch.setattr(so._rates.LearningRate, "over", lambda self, a, b: passes.append(b - a) or over(self, a, b))
    cfg = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=1e-8, weight_decay=wd, mode="dense_equivalent")
    assert so._rates.LearningRate(schedule, wd).runs(np.dtype(dtype)) is not None
    opt = so.SparseAdam(np.array([1.0], dtype=dtype), cfg)
    state = opt.state_dict()
    state.update(step_count=np.int64(s + k), last_step=np.array([s]), m=np.array([m], dtype), v=np.array([v], dtype))
    opt.load_state_dict(state)
    opt.catch_up(np.arange(1))
    got = float(opt.params[0])
    ref, scale = exact_dense_scheduled_long(1.0, float(dtype(m)), float(dtype(v)), s, k, schedule, beta1, beta2, 1e-8, wd, dtype)
    err = float(abs(mpmath.mpf(got) - ref) / (scale * float(np.finfo(dtype).eps)))
    assert nodes and sum(passes) < 10_000, (len(nodes), sum(passes))
    assert err <= (QUADRATURE_BOUND_EPS if dtype == np.float32 else BOUND_EPS), err


def caught_up_rows(p, m, v, last, through, cfg, dtype=np.float64):
    """``SparseAdamTable`` in DENSE_EQUIVALENT over rows ``(R, C)`` of ``dtype``, row ``r`` last touched at ``last[r]``,
    every row caught up through ``through``: the parameters."""
    opt = so.SparseAdamTable(np.array(p, dtype=dtype), cfg)
    state = opt.state_dict()
    state.update(step_count=np.int64(through), m=np.array(m, dtype=dtype), v=np.array(v, dtype=dtype))
    state.update(last_step=np.asarray(last, dtype=np.int64))
    opt.load_state_dict(state)
    opt.catch_up(np.arange(len(last)))
    return opt.params


def spy_on_prefix_sums(monkeypatch, name: str = "_prefix_sums") -> list:
    """What each call of AdamCoasting's ``name`` (its prefix sums, or its settled sums) returns, in order (None where
    the windows were summed otherwise)."""
    results = []
    original = getattr(AdamCoasting, name)
    monkeypatch.setattr(AdamCoasting, name, lambda self, *a: results.append(original(self, *a)) or results[-1])
    return results


def late_moments(seed, scale, rows=200, cols=8):
    """A float32 table's state late in training: ``(gaps, m, v)``, row ``r`` last touched about ``r**2.2`` steps before
    (1 to 10**5), ``sqrt(v)`` about 0.3 of ``scale`` and ``m`` up to it."""
    rng = np.random.default_rng(seed)
    gaps = np.sort(np.clip((np.arange(1, rows + 1) ** 2.2 * rng.uniform(0.5, 2.0, rows)).astype(np.int64), 1, 10**5))
    x = ((np.abs(rng.standard_normal((rows, cols))) * 0.3 + 1e-3) * scale).astype(np.float32)
    return gaps, (x * rng.uniform(-1.0, 1.0, x.shape)).astype(np.float32), (x * x).astype(np.float32)


def drawn_moments(rng, rows, cols, log_scale):
    """``(gaps, m, v)`` of a float32 table: distinct gaps from 1 to 10**5, ``sqrt(v)`` over three decades below the scale."""
    gaps = np.sort(rng.choice(np.arange(1, 10**5), rows, replace=False))
    x = (10.0 ** (log_scale + rng.uniform(-3.0, 0.0, (rows, cols)))).astype(np.float32)
    return gaps, (x * rng.uniform(-1.0, 1.0, x.shape)).astype(np.float32), (x * x).astype(np.float32)


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(
    ("beta1", "beta2", "lr", "wd", "through", "reference"),
    [
        (0.99, 0.999, 1e-2, 1.0, 6000, "200-bit"),  # c = beta1: every step counts
        (0.99, 0.9, 1e-2, 1.5, 4000, "200-bit"),  # c / beta1 = 0.995: the last ~10**4 steps
        (0.99999, 0.999, 1e-3, 1e-2, 4_000_000, "extended"),  # 3.7 million steps before the bias corrections settle
    ],
)
def test_rows_last_touched_at_different_steps_share_a_window_cut_from_the_end_exactly(
    beta1, beta2, lr, wd, through, reference, monkeypatch
):
    """AdamW with c = 1 - lr * wd <= beta1 (the terms grow towards the end of the gap) and rows last touched at
    different steps: their windows all end at the catch-up's step, so the steps after the latest last step are
    summed once for all (S(s, k) = c**tail S(s, head) + beta1**head S(latest, tail, beta2**(head / 2) x)); each
    coordinate is float64 rounding of its own exact recurrence."""
    shared = []
    original = AdamCoasting._sum_rows
    monkeypatch.setattr(AdamCoasting, "_sum_rows", lambda self, *a, **kw: shared.append(a[2].size) or original(self, *a, **kw))
    last = np.array([3, 10, 57, 200, 201, 260])
    rng = np.random.default_rng(7)
    x = 10.0 ** rng.uniform(-9, 0, (last.size, 2))
    m = x * rng.uniform(-1.0, 1.0, x.shape)
    p = rng.uniform(-1.0, 1.0, x.shape)
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=1e-8, weight_decay=wd, mode="dense_equivalent")
    got = caught_up_rows(p, m, x * x, last, through, cfg)
    assert 1 in shared  # one window summed for every row: the steps after the latest last step
    c = 1.0 - lr * wd
    for r, s in enumerate(last.tolist()):
        for col in range(x.shape[1]):
            args = (p[r, col], m[r, col], x[r, col] ** 2, s, through - s, lr, beta1, beta2, 1e-8, c)
            if reference == "extended":
                ref, scale = exact_dense_extended(*args)
                err = float(abs(np.longdouble(got[r, col]) - ref) / (scale * np.longdouble(EPS64)))
            else:
                ref, _, _, terms = exact_dense_long(*args)
                scale = abs(mpmath.mpf(c) ** (through - s) * p[r, col]) + terms
                err = float(abs(mpmath.mpf(float(got[r, col])) - ref) / (scale * EPS64))
            assert err <= BOUND_EPS, (r, col, err)


#: Late in a long run (AdamCoasting._prefix_sums): (beta1, beta2, wd, gradient scale) of float32 tables.
LATE_CASES = [(0.9, 0.999, 0.0, 1e-6), (0.999, 0.999, 0.01, 1.0), (0.9999, 0.999, 0.0, 1e-6), (0.999, 0.9999, 0.01, 1e-3)]


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(("beta1", "beta2", "wd", "scale"), LATE_CASES)
def test_rows_late_in_training_are_summed_through_prefix_sums_exactly(beta1, beta2, wd, scale, monkeypatch):
    """A float32 table at step 10**6 whose row r was last touched about r steps before (gaps from 1 to 10**5): every
    window is a difference of one function of x, the settled sum of every step (the bias corrections are 1;
    AdamCoasting._settled_sums); each coordinate is within QUADRATURE_BOUND_EPS float32 epsilons of its scale of the
    exact recurrence with float32's dormant factors (80-bit), the parameter 0 so that the scale is the coasting's
    own (measured: at most 1.27 to 1.50; through the prefix sums, one sequence cut at every window's end, 0.87 to
    1.50; summed window by window, 1.14 to 3.17)."""
    results = spy_on_prefix_sums(monkeypatch, "_settled_sums")
    monkeypatch.setattr(_adam_coasting, "NODE_BATCH", 1 << 12)  # the stretches at the nodes in many batches, as a large table's
    through, lr = 10**6, 1e-3
    gaps, m, v = late_moments([7, int(beta1 * 1e4)], scale)
    rows, cols = m.shape
    last = through - gaps
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=1e-8, weight_decay=wd, mode="dense_equivalent")
    params = caught_up_rows(np.zeros(m.shape), m, v, last, through, cfg, np.float32)  # p = 0: the coasting's scale
    assert results and all(r is not None for r in results)  # every window through the settled sum (or its fallbacks)
    d1, d2, c = _adam_coasting.dormant_factors(beta1, beta2, 1.0 - lr * wd, np.dtype(np.float32))
    eps32 = np.longdouble(np.finfo(np.float32).eps)
    for r in np.linspace(0, rows - 1, 12).astype(int).tolist():
        for col in (0, cols - 1):
            args = (0.0, float(m[r, col]), float(v[r, col]), int(last[r]), int(gaps[r]), lr, d1, d2, 1e-8, c)
            ref, ref_scale = exact_dense_extended(*args)
            err = float(abs(np.longdouble(params[r, col]) - ref) / (ref_scale * eps32))
            assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([0.5, 0.9, 0.99, 0.999, 0.9999]),  # beta1
    st.sampled_from([0.9, 0.99, 0.999, 0.9999]),  # beta2
    st.sampled_from([1e-12, 1e-8, 1e-3]),  # eps
    st.sampled_from([0.0, 0.01, 1.0]),  # weight_decay (lr 1e-3)
    st.floats(-12.0, 0.0),  # log10 of the gradient scale
    st.integers(0, 2**31),  # seed
)
def test_late_rows_at_any_hyper_parameters_are_the_exact_recurrence(beta1, beta2, eps, wd, log_scale, seed):
    """As the test above over drawn hyper-parameters: rows with distinct last steps from 1 to 10**5 dormant steps
    before step 10**6, sqrt(v) spanning three decades of the drawn scale, through the prefix sums unless 1 - lr *
    weight_decay <= beta1; every coordinate checked is within QUADRATURE_BOUND_EPS float32 epsilons of its coasting
    of the exact recurrence."""
    rng = np.random.default_rng(seed)
    rows, cols, through, lr = 64, 16, 10**6, 1e-3
    gaps, m, v = drawn_moments(rng, rows, cols, log_scale)
    x = np.sqrt(v)
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, mode="dense_equivalent")
    coasting = AdamCoasting(lr, beta1, beta2, eps, wd, np.float32)
    shared = coasting._prefix_sums(x, np.arange(rows), through - gaps, gaps, x.min(axis=1), x.max(axis=1))
    assert (shared is not None) == (not coasting.reverse)  # terms that grow along the gap: windows cut from the end
    params = caught_up_rows(np.zeros(m.shape), m, v, through - gaps, through, cfg, np.float32)
    d1, d2, c = _adam_coasting.dormant_factors(beta1, beta2, 1.0 - lr * wd, np.dtype(np.float32))
    eps32 = np.longdouble(np.finfo(np.float32).eps)
    for r in rng.choice(rows, 4, replace=False).tolist():
        col = int(rng.integers(cols))
        args = (0.0, float(m[r, col]), float(v[r, col]), through - int(gaps[r]), int(gaps[r]), lr, d1, d2, eps, c)
        ref, ref_scale = exact_dense_extended(*args)
        # where the coasting is subnormal in float32, each of the few float32 operations that make it rounds to a
        # multiple of 2**-149: an absolute error of a few of those, 2**-147, whatever its scale
        err = float(max(abs(np.longdouble(params[r, col]) - ref) - np.longdouble(2.0**-147), 0) / (ref_scale * eps32))
        assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize("wd", [0.01, 0.0])
def test_late_rows_of_every_layout_are_the_exact_recurrence(wd, monkeypatch):
    """The settled sum (Adam and AdamW) over a table late in training whose rows mix every layout the catch-up sees:
    rows touched on the step before (no dormant step), rows that do not coast (m = 0), rows that coast in some
    entries only, and entries with v = 0 (x at the bottom of the interpolants' range): each coordinate within
    QUADRATURE_BOUND_EPS float32 epsilons of its scale of the exact recurrence (80-bit; measured at most 1.23)."""
    results = spy_on_prefix_sums(monkeypatch, "_settled_sums")
    rng = np.random.default_rng(11)
    rows, cols, through, lr = 120, 32, 10**6, 1e-3
    gaps = rng.integers(0, 50_000, rows)
    gaps[:10] = 0
    x = (10.0 ** rng.uniform(-9, 0, (rows, cols))).astype(np.float32)
    m = (x * rng.uniform(-1, 1, x.shape)).astype(np.float32)
    m[10:20] = 0
    m[20:30, :3] = 0
    v = (x * x).astype(np.float32)
    v[30:40, 2] = 0
    p = rng.standard_normal((rows, cols)).astype(np.float32)
    cfg = so.SparseAdamConfig(lr=lr, beta1=0.999, beta2=0.999, eps=1e-8, weight_decay=wd, mode="dense_equivalent")
    params = caught_up_rows(p, m, v, through - gaps, through, cfg, np.float32)
    assert results and all(r is not None for r in results)
    d1, d2, c = _adam_coasting.dormant_factors(0.999, 0.999, 1.0 - lr * wd, np.dtype(np.float32))
    eps32 = np.longdouble(np.finfo(np.float32).eps)
    picks = [(r, col) for r in (12, 21, 25, 33, 37, 45, 80, 119) for col in (0, 2, 31)]
    for r, col in picks:
        if gaps[r] == 0:
            continue
        args = (float(p[r, col]), float(m[r, col]), float(v[r, col]), through - int(gaps[r]), int(gaps[r]), lr, d1, d2, 1e-8, c)
        ref, ref_scale = exact_dense_extended(*args)
        err = float(abs(np.longdouble(params[r, col]) - ref) / (ref_scale * eps32))
        assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)
    np.testing.assert_array_equal(params[:10], p[:10])  # no dormant step: untouched


#: Late in a long run under a schedule: (schedule, beta1, beta2, gradient scale, through the settled sums).
LATE_SCHEDULED_CASES = [
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 0.999, 0.999, 1e-6, True),
    (so.schedules.warmup_cosine(1e-3, 1000, 1_200_000, 0.0), 0.9, 0.999, 1e-6, True),  # near the end of a cosine to 0
    (so.schedules.warmup_cosine(1e-3, 1000, 1_000_100, 1e-5), 0.999, 0.999, 1e-6, True),  # 100 steps before its end
    (so.schedules.warmup_cosine(1e-2, 1000, 3_000_000, 1e-2), 0.9999, 0.999, 1e-3, True),  # a flat cosine
    (so.schedules.warmup_cosine(1e-3, 1000, 3_000_000, 3e-3), 0.9999, 0.999, 1e-3, True),  # a rising cosine
    (so.schedules.linear_warmup(1e-3, 2_000_000), 0.999, 0.9999, 1e-6, False),
    (so.schedules.warmup_cosine(1e-3, 1000, 800_000, 1e-5), 0.999, 0.999, 1.0, True),  # after the cosine: constant
    (so.schedules.warmup_cosine(1e-3, 1000, 970_000, 1e-5), 0.999, 0.9999, 1e-6, True),  # windows across its end
    (so.schedules.exponential(1e-3, 0.999999), 0.9999, 0.999, 1e-6, True),
    (so.schedules.step_decay(1e-3, 30_000, 0.5), 0.999, 0.999, 1e-6, True),  # windows across its drops
]


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(("schedule", "beta1", "beta2", "scale", "settled"), LATE_SCHEDULED_CASES)
def test_rows_late_in_training_under_a_schedule_are_summed_through_settled_or_prefix_sums_exactly(
    schedule, beta1, beta2, scale, settled, monkeypatch
):
    """Under a cosine (falling to 1e-5 or to 0, flat or rising) or after it, each window's rates are two geometric
    sequences of the dormant step, one complex, whose settled sums give every window (AdamCoasting._settled_rates);
    under an exponential decay one, of ratio gamma; windows across a step decay's drops or the cosine's end are cut
    into pieces, each a window of its own (AdamCoasting._settled_pieces);
    under a warm-up they are a few sequences times factors of its last step, so the windows are prefixes of those
    sequences (AdamCoasting._rate_sequences). Each coordinate of a float32 table late in training is within
    QUADRATURE_BOUND_EPS float32 epsilons of its scale of the exact recurrence with every step's own rate (80-bit;
    measured at most 0.84)."""
    found = spy_on_prefix_sums(monkeypatch, "_settled_sums")
    results = spy_on_prefix_sums(monkeypatch)
    through = 10**6
    gaps, m, v = late_moments([9, int(beta1 * 1e4)], scale)
    rows, cols = m.shape
    last = through - gaps
    cfg = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=1e-8, mode="dense_equivalent")
    params = caught_up_rows(np.zeros(m.shape), m, v, last, through, cfg, np.float32)
    assert found and all((r is not None) == settled for r in found)  # every window through the settled sums
    if not settled:
        assert results and all(r is not None for r in results)  # every window through the prefix sums
    d1, d2, _ = _adam_coasting.dormant_factors(beta1, beta2, 1.0, np.dtype(np.float32))
    eps32 = np.longdouble(np.finfo(np.float32).eps)
    for r in np.linspace(0, rows - 1, 10).astype(int).tolist():
        for col in (0, cols - 1):
            args = (0.0, float(m[r, col]), float(v[r, col]), int(last[r]), int(gaps[r]), 1.0, d1, d2, 1e-8, 1.0)
            ref, ref_scale = exact_dense_extended(*args, schedule=schedule)
            err = float(max(abs(np.longdouble(params[r, col]) - ref) - np.longdouble(2.0**-147), 0) / (ref_scale * eps32))
            assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)


#: The expansion under a schedule (AdamCoasting._window): (schedule, beta1, beta2, dtype, rows' first rates apart).
EXPANDED_SCHEDULED_CASES = [
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 0.9, 0.999, np.float32, False),
    (so.schedules.warmup_cosine(1e-3, 1000, 1_200_000, 0.0), 0.9, 0.999, np.float32, False),  # near the cosine's end
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 0.99, 0.9999, np.float64, False),
    (so.schedules.step_decay(1e-2, 30_000, 0.5), 0.9, 0.999, np.float64, False),  # windows across its drops
    (so.schedules.exponential(1e-3, 0.99999), 0.9, 0.999, np.float32, False),
    (so.schedules.warmup_cosine(1e-3, 1000, 1_000_100, 0.0), 0.9, 0.999, np.float32, True),  # rates near 0: blocks
]


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@pytest.mark.parametrize(("schedule", "beta1", "beta2", "dtype", "apart"), EXPANDED_SCHEDULED_CASES)
def test_rows_under_a_schedule_are_summed_through_the_expansion_exactly(schedule, beta1, beta2, dtype, apart, monkeypatch):
    """Adam under a built-in schedule, gradients of scale 1 (``sqrt(v)`` far above eps): the expansion, with each
    dormant step's rate in its weights, P_n(s, K) = sum_i rho_n**i u_n(s + i) lr_{s+i} (AdamCoasting._window), for
    rows last touched 1 to 10**5 steps before step 10**6: each coordinate within QUADRATURE_BOUND_EPS epsilons of the
    dtype of its scale of the exact recurrence with every step's own rate (80-bit). Where a long window starts at a
    rate below the peak / RATE_SPREAD (the last case: a cosine to 0 ending 100 steps after step 10**6), the tail's
    rates are not bounded by the first's and the blocks sum the rows instead."""
    expanded = []
    original = AdamCoasting._expand
    monkeypatch.setattr(AdamCoasting, "_expand", lambda self, *a: expanded.append(original(self, *a)) or expanded[-1])
    through = 10**6
    gaps, m, v = late_moments([5, int(beta1 * 1e4)], 1.0, rows=120, cols=4)
    last = through - gaps
    cfg = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=1e-8, mode="dense_equivalent")
    params = caught_up_rows(np.zeros(m.shape), m, v, last, through, cfg, dtype)
    assert expanded and all((r is None) == apart for r in expanded), [r is None for r in expanded]
    d1, d2, _ = _adam_coasting.dormant_factors(beta1, beta2, 1.0, np.dtype(dtype))
    eps = np.longdouble(np.finfo(dtype).eps)
    for r in np.linspace(0, len(gaps) - 1, 8).astype(int).tolist():
        for col in (0, m.shape[1] - 1):
            mr, vr = float(dtype(m[r, col])), float(dtype(v[r, col]))
            ref, ref_scale = exact_dense_extended(0.0, mr, vr, int(last[r]), int(gaps[r]), 1.0, d1, d2, 1e-8, 1.0, schedule=schedule)
            err = float(abs(np.longdouble(params[r, col]) - ref) / (ref_scale * eps))
            assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)


@pytest.mark.skipif(not EXTENDED, reason="numpy's long double is float64 on this platform")
@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from([0.9, 0.99, 0.999, 0.9999]),  # beta1
    st.sampled_from([0.99, 0.999, 0.9999]),  # beta2
    st.integers(1_050_000, 6_000_000),  # the cosine's end
    st.sampled_from([0.0, 1e-2, 0.5, 3.0]),  # its final rate over its peak (above 1: rising)
    st.floats(-9.0, 0.0),  # log10 of the gradient scale
    st.integers(0, 2**31),  # seed
)
def test_late_rows_under_any_cosine_are_the_exact_recurrence(beta1, beta2, total, final, log_scale, seed):
    """As the test above over drawn cosines and hyper-parameters: within QUADRATURE_BOUND_EPS float32 epsilons of the
    exact recurrence, through the prefix sums at least wherever the cosine ends 500,000 steps or more after the
    windows (no window crosses its end, and the rates' sequences cancel by a factor below 3 there); nearer its end
    the windows may cross it or cancel more, and are summed one by one."""
    rng = np.random.default_rng(seed)
    rows, cols, through = 64, 16, 10**6
    schedule = so.schedules.warmup_cosine(1e-3, 1000, total, final * 1e-3)
    gaps, m, v = drawn_moments(rng, rows, cols, log_scale)
    x = np.sqrt(v)
    cfg = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=1e-8, mode="dense_equivalent")
    coasting = AdamCoasting(so._rates.LearningRate(schedule), beta1, beta2, 1e-8, 0.0, np.float32)
    coasting._uses_blocks(through)
    shared = coasting._prefix_sums(x, np.arange(rows), through - gaps, gaps, x.min(axis=1), x.max(axis=1))
    assert shared is not None or total < 1_500_000
    params = caught_up_rows(np.zeros(m.shape), m, v, through - gaps, through, cfg, np.float32)
    d1, d2, _ = _adam_coasting.dormant_factors(beta1, beta2, 1.0, np.dtype(np.float32))
    eps32 = np.longdouble(np.finfo(np.float32).eps)
    for r in rng.choice(rows, 4, replace=False).tolist():
        col = int(rng.integers(cols))
        args = (0.0, float(m[r, col]), float(v[r, col]), through - int(gaps[r]), int(gaps[r]), 1.0, d1, d2, 1e-8, 1.0)
        ref, ref_scale = exact_dense_extended(*args, schedule=schedule)
        err = float(max(abs(np.longdouble(params[r, col]) - ref) - np.longdouble(2.0**-147), 0) / (ref_scale * eps32))
        assert err <= QUADRATURE_BOUND_EPS, (r, col, int(gaps[r]), err)


def test_prefix_sums_apply_late_in_training_in_float32_only():
    """Where the running sums' roundings exceed the dtype's (float64), before the bias corrections settle, under a
    schedule with weight decay, an exponential one or windows across its breaks, or where the nodes would be many
    against the entries, the windows are summed one by one (None); under a warm-up, a cosine or after it, without
    weight decay, they are not."""
    classes = np.arange(10**6 - 40, 10**6, dtype=np.int64)
    gaps = 10**6 - classes
    x = np.full((classes.size, 64), 1e-4)
    row_class = np.arange(classes.size)
    x_min = x_max = np.full(classes.size, 1e-4)

    def applies(lr, dtype, shift=0, wd=0.0):
        rate = lr if isinstance(lr, float) else so._rates.LearningRate(lr, wd)
        coasting = AdamCoasting(rate, 0.999, 0.999, 1e-8, wd, dtype)
        coasting._uses_blocks(10**6)
        return coasting._prefix_sums(x, row_class, classes - shift, gaps, x_min, x_max) is not None

    cosine = so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)
    assert applies(1e-3, np.float32)
    assert not applies(1e-3, np.float64)
    assert not applies(1e-3, np.float32, shift=10**6 - 100)  # last steps 60 to 100: the bias corrections still move
    assert applies(cosine, np.float32) and applies(so.schedules.linear_warmup(1e-3, 2_000_000), np.float32)
    assert applies(so.schedules.warmup_cosine(1e-3, 1000, 900_000, 1e-5), np.float32)  # after the cosine: constant
    assert not applies(cosine, np.float32, wd=0.01)
    assert not applies(so.schedules.exponential(1e-3, 0.999999), np.float32)
    assert not applies(so.schedules.warmup_cosine(1e-3, 1000, 999_990, 1e-5), np.float32)  # windows across its end
    # rows of 4 entries each last touched at its own step, sqrt(v) over 16 decades: the windows' values at the
    # nodes would outnumber the entries more than PREFIX_NODES times
    many = np.arange(10**6 - 400, 10**6, dtype=np.int64)
    narrow = np.tile(np.array([1e-12, 1e-6, 1.0, 1e4]), (many.size, 1))
    coasting = AdamCoasting(1e-3, 0.999, 0.999, 1e-8, 0.0, np.float32)
    args = (np.arange(many.size), many, 10**6 - many, narrow.min(axis=1), narrow.max(axis=1))
    assert coasting._prefix_sums(narrow, *args) is None
    assert coasting._prefix_sums(np.tile(narrow, 8), *args) is not None  # 32 entries a row: they pay for the nodes


def exact_dense_scheduled_long(p, m, v, s, k, schedule, beta1, beta2, eps, wd=0.0, dtype=np.float64):
    """:func:`exact_dense_long` under ``schedule``: ``(p, scale)``.

    Each dormant step at its own rate (the float64 ``schedule(t)``, as torch's LambdaLR gives it) and decoupled
    decay factor ``dtype(1 - lr_t * wd)``, with the moments' factors of torch's ``dtype`` kernels
    (:func:`sparse_opt._adam_coasting.dormant_factors`: in float32 ``beta2`` is ``float32(beta2)``); the reference stops
    where the rest of the coasting is below ``STOP`` of what is there, bounded with the schedule's peak rate
    (``peak |m_i| beta1 / ((1 - beta1)(1 - beta1**(i+1)) eps)``; the decays only shrink it), and the remaining
    decays are applied one by one, so that windows of 10**5 steps and more can be checked.
    """
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    f = mp.mpf
    d1, d2, _ = _adam_coasting.dormant_factors(beta1, beta2, 1.0, np.dtype(dtype))  # torch's kernels of dtype
    p, m, v, b1, b2, eps = (f(float(x)) for x in (p, m, v, d1, d2, eps))
    peak = f(so.schedules.peak(schedule))
    scale_terms = f(0)
    i = 0
    while i < k:
        i += 1
        m, v = b1 * m, b2 * v
        bc1, bc2_sqrt = 1.0 - beta1 ** (s + i), math.sqrt(1.0 - beta2 ** (s + i))  # as torch computes them
        rate = schedule(s + i)
        c = f(float(dtype(1.0 - rate * wd)))
        step = f(rate) * (m / f(bc1)) / (mp.sqrt(v) / f(bc2_sqrt) + eps)
        p = c * p - step
        scale_terms = c * scale_terms + abs(step)
        if i % 32 == 0:
            rest = peak * abs(m) * b1 / ((1 - b1) * f(1.0 - beta1 ** (s + i + 1)) * eps)
            if rest <= STOP * (abs(p) + scale_terms):
                break
    for t in range(s + i + 1, s + k + 1) if wd else ():
        c = f(float(dtype(1.0 - schedule(t) * wd)))
        p, scale_terms = c * p, c * scale_terms
    return p, scale_terms


SCHEDULED_QUADRATURE_CASES = [
    # (schedule, m, v, s, k, beta1, beta2, eps): windows of 4 * 10**4 to 3.7 * 10**5 steps that cross the schedule's
    # breaks: a warm-up's end, a cosine's end at final_lr 0 (its double zero), a rising cosine, the periods of a step
    # decay (of 3000 steps, and of 7: too short for pieces), an exponential decay; b x above, near and below eps
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 3e-7, 1e-12, 20, 10**6, 0.999, 0.999, 1e-8),
    (so.schedules.warmup_cosine(0.02, 50, 60_000, 0.0), -2e-9, 4e-18, 30_000, 80_000, 0.999, 0.9999, 1e-8),
    (so.schedules.warmup_cosine(1e-3, 10, 50_000, 5e-3), 1e-3, 1e-6, 3, 60_000, 0.999, 0.99, 1e-8),
    (so.schedules.step_decay(0.01, 3000, 0.5), 2e-9, 4e-18, 2500, 50_000, 0.999, 0.9, 1e-12),
    (so.schedules.step_decay(0.01, 7, 0.99), 1e-5, 1e-10, 100, 5000, 0.99, 0.999, 1e-8),
    (so.schedules.exponential(0.01, 0.9995), -1e-4, 1e-8, 7, 10**5, 0.999, 0.9999, 1e-8),
    (so.schedules.linear_warmup(0.05, 20_000), 5e-11, 1e-20, 10, 10**5, 0.999, 0.999, 1e-8),
    (so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5), 1e-3, 1e-6, 20, 400_000, 0.9999, 0.9999, 1e-8),
]


@pytest.mark.parametrize("case", SCHEDULED_QUADRATURE_CASES)
def test_long_windows_under_a_schedule_are_summed_through_gauss_rules_exactly(case, monkeypatch):
    """Each piece within one segment of the schedule, its rate continued to the Gauss rule's pseudo-steps and its
    growth on the ellipse in the bound (sparse_opt._analytic_rates): float64 rounding of the exact recurrence."""
    schedule, m, v, s, k, beta1, beta2, eps = case
    nodes = spy_on_nodes(monkeypatch)
    cfg = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=eps, mode="dense_equivalent")
    got, _, _ = caught_up(1.0, m, v, s, k, cfg)
    ref, terms = exact_dense_scheduled_long(1.0, m, v, s, k, schedule, beta1, beta2, eps)
    err = float(abs(mpmath.mpf(got) - ref) / ((1 + terms) * EPS64))
    # periods shorter than the least piece are summed step by step
    short = isinstance(schedule, so.schedules.StepDecay) and schedule.step_size < 2**_adam_coasting.MIN_PIECE_LEVEL
    assert bool(nodes) != short, "the window was not summed through pieces" if not short else nodes
    assert err <= QUADRATURE_BOUND_EPS, err


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("beta1", "beta2", "wd", "lr"),
    [
        (0.9999, 0.999, 0.0, 1e-3),
        (0.9999, 0.9999, 0.01, 1e-3),
        (0.99999, 0.9, 0.0, 1e-3),
        (0.99999, 0.999, 1e-2, 1e-3),  # c = 1 - lr * wd = beta1: every step of the gap counts
        (0.9999, 0.9999, 0.0, so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)),
        (0.9999, 0.999, 0.0, so.schedules.exponential(1e-3, 0.99999)),
        (0.9999, 0.999, 0.0, so.schedules.step_decay(1e-3, 100_000, 0.5)),
    ],
)
def test_the_terms_a_catch_up_evaluates_do_not_grow_with_the_gap(beta1, beta2, wd, lr, dtype, monkeypatch):
    """The cost of a catch-up, counted as the terms it evaluates (steps one by one and pseudo-steps of the Gauss
    rules), after 10**4, 10**6 and 2**40 dormant steps: a few thousand at most in float64 whatever the gap (the
    window alone is 3.7 * 10**5 steps for beta1 = 0.9999 and 3.7 * 10**6 for 0.99999), at a constant rate and under
    built-in schedules (a warm-up and a cosine over 2 * 10**6 steps, an exponential, and a step decay whose periods
    each add about 200 terms: O(window / step_size), here 4 periods; 40,000 terms for 185 periods of 2000 steps)."""
    counted = []
    step_terms, node_terms = AdamCoasting._step_terms, AdamCoasting._node_terms
    monkeypatch.setattr(AdamCoasting, "_step_terms", lambda self, s, k, o, i: counted.append(i.size) or step_terms(self, s, k, o, i))
    monkeypatch.setattr(AdamCoasting, "_node_terms", lambda self, *a: counted.append(a[3].size) or node_terms(self, *a))
    cfg = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=1e-8, weight_decay=wd, mode="dense_equivalent")
    rng = np.random.default_rng(0)
    x = (10.0 ** rng.uniform(-12, 0, (64, 8))).astype(dtype)
    terms = {}
    for gap in (10**4, 10**6, 2**40):
        counted.clear()
        opt = so.SparseAdamTable(np.ones((64, 8), dtype=dtype), cfg)
        state = opt.state_dict()
        last = np.arange(3, 67, dtype=np.int64)  # one last step per row
        state.update(step_count=np.int64(66 + gap), m=(0.5 * x).astype(dtype), v=(x * x).astype(dtype), last_step=last)
        opt.load_state_dict(state)
        opt.catch_up(np.arange(64))
        assert np.isfinite(opt.params).all()
        terms[gap] = sum(counted)
    assert max(terms.values()) <= 6000, terms


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([(0.9, 0.999, 0.0), (0.9999, 0.999, 0.0), (0.999, 0.5, 0.1), (0.0, 0.9, 0.0), (0.99999, 0.9999999, 0.0)]),
    st.sampled_from([np.float32, np.float64]),
    st.lists(
        st.tuples(st.integers(-2000, 10**6), st.integers(_adam_coasting.MIN_PIECE_LEVEL, 20), st.booleans()),
        min_size=1,
        max_size=40,
    ),
)
def test_settled_pieces_share_a_bound_that_covers_their_own(hyper_, dtype, pieces):
    """AdamCoasting._piece_nodes takes one bound per level for the pieces whose bias corrections have settled (their
    limit, with slack): never fewer nodes than each piece's own bound asks for, and at most one more."""
    beta1, beta2, wd = hyper_
    coasting = AdamCoasting(1e-3, beta1, beta2, 1e-8, wd, dtype)
    level = np.array([p[1] for p in pieces], dtype=np.int64)
    # starts relative to where the settled bound applies, aligned on the piece's size as _plan aligns them
    start = (coasting._bias_settled + np.array([p[0] for p in pieces], dtype=np.int64)) >> level << level
    start = np.maximum(start, 2 << level)
    flat = np.array([p[2] for p in pieces])
    kind = np.zeros(level.size, dtype=np.int64)
    shared = coasting._piece_nodes(start, level, flat, kind)
    own = coasting._node_bound(start, level, flat, kind)
    assert (shared >= own).all() and (shared <= own + 1).all(), (shared, own)
    half = (2.0**level - 1) / 2
    settled = start + half - half * math.hypot(1.0, float(_adam_coasting.PIECE_SIGMAS.max())) >= coasting._bias_settled
    np.testing.assert_array_equal(shared[~settled], own[~settled])


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([(0.9999, 0.999, 0.0), (0.999, 0.5, 0.1), (0.99, 0.9, 0.0), (0.9, 0.9999, 0.5)]),
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 3000), st.integers(1, 2**61)),  # s
            st.integers(1, 6000),  # first dormant step summed, after s
            st.integers(0, 200_000),  # steps summed after the first
            st.sampled_from([0.0, 1e-12, 1e-6, 1e-3, 1.0]),  # x_max
            st.one_of(st.just(-1), st.integers(0, 64), st.integers(0, 300_000)),  # the zero's distance after the last step (-1: none)
            st.sampled_from([0.0, 1e-5, 1e-3, 0.1]),  # a schedule's own rate of change
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_the_pieces_tile_every_window_aligned_and_away_from_step_zero(hyper_, windows):
    """What the quadrature's bound relies on (AdamCoasting._plan): the items of a window tile its steps exactly, in
    order; every piece of 2**l steps starts at a multiple q 2**l with q >= 2, is at least 2**MIN_PIECE_LEVEL and at
    most 2**cap long (cap of the part it lies in: before or from the window's first flat step, with the schedule's
    rate added to Adam's), does not cross that step, and ends at least twice its length before the window's zero (a
    cosine's end, where the rate has a double zero)."""
    beta1, beta2, wd = hyper_
    coasting = AdamCoasting(1e-3, beta1, beta2, 1e-8, wd, np.float64)
    s = np.array([w[0] for w in windows], dtype=np.int64)
    first = s + np.array([w[1] for w in windows])
    last = first + np.array([w[2] for w in windows])
    x_max = np.array([w[3] for w in windows])
    zero = np.array([0 if w[4] < 0 else int(last[i]) + 1 + w[4] for i, w in enumerate(windows)], dtype=np.int64)
    rate = np.array([w[5] for w in windows])
    owner, start, size, level = coasting._plan(np.arange(s.size), s, first, last, x_max, zero, rate)
    flat = coasting._flat_step(s, x_max)
    l1, l2 = coasting._rates
    order = np.lexsort((start, owner))
    owner, start, size, level = owner[order], start[order], size[order], level[order]
    for w in range(s.size):
        mine = owner == w
        ends = start[mine] + size[mine]
        assert start[mine][0] == first[w] and ends[-1] == last[w] + 1
        np.testing.assert_array_equal(start[mine][1:], ends[:-1])
        for a, n, lv in zip(start[mine].tolist(), size[mine].tolist(), level[mine].tolist()):
            if lv < 0:
                continue
            cap = math.floor(-math.log2((l1 + l2 if a < flat[w] else l1) + rate[w]))
            assert n == 2**lv and a % n == 0 and a >= 2 * n, (a, n)
            assert _adam_coasting.MIN_PIECE_LEVEL <= lv <= cap, (lv, cap)
            assert a + n <= flat[w] or a >= flat[w]
            assert zero[w] == 0 or a + 3 * n <= zero[w], (a, n, zero[w])


def test_log_interpolants_are_the_polynomials_of_their_pieces_whatever_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``log_interpolate`` evaluates, at each entry, the polynomial in u of its row's piece of ``log x``: checked
    against numpy's ``polyval`` entry by entry, and bit for bit the same in batches of 64 entries (rows split), with
    one range for all rows or one a row; ``log_coefficients`` gives the interpolant through its nodes (checked
    against numpy's ``chebinterpolate`` of the same function, at 101 points)."""
    rng = np.random.default_rng(5)
    rows, cols, pieces, n = 300, 7, 5, 9
    x = np.exp(rng.uniform(-3.0, 3.0, (rows, cols)))
    x[0, 0], x[1, 1] = 1e-9, 1e9  # clipped to the pieces' range
    low, top = np.array([math.exp(-2.5)]), np.array([math.exp(2.5)])
    lo, width = np.log(low), np.array([1.0])
    coef = rng.standard_normal((40 * pieces, n)) / 2.0 ** np.arange(n)
    first = rng.integers(0, 40, rows) * pieces
    got = log_chebyshev.log_interpolate(x, coef, low, top, lo, width, np.array([pieces]), first)
    y = np.clip(np.log(x), -2.5, 2.5)
    piece = np.clip(np.floor(y + 2.5), 0, pieces - 1)
    u = np.clip(2.0 * (y + 2.5 - piece) - 1.0, -1.0, 1.0)
    expected = np.array(
        [[np.polynomial.polynomial.polyval(u[r, c], coef[first[r] + int(piece[r, c])]) for c in range(cols)] for r in range(rows)]
    )
    assert np.abs(got - expected).max() <= 1e-14 * np.abs(coef).sum(axis=1).max()
    monkeypatch.setattr(log_chebyshev, "INTERPOLATE_BATCH", 64)
    batched = log_chebyshev.log_interpolate(x, coef, low, top, lo, width, np.array([pieces]), first)
    assert batched.tobytes() == got.tobytes()
    per_row = (np.repeat(a, rows) for a in (low, top, lo, width, np.array([pieces])))  # one range a row, sliced too
    assert log_chebyshev.log_interpolate(x, coef, *per_row, first).tobytes() == got.tobytes()
    nodes = np.cos(np.pi * (np.arange(n) + 0.5) / n)  # log_nodes' positions in u
    at = np.linspace(-1.0, 1.0, 101)
    interpolant = np.polynomial.polynomial.polyval(at, log_chebyshev.log_coefficients(np.exp(nodes)))
    expected = np.polynomial.chebyshev.chebval(at, np.polynomial.chebyshev.chebinterpolate(np.exp, n - 1))
    assert np.abs(interpolant - expected).max() <= 1e-14 * math.e


def test_complex_log_interpolants_are_complex_horners_rule() -> None:
    """Complex coefficients (the settled sums under a cosine): complex Horner's rule in the real u is each part's own
    (a complex times a real is each part times it), so the values are the real evaluations of the real and imaginary
    parts, and Horner's rule written out here to rounding."""
    rng = np.random.default_rng(8)
    rows, cols, pieces, n = 200, 5, 6, 8
    x = np.exp(rng.uniform(-3.5, 3.5, (rows, cols)))
    low, top = np.array([math.exp(-3.0)]), np.array([math.exp(3.0)])
    lo, width = np.log(low), np.array([1.0])
    coef = (rng.standard_normal((pieces, n)) + 1j * rng.standard_normal((pieces, n))) / 2.0 ** np.arange(n)
    first = np.zeros(rows, dtype=np.int64)
    got = log_chebyshev.log_interpolate(x, coef, low, top, lo, width, np.array([pieces]), first)
    assert got.dtype == np.complex128
    y = np.clip(np.log(x), -3.0, 3.0)
    piece = np.clip(np.floor(y + 3.0), 0, pieces - 1)
    u = np.clip(2.0 * (y + 3.0 - piece) - 1.0, -1.0, 1.0)
    expected = coef[piece.astype(np.int64), n - 1]
    for j in range(n - 2, -1, -1):
        expected = expected * u + coef[piece.astype(np.int64), j]
    assert np.abs(got - expected).max() <= 1e-14 * np.abs(coef).sum(axis=1).max()
    parts = [log_chebyshev.log_interpolate(x, c, low, top, lo, width, np.array([pieces]), first) for c in (coef.real, coef.imag)]
    assert np.array_equal(got.real, parts[0]) and np.array_equal(got.imag, parts[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_under_a_schedule_through_the_expansion_resumes_bit_for_bit(dtype, monkeypatch):
    """The expansion's weights under a schedule are kept by last step and built from kept rates: a run restored from
    a checkpoint mid-way (nothing kept) continues bit for bit as one that never stopped, whatever was kept."""
    expanded = []
    original = AdamCoasting._expand
    monkeypatch.setattr(AdamCoasting, "_expand", lambda self, *a: expanded.append(original(self, *a)) or expanded[-1])
    schedule = so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)
    through = 10**6
    gaps, m, v = late_moments([8, 1], 1.0, rows=300, cols=4)
    rng = np.random.default_rng(2)
    cfg = so.SparseAdamConfig(lr=schedule, beta1=0.9, beta2=0.999, eps=1e-8, mode="dense_equivalent")
    batches = [(np.unique(rng.integers(0, 300, 60)), rng.standard_normal((300, 4)).astype(dtype)) for _ in range(6)]

    def start() -> so.SparseAdamTable:
        opt = so.SparseAdamTable(np.zeros(m.shape, dtype=dtype), cfg)
        state = opt.state_dict()
        state.update(step_count=np.int64(through), m=m.astype(dtype), v=v.astype(dtype), last_step=through - gaps)
        opt.load_state_dict(state)
        return opt

    def train(opt: so.SparseAdamTable, part: list) -> None:
        for ids, g in part:
            opt.step(so.CsrGradient.from_rows(ids, g[ids], 300))

    straight = start()
    train(straight, batches)
    first = start()
    train(first, batches[:3])
    resumed = so.SparseAdamTable(first.params.copy(), cfg)
    resumed.load_state_dict(first.state_dict())
    train(resumed, batches[3:])
    assert expanded and any(r is not None for r in expanded)
    np.testing.assert_array_equal(resumed.params, straight.params)
    straight.catch_up()
    resumed.catch_up()
    assert resumed.params.tobytes() == straight.params.tobytes()


def test_scheduled_full_windows_are_the_same_from_one_stretch_of_rates_or_each_window_own(monkeypatch):
    """P_n(s, L) under a schedule past the settled steps: from windows of one stretch of kept rates (last steps close
    together) or from each window's own rates (far apart): the same bits, each the sum over its window."""
    schedule = so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)
    coasting = AdamCoasting(so._rates.LearningRate(schedule), 0.9, 0.999, 1e-8, 0.0, np.float32)
    s = np.array([900_000, 900_003, 912_345, 999_000, 900_003])
    near = coasting._sum_windows(s, settled=True)
    monkeypatch.setattr(_adam_coasting, "RATE_MEMO", 10)  # no stretch is short enough: each window's own rates
    apart = coasting._sum_windows(s, settled=True)
    assert near.tobytes() == apart.tobytes()
    i = np.arange(1, coasting.window + 1)
    rates = np.array([schedule(int(t)) for t in (s[2] + i).tolist()])
    direct = (coasting._rho_power(i.astype(np.float64)) * rates).sum(axis=1)
    np.testing.assert_allclose(near[:, 2], direct, rtol=1e-14)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 0.4999), min_size=1, max_size=12),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.sampled_from([np.finfo(np.float32).eps / 64, np.finfo(np.float64).eps / 64, np.finfo(np.float64).eps / 1024]),
    st.integers(0, 2**32 - 1),
)
def test_a_blocks_series_reaches_its_target_with_the_terms_it_counts_and_no_fewer(es, a, b, target, seed):
    """A block's Chebyshev coefficients are the series of ``H(t) = sum w_i / (1 - e_i t)`` in closed form, and
    ``_series_terms`` counts the least terms whose truncation stays below ``target`` of ``H`` on the whole interval.

    Against 60-digit mpmath: the series ``c_0 = sum w / r``, ``c_j = 2 sum w q**j / r`` truncated at the count is
    within ``target`` of ``H`` summed pole by pole, at 201 points; one term fewer misses it wherever the first term
    left out alone exceeds twice the target at ``u = 1`` (there every ``T_j`` is 1 and every term positive); and the
    float64 coefficients are each within ``j + 4`` float64 roundings of the exact ones."""
    import mpmath

    mpmath.mp.dps = 60
    t_lo, t_hi = sorted((a, b))
    mid, half = (t_hi + t_lo) / 2, max((t_hi - t_lo) / 2, t_hi * 2.0**-30, 1e-300)
    e = np.array(es)
    w = np.random.default_rng(seed).uniform(0.1, 1.0, e.size)
    level, slope = 1.0 - e * mid, e * half
    worst = int(np.argmax(e))
    n = int(_adam_coasting._series_terms(level[worst : worst + 1], slope[worst : worst + 1], np.array([target]))[0])
    got = _adam_coasting._series_coefficients(w, level, slope, np.array([0]), n)[0]
    big_a, big_b = [mpmath.mpf(float(z)) for z in level], [mpmath.mpf(float(z)) for z in slope]
    roots = [mpmath.sqrt(x * x - y * y) for x, y in zip(big_a, big_b)]
    qs = [y / (x + r) for x, y, r in zip(big_a, big_b, roots)]
    coef = [sum((1 if j == 0 else 2) * mpmath.mpf(wi) * q**j / r for wi, q, r in zip(w, qs, roots)) for j in range(n)]
    for j in range(n):
        assert abs(got[j] - coef[j]) <= (j + 4) * np.finfo(np.float64).eps * coef[j]
    u = [mpmath.mpf(float(z)) for z in np.linspace(-1.0, 1.0, 201)]
    exact = [sum(mpmath.mpf(wi) / (x - y * ui) for wi, x, y in zip(w, big_a, big_b)) for ui in u]

    def error(terms: int) -> float:
        return max(float(abs(sum(coef[j] * mpmath.chebyt(j, ui) for j in range(terms)) / h - 1)) for ui, h in zip(u, exact))

    assert error(n) <= target
    if n > 1 and coef[n - 1] > 2 * target * exact[-1]:
        assert error(n - 1) > target

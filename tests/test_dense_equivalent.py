"""DENSE_EQUIVALENT: the lazy trajectory is the dense one, at a cost that does not grow with the gap.

The reference is dense training fed zero gradients on dormant coordinates:
``so.DenseAdam`` (whose agreement with ``torch.optim.Adam``/``AdamW`` the golden
tests pin) and, for SGD, a dense loop written out below. Real-torch replays of
the same semantics are in ``test_torch_golden_round2.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparse_opt as so
from sparse_opt import _adam_coasting
from sparse_opt._adam_coasting import AdamCoasting

DENSE = so.LazyMode.DENSE_EQUIVALENT


def coo(indices, values, dim):
    return so.CooGradient(np.array(indices, dtype=np.int64), np.array(values, dtype=np.float64), dim)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 0.0) -> None:
    """Equal to ``rtol`` relative; non-finite entries must be non-finite in the same way (NaN, +inf, -inf)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


def run_adam_pair(schedule, dim, config, dtype=np.float64, seed=0):
    """Run SparseAdam(DENSE_EQUIVALENT) and DenseAdam fed zeros on the same schedule; return both optimizers."""
    p0 = np.random.default_rng(seed).standard_normal(dim).astype(dtype)
    lazy_p, dense_p = p0.copy(), p0.copy()
    lazy = so.SparseAdam(lazy_p, so.SparseAdamConfig(**config, mode=DENSE))
    dense = so.DenseAdam(dense_p, **config)
    for idx, vals in schedule:
        g = coo(idx, vals, dim)
        lazy.step(g)
        with np.errstate(all="ignore"):  # eps = 0 gives dense Adam 0 / 0 on all-zero coordinates
            dense.step(g.to_dense().astype(dtype))
    return lazy, dense


ADAM_CONFIGS = [
    {"lr": 1e-2},
    {"lr": 1e-2, "eps": 0.0},
    {"lr": 1e-2, "eps": 1e-3},  # eps dominates the small v of small gradients
    {"lr": 1e-2, "eps": 1.0},
    {"lr": 1e-2, "weight_decay": 0.5},
    {"lr": 1e-2, "beta1": 0.0},
    {"lr": 1e-2, "beta1": 0.5, "beta2": 0.9},
    {"lr": 1e-2, "beta1": 0.9, "beta2": 0.5},  # beta2 < beta1**2: the coasting grows before eps takes over
    {"lr": 1e-2, "beta1": 0.9, "beta2": 0.0},
    {"lr": 1e-2, "beta1": 0.99, "beta2": 0.9999},
    {"lr": 1e-3, "beta1": 0.95, "beta2": 0.9, "eps": 0.0, "weight_decay": 0.1},
]


@st.composite
def sparse_schedules(draw, dim=5, max_steps=40):
    """Steps touching random subsets (often none) of ``dim`` coordinates, with gradients of varied magnitude."""
    steps = []
    scale = draw(st.sampled_from([1.0, 1e-3, 1e-6]))
    for _ in range(draw(st.integers(1, max_steps))):
        mask = draw(st.lists(st.sampled_from([False, False, False, True]), min_size=dim, max_size=dim))
        idx = [i for i in range(dim) if mask[i]]
        vals = draw(st.lists(st.floats(-3, 3).filter(lambda x: abs(x) > 1e-3), min_size=len(idx), max_size=len(idx)))
        steps.append((idx, [scale * v for v in vals]))
    return steps


@settings(max_examples=80)
@given(sparse_schedules(), st.sampled_from(range(len(ADAM_CONFIGS))))
def test_adam_after_catch_up_equals_dense_adam_fed_zeros(schedule, which):
    """Any schedule, any eps >= 0, beta1, beta2 in [0, 1), weight decay: 1e-12 relative in float64."""
    config = ADAM_CONFIGS[which]
    lazy, dense = run_adam_pair(schedule, 5, config)
    lazy.catch_up()
    assert_close(lazy.params, dense.params, rtol=1e-12)
    assert_close(lazy.m, dense.m, rtol=1e-12, atol=1e-300)
    assert_close(lazy.v, dense.v, rtol=1e-12, atol=1e-300)
    assert lazy.last_step.tolist() == [lazy.step_count] * 5


@pytest.mark.parametrize(
    "config, gap",
    [
        ({"lr": 1e-3}, 3000),  # three times 1 / (1 - beta2)
        ({"lr": 1e-3, "eps": 0.0}, 3000),
        ({"lr": 1e-3, "eps": 1e-3}, 3000),
        ({"lr": 1e-3, "weight_decay": 0.1}, 3000),
        ({"lr": 1e-3, "beta2": 0.99}, 2500),
        ({"lr": 1e-3, "beta1": 0.99, "beta2": 0.9999}, 4000),
        ({"lr": 1e-3, "beta1": 0.9, "beta2": 0.5}, 2000),
    ],
)
def test_adam_gaps_longer_than_the_second_moment_memory(config, gap):
    """A coordinate touched, then dormant for thousands of steps (more than 1 / (1 - beta2)), then touched."""
    schedule = [([0, 1, 2], [0.3, -1e-4, 2.0])] + [([2], [0.1])] * gap + [([0, 1, 2], [-0.5, 1e-4, 0.1])]
    schedule += [([2], [0.1])] * 7
    lazy, dense = run_adam_pair(schedule, 4, config)
    lazy.catch_up()
    assert_close(lazy.params, dense.params, rtol=1e-12)
    assert_close(lazy.m, dense.m, rtol=1e-12, atol=1e-300)
    assert_close(lazy.v, dense.v, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("config", ADAM_CONFIGS[:5])
def test_float32_follows_dense_float32_to_its_rounding(config):
    """In float32 the lazy catch-up agrees with dense float32 Adam as closely as float32 steps agree at all.

    Bound: 16 float32 epsilons of the table's scale, nothing relative. Measured
    (8 seeds of this schedule, each config): worst 10.5 (eps = 0), 5-6.6 for
    the others -- dense float32 Adam rounds at each of the 300 steps, the
    catch-up once per gap. (Round 2 allowed rtol 2e-5, 168 epsilons.)
    """
    rng = np.random.default_rng(1)
    schedule = [(sorted(rng.choice(6, size=rng.integers(0, 3), replace=False).tolist()), None) for _ in range(300)]
    schedule = [(idx, rng.standard_normal(len(idx)).tolist()) for idx, _ in schedule]
    lazy, dense = run_adam_pair(schedule, 6, config, dtype=np.float32)
    lazy.catch_up()
    scale = np.nanmax(np.abs(dense.params))
    assert_close(lazy.params, dense.params, rtol=0.0, atol=16 * float(np.finfo(np.float32).eps) * scale)


def test_training_loop_catching_up_the_looked_up_ids_follows_dense_adam():
    """catch_up(ids), read table[ids], step: the table is dense Adam's wherever it is read."""
    rng = np.random.default_rng(3)
    rows, cols = 50, 4
    table = rng.standard_normal((rows, cols))
    reference = table.copy()
    opt = so.SparseAdamTable(table, so.SparseAdamConfig(lr=0.02, mode="dense_equivalent", weight_decay=0.1))
    dense = so.DenseAdam(reference, lr=0.02, weight_decay=0.1)
    target = rng.standard_normal((rows, cols))
    for _ in range(200):
        ids = rng.zipf(1.3, size=8) % rows
        opt.catch_up(ids)
        # atol: a parameter that decay and coasting cancel down to ~1e-6 keeps the rounding of its ~1e-2 terms
        np.testing.assert_allclose(table[ids], reference[ids], rtol=1e-12, atol=1e-15)
        grads = table[ids] - target[ids]  # d/d row of 0.5 * ||row - target||**2
        opt.step(so.CsrGradient.from_rows(ids, grads, rows))
        dense.step(so.CsrGradient.from_rows(ids, grads, rows).to_dense())
    opt.catch_up()
    np.testing.assert_allclose(table, reference, rtol=1e-12, atol=1e-15)


def test_catch_up_is_idempotent_and_does_not_advance_the_step():
    lazy, _ = run_adam_pair([([0, 1], [1.0, -1.0])] + [([1], [0.5])] * 20, 3, {"lr": 0.1})
    lazy.catch_up([0, 0, 2])
    once = (lazy.params.copy(), lazy.m.copy(), lazy.v.copy(), lazy.last_step.copy())
    lazy.catch_up([2, 0])
    lazy.catch_up()
    twice = (lazy.params, lazy.m, lazy.v, lazy.last_step)
    for a, b in zip(once[:3], twice[:3]):
        np.testing.assert_array_equal(a, b)
    assert lazy.step_count == 21 and twice[3].tolist() == [21, 21, 21]


@given(sparse_schedules(dim=4, max_steps=30), st.sampled_from(range(len(ADAM_CONFIGS))))
def test_catching_up_at_every_step_equals_catching_up_at_the_end(schedule, which):
    config = ADAM_CONFIGS[which]
    every, _ = run_adam_pair([], 4, config)
    end, _ = run_adam_pair([], 4, config)
    for idx, vals in schedule:
        every.step(coo(idx, vals, 4))
        every.catch_up()
        end.step(coo(idx, vals, 4))
    end.catch_up()
    assert_close(every.params, end.params, rtol=1e-12, atol=1e-15)
    assert_close(every.m, end.m, rtol=1e-12, atol=1e-300)


def test_moments_at_a_touch_equal_dormancy_decay():
    """DENSE_EQUIVALENT's moments are DORMANCY_DECAY's (to rounding); only the parameters differ."""
    schedule = [([0, 1], [1.0, 2.0]), ([1], [1.0]), ([1], [1.0]), ([], []), ([0], [-0.5])]
    out = {}
    for mode in ("dormancy_decay", "dense_equivalent"):
        p = np.zeros(2)
        opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, mode=mode))
        for idx, vals in schedule:
            opt.step(coo(idx, vals, 2))
        out[mode] = (opt.m.copy(), opt.v.copy(), p.copy())
    np.testing.assert_allclose(out["dense_equivalent"][0], out["dormancy_decay"][0], rtol=1e-15)
    np.testing.assert_allclose(out["dense_equivalent"][1], out["dormancy_decay"][1], rtol=1e-15)
    assert abs(out["dense_equivalent"][2][0] - out["dormancy_decay"][2][0]) > 1e-2  # coordinate 0 coasted


def test_coasting_by_hand_for_one_dormant_step():
    """One dormant step of dense Adam, written out: p -= lr * m_hat / (sqrt(v_hat) + eps) with g = 0."""
    p = np.array([1.0])
    opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, beta1=0.9, beta2=0.99, eps=1e-3, mode=DENSE, weight_decay=0.2))
    opt.step(coo([0], [2.0], 1))
    p1, m1, v1 = float(p[0]), 0.2, 0.04
    opt.step(coo([], [], 1))
    opt.catch_up()
    m2, v2 = 0.9 * m1, 0.99 * v1
    expected = p1 * (1 - 0.1 * 0.2) - 0.1 * (m2 / (1 - 0.9**2)) / (math.sqrt(v2 / (1 - 0.99**2)) + 1e-3)
    assert p[0] == pytest.approx(expected, rel=1e-15)
    assert opt.m[0] == pytest.approx(m2, rel=1e-15) and opt.v[0] == pytest.approx(v2, rel=1e-15)


def test_never_touched_coordinates_only_decay_and_eps_zero_gives_torchs_nan():
    p = np.array([2.0, 3.0])
    opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, mode=DENSE, weight_decay=0.5))
    for _ in range(10):
        opt.step(coo([1], [1.0], 2))
    opt.catch_up([0])
    assert p[0] == pytest.approx(2.0 * 0.95**10, rel=1e-15)
    q = np.array([2.0, 3.0])
    zero_eps = so.SparseAdam(q, so.SparseAdamConfig(lr=0.1, mode=DENSE, eps=0.0))
    zero_eps.step(coo([1], [1.0], 2))
    zero_eps.catch_up()
    assert math.isnan(q[0])  # dense Adam with eps = 0: 0 / (0 + 0) on a coordinate that never had a gradient


# ------------------------------------------------------------------ the cost does not grow with the gap


def far_apart(config, gap, dtype=np.float64):
    """A coordinate last updated at step 1 and caught up at step 1 + gap, set up through a state dict."""
    p = np.array([0.5], dtype=dtype)
    opt = so.SparseAdam(p, so.SparseAdamConfig(**config, mode=DENSE))
    opt.step(coo([0], [0.2], 1))
    state = opt.state_dict()
    state["step_count"] = np.int64(1 + gap)
    opt.load_state_dict(state)
    return opt, p


def test_window_is_a_constant_of_the_hyper_parameters():
    """The weights' window L depends on beta1, beta2, lr * weight_decay and the dtype, never on a gap."""
    default = AdamCoasting(1e-3, 0.9, 0.999, 1e-8, 0.0, np.float64)
    assert 400 <= default.window <= 1500
    assert AdamCoasting(1e-3, 0.9, 0.999, 1e-8, 0.0, np.float32).window < default.window
    assert AdamCoasting(1e-3, 0.9, 0.5, 1e-8, 0.0, np.float64).window == 0  # replayed: rho >= 1


@pytest.mark.parametrize("beta", [0.9, 0.9999])
def test_tables_by_step_hold_the_same_bits_whatever_was_asked_first(beta, monkeypatch):
    """The catch-up's tables by step (bias corrections, powers) do not depend on the order of the requests.

    numpy's vectorised power may round a value by its position in the array: the
    tables are filled in aligned chunks, so that a restored optimizer (which
    asks for other steps first) computes what one that never stopped does.
    """
    monkeypatch.setattr(_adam_coasting, "_TABLES", {})
    coasting = AdamCoasting(1e-3, beta, 0.999, 1e-8, 0.0, np.float64)
    steps = np.arange(1, 3 * _adam_coasting.TABLE_CHUNK + 17, dtype=np.int64)
    late = steps[steps.size // 2 :][::-1].copy()
    first = [coasting._bias_correction(beta, late), coasting._powers(beta, 0.5, late)]
    monkeypatch.setattr(_adam_coasting, "_TABLES", {})
    second = [coasting._bias_correction(beta, steps), coasting._powers(beta, 0.5, steps)]
    for a, b in zip(first, second):
        assert np.array_equal(a, b[late - 1])
    # the values themselves: torch's 1 - beta**j (bit for bit while it is below 1/2, then within numpy's power
    # error, an ulp, doubled by the subtraction) and beta**(j / 2) to an ulp
    torch_bias = np.array([1.0 - math.pow(beta, j) for j in steps.tolist()])
    below_half = torch_bias < 0.5
    assert np.array_equal(second[0][below_half], torch_bias[below_half])
    assert np.allclose(second[0][~below_half], torch_bias[~below_half], rtol=4.5e-16, atol=0)
    assert np.allclose(second[1], np.array([math.pow(beta, j / 2) for j in steps.tolist()]), rtol=4.5e-16, atol=0)


@pytest.mark.parametrize("config", [{"lr": 1e-3}, {"lr": 1e-3, "eps": 1.0}, {"lr": 1e-3, "eps": 0.0}])
def test_a_gap_of_a_billion_steps_costs_no_replay_and_converges(config, monkeypatch):
    """Expansion and direct sum cover the default regimes: no step-by-step replay, whatever the gap."""

    def no_replay(*args, **kwargs):
        raise AssertionError("replayed")

    monkeypatch.setattr(AdamCoasting, "_replay", no_replay)
    results = []
    for gap in (10**4, 10**5):
        opt, p = far_apart(config, gap)
        opt.catch_up()
        results.append(float(p[0]))
    assert results[0] == pytest.approx(results[1], rel=1e-14)  # the coasting has converged long before
    opt, p = far_apart(config, 10**9)
    opt.catch_up()
    assert float(p[0]) == pytest.approx(results[1], rel=1e-14)


@pytest.mark.parametrize("gap", [10, 3000])
def test_eps_zero_with_a_second_moment_that_reaches_zero_follows_dense_adam_to_infinity(gap):
    """beta2 <= 0.5 and eps = 0: dense Adam's v rounds to 0 within ~800 steps and m / 0 sends p to -inf."""
    schedule = [([0, 1], [0.3, 0.0])] + [([], [])] * gap
    lazy, dense = run_adam_pair(schedule, 2, {"lr": 1e-3, "beta2": 0.4, "eps": 0.0})
    lazy.catch_up()
    assert_close(lazy.params, dense.params, rtol=1e-12)
    assert np.isnan(dense.params[1])  # coordinate 1: m = v = 0, 0 / 0 from the first dormant step
    assert np.isinf(dense.params[0]) == (gap > 1000)


def _count_replays_and_windows(monkeypatch, window_of):
    """Record each replay call and each ``_blocks`` call's summed steps (``min(k, window_of(self, s, k, x_max))``)."""
    replays, windows = [], []
    original_blocks = AdamCoasting._blocks

    def counting_blocks(self, s, k, x_min, x_max, known=None, entries=None):
        windows.append(int(np.minimum(k, window_of(self, s, k, x_max)).sum()))
        return original_blocks(self, s, k, x_min, x_max, known, entries)

    monkeypatch.setattr(AdamCoasting, "_replay", lambda *a: replays.append(1))
    monkeypatch.setattr(AdamCoasting, "_blocks", counting_blocks)
    return replays, windows


def test_a_coasting_that_grows_before_eps_takes_over_costs_a_bounded_window(monkeypatch):
    """beta2 < beta1**2 (rho_0 >= 1, no expansion): the Chebyshev blocks sum a window bounded for any gap, no replay."""
    replays, windows = _count_replays_and_windows(monkeypatch, lambda self, s, k, x_max: self._block_window(s, x_max))
    results = []
    for gap in (10**4, 10**9):
        opt, p = far_apart({"lr": 1e-3, "beta1": 0.9, "beta2": 0.5}, gap)
        opt.catch_up()
        results.append(float(p[0]))
    assert replays == [] and len(windows) == 2 and windows[0] == windows[1] < 2000  # beta1's decay, not the gap
    assert np.isfinite(results[1]) and results[0] == pytest.approx(results[1], rel=1e-14)


def test_adamw_whose_decay_outpaces_beta1_sums_a_window_cut_from_the_end(monkeypatch):
    """1 - lr * wd < beta1: the terms grow towards the gap's end; the blocks sum its last steps, as many for any gap."""
    replays, windows = _count_replays_and_windows(monkeypatch, lambda self, s, k, x_max: self._reverse_window(s, k))
    config = {"lr": 0.5, "weight_decay": 0.3, "beta1": 0.9}  # c / beta1 = 0.94
    for gap in (10**4, 10**9):
        far_apart(config, gap)[0].catch_up()
    assert replays == [] and len(windows) == 2 and windows[0] == windows[1] < 1000
    schedule = [([0, 1], [0.3, -2e-6])] + [([], [])] * 700
    lazy, dense = run_adam_pair(schedule, 2, config)
    lazy.catch_up()
    assert_close(lazy.params, dense.params, rtol=1e-12)


def test_a_window_from_the_end_is_summed_however_long(monkeypatch):
    """c == beta1 (lr * wd = 1 - beta1): every step of a gap weighs the same, and the window is the whole gap; it is
    summed (by the blocks, long windows through Gauss rules on pieces), never replayed, and equals dense AdamW."""
    monkeypatch.setattr(_adam_coasting, "QUADRATURE_FROM", 64)
    nodes = []
    node_terms = AdamCoasting._node_terms
    monkeypatch.setattr(AdamCoasting, "_node_terms", lambda self, *a: nodes.append(a[3].size) or node_terms(self, *a))
    replays = []
    original = AdamCoasting._replay

    def counting(self, *args):
        replays.append(args[0].size)
        return original(self, *args)

    monkeypatch.setattr(AdamCoasting, "_replay", counting)
    config = {"lr": 0.1, "weight_decay": 1.0, "beta1": 0.9}  # c = 0.9 = beta1
    short = [([0, 1], [0.3, -0.5])] + [([], [])] * 40 + [([1], [0.1])] + [([], [])] * 300
    lazy, dense = run_adam_pair(short, 2, config)
    lazy.catch_up()
    assert replays == []  # row 1's 40 dormant steps one by one; at the end 340 and 300, through pieces
    assert nodes
    assert_close(lazy.params, dense.params, rtol=1e-12)


def test_replay_stops_once_the_rest_of_the_coasting_is_negligible(monkeypatch):
    """Where the replay is used (eps = 0 and no window), it runs a bounded number of steps for any gap."""
    calls = []
    original = AdamCoasting._replay

    def counting(self, p, m, v, s, k):
        calls.append(int(k.max()))
        return original(self, p, m, v, s, k)

    monkeypatch.setattr(AdamCoasting, "_replay", counting)
    iterations = []
    real_sqrt = np.sqrt

    def counting_sqrt(x, *args, **kwargs):
        iterations.append(1)
        return real_sqrt(x, *args, **kwargs)

    opt, p = far_apart({"lr": 1e-3, "beta1": 0.9, "beta2": 0.9, "eps": 0.0}, 10**9)
    monkeypatch.setattr(np, "sqrt", counting_sqrt)
    opt.catch_up()
    monkeypatch.setattr(np, "sqrt", real_sqrt)
    assert calls == [10**9]
    assert len(iterations) < 2000  # one sqrt per replayed step: bounded by rho_0's decay, not by 10**9
    assert np.isfinite(p[0])


# ------------------------------------------------------------------ SGD: a fixed linear recurrence


def dense_sgd(p, buf, grads, lr, weight_decay, momentum):
    """torch.optim.SGD (dampening 0, no nesterov), step by step, on dense float64 arrays."""
    for g in grads:
        d = g + weight_decay * p
        if momentum:
            buf = momentum * buf + d
            d = buf
        p = p - lr * d
    return p, buf


@pytest.mark.parametrize("weight_decay, momentum", [(0.5, 0.0), (0.0, 0.9), (0.1, 0.9), (0.01, 0.99)])
@pytest.mark.parametrize("gap", [1, 2, 10, 3000])
def test_sgd_dormant_steps_are_the_power_of_one_matrix(weight_decay, momentum, gap):
    lr = 0.05
    p = np.array([1.0, -2.0])
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=lr, weight_decay=weight_decay, momentum=momentum, mode=DENSE))
    opt.step(coo([0, 1], [0.3, 0.1], 2))
    p1 = p.copy()
    buf1 = None if opt.momentum_buffer is None else opt.momentum_buffer.copy()
    for _ in range(gap):
        opt.step(coo([], [], 2))
    opt.catch_up()
    want_p, want_buf = dense_sgd(p1, 0.0 if buf1 is None else buf1, [np.zeros(2)] * gap, lr, weight_decay, momentum)
    np.testing.assert_allclose(p, want_p, rtol=1e-12)
    if momentum:
        np.testing.assert_allclose(opt.momentum_buffer, want_buf, rtol=1e-12, atol=1e-300)


def test_sgd_recurrence_by_hand():
    """wd only: p * (1 - lr*wd)**k; momentum only: p - lr * mu * (1 - mu**k) / (1 - mu) * buf."""
    p = np.array([2.0])
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, weight_decay=0.5, mode=DENSE))
    opt.step(coo([], [], 1))
    opt.step(coo([], [], 1))
    opt.catch_up()
    assert p[0] == pytest.approx(2.0 * 0.95**2, rel=1e-15)
    q = np.array([0.0])
    mom = so.SparseSgd(q, so.SparseSgdConfig(lr=0.1, momentum=0.5, mode=DENSE))
    mom.step(coo([0], [1.0], 1))  # buf = 1, q = -0.1
    for _ in range(3):
        mom.step(coo([], [], 1))
    mom.catch_up()
    assert q[0] == pytest.approx(-0.1 - 0.1 * 0.5 * (1 - 0.5**3) / 0.5, rel=1e-15)
    assert mom.momentum_buffer[0] == pytest.approx(0.5**3, rel=1e-15)


@settings(max_examples=50)
@given(sparse_schedules(dim=4, max_steps=40), st.sampled_from([(0.1, 0.9), (0.5, 0.0), (0.0, 0.5)]))
def test_sgd_after_catch_up_equals_dense_sgd(schedule, hyper):
    weight_decay, momentum = hyper
    p = np.linspace(-1, 1, 4)
    ref_p, ref_buf = p.copy(), np.zeros(4)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, weight_decay=weight_decay, momentum=momentum, mode=DENSE))
    for idx, vals in schedule:
        g = coo(idx, vals, 4)
        opt.step(g)
        ref_p, ref_buf = dense_sgd(ref_p, ref_buf, [g.to_dense()], 0.1, weight_decay, momentum)
    opt.catch_up()
    np.testing.assert_allclose(p, ref_p, rtol=1e-12, atol=1e-15)


def test_sgd_lazy_differs_from_dense_and_dormancy_decay_is_refused():
    with pytest.raises(ValueError, match="DORMANCY_DECAY is Adam's rule"):
        so.SparseSgdConfig(lr=0.1, mode="dormancy_decay")
    p = np.array([1.0, 1.0])
    lazy = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, weight_decay=0.5))
    with pytest.raises(ValueError, match="catch_up is for mode DENSE_EQUIVALENT: this optimizer.s mode is LAZY"):
        lazy.catch_up()
    assert lazy.last_step is None


# ------------------------------------------------------------------ tables


def test_table_catch_up_by_rows_equals_flat_catch_up_by_coordinates():
    rng = np.random.default_rng(5)
    table = rng.standard_normal((6, 3))
    flat = table.reshape(-1).copy()
    cfg = so.SparseAdamConfig(lr=0.05, mode=DENSE, weight_decay=0.1)
    t_opt, f_opt = so.SparseAdamTable(table, cfg), so.SparseAdam(flat, cfg)
    for step in range(30):
        ids = rng.choice(6, size=2, replace=False)
        g = so.CsrGradient.from_rows(ids, rng.standard_normal((2, 3)), 6)
        if step % 7 == 3:  # an incomplete row now and then: row 0's entries get different steps
            g = so.CsrGradient(np.array([0, 1, 1, 1, 1, 1, 1]), np.array([2]), np.array([0.5]), (6, 3))
        t_opt.step(g)
        f_opt.step(g.to_coo())
    t_opt.catch_up([4, 0])
    f_opt.catch_up(np.r_[np.arange(12, 15), np.arange(0, 3)])
    np.testing.assert_array_equal(table.reshape(-1), flat)
    t_opt.catch_up()
    f_opt.catch_up()
    np.testing.assert_array_equal(table.reshape(-1), flat)
    assert t_opt.state_dict()["last_step"].shape == (6,)  # every row current: one step per row again


@pytest.mark.parametrize("scale", [1.0, 1e-6])
def test_table_rows_fresh_or_touched_the_step_before_catch_up_as_flat_coordinates_do(scale):
    """Rows never touched (m = 0) or touched on the step before (no gap) beside rows after a long gap: the table's
    whole-row catch-up (those rows summed as windows of no steps) gives the per-coordinate catch-up's bits."""
    rng = np.random.default_rng(11)
    rows, cols = 40, 4
    table = rng.standard_normal((rows, cols)).astype(np.float32)
    flat = table.reshape(-1).copy()
    cfg = so.SparseAdamConfig(lr=1e-3, beta1=0.999, mode=DENSE)
    t_opt, f_opt = so.SparseAdamTable(table, cfg), so.SparseAdam(flat, cfg)

    def step(ids):
        g = so.CsrGradient.from_rows(ids, (rng.standard_normal((ids.size, cols)) * scale).astype(np.float32), rows)
        t_opt.step(g)
        f_opt.step(g.to_coo())

    for _ in range(12):  # rows 0 .. 29 warm, last touched on different steps; rows 30 .. 39 never
        step(np.sort(rng.choice(30, size=6, replace=False)))
    for opt in (t_opt, f_opt):
        state = opt.state_dict()
        state["step_count"] = np.int64(int(state["step_count"]) + 100_000)
        opt.load_state_dict(state)
    step(np.arange(0, 10))
    step(np.arange(5, 40))  # rows 5 .. 9 touched on the step before, 10 .. 29 after the gap, 30 .. 39 fresh
    np.testing.assert_array_equal(table.reshape(-1), flat)
    t_opt.catch_up()
    f_opt.catch_up()
    np.testing.assert_array_equal(table.reshape(-1), flat)


def test_sgd_catch_up_stays_exact_for_a_gap_of_a_hundred_thousand_steps():
    """M**k is formed and powered in double-double: no error growing with the gap (was 5.5e-12 at k = 1e5).

    The reference is the recurrence in 50-digit decimal arithmetic.
    """
    from decimal import Decimal, getcontext

    getcontext().prec = 50
    lr, wd, mu, k = 0.05, 0.01, 0.9, 100_000
    for momentum in (0.0, mu):
        p = np.array([1.0])
        opt = so.SparseSgd(p, so.SparseSgdConfig(lr=lr, weight_decay=wd, momentum=momentum, mode=DENSE))
        state = opt.state_dict()
        if momentum:
            state["momentum_buffer"] = np.array([0.25])
        state["step_count"] = np.int64(k)
        opt.load_state_dict(state)
        opt.catch_up()
        P, B = Decimal(1), Decimal(0.25 if momentum else 0)
        for _ in range(k):
            B = Decimal(momentum) * B + Decimal(wd) * P
            P = P - Decimal(lr) * B  # without momentum B is just wd * P: torch's coupled decay
        assert float(abs(Decimal(float(p[0])) - P) / abs(P)) < 1e-15


@pytest.mark.parametrize(
    ("schedule", "momentum", "weight_decay"),
    [
        (so.schedules.warmup_cosine(0.05, 300, 6000, 1e-3), 0.9, 0.01),  # constant after step 6000
        (so.schedules.step_decay(0.05, 700, 0.5), 0.5, 0.1),  # a constant rate per period
        (so.schedules.linear_warmup(0.02, 5000), 0.0, 0.05),  # no momentum; constant after the warm-up
        (lambda t: 0.01 * (1 + t % 3), 0.9, 0.01),  # any callable: every step multiplied in
    ],
)
@pytest.mark.parametrize("block", [None, 97])
def test_sgd_with_decay_under_a_schedule_is_one_pass_for_every_last_step_exactly(
    schedule, momentum, weight_decay, block, monkeypatch
):
    """SGD with coupled decay under a schedule: the maps M_T ... M_{s+1} of rows last touched at many different steps
    come from one pass from T back to the earliest (each product is the next later one's times the steps between),
    with every stretch of one constant rate a matrix power: the rates asked for are the longest gap's at most, and
    fewer where the schedule is constant; each map within k float64 roundings (k 2**-53, relative to its largest
    entry) of the 200-bit product of every step's matrix over its k steps (the test below holds the products near
    the identity to O(log k)).
    With items of at most 97 steps (DECAY_BLOCK lowered) the walked steps come in many items of many sizes, padded
    and multiplied together."""
    mpmath = pytest.importorskip("mpmath")
    from sparse_opt._rates import LearningRate
    from sparse_opt.sparse_sgd import sgd_scheduled_map

    if block:
        monkeypatch.setattr(so.sparse_sgd, "DECAY_BLOCK", block)
    rates = LearningRate(schedule)
    asked = []
    over = LearningRate.over
    rates.over = lambda a, b: asked.append(b - a) or over(rates, a, b)  # type: ignore[method-assign]
    at_steps = LearningRate.at_steps
    rates.at_steps = lambda steps: asked.append(np.size(steps)) or at_steps(rates, steps)  # type: ignore[method-assign]
    through = 9000
    starts = np.array([8999, 8000, 6500, 5999, 5000, 4321, 3000, 700, 299, 5, 0], dtype=np.int64)
    got = sgd_scheduled_map(starts, through, rates=rates, weight_decay=weight_decay, momentum=momentum)
    callable_ = so.schedules.peak(schedule) is None
    assert sum(asked) <= through - int(starts.min()) + (through if callable_ else 0)
    if not callable_:  # the constant stretches are powers, never walked
        assert sum(asked) < 0.8 * (through - int(starts.min()))
    for s, err in zip(starts.tolist(), _sgd_map_roundings(mpmath, rates, starts, through, weight_decay, momentum, got)):
        assert err <= max(through - s, 1), (s, err)


def _sgd_map_roundings(mpmath, rates, starts, through, weight_decay, momentum, got) -> list[float]:
    """For each start ``s``, the error of the map ``got`` (``(a, b, c, d)`` arrays, one per start) against the
    200-bit product of every step's matrix ``[[1 - lr_j wd, -lr_j mu], [wd, mu]]`` over ``s + 1 .. through``, in
    float64 roundings (``2**-53``) relative to the exact map's largest entry."""
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    wd, mu = mp.mpf(weight_decay), mp.mpf(momentum)
    out = []
    for n, s in enumerate(starts.tolist()):
        a, b, c, d = mp.mpf(1), mp.mpf(0), mp.mpf(0), mp.mpf(1)
        for j in range(s + 1, through + 1):
            lr = mp.mpf(rates.at(j))
            m00, m01, m10, m11 = 1 - lr * wd, -lr * mu, wd, mu
            a, b, c, d = m00 * a + m01 * c, m00 * b + m01 * d, m10 * a + m11 * c, m10 * b + m11 * d
        top = max(abs(a), abs(b), abs(c), abs(d))
        out.append(float(max(abs(mp.mpf(float(x[n])) - y) for x, y in zip(got, (a, b, c, d))) / top / 2.0**-53))
    return out


@pytest.mark.parametrize(
    ("schedule", "momentum", "weight_decay"),
    [
        (lambda t: 0.01 * (1 + t % 3), 0.9, 0.01),  # three rates, each factor's rounding repeated every third step
        (lambda t: 0.01 * (1 + t % 3), 0.5, 0.1),
        (lambda t: 1e-3 * (1 + (t % 7) / 7), 0.0, 0.3),  # no momentum: the map is the decay product alone
        (so.schedules.linear_warmup(0.02, 5000), 0.0, 0.05),
        (so.schedules.warmup_cosine(0.01, 100, 8000, 1e-4), 0.9, 0.01),
    ],
)
def test_sgd_scheduled_map_does_not_accumulate_the_rounding_of_one_minus_lr_wd(schedule, momentum, weight_decay):
    """The scheduled map holds a product near the identity as ``a - 1`` (``sparse_sgd._compose``): a step's ``1 -
    lr*wd`` is never rounded, so its rounding (up to ``2**-54`` absolute, against a decay of ``lr*wd``) does not add
    up over the gap. Against the 200-bit product, each map of ``k`` steps is within ``4 log2(k) + 4`` roundings of
    its largest entry (measured: at most 29 for k = 9000, against 1,749 and 1,095 for the first two cases when every
    factor was rounded, the repeated rates repeating their roundings: 0.19 k)."""
    mpmath = pytest.importorskip("mpmath")
    from sparse_opt._rates import LearningRate
    from sparse_opt.sparse_sgd import sgd_scheduled_map

    rates = LearningRate(schedule)
    through = 9000
    starts = np.array([8999, 8000, 6500, 5999, 5000, 4321, 3000, 700, 299, 5, 0], dtype=np.int64)
    got = sgd_scheduled_map(starts, through, rates=rates, weight_decay=weight_decay, momentum=momentum)
    for s, err in zip(starts.tolist(), _sgd_map_roundings(mpmath, rates, starts, through, weight_decay, momentum, got)):
        assert err <= 4 * math.log2(through - s) + 4, (s, err)


@pytest.mark.parametrize(
    ("schedule", "momentum", "s", "k"),
    [
        (so.schedules.warmup_cosine(0.1, 100, 10**6, 1e-4), 0.9, 20, 10**6),  # from inside the warm-up
        (so.schedules.warmup_cosine(0.1, 10**5, 10**6, 1e-4), 0.9, 3, 50_000),  # rates far below the peak
        (so.schedules.exponential(0.5, 0.999), 0.99, 7, 2**40),
        (so.schedules.step_decay(0.05, 300, 0.5), 0.5, 250, 4000),
        (lambda t: 0.01 * (1 + t % 3), 0.9, 5, 10**5),  # any callable: its peak so far is found once, O(steps)
        (lambda t: 1e-9 if t < 500 else 0.5, 0.9, 5, 10**4),  # the rate jumps 5e8-fold after the first window
    ],
)
def test_sgd_momentum_without_decay_sums_only_the_steps_that_count_exactly(schedule, momentum, s, k):
    """SGD under a schedule without weight decay: the gap's map is [[1, -sum lr_{s+i} mu**i], [0, mu**k]], and the
    sum stops once the rest is below 2**-56 of it (a few hundred rates for mu = 0.9, whatever the gap): within a few
    float64 roundings of the exact sum over every step of the gap (200-bit, the terms beyond the window bounded)."""
    mpmath = pytest.importorskip("mpmath")
    from sparse_opt._rates import LearningRate
    from sparse_opt.sparse_sgd import sgd_scheduled_map

    rates = LearningRate(schedule)
    asked = []
    over = LearningRate.over
    rates.over = lambda a, b: asked.append(b - a) or over(rates, a, b)  # type: ignore[method-assign]
    a, b, c, d = (float(x[0]) for x in sgd_scheduled_map(np.array([s]), s + k, rates=rates, weight_decay=0.0, momentum=momentum))
    scanned = s + k if so.schedules.peak(schedule) is None else 0  # a callable's rates up to the step, once
    assert (a, c) == (1.0, 0.0) and sum(asked) <= 20_000 + scanned
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 200
    mu, total, power = mp.mpf(momentum), mp.mpf(0), mp.mpf(1)
    for i in range(1, min(k, 30_000) + 1):  # mu**30000 < 1e-130: the rest is far below float64's rounding
        power *= mu
        total += mp.mpf(rates.at(s + i)) * power
    assert abs(mp.mpf(b) + total) <= 4 * 2.0**-52 * total, (b, float(total))
    assert d == pytest.approx(momentum**k if k < 10**6 else 0.0, rel=1e-15, abs=1e-300)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(1, 6),
    cols=st.integers(1, 300),
    spread=st.sampled_from([0, 10, 60, 1100]),
)
def test_row_sums_are_within_one_rounding_of_the_exact_sums(data, rows, cols, spread):
    """Non-negative terms of any spread of magnitudes (zeros and subnormals too): each row's sum within one rounding
    of the exact sum (fractions), as ``math.fsum`` gives it; rows near the largest float are summed by fsum."""
    from fractions import Fraction

    from sparse_opt._double_double import row_sums

    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    exponent = rng.integers(-spread, 1, (rows, cols)) - (1074 - 60 if spread == 1100 else 0)
    terms = np.ldexp(rng.random((rows, cols)), exponent.astype(np.int32))
    terms[rng.random((rows, cols)) < 0.2] = 0.0
    if data.draw(st.booleans()):
        terms[0] *= 2.0**1000 if spread < 1100 else 1.0  # large terms
    got = row_sums(terms)
    for r in range(rows):
        exact = sum(Fraction(float(t)) for t in terms[r])
        assert abs(Fraction(float(got[r])) - exact) <= Fraction(2.0**-52) * exact, (r, float(got[r]), float(exact))
    big = np.array([[1.7e308, 1e306, 0.0], [1.7e308, 1e308, 0.0]])
    assert row_sums(big).tolist() == [math.fsum(big[0].tolist()), math.inf]  # the second sum is beyond float64


@pytest.mark.parametrize("momentum", [0.9, 0.999])
def test_sgd_momentum_after_a_settled_schedule_sums_its_rate_in_closed_form(momentum):
    """Once a built-in schedule has settled at rate r, the dormant steps' terms r mu**i add up in closed form: gaps
    of 10**12 steps (and 2**62 - 1000) take no more rates than the steps before the schedule settles, and the sum is
    within 8 roundings of the exact one (mpmath: the steps before one by one, the settled ones as a geometric sum)."""
    mpmath = pytest.importorskip("mpmath")
    from sparse_opt._rates import LearningRate
    from sparse_opt.sparse_sgd import sgd_scheduled_map

    schedule = so.schedules.warmup_cosine(0.1, 10, 100, final_lr=0.01)  # settles at step 100, rate 0.01
    rates = LearningRate(schedule)
    asked = []
    over = LearningRate.over
    rates.over = lambda a, b: asked.append((a, b)) or over(rates, a, b)  # type: ignore[method-assign]
    starts = np.array([5, 50, 95, 99, 100, 150], dtype=np.int64)
    for gap in (10**12, 2**62 - 1000):
        asked.clear()
        through = 150 + gap
        a, b, c, d = sgd_scheduled_map(starts, through, rates=rates, weight_decay=0.0, momentum=momentum)
        assert max((hi for _, hi in asked), default=0) <= 100  # only steps before the schedule settles, one by one
        assert (a == 1.0).all() and (c == 0.0).all() and (d == 0.0).all()
        mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
        mp.prec = 200
        mu = mp.mpf(momentum)
        for n, s in enumerate(starts.tolist()):
            k, i0 = through - s, max(100 - s, 1)
            walked = sum(mp.mpf(rates.at(s + i)) * mu**i for i in range(1, i0))
            exact = walked + mp.mpf(0.01) * mu**i0 * (1 - mu ** (k - i0 + 1)) / (1 - mu)
            assert abs(-mp.mpf(float(b[n])) - exact) <= 8 * 2.0**-53 * exact, (s, gap, float(b[n]), float(exact))


@pytest.mark.parametrize("lr, weight_decay, momentum", [(0.05, 0.1, 0.9), (1e-3, 0.0, 0.99), (0.3, 2.0, 0.5), (1e-8, 1e-4, 0.999)])
def test_sgd_dormant_map_by_byte_tables_is_the_exact_power(lr, weight_decay, momentum):
    """One matrix for every gap goes through tables of its powers by byte: each entry within 4 roundings of the
    largest entry of the exact power (mpmath, 300 bits, M formed from the float hyper-parameters exactly), for gaps
    from 0 to 2**63 - 1 in every byte; the tables are kept per matrix (a second call is the same floats)."""
    mpmath = pytest.importorskip("mpmath")
    from sparse_opt.sparse_sgd import sgd_dormant_map

    rng = np.random.default_rng(4)
    gaps = np.concatenate([[0, 1, 2, 255, 256, 257, 65535, 65536, 10**6, 2**40 + 3, 2**63 - 1], rng.integers(0, 2**20, 8)])
    got = sgd_dormant_map(gaps, lr=lr, weight_decay=weight_decay, momentum=momentum)
    again = sgd_dormant_map(gaps[::-1].copy(), lr=lr, weight_decay=weight_decay, momentum=momentum)
    assert all(x.tobytes() == y[::-1].tobytes() for x, y in zip(got, again))
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.prec = 300
    lr_, wd, mu = mp.mpf(lr), mp.mpf(weight_decay), mp.mpf(momentum)
    m = mp.matrix([[1 - lr_ * wd, -lr_ * mu], [wd, mu]])
    for n, k in enumerate(gaps.tolist()):
        exact = m**k
        top = max(abs(exact[i, j]) for i in range(2) for j in range(2))
        for e, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
            bound = 4 * 2.0**-53 * top + 2.0**-1070  # (powers below float64's range round to 0 or subnormals)
            assert abs(mp.mpf(float(got[e][n])) - exact[i, j]) <= bound, (k, e, float(got[e][n]))

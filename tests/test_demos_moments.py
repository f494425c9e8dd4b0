"""sparse_opt.demos.moments: one coordinate under Adam's lazy modes and dense Adam, and the coasting sum (notebook 03)."""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos import figures
from sparse_opt.demos import moments as mo

B1, B2 = 0.9, 0.999


def test_touch_steps_periodic_and_bursts_by_hand() -> None:
    np.testing.assert_array_equal(mo.touch_steps("periodic", 10, 3), [1, 4, 7, 10])
    # bursts of 5 starting every 5 * period = 10 steps
    np.testing.assert_array_equal(mo.touch_steps("bursts", 23, 2), [1, 2, 3, 4, 5, 11, 12, 13, 14, 15, 21, 22, 23])


@pytest.mark.parametrize("pattern", mo.PATTERNS)
def test_touch_steps_period_one_is_every_step(pattern: str) -> None:
    np.testing.assert_array_equal(mo.touch_steps(pattern, 17, 1), np.arange(1, 18))


def test_touch_steps_random_is_seeded_with_the_right_rate() -> None:
    a = mo.touch_steps("random", 20_000, 10, seed=3)
    np.testing.assert_array_equal(a, mo.touch_steps("random", 20_000, 10, seed=3))
    assert not np.array_equal(a[:50], mo.touch_steps("random", 20_000, 10, seed=4)[:50])
    assert a.dtype == np.int64 and (np.diff(a) > 0).all() and a[0] >= 1 and a[-1] <= 20_000
    assert abs(a.size / 20_000 - 0.1) < 0.01


def test_touch_steps_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="pattern"):
        mo.touch_steps("sometimes", 10, 2)
    with pytest.raises(ValueError, match="period"):
        mo.touch_steps("periodic", 10, 0)


def test_hand_example_touches_at_1_and_5() -> None:
    tr = mo.moment_traces([1, 5], 5, 1.0, B1, B2)
    assert tr.m["lazy"][-1] == pytest.approx((1 - B1) * (1 + B1), rel=1e-14)
    for name in ("dormancy_decay", "dense_equivalent", "dense"):
        assert tr.m[name][-1] == pytest.approx((1 - B1) * (1 + B1**4), rel=1e-14)
        assert tr.v[name][-1] == pytest.approx((1 - B2) * (1 + B2**4), rel=1e-14)
    assert tr.v["lazy"][-1] == pytest.approx((1 - B2) * (1 + B2), rel=1e-14)
    # between the touches: the lazy state holds, dense (and DENSE_EQUIVALENT read after catch_up) decays
    np.testing.assert_array_equal(tr.m["lazy"][:4], np.full(4, 1 - B1))
    np.testing.assert_array_equal(tr.m["dormancy_decay"][:4], np.full(4, 1 - B1))
    np.testing.assert_allclose(tr.m["dense"][:4], (1 - B1) * B1 ** np.arange(4), rtol=1e-15)
    np.testing.assert_allclose(tr.m["dense_equivalent"][:4], tr.m["dense"][:4], rtol=1e-15)
    np.testing.assert_array_equal(tr.touched, [True, False, False, False, True])
    np.testing.assert_array_equal(tr.grad, [1.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(tr.at_touches("m")["lazy"], tr.m["lazy"][[0, 4]])
    assert tr.at(5, "m") == {name: tr.m[name][4] for name in mo.OPTIMIZERS}
    assert tr.before(5) == {name: tr.param[name][3] for name in mo.OPTIMIZERS}
    assert tr.before(1) == {name: 0.0 for name in mo.OPTIMIZERS}
    assert tr.before(1, "v") == {name: 0.0 for name in mo.OPTIMIZERS}


def test_hand_example_sign_flip_after_a_long_gap() -> None:
    tr = mo.moment_traces(np.r_[np.arange(1, 11), 60], 60, np.r_[np.ones(10), -1.0], B1, B2)
    assert tr.m["lazy"][-1] == pytest.approx(B1 * (1 - B1**10) - (1 - B1), rel=1e-12)
    assert tr.m["dense"][-1] == pytest.approx(B1**50 * (1 - B1**10) - (1 - B1), rel=1e-12)
    # the lazy update still follows the old gradients: the parameter decreases
    assert tr.param["lazy"][-1] < tr.param["lazy"][-2]
    assert tr.param["dense"][-1] > tr.param["dense"][-2]


@settings(max_examples=40, deadline=None)
@given(
    touches=st.lists(st.integers(1, 150), min_size=1, max_size=40, unique=True).map(sorted),
    grads=st.lists(st.floats(0.1, 10.0), min_size=40, max_size=40),
    beta1=st.floats(0.0, 0.99),
    beta2=st.floats(0.5, 0.9999),
)
def test_dormancy_decay_moments_equal_dense_at_every_touch(
    touches: list[int], grads: list[float], beta1: float, beta2: float
) -> None:
    tr = mo.moment_traces(touches, 150, np.array(grads[: len(touches)]), beta1, beta2)
    m, v = tr.at_touches("m"), tr.at_touches("v")
    np.testing.assert_allclose(m["dormancy_decay"], m["dense"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(v["dormancy_decay"], v["dense"], rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "hyper",
    [
        {},
        {"weight_decay": 2.0, "lr": 1e-2},
        {"eps": 1e-3},
        {"beta1": 0.0},
        {"beta1": 0.9, "beta2": 0.5},  # no window: the catch-up replays
    ],
)
def test_dense_equivalent_is_dense_adam_at_every_step(hyper: dict) -> None:
    steps = mo.touch_steps("random", 120, 9, seed=2)
    grads = np.random.default_rng(1).uniform(-2, 2, steps.size)
    tr = mo.moment_traces(steps, 120, grads, p0=0.5, **hyper)
    for field in ("m", "v", "param"):
        trace = getattr(tr, field)
        assert mo.max_relative_difference(trace["dense_equivalent"], trace["dense"]) <= 1e-12, field


def test_weight_decay_in_each_mode_by_hand() -> None:
    lr, wd = 1e-2, 0.5
    c = 1 - lr * wd
    tr = mo.moment_traces([1, 26], 26, 1.0, B1, B2, lr=lr, eps=1e-8, weight_decay=wd, p0=1.0)
    m, v = tr.at(26, "m"), tr.at(26, "v")

    def step(name: str) -> float:
        return lr * (m[name] / (1 - B1**26)) / (math.sqrt(v[name] / (1 - B2**26)) + 1e-8)

    p1 = tr.at(1)
    assert tr.at(26)["lazy"] == pytest.approx(c * p1["lazy"] - step("lazy"), rel=1e-13)
    assert tr.at(26)["dormancy_decay"] == pytest.approx(c**25 * p1["dormancy_decay"] - step("dormancy_decay"), rel=1e-13)
    assert tr.at(26)["dense_equivalent"] == pytest.approx(tr.at(26)["dense"], rel=1e-12)
    assert tr.weight_decay == wd and tr.p0 == 1.0


def test_every_step_the_four_are_bit_identical() -> None:
    grads = np.random.default_rng(0).standard_normal(150)
    tr = mo.moment_traces(np.arange(1, 151), 150, grads, B1, B2)
    for field in ("m", "v", "param"):
        trace = getattr(tr, field)
        for name in mo.OPTIMIZERS:
            np.testing.assert_array_equal(trace[name], trace["dense"])


def test_moment_traces_rejects_bad_touch_steps() -> None:
    with pytest.raises(ValueError, match="ascending"):
        mo.moment_traces([3, 2], 5, 1.0)
    with pytest.raises(ValueError, match="inside"):
        mo.moment_traces([0, 2], 5, 1.0)
    with pytest.raises(ValueError, match="inside"):
        mo.moment_traces([2, 6], 5, 1.0)


def test_max_relative_difference() -> None:
    assert mo.max_relative_difference([1.0, 2.2], [1.0, 2.0]) == pytest.approx(0.1)
    assert mo.max_relative_difference([0.0, 1.0], [0.0, 1.0]) == 0.0
    assert mo.max_relative_difference([1e-300], [0.0]) == math.inf
    assert mo.max_relative_difference([np.nan, np.inf], [np.nan, np.inf]) == 0.0
    assert mo.max_relative_difference([np.nan], [1.0]) == math.inf
    assert mo.max_relative_difference([], []) == 0.0


def test_first_update_ratio_hand_values() -> None:
    # t = 50: 0.1 / (1 - 0.9**50) * sqrt((1 - 0.999**50) / 0.001) = 0.10052 * 6.9850
    assert float(mo.first_update_ratio(50, B1, B2)) == pytest.approx(0.70215, abs=5e-5)
    assert float(mo.first_update_ratio(1, B1, B2)) == pytest.approx(1.0, rel=1e-15)
    limit = (1 - B1) / np.sqrt(1 - B2)
    assert float(mo.first_update_ratio(100_000, B1, B2)) == pytest.approx(limit, rel=1e-12)
    with pytest.raises(ValueError):
        mo.first_update_ratio(0, B1, B2)


@pytest.mark.parametrize("t", [1, 2, 50, 3000])
def test_first_update_measured_matches_closed_form(t: int) -> None:
    lr, g = 1e-3, 2.5
    out = mo.first_update(t, g, B1, B2, lr=lr, eps=1e-14)
    assert out["global_step"] == pytest.approx(-lr * float(mo.first_update_ratio(t, B1, B2)), rel=1e-10)
    assert out["dense"] == pytest.approx(out["global_step"], rel=1e-12)
    assert out["per_coordinate"] == pytest.approx(-lr, rel=1e-10)


def test_moments_after_touches() -> None:
    assert mo.moments_after_touches(0, 2.0, B1, B2) == (0.0, 0.0)
    m, v = mo.moments_after_touches(3, 2.0, B1, B2)
    assert m == pytest.approx(2.0 * (1 - B1**3), rel=1e-15) and v == pytest.approx(4.0 * (1 - B2**3), rel=1e-15)
    tr = mo.moment_traces([1, 2, 3], 3, 2.0, B1, B2)
    assert (m, v) == (pytest.approx(tr.m["lazy"][-1], rel=1e-14), pytest.approx(tr.v["lazy"][-1], rel=1e-14))
    with pytest.raises(ValueError):
        mo.moments_after_touches(-1, 1.0, B1, B2)


def test_touch_update_matches_a_run_of_the_four() -> None:
    lr, eps, gap = 1e-3, 1e-8, 60
    tr = mo.moment_traces(np.r_[np.arange(1, 6), 5 + gap], 5 + gap, np.r_[np.ones(5), 0.5], B1, B2, lr=lr, eps=eps)
    m_s, v_s = mo.moments_after_touches(5, 1.0, B1, B2)
    t = 5 + gap
    for name in mo.OPTIMIZERS:
        mode = "lazy" if name == "lazy" else name
        predicted = float(mo.touch_update(m_s, v_s, 0.5, gap, t, mode, beta1=B1, beta2=B2, lr=lr, eps=eps))
        assert tr.at(t)[name] - tr.before(t)[name] == pytest.approx(predicted, rel=1e-9), name
    with pytest.raises(ValueError, match="mode"):
        mo.touch_update(m_s, v_s, 1.0, gap, t, "sometimes")


def test_touch_update_long_gap_limits() -> None:
    # after a gap far longer than 1 / (1 - beta2) the dense moments have forgotten: (1 - b1) / sqrt(1 - b2)
    m_s, v_s = mo.moments_after_touches(10, 1.0, B1, B2)
    dense = -float(mo.touch_update(m_s, v_s, 1.0, 10**6, 10**6 + 10, "dense", lr=1.0, eps=0.0))
    assert dense == pytest.approx((1 - B1) / math.sqrt(1 - B2), rel=1e-9)
    # LAZY ignores the gap: its moments are those of 11 consecutive touches, bias-corrected at a large t
    lazy = -float(mo.touch_update(m_s, v_s, 1.0, 10**6, 10**6 + 10, "lazy", lr=1.0, eps=0.0))
    assert lazy == pytest.approx((1 - B1**11) / math.sqrt(1 - B2**11), rel=1e-9)
    gaps = np.array([1, 10, 100])
    assert mo.touch_update(m_s, v_s, 1.0, gaps, 10 + gaps, "dormancy_decay").shape == (3,)


def test_zero_gradient_steps_is_dense_adam_fed_zeros() -> None:
    p0, m0, v0 = np.array([0.3, -1.0]), np.array([0.02, -0.5]), np.array([1e-3, 0.4])
    hyper = {"lr": 1e-2, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.3}
    p = p0.copy()
    dense = so.DenseAdam(p, **hyper)
    dense.load_state_dict({**dense.state_dict(), "step_count": 7, "m": m0.copy(), "v": v0.copy()})
    for _ in range(40):
        dense.step(np.zeros(2))
    out = mo.zero_gradient_steps(p0, m0, v0, 7, 40, **hyper)
    np.testing.assert_allclose(out[0], p, rtol=1e-13)
    np.testing.assert_allclose(out[1], dense.m, rtol=1e-13)
    np.testing.assert_allclose(out[2], dense.v, rtol=1e-13)
    np.testing.assert_array_equal(p0, [0.3, -1.0])  # inputs untouched


def test_coasting_weights_by_hand() -> None:
    a, b = mo.coasting_weights(0, 2, 0.5, 0.25)
    # i = 1: a = 0.5 / 0.5, b = 0.5 / sqrt(0.75); i = 2: a = 0.25 / 0.75, b = 0.25 / sqrt(1 - 0.0625)
    np.testing.assert_allclose(a, [1.0, 1 / 3], rtol=1e-15)
    np.testing.assert_allclose(b, [0.5 / math.sqrt(0.75), 0.25 / math.sqrt(0.9375)], rtol=1e-15)
    assert mo.coasting_weights(5, 0, B1, B2)[0].size == 0
    with pytest.raises(ValueError):
        mo.coasting_weights(-1, 3, B1, B2)


ROW = {
    "p": np.array([1.0, -0.5, 2.0, 0.1]),
    "m": np.array([0.01, -2e-5, 3e-9, 0.2]),
    "v": np.array([1e-4, 1e-9, 1e-17, 0.05]),
}


@pytest.mark.parametrize(
    "hyper",
    [{}, {"weight_decay": 0.5, "lr": 1e-2}, {"eps": 1e-3}, {"beta1": 0.5, "beta2": 0.9}, {"beta1": 0.9, "beta2": 0.5}],
)
@pytest.mark.parametrize("s, k", [(0, 1), (3, 40), (100, 2000)])
def test_coasting_sum_and_catch_up_equal_the_loop(hyper: dict, s: int, k: int) -> None:
    loop = mo.zero_gradient_steps(ROW["p"], ROW["m"], ROW["v"], s, k, **hyper)
    closed = mo.coasting_sum(ROW["p"], ROW["m"], ROW["v"], s, k, **hyper)
    kernel = mo.kernel_catch_up(ROW["p"], ROW["m"], ROW["v"], s, k, **hyper)
    for got in (closed, kernel):
        assert mo.max_relative_difference(got[0], loop[0]) <= 1e-12
        np.testing.assert_allclose(got[1], loop[1], rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(got[2], loop[2], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("hyper", [{}, {"weight_decay": 0.5, "lr": 1e-2}, {"eps": 1e-6}])
def test_coasting_expansion_equals_the_loop_where_it_converges(hyper: dict) -> None:
    s, k = 50, 3000
    eps = hyper.get("eps", 1e-8)
    window = mo.catch_up_window(lr=hyper.get("lr", 1e-3), weight_decay=hyper.get("weight_decay", 0.0))
    loop = mo.zero_gradient_steps(ROW["p"], ROW["m"], ROW["v"], s, k, **hyper)
    exp = mo.coasting_expansion(ROW["p"], ROW["m"], ROW["v"], s, k, window=window, **hyper)
    ratio = mo.expansion_ratio(ROW["v"], s, window, B2, eps)
    ok = ratio < 1
    assert ok.any() and not ok.all()
    assert mo.max_relative_difference(exp[0][ok], loop[0][ok]) <= 1e-12
    assert np.isnan(exp[0][~ok]).all()
    # a fixed number of terms too few for a slowly converging entry is visibly off
    few = mo.coasting_expansion(ROW["p"], ROW["m"], ROW["v"], s, k, terms=1, window=window, **hyper)
    assert mo.max_relative_difference(few[0][ok], loop[0][ok]) > 1e-12


def test_coasting_expansion_with_eps_zero_is_one_term() -> None:
    s, k = 10, 200
    loop = mo.zero_gradient_steps(ROW["p"], ROW["m"], ROW["v"], s, k, eps=0.0)
    exp = mo.coasting_expansion(ROW["p"], ROW["m"], ROW["v"], s, k, terms=1, eps=0.0)
    assert mo.max_relative_difference(exp[0], loop[0]) <= 1e-12


def test_rho_ratio_and_terms_by_hand() -> None:
    assert float(mo.coasting_rho(0, 0.9, 0.999)) == pytest.approx(0.9 / math.sqrt(0.999), rel=1e-15)
    assert float(mo.coasting_rho(1, 0.9, 0.81, c=0.5)) == pytest.approx(0.9 / (0.5 * 0.81), rel=1e-15)
    # b_k = beta2**(k/2) / sqrt(1 - beta2**(s+k)): s = 0, k = 2, beta2 = 0.25 gives 0.25 / sqrt(0.9375)
    assert float(mo.expansion_ratio(0.04, 0, 2, 0.25, 1e-2)) == pytest.approx(1e-2 / (0.2 * 0.25 / math.sqrt(0.9375)), rel=1e-14)
    assert float(mo.expansion_ratio(0.0, 0, 2, 0.25, 1e-2)) == math.inf
    np.testing.assert_array_equal(mo.terms_needed([2.0**-7, 0.5, 1.0, 1e-30]), [8.0, 56.0, np.inf, 1.0])


def test_catch_up_window_and_replay_length() -> None:
    default = mo.catch_up_window()
    assert 100 < default < 2000
    assert mo.catch_up_window(beta1=0.99, beta2=0.9999) > default
    assert mo.catch_up_window(beta1=0.9, beta2=0.5) == 0  # rho_0 >= 1: no window
    assert mo.catch_up_window(beta1=0.9, beta2=0.9) == 0  # rho_0 < 1 but rho_7 >= 1: no window either
    assert float(mo.coasting_rho(7, 0.9, 0.9)) > 1 > float(mo.coasting_rho(0, 0.9, 0.9))
    n = mo.replay_length(m=0.01, p=1.0, s=100)
    # the rest of the coasting after n steps is below rounding of |p| (checked against the loop)
    p_n = mo.zero_gradient_steps([1.0], [0.01], [1e-4], 100, n)
    p_far = mo.zero_gradient_steps([1.0], [0.01], [1e-4], 100, n + 2000)
    assert abs(p_far[0][0] - p_n[0][0]) <= 2.0**-56 * abs(p_n[0][0])
    assert n < mo.replay_length(m=1.0, p=1.0, s=100)  # a larger m needs longer, whatever the gap
    with pytest.raises(ValueError):
        mo.replay_length(m=0.01, p=1.0, s=0, eps=0.0)


def test_catch_up_after_a_billion_steps_equals_the_first_terms_of_the_sum() -> None:
    far = mo.kernel_catch_up(ROW["p"], ROW["m"], ROW["v"], 100, 10**9)
    first = mo.coasting_sum(ROW["p"], ROW["m"], ROW["v"], 100, 50_000)
    assert mo.max_relative_difference(far[0], first[0]) <= 1e-12
    # m and v end where dense Adam's stall: a few of the smallest subnormals, never 0 (test_catch_up_edges)
    tiny = np.finfo(np.float64).smallest_subnormal
    assert (np.abs(far[1]) <= 5 * tiny).all() and (far[2] <= 499 * tiny).all()


def test_plot_moment_traces_panels_and_lines() -> None:
    tr = mo.moment_traces(mo.touch_steps("periodic", 30, 5), 30, 1.0)
    fig = mo.plot_moment_traces(tr)
    assert isinstance(fig, Figure) and fig.dpi == figures.DPI
    assert [ax.get_ylabel() for ax in fig.axes] == ["m (first moment)", "v (second moment)", "parameter"]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [mo.LABELS[name] for name in mo.OPTIMIZERS]
    by_label = {line.get_label(): line for line in fig.axes[2].lines}
    np.testing.assert_array_equal(by_label[mo.LABELS["dense"]].get_ydata(), tr.param["dense"])
    np.testing.assert_array_equal(by_label[mo.LABELS["dense_equivalent"]].get_ydata(), tr.param["dense_equivalent"])
    assert len(by_label[mo.LABELS["lazy"]].get_xdata()) == 6  # a marker per touch
    assert "6 touches" in fig.texts[0].get_text()
    assert fig.axes[0].yaxis.label.get_fontsize() == figures.LABEL
    only = mo.plot_moment_traces(tr, fields=("param",), title="t")
    assert len(only.axes) == 1 and only.texts[0].get_text() == "t"
    with pytest.raises(ValueError, match="fields"):
        mo.plot_moment_traces(tr, fields=("w",))


def test_moment_figure_is_the_widget_figure() -> None:
    fig = mo.moment_figure(beta1=0.5, beta2=0.99, pattern="bursts", period=3, weight_decay=10.0, num_steps=40)
    assert len(fig.axes) == 3
    assert "beta1 = 0.5" in fig.texts[0].get_text() and "weight decay = 10" in fig.texts[0].get_text()
    expected = mo.moment_traces(mo.touch_steps("bursts", 40, 3), 40, 1.0, 0.5, 0.99, weight_decay=10.0)
    dense_line = [line for line in fig.axes[0].lines if line.get_label() == mo.LABELS["dense"]][0]
    np.testing.assert_array_equal(dense_line.get_ydata(), expected.m["dense"])


def test_plot_touch_after_gap() -> None:
    gaps = np.array([1, 10, 100, 1000, 10_000])
    fig = mo.plot_touch_after_gap(gaps, history=10)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    lazy, dense = ax.lines[0].get_ydata(), ax.lines[1].get_ydata()
    m_s, v_s = mo.moments_after_touches(10, 1.0, B1, B2)
    np.testing.assert_allclose(dense, -mo.touch_update(m_s, v_s, 1.0, gaps, 10 + gaps, "dense", lr=1.0, eps=0.0))
    assert lazy[-1] > dense[-1] == pytest.approx((1 - B1) / math.sqrt(1 - B2), rel=1e-3)


def test_coasting_terms_are_the_terms_coasting_sum_adds() -> None:
    v = np.array([1e-18, 1e-6, 1e-2])
    terms = mo.coasting_terms(v, 40, 300, c=0.999)
    assert terms.shape == (3, 300) and (terms > 0).all()
    p, _, _ = mo.coasting_sum(np.zeros(3), np.ones(3), v, 40, 300, lr=1.0, weight_decay=0.001)
    np.testing.assert_allclose(-p, terms.sum(axis=-1), rtol=1e-14)
    a, b = mo.coasting_weights(40, 300, B1, B2)  # the last term: c**0 a_k / (b_k x + eps)
    np.testing.assert_allclose(terms[:, -1], a[-1] / (b[-1] * np.sqrt(v) + 1e-8), rtol=1e-15)


def test_plot_coasting_terms_shows_each_entry_below_rounding_past_the_window() -> None:
    v = 10.0 ** np.array([-18.0, -10.0, -2.0])
    window = mo.catch_up_window()
    fig = mo.plot_coasting_terms(v, 100, 2000, window)
    (ax,) = fig.axes
    entries = [line for line in ax.lines if line.get_label().startswith("x / eps")]
    assert len(entries) == 3 and ax.get_yscale() == "log"
    for line in entries:
        share = line.get_ydata()
        assert math.isclose(share.sum(), 1.0, rel_tol=1e-12)
        assert share[window - 1 :].max() < 2.0**-56  # the optimizer's window leaves out less than rounding
    assert any(line.get_xdata()[0] == window for line in ax.lines if "window" in line.get_label())


def test_plot_first_update_ratio_highlights_the_step() -> None:
    fig = mo.plot_first_update_ratio(5000, B1, B2, highlight=50)
    (ax,) = fig.axes
    assert fig.dpi == figures.DPI and ax.get_xscale() == "log"
    assert any("t = 50: 0.702" in t.get_text() for t in ax.texts)


def test_sparse_opt_does_not_import_the_demos() -> None:
    code = "import sys, sparse_opt; assert 'sparse_opt.demos' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

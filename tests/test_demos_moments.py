"""sparse_opt.demos.moments: one coordinate under LAZY, DORMANCY_DECAY and dense Adam (notebook 03)."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sparse_opt.demos import moments as mo  # noqa: E402

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
    assert tr.m["dense"][-1] == pytest.approx((1 - B1) * (1 + B1**4), rel=1e-14)
    assert tr.m["dormancy_decay"][-1] == pytest.approx((1 - B1) * (1 + B1**4), rel=1e-14)
    assert tr.v["lazy"][-1] == pytest.approx((1 - B2) * (1 + B2), rel=1e-14)
    assert tr.v["dormancy_decay"][-1] == pytest.approx((1 - B2) * (1 + B2**4), rel=1e-14)
    # between the touches: the lazy state holds, dense decays one factor per step
    np.testing.assert_array_equal(tr.m["lazy"][:4], np.full(4, 1 - B1))
    np.testing.assert_allclose(tr.m["dense"][:4], (1 - B1) * B1 ** np.arange(4), rtol=1e-15)
    np.testing.assert_array_equal(tr.touched, [True, False, False, False, True])
    np.testing.assert_array_equal(tr.grad, [1.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(tr.at_touches("m")["lazy"], tr.m["lazy"][[0, 4]])


def test_hand_example_sign_flip_after_a_long_gap() -> None:
    tr = mo.moment_traces(np.r_[np.arange(1, 11), 60], 60, np.r_[np.ones(10), -1.0], B1, B2)
    assert tr.m["lazy"][-1] == pytest.approx(B1 * (1 - B1**10) - (1 - B1), rel=1e-12)
    assert tr.m["dense"][-1] == pytest.approx(B1**50 * (1 - B1**10) - (1 - B1), rel=1e-12)
    # the lazy update still follows the old gradients: the parameter decreases
    assert tr.param["lazy"][-1] < tr.param["lazy"][-2]
    assert tr.param["dense"][-1] > tr.param["dense"][-2]


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


def test_every_step_the_three_are_bit_identical() -> None:
    grads = np.random.default_rng(0).standard_normal(150)
    tr = mo.moment_traces(np.arange(1, 151), 150, grads, B1, B2)
    for field in ("m", "v", "param"):
        trace = getattr(tr, field)
        np.testing.assert_array_equal(trace["lazy"], trace["dormancy_decay"])
        np.testing.assert_array_equal(trace["lazy"], trace["dense"])


def test_moment_traces_rejects_bad_touch_steps() -> None:
    with pytest.raises(ValueError, match="ascending"):
        mo.moment_traces([3, 2], 5, 1.0)
    with pytest.raises(ValueError, match="inside"):
        mo.moment_traces([0, 2], 5, 1.0)
    with pytest.raises(ValueError, match="inside"):
        mo.moment_traces([2, 6], 5, 1.0)


def test_max_relative_difference() -> None:
    assert mo.max_relative_difference([1.0, 2.2], [1.0, 2.0]) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="zero"):
        mo.max_relative_difference([1.0], [0.0])


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
    # eps tiny but not 0: dense Adam fed zeros would compute 0 / 0 before the touch
    lr, g = 1e-3, 2.5
    out = mo.first_update(t, g, B1, B2, lr=lr, eps=1e-14)
    assert out["global_step"] == pytest.approx(-lr * float(mo.first_update_ratio(t, B1, B2)), rel=1e-10)
    assert out["dense"] == pytest.approx(out["global_step"], rel=1e-12)
    assert out["per_coordinate"] == pytest.approx(-lr, rel=1e-10)


def test_plot_moment_traces_has_three_panels() -> None:
    tr = mo.moment_traces(mo.touch_steps("periodic", 30, 5), 30, 1.0)
    fig = mo.plot_moment_traces(tr)
    try:
        assert isinstance(fig, Figure)
        assert [ax.get_ylabel() for ax in fig.axes] == ["m (first moment)", "v (second moment)", "parameter"]
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert legend == [mo.LABELS[name] for name in mo.OPTIMIZERS]
        # dense: the full trace; lazy modes: a marker per touch (6 touches)
        dense_line = [line for line in fig.axes[0].lines if line.get_label() == mo.LABELS["dense"]][0]
        np.testing.assert_array_equal(dense_line.get_ydata(), tr.m["dense"])
        lazy_markers = [line for line in fig.axes[0].lines if line.get_label() == mo.LABELS["lazy"]][0]
        assert len(lazy_markers.get_xdata()) == 6
        assert "6 touches" in fig._suptitle.get_text()
    finally:
        plt.close(fig)


def test_plot_first_update_ratio_highlights_the_step() -> None:
    fig = mo.plot_first_update_ratio(5000, B1, B2, highlight=50)
    try:
        (ax,) = fig.axes
        assert ax.get_xscale() == "log"
        assert any("t = 50: 0.702" in t.get_text() for t in ax.texts)
    finally:
        plt.close(fig)


def test_sparse_opt_does_not_import_the_demos() -> None:
    code = "import sys, sparse_opt; assert 'sparse_opt.demos' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

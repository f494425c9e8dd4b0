"""sparse_opt.demos.egdd_demo: hand-derived values behind notebook 06."""

import math

import numpy as np
import pytest
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos import egdd_demo as ed
from figure_checks import assert_slide_ready, data_points_under_legends, drawn, minor_tick_labels

CURVATURES = np.logspace(0, -3, 8)
H = ed.quadratic_hessian(CURVATURES)
X0 = np.ones(8)


def test_quadratic_hessian_diagonal_and_rotated():
    assert np.array_equal(ed.quadratic_hessian([2.0, 0.5]), np.diag([2.0, 0.5]))
    rotated = ed.quadratic_hessian(CURVATURES, rotation_seed=0)
    assert np.allclose(rotated, rotated.T, rtol=0, atol=1e-15)
    assert np.allclose(np.linalg.eigvalsh(rotated), np.sort(CURVATURES), rtol=1e-12, atol=1e-15)
    assert np.abs(rotated - np.diag(np.diag(rotated))).max() > 0.01
    assert np.array_equal(rotated, ed.quadratic_hessian(CURVATURES, rotation_seed=0))


def test_quadratic_loss():
    assert ed.quadratic_loss(np.diag([2.0, 4.0]), np.array([1.0, 1.0])) == 3.0
    assert ed.quadratic_loss(np.diag([1.0]), np.array([1e200])) == math.inf


def test_momentum_sgd_by_hand():
    # h = 1, x0 = 1, lr = 0.5, momentum = 0.5:
    # m1 = 0.5, x1 = 0.5; m2 = 0.25 + 0.25 = 0.5, x2 = 0; m3 = 0.25 + 0 = 0.25, x3 = -0.25
    res = ed.momentum_sgd(np.diag([1.0]), np.array([1.0]), 3, learning_rate=0.5, momentum=0.5)
    assert np.array_equal(res["x"][:, 0], [1.0, 0.5, 0.0, -0.25])
    assert np.array_equal(res["loss"], [0.5, 0.125, 0.0, 0.03125])


def test_momentum_sgd_lr_outside_by_hand():
    # TF MomentumOptimizer / torch SGD form: accum = 0.5 accum + g, x -= 0.5 accum (h = 1, x0 = 1)
    # accum1 = 1, x1 = 0.5; accum2 = 0.5 + 0.5 = 1, x2 = 0; accum3 = 0.5 + 0 = 0.5, x3 = -0.25: same as inside
    res = ed.momentum_sgd(np.diag([1.0]), np.array([1.0]), 3, learning_rate=0.5, momentum=0.5, lr_inside=False)
    assert np.array_equal(res["x"][:, 0], [1.0, 0.5, 0.0, -0.25])


def test_momentum_forms_differ_under_a_schedule_by_hand():
    # lr = (1, 0.5), momentum 0.5, h = 1, x0 = 1.
    # inside (Keras / EGDD): m1 = 1, x1 = 0; m2 = 0.5 * 1 + 0.5 * 0 = 0.5, x2 = -0.5
    # outside (TF MomentumOptimizer): a1 = 1, x1 = 0; a2 = 0.5 * 1 + 0 = 0.5, x2 = 0 - 0.5 * 0.5 = -0.25
    inside = ed.momentum_sgd(np.diag([1.0]), np.array([1.0]), 2, [1.0, 0.5], 0.5)
    outside = ed.momentum_sgd(np.diag([1.0]), np.array([1.0]), 2, [1.0, 0.5], 0.5, lr_inside=False)
    assert inside["x"][:, 0].tolist() == [1.0, 0.0, -0.5]
    assert outside["x"][:, 0].tolist() == [1.0, 0.0, -0.25]


@pytest.mark.parametrize("lr", [0.3, 1.0, 3.0])
def test_momentum_forms_agree_to_rounding_for_a_constant_lr(lr):
    inside = ed.momentum_sgd(H, X0, 300, lr, 0.9)
    outside = ed.momentum_sgd(H, X0, 300, lr, 0.9, lr_inside=False)
    np.testing.assert_allclose(inside["x"], outside["x"], rtol=0, atol=1e-13)
    # a schedule given as one value per step, all equal, is the constant
    assert np.array_equal(ed.momentum_sgd(H, X0, 300, np.full(300, lr), 0.9)["x"], inside["x"])


def test_momentum_sgd_divergence_is_reported_as_inf_without_warnings():
    # lr * h = 5 > 2 (1 + momentum): the iterates grow by about 4x a step and overflow
    res = ed.momentum_sgd(np.diag([1.0]), np.array([1.0]), 600, learning_rate=5.0, momentum=0.9)
    assert res["loss"][-1] == math.inf and np.isfinite(res["loss"][10])


@pytest.mark.parametrize("use_signs", [True, False])
@pytest.mark.parametrize("use_directions", [True, False])
def test_frozen_egdd_is_momentum_sgd_bit_for_bit(use_signs, use_directions):
    sgd = ed.momentum_sgd(H, X0, 300, learning_rate=1.0, momentum=0.9)
    frozen = {"gain_learning_rate": 0.0, "scale_learning_rate": 0.0}
    egdd = ed.run_egdd(H, X0, 300, 1.0, 0.9, **frozen, use_signs=use_signs, use_directions=use_directions)
    assert np.array_equal(egdd["x"], sgd["x"])
    assert np.array_equal(egdd["loss"], sgd["loss"])
    assert np.all(egdd["gain"] == 1.0) and np.all(egdd["lr_scale"] == 1.0)


def test_run_egdd_first_two_steps_by_hand():
    # H = diag(1, 0.5), x0 = (1, -2), lr = 0.5, momentum = 0.9, defaults otherwise.
    # Step 1: m_old = gbar_old = 0, so gain and lr_scale stay 1; g1 = (1, -1), m1 = 0.5 g1, x1 = (0.5, -1.5).
    # Step 2: g2 = (0.5, -0.75) has the signs of gbar1 = 0.1 g1: both gains *= exp(0.01);
    #         lr_scale *= exp(0.001 * cos(g2, m1)).
    res = ed.run_egdd(np.diag([1.0, 0.5]), np.array([1.0, -2.0]), 2, 0.5, 0.9)
    assert np.array_equal(res["x"][1], [0.5, -1.5])
    assert np.array_equal(res["gain"][1], [1.0, 1.0]) and res["lr_scale"][1] == 1.0
    g2, m1 = np.array([0.5, -0.75]), np.array([0.5, -0.5])
    cos = g2 @ m1 / (np.linalg.norm(g2) * np.linalg.norm(m1))
    scale = math.exp(0.001 * cos)
    gain = math.exp(0.01)
    assert np.allclose(res["gain"][2], gain, rtol=1e-15)
    assert res["lr_scale"][2] == pytest.approx(scale, rel=1e-12)
    m2 = 0.9 * m1 + 0.5 * gain * g2
    assert np.allclose(res["x"][2], res["x"][1] - scale * m2, rtol=1e-12)
    assert res["gain"].shape == (3, 2) and res["lr_scale"].shape == (3,) and res["loss"].shape == (3,)


def test_sign_rule_moves_gains_by_whole_factors_of_exp_gain_lr():
    res = ed.run_egdd(H, X0, 200, 1.0, 0.9, gain_learning_rate=0.01)
    steps = np.log(res["gain"]) / 0.01
    assert res["gain"].max() < 100 and res["gain"].min() > 0.01  # no clipping on this run
    assert np.allclose(steps, np.round(steps), rtol=0, atol=1e-6)
    assert np.all(np.abs(np.diff(np.round(steps), axis=0)) <= 1)


def test_egdd_adapts_gains_to_curvature_and_beats_momentum_sgd():
    sgd = ed.momentum_sgd(H, X0, 500, 1.0, 0.9)
    egdd = ed.run_egdd(H, X0, 500, 1.0, 0.9, scale_learning_rate=0.01)
    final_gain = egdd["gain"][-1]
    assert np.all(np.diff(final_gain) > 0)  # flatter coordinate, larger gain
    assert final_gain[0] < 1 < 10 < final_gain[-1]
    assert egdd["loss"][-1] < 1e-6 * sgd["loss"][-1]


def test_gains_barely_move_without_signs_on_small_gradients():
    res = ed.run_egdd(H, X0, 500, 1.0, 0.9, use_signs=False)
    assert np.abs(res["gain"] - 1).max() < 0.1


def test_lr_sweep_sgd_diverges_where_egdd_recovers():
    sweep = ed.lr_sweep(H, X0, 500, [0.1, 1.0, 5.0], 0.9, scale_learning_rate=0.01)
    assert sweep["learning_rate"].tolist() == [0.1, 1.0, 5.0]
    assert sweep["sgd_loss"][-1] == math.inf
    assert np.all(sweep["egdd_loss"] < 1e-6)
    assert np.all(sweep["egdd_loss"] < sweep["sgd_loss"])
    # too small a learning rate: lr_scale grows; too large: it shrinks
    assert sweep["egdd_lr_scale"][0] > 5 and sweep["egdd_lr_scale"][-1] < 0.5
    again = ed.momentum_sgd(H, X0, 500, 1.0, 0.9)["loss"][-1]
    assert sweep["sgd_loss"][1] == again


def test_plot_egdd_run_axes():
    sgd = ed.momentum_sgd(H, X0, 20, 1.0, 0.9)
    egdd = ed.run_egdd(H, X0, 20, 1.0, 0.9)
    fig = ed.plot_egdd_run(egdd, sgd, CURVATURES)
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    ax_loss, ax_gain, ax_scale = fig.axes
    assert ax_loss.get_yscale() == "log" and len(ax_loss.get_lines()) == 2
    assert ax_gain.get_yscale() == "log" and len(ax_gain.get_lines()) == len(CURVATURES)
    assert np.array_equal(ax_scale.get_lines()[0].get_ydata(), egdd["lr_scale"])


def test_plot_lr_sweep_marks_diverged_runs_in_a_band_not_at_a_loss():
    # after 100 steps at lr = 5 both are still above the initial loss (EGDD recovers later)
    sweep = ed.lr_sweep(H, X0, 100, [0.5, 5.0], 0.9)
    assert sweep["initial_loss"] == pytest.approx(0.5 * CURVATURES.sum(), rel=1e-15)
    fig = drawn(ed.plot_lr_sweep(sweep, stability_limit=3.8))
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    (ax,) = fig.axes
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["initial loss", "momentum SGD", "momentum SGD diverged", "EGDD", "EGDD diverged",
                      "momentum SGD stability limit, lr = 3.8"]
    crosses = [line for line in ax.get_lines() if line.get_label().endswith("diverged")]
    assert len(crosses) == 2
    for line in crosses:
        assert line.get_xdata().tolist() == [5.0]
        # y is in axes coordinates, inside the band at the top: not a loss value
        assert line.get_transform() == ax.get_xaxis_transform()
        assert line.get_ydata().tolist() == [1 - ed.DIVERGED_BAND / 2]
    # every plotted loss and the initial loss lie below the band
    low, high = (np.log10(v) for v in ax.get_ylim())
    band_bottom = 10 ** (high - ed.DIVERGED_BAND * (high - low))
    assert sweep["initial_loss"] < band_bottom
    assert all(np.all(line.get_ydata() < band_bottom) for line in ax.get_lines() if line not in crosses
               and line.get_transform() == ax.transData)
    # no loss tick label inside the band
    labelled = [t.get_position()[1] for t in ax.get_yticklabels() if t.get_text()]
    assert labelled and max(labelled) < band_bottom
    assert_slide_ready(fig)


def test_every_plot_is_slide_ready():
    sgd = ed.momentum_sgd(H, X0, 200, 1.0, 0.9)
    egdd = ed.run_egdd(H, X0, 200, 1.0, 0.9, scale_learning_rate=0.01)
    assert_slide_ready(ed.plot_egdd_run(egdd, sgd, CURVATURES))
    sweep = ed.lr_sweep(H, X0, 200, [0.1, 1.0, 5.0], 0.9)
    assert_slide_ready(ed.plot_lr_sweep(sweep))
    assert_slide_ready(ed.plot_egdd_on_lookups(ed.egdd_on_lookups(100, 4, 40, 16)))


def test_egdd_state_numbers_read_from_the_optimizer():
    assert ed.egdd_state_numbers((1000, 8)) == {"weight_sized_slots": 3, "per_tensor": 2, "weights": 8000, "total": 24002}
    assert ed.egdd_state_numbers((10**6, 64))["total"] == 3 * 64_000_000 + 2
    # the probe agrees with a real optimizer over the real shape
    state = so.EGDD([np.zeros((5, 3))], 0.1, 0.9).state[0]
    assert sum(np.size(v) for v in state.values()) == ed.egdd_state_numbers((5, 3))["total"]
    assert ed.egdd_state_numbers((7,))["total"] == 3 * 7 + 2
    with pytest.raises(ValueError, match="at least one dimension"):
        ed.egdd_state_numbers(())


def test_egdd_on_lookups_gains_move_only_on_touches_and_never_on_the_first():
    run = ed.egdd_on_lookups(200, 4, 60, 16, gain_learning_rate=0.01, scale_learning_rate=0.01)
    touches = run["touches"]
    assert np.all(run["gain_moved_untouched"] == 0)
    # a row's first touch meets gbar = 0: at most touches - 1 moves of exp(+-0.01) per entry
    assert np.all(np.abs(run["gain_moves"]) <= np.maximum(touches - 1, 0)[:, None])
    assert np.all(run["gain"][touches <= 1] == 1.0)
    assert np.abs(run["gain_moves"][touches > 10]).max() >= 3
    # the sign rule moves a gain by a whole step whatever the age of gbar
    assert run["touch_gap"].min() >= 1 and run["touch_gap"].size == run["touch_gbar"].size == run["touch_gain_moves"].size
    assert run["touch_gap"].size == int(np.maximum(touches - 1, 0).sum())
    assert np.all(run["touch_gbar"] > 0)
    stale = run["touch_gap"] > 20
    assert stale.any() and np.all(np.abs(run["touch_gain_moves"][stale]) > 0.99)
    # untouched rows still move: their momentum keeps coasting
    assert np.all(run["rows_moved"] >= run["touched"]) and run["rows_moved"][-1] > 2 * run["touched"][-1]


def test_egdd_on_lookups_frozen_rates_keep_gain_and_scale_at_one():
    run = ed.egdd_on_lookups(100, 4, 20, 8, gain_learning_rate=0.0, scale_learning_rate=0.0)
    assert np.all(run["gain"] == 1.0) and np.all(run["lr_scale"] == 1.0)
    assert run["touch_gain_moves"].size == 0 and np.all(run["gain_moves"] == 0)


def test_touch_buckets_by_hand():
    run = {
        "touches": np.array([0, 1, 3, 60]),
        "gain_moves": np.array([[0.0, 0.0], [0.0, 0.0], [2.0, -1.0], [10.0, 20.0]]),
        "params": np.array([[1.0], [0.5], [0.25], [0.0]]),
        "start": np.zeros((4, 1)),
        "target": np.ones((4, 1)),
    }
    buckets = ed.touch_buckets(run)
    assert [b["label"] for b in buckets] == ["0", "1", "2-5", "51+"]
    assert [b["rows"] for b in buckets] == [1, 1, 1, 1]
    assert buckets[2]["mean_abs_moves"] == 1.5 and buckets[2]["max_abs_moves"] == 2.0
    assert [b["distance_left"] for b in buckets] == [0.0, 0.5, 0.75, 1.0]

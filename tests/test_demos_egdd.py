"""sparse_opt.demos.egdd_demo: hand-derived values behind notebook 06."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from sparse_opt.demos import egdd_demo as ed

CURVATURES = np.logspace(0, -3, 8)
H = ed.quadratic_hessian(CURVATURES)
X0 = np.ones(8)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


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


def test_plot_lr_sweep_marks_diverged_runs():
    # after 100 steps at lr = 5 both are still above the initial loss (EGDD recovers later)
    sweep = ed.lr_sweep(H, X0, 100, [0.5, 5.0], 0.9)
    assert sweep["initial_loss"] == pytest.approx(0.5 * CURVATURES.sum(), rel=1e-15)
    fig = ed.plot_lr_sweep(sweep)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    handles, labels = fig.axes[0].get_legend_handles_labels()
    assert labels == ["momentum SGD", "momentum SGD diverged", "EGDD", "EGDD diverged"]
    for handle in handles[1::2]:
        assert handle.get_xdata().tolist() == [5.0]
        assert handle.get_ydata().tolist() == [10 * sweep["initial_loss"]]

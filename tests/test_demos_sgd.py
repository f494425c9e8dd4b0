"""Tests of sparse_opt.demos.sgd: lazy, DENSE_EQUIVALENT and dense SGD, the zero-gradient principle, the plots."""

import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos import figures
from sparse_opt.demos.sgd import (
    caught_up,
    dense_adagrad_step,
    dense_dormant_matrix,
    dense_dormant_state,
    dense_sgd_step,
    dense_sgd_trajectory,
    lazy_sgd_trajectory,
    lazy_vs_dense_sgd_trajectory,
    moved_rows,
    per_touch_moves,
    plot_lazy_vs_dense_sgd,
    plot_row_changes,
    power_by_squaring,
    sgd_figure,
    sgd_state_after_gap,
    touch_schedule,
    train_embedding_sgd,
    zero_gradient_principle,
)

RARE = so.SparseSgdConfig(lr=0.1, weight_decay=0.05, momentum=0.9)


def test_touch_schedule():
    assert touch_schedule(7, 3).tolist() == [True, False, False, True, False, False, True]
    assert touch_schedule(3, 1).all()
    assert touch_schedule(4, 10).tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="period must be positive"):
        touch_schedule(3, 0)


def test_dense_sgd_weight_decay_on_zero_gradient_decays_geometrically():
    cfg = so.SparseSgdConfig(lr=0.1, weight_decay=0.5)
    traj = dense_sgd_trajectory(np.array([2.0, -4.0]), np.zeros((6, 2)), cfg)
    k = np.arange(7)[:, None]
    np.testing.assert_allclose(traj, np.array([2.0, -4.0]) * 0.95**k, rtol=1e-14)


def test_dense_sgd_momentum_keeps_moving_after_one_touch():
    # step 1: buf = g, p = p0 - lr * g; then buf = mom**j * g on zero gradients,
    # so after k steps p = p0 - lr * g * (1 - mom**k) / (1 - mom)
    lr, mom, g = 0.1, 0.5, -2.0
    cfg = so.SparseSgdConfig(lr=lr, momentum=mom)
    grads = np.zeros((8, 1))
    grads[0] = g
    traj = dense_sgd_trajectory(np.array([1.0]), grads, cfg)[:, 0]
    k = np.arange(9)
    np.testing.assert_allclose(traj, 1.0 - lr * g * (1 - mom**k) / (1 - mom), rtol=1e-14)
    assert traj[1] == pytest.approx(1.2) and traj[2] == pytest.approx(1.3)


def test_dense_sgd_step_by_hand_and_maximize():
    cfg = so.SparseSgdConfig(lr=0.5, weight_decay=0.1, momentum=0.9)
    p, buf = np.array([1.0]), np.array([2.0])
    dense_sgd_step(p, buf, np.array([3.0]), cfg)
    # g = 3 + 0.1 * 1 = 3.1; buf = 0.9 * 2 + 3.1 = 4.9; p = 1 - 0.5 * 4.9
    assert buf.tolist() == pytest.approx([4.9]) and p.tolist() == pytest.approx([-1.45])
    up = so.SparseSgdConfig(lr=0.5, weight_decay=0.1, momentum=0.9, maximize=True)
    p2, buf2 = np.array([1.0]), np.array([2.0])
    dense_sgd_step(p2, buf2, np.array([-3.0]), up)
    np.testing.assert_array_equal(p2, p)
    np.testing.assert_array_equal(buf2, buf)


def test_lazy_freezes_while_dense_decays_for_a_row_touched_once():
    # p0 = 1, g = -1, lr = 0.1, wd = 0.5: step 1 gives p1 = 1 - 0.1 * (-1 + 0.5) = 1.05;
    # lazy then holds 1.05, dense (and DENSE_EQUIVALENT) decay as 1.05 * 0.95**(k - 1)
    cfg = so.SparseSgdConfig(lr=0.1, weight_decay=0.5)
    c = lazy_vs_dense_sgd_trajectory(cfg, num_steps=10, period=100, grad=-1.0, p0=1.0)
    assert c.touched.sum() == 1 and c.touched[0]
    assert c.lazy[0] == c.dense[0] == c.dense_equivalent[0] == 1.0
    assert c.lazy[1] == c.dense[1] == pytest.approx(1.05)
    np.testing.assert_array_equal(c.lazy[1:], np.full(10, c.lazy[1]))
    np.testing.assert_allclose(c.dense[1:], 1.05 * 0.95 ** np.arange(10), rtol=1e-14)
    np.testing.assert_allclose(c.dense_equivalent, c.dense, rtol=1e-13)
    np.testing.assert_array_equal(c.steps, np.arange(11))
    np.testing.assert_array_equal(c.touch_steps, [1])
    assert c.config.mode is so.LazyMode.LAZY


def test_lazy_with_weight_decay_closed_form_per_touch():
    # each touch: p <- a * p - lr * g with a = 1 - lr * wd; lazy skips the dormant
    # steps, dense multiplies by a**(period - 1) between touches
    lr, wd, g, p0, period = 0.2, 0.25, -1.0, 1.0, 4
    a = 1 - lr * wd
    cfg = so.SparseSgdConfig(lr=lr, weight_decay=wd)
    c = lazy_vs_dense_sgd_trajectory(cfg, num_steps=4 * period, period=period, grad=g, p0=p0)
    n = np.arange(1, 5)
    after_touch = 1 + (n - 1) * period
    np.testing.assert_allclose(c.lazy[after_touch], a**n * p0 - lr * g * (1 - a**n) / (1 - a), rtol=1e-14)
    q = p0
    for touch in after_touch:
        q = a * q - lr * g
        assert c.dense[touch] == pytest.approx(q, rel=1e-14)
        q *= a ** (period - 1)


def test_lazy_is_constant_between_touches_and_equals_dense_when_touched_every_step():
    rare = lazy_vs_dense_sgd_trajectory(RARE, num_steps=50, period=7)
    assert (np.diff(rare.lazy)[~rare.touched] == 0).all()
    assert (np.diff(rare.lazy)[rare.touched] != 0).all()
    assert not np.array_equal(rare.lazy, rare.dense)
    hot = lazy_vs_dense_sgd_trajectory(RARE, num_steps=50, period=1)
    np.testing.assert_array_equal(hot.lazy, hot.dense)


def test_dense_equivalent_comparison_is_on_the_dense_line():
    rare = lazy_vs_dense_sgd_trajectory(RARE, num_steps=120, period=30)
    assert np.abs(rare.dense_equivalent - rare.dense).max() <= 1e-12 * np.abs(rare.dense).max()
    assert np.abs(rare.lazy - rare.dense).max() > 0.1
    # the values the notebook prints
    assert rare.lazy[-1] == pytest.approx(1.853102, abs=5e-7)
    assert rare.dense[-1] == pytest.approx(0.428548, abs=5e-7)


def test_lazy_fed_explicit_zero_entries_is_dense_sgd_bit_for_bit():
    cfg = so.SparseSgdConfig(lr=0.05, weight_decay=0.1, momentum=0.8)
    rng = np.random.default_rng(3)
    grads = rng.standard_normal((30, 5)) * (rng.random((30, 5)) < 0.3)
    p0 = rng.standard_normal(5)
    every = np.ones_like(grads, dtype=bool)
    np.testing.assert_array_equal(lazy_sgd_trajectory(p0, grads, every, cfg), dense_sgd_trajectory(p0, grads, cfg))
    # with absent entries instead of zero ones, the trajectories differ
    assert not np.array_equal(lazy_sgd_trajectory(p0, grads, grads != 0, cfg), dense_sgd_trajectory(p0, grads, cfg))


def test_dense_equivalent_trajectory_with_absent_entries_is_dense_sgd():
    values = {"lr": 0.05, "weight_decay": 0.1, "momentum": 0.8}
    rng = np.random.default_rng(4)
    touched = rng.random((60, 5)) < 0.2
    grads = np.where(touched, rng.standard_normal((60, 5)), 0.0)
    p0 = rng.standard_normal(5)
    exact = lazy_sgd_trajectory(p0, grads, touched, so.SparseSgdConfig(**values, mode="dense_equivalent"))
    dense = dense_sgd_trajectory(p0, grads, so.SparseSgdConfig(**values))
    np.testing.assert_allclose(exact, dense, rtol=1e-12, atol=1e-15)


def test_caught_up_reads_without_changing_the_optimizer():
    p = np.ones(3)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, weight_decay=0.5, mode="dense_equivalent"))
    opt.step(so.CooGradient([0], [1.0], 3))
    for _ in range(4):
        opt.step(so.CooGradient([], [], 3))
    before = p.copy()
    shadow = caught_up(opt)
    np.testing.assert_array_equal(p, before)  # the original still lags
    assert opt.last_step.tolist() == [1, 0, 0]
    assert shadow.params is not p
    np.testing.assert_allclose(shadow.params, before * 0.95**np.array([4, 5, 5]), rtol=1e-14)
    lazy = so.SparseSgd(np.ones(2), so.SparseSgdConfig(lr=0.1))
    lazy.step(so.CooGradient([1], [1.0], 2))
    np.testing.assert_array_equal(caught_up(lazy).params, lazy.params)


def test_lazy_sgd_trajectory_keeps_float32_and_checks_shapes():
    cfg = so.SparseSgdConfig(lr=0.5)
    traj = lazy_sgd_trajectory(np.ones(2, dtype=np.float32), np.ones((3, 2)), np.eye(3, 2, dtype=bool), cfg)
    assert traj.dtype == np.float32
    np.testing.assert_array_equal(traj, [[1.0, 1.0], [0.5, 1.0], [0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match="must both be"):
        lazy_sgd_trajectory(np.ones(2), np.ones((3, 2)), np.ones((3, 3), dtype=bool), cfg)


def test_per_touch_moves_count_touches_for_lazy_and_steps_for_dense():
    # momentum only, g = -1 every P = 30 steps: lazy moves lr (1 - mu**n) / (1 - mu) at touch n,
    # dense lr (1 - mu**(P n)) / (1 - mu) over the period that follows it
    lr, mu, period = 0.1, 0.9, 30
    c = lazy_vs_dense_sgd_trajectory(so.SparseSgdConfig(lr=lr, momentum=mu), num_steps=300, period=period)
    n = np.arange(1, 11)
    np.testing.assert_allclose(per_touch_moves(c, "lazy"), lr * (1 - mu**n) / (1 - mu), rtol=1e-12)
    np.testing.assert_allclose(per_touch_moves(c, "dense"), lr * (1 - mu ** (period * n)) / (1 - mu), rtol=1e-12)
    np.testing.assert_allclose(per_touch_moves(c, "dense_equivalent"), per_touch_moves(c, "dense"), rtol=1e-12)
    # the last move runs to the end of the trajectory
    short = lazy_vs_dense_sgd_trajectory(so.SparseSgdConfig(lr=lr, momentum=mu), num_steps=35, period=period)
    assert per_touch_moves(short, "dense")[-1] == pytest.approx(short.dense[-1] - short.dense[30], rel=1e-14)


def test_dense_dormant_state_by_hand():
    # momentum only: lr = 0.5, mom = 0.5, (p, buf) = (0, 1)
    # step 1: buf = 0.5, p = -0.25; step 2: buf = 0.25, p = -0.375
    cfg = so.SparseSgdConfig(lr=0.5, momentum=0.5)
    assert dense_dormant_state(0.0, 1.0, cfg, 2) == pytest.approx((-0.375, 0.25))
    assert dense_dormant_state(0.3, 0.7, cfg, 0) == (0.3, 0.7)
    # weight decay only: p * (1 - lr * wd)**k
    wd_only = so.SparseSgdConfig(lr=0.1, weight_decay=0.5)
    p_k, _ = dense_dormant_state(2.0, 0.0, wd_only, 5)
    assert p_k == pytest.approx(2.0 * 0.95**5, rel=1e-14)
    np.testing.assert_array_equal(dense_dormant_matrix(wd_only), [[0.95, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(dense_dormant_matrix(RARE), [[0.995, -0.09], [0.05, 0.9]], rtol=1e-15)


def test_dense_dormant_state_matches_simulated_dense_sgd():
    p, buf = np.array([1.3]), np.array([-0.4])
    expected = dense_dormant_state(1.3, -0.4, RARE, 25)
    for _ in range(25):
        dense_sgd_step(p, buf, np.zeros(1), RARE)
    assert (p[0], buf[0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "k, squarings, products", [(0, 0, 0), (1, 0, 0), (2, 1, 0), (3, 1, 1), (29, 4, 3), (1000, 9, 5), (2**63 - 1, 62, 62)]
)
def test_power_by_squaring_counts(k, squarings, products):
    power = power_by_squaring(np.eye(2) * 0.5, k)
    assert (power.squarings, power.products) == (squarings, products)
    assert power.squarings == max(k.bit_length() - 1, 0)


def test_power_by_squaring_equals_repeated_products():
    M = dense_dormant_matrix(RARE)
    np.testing.assert_array_equal(power_by_squaring(M, 0).matrix, np.eye(2))
    np.testing.assert_array_equal(power_by_squaring(M, 1).matrix, M)
    repeated = np.eye(2)
    for k in range(1, 70):
        repeated = repeated @ M
        np.testing.assert_allclose(power_by_squaring(M, k).matrix, repeated, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(power_by_squaring(M, k).matrix, np.linalg.matrix_power(M, k), rtol=1e-12, atol=0)
    with pytest.raises(ValueError):
        power_by_squaring(M, -1)


def test_sgd_state_after_gap_through_the_optimizer():
    mom = so.SparseSgdConfig(lr=0.1, momentum=0.9)
    for gap in (1, 29, 10**9):
        p, b = sgd_state_after_gap(1.0, 0.5, mom, gap)
        assert p == pytest.approx(1.0 - 0.1 * 0.9 * 0.5 * (1 - 0.9**gap) / (1 - 0.9), rel=1e-12)
        assert b == pytest.approx(0.5 * 0.9**gap, rel=1e-12)
    assert sgd_state_after_gap(1.3, -0.4, RARE, 29) == pytest.approx(dense_dormant_state(1.3, -0.4, RARE, 29), rel=1e-12)
    p, b = sgd_state_after_gap(2.0, 7.0, so.SparseSgdConfig(lr=0.1, weight_decay=0.5), 5)  # no buffer
    assert (p, b) == (pytest.approx(2.0 * 0.95**5, rel=1e-14), 0.0)
    assert sgd_state_after_gap(2.0, 0.0, RARE, 0) == (2.0, 0.0)


def test_dense_adagrad_step_by_hand():
    cfg = so.SparseAdagradConfig(lr=0.5, lr_decay=1.0, eps=0.0)
    p, acc = np.array([1.0, 2.0]), np.array([0.0, 9.0])
    dense_adagrad_step(p, acc, np.array([3.0, 0.0]), 2, cfg)
    # clr = 0.5 / (1 + 1 * 1) = 0.25; sum = [9, 9]; p = [1 - 0.25 * 3 / 3, 2 - 0]
    np.testing.assert_array_equal(acc, [9.0, 9.0])
    np.testing.assert_array_equal(p, [0.75, 2.0])


def test_zero_gradient_principle():
    cases = {c.name: c for c in zero_gradient_principle(num_steps=120, n=5, density=0.25, seed=1)}
    assert list(cases) == ["plain SGD", "SGD with momentum 0.9", "SGD with weight decay 0.05", "Adagrad"]
    for name in ("plain SGD", "Adagrad"):
        assert cases[name].zero_step_change == 0.0
        assert cases[name].bit_identical and cases[name].lazy_dense_difference == 0.0
    for name in ("SGD with momentum 0.9", "SGD with weight decay 0.05"):
        assert cases[name].zero_step_change > 0.0
        assert not cases[name].bit_identical and cases[name].lazy_dense_difference > 1e-3


def test_train_embedding_sgd_dense_equivalent_is_dense_training():
    values = {"lr": 0.5, "weight_decay": 0.01, "momentum": 0.9}
    small = {"num_rows": 100, "cols": 4, "num_steps": 80, "batch_size": 16}
    exact = train_embedding_sgd(so.SparseSgdConfig(**values, mode="dense_equivalent"), **small)
    assert exact.max_relative_difference <= 1e-12
    assert 0 < exact.touched_rows.size < 100
    stale = train_embedding_sgd(so.SparseSgdConfig(**values, mode="dense_equivalent"), catch_up_before_lookup=False, **small)
    lazy = train_embedding_sgd(so.SparseSgdConfig(**values), **small)
    assert stale.max_relative_difference > 1e-6 and lazy.max_relative_difference > 1e-3
    np.testing.assert_array_equal(exact.dense, lazy.dense)  # the same batches, the same dense run
    # plain SGD: a zero-gradient step is a no-op, so lazy already is dense
    plain = train_embedding_sgd(so.SparseSgdConfig(lr=0.5), **small)
    assert plain.max_relative_difference <= 1e-12


def test_moved_rows_is_bitwise():
    before = np.zeros((4, 2))
    after = before.copy()
    after[1, 1] = 1e-300
    after[2, 0] = -0.0  # equal as numbers, different bits
    assert moved_rows(before, after).tolist() == [1, 2]
    assert moved_rows(before, before.copy()).tolist() == []
    with pytest.raises(ValueError, match="same shape"):
        moved_rows(before, after[:3])


def test_plot_lazy_vs_dense_sgd_lines_per_comparison():
    rare = lazy_vs_dense_sgd_trajectory(RARE, num_steps=40, period=10)
    hot = lazy_vs_dense_sgd_trajectory(RARE, num_steps=40, period=1)
    fig = plot_lazy_vs_dense_sgd([rare, hot])
    assert isinstance(fig, Figure) and fig.dpi == figures.DPI
    assert len(fig.axes) == 2
    for ax, c in zip(fig.axes, [rare, hot]):
        lazy, dense, exact, touches = ax.lines
        np.testing.assert_array_equal(lazy.get_ydata(), c.lazy)
        np.testing.assert_array_equal(dense.get_ydata(), c.dense)
        np.testing.assert_array_equal(exact.get_ydata(), c.dense_equivalent[:: max(1, c.steps.size // 40)])
        np.testing.assert_array_equal(touches.get_xdata(), np.flatnonzero(c.touched) + 1)
        assert ax.get_xlabel() == "step"
        assert ax.title.get_fontsize() == figures.TITLE
    assert fig.axes[0].get_title() == "coordinate touched every 10 steps"
    assert fig.axes[1].get_title() == "coordinate touched every step"
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()][2] == "DENSE_EQUIVALENT, read after catch_up"
    without = plot_lazy_vs_dense_sgd([rare], show_dense_equivalent=False)
    assert len(without.axes) == 1 and len(without.axes[0].lines) == 3
    with pytest.raises(ValueError, match="empty"):
        plot_lazy_vs_dense_sgd([])


def test_sgd_figure_is_the_widget_figure():
    fig = sgd_figure(lr=0.2, weight_decay=0.0, momentum=0.5, period=7, num_steps=30)
    assert [ax.get_title() for ax in fig.axes] == ["coordinate touched every 7 steps", "coordinate touched every step"]
    expected = lazy_vs_dense_sgd_trajectory(so.SparseSgdConfig(lr=0.2, momentum=0.5), num_steps=30, period=7)
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), expected.lazy)
    assert "momentum = 0.5" in fig.texts[0].get_text()


def test_plot_row_changes_has_an_image_and_a_colour_bar_per_panel():
    before = np.zeros((5, 3))
    after = before.copy()
    after[[1, 3]] = [[0.5, -1.0, 0.0], [2.0, 0.0, 0.0]]
    fig = plot_row_changes([("step", before, after), ("nothing", before, before.copy())])
    assert isinstance(fig, Figure) and fig.dpi == figures.DPI
    assert len(fig.axes) == 4  # two images, two colour bars
    ax, ax_nothing = fig.axes[0], fig.axes[1]
    (image,) = ax.images
    np.testing.assert_array_equal(image.get_array(), after - before)
    assert image.get_clim() == (-2.0, 2.0)  # symmetric around 0: untouched rows are the neutral colour
    assert ax.get_title() == "step\n2 of 5 rows moved"
    assert ax_nothing.get_title() == "nothing\n0 of 5 rows moved"
    assert ax_nothing.images[0].get_clim() == (-1.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        plot_row_changes([])


def test_demos_do_not_import_pyplot():
    code = (
        "import sys, sparse_opt.demos.sgd, sparse_opt.demos.moments; "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

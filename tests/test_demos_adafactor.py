"""sparse_opt.demos.adafactor_demo: hand-derived values behind notebook 05."""

import math

import numpy as np
import pytest
from matplotlib.figure import Figure

from sparse_opt.demos import adafactor_demo as ad
from sparse_opt.demos.data import zipf_id_batches
from figure_checks import assert_slide_ready, data_points_under_legends, drawn, legends, minor_tick_labels

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize(
    ("shape", "full", "factored"),
    [
        ((1024,), 1024, 1024),
        ((768, 768), 589_824, 1536),
        ((4096, 1024), 4_194_304, 5120),
        ((12, 64, 32), 24_576, 12 * 96),
        ((), 1, 1),
    ],
)
def test_second_moment_memory_counts_match_the_optimizer_state(shape, full, factored):
    mem = ad.second_moment_memory(shape)
    assert (mem["full"], mem["factored"], mem["state"]) == (full, factored, factored)
    assert mem["state_bytes"] == 4 * factored
    assert ad.second_moment_memory(shape, np.float64)["state_bytes"] == 8 * factored


def test_gradient_stream_is_seeded_and_shaped():
    for kind in ("rank1", "rank1ish", "random"):
        a = ad.gradient_stream(kind, (5, 3), 4, seed=1)
        assert a.shape == (4, 5, 3) and a.dtype == np.float64
        assert np.array_equal(a, ad.gradient_stream(kind, (5, 3), 4, seed=1))
        assert not np.array_equal(a, ad.gradient_stream(kind, (5, 3), 4, seed=2))
    with pytest.raises(ValueError, match="kind"):
        ad.gradient_stream("rank2", (5, 3), 4, seed=1)


def test_rank1_stream_squares_are_one_rank1_matrix_up_to_a_scalar():
    g2 = ad.gradient_stream("rank1", (6, 4), 3, seed=0) ** 2
    ratio = g2[1] / g2[0]
    assert np.allclose(ratio, ratio[0, 0], rtol=1e-12)
    assert np.linalg.matrix_rank(g2[0]) == 1


@pytest.mark.parametrize("beta2_decay", [-0.8, -1.0, 0.0])
def test_factored_estimate_is_exact_for_a_rank1_stream_under_any_schedule(beta2_decay):
    grads = ad.gradient_stream("rank1", (16, 8), 30, seed=3)
    res = ad.factored_vs_full(grads, beta2_decay)
    assert res["rel_error"].shape == (30,)
    assert res["rel_error"].max() < 1e-12
    assert np.allclose(res["factored"], res["full"], rtol=1e-12, atol=0)


def test_factored_vs_full_one_rank1_gradient_and_plain_average():
    g = np.outer([1.0, 2.0], [1.0, 3.0])  # g**2 = outer([1, 4], [1, 9])
    res = ad.factored_vs_full(g[None])
    assert np.allclose(res["factored"], g**2, rtol=1e-15)
    # beta2_decay = -1: 1 - beta2_t = 1/t, so the EMA is the plain mean of g**2
    g2 = np.array([[1.0, 2.0], [3.0, 5.0]])
    res = ad.factored_vs_full(np.stack([g, g2]), beta2_decay=-1.0)
    assert np.allclose(res["full"], (g**2 + g2**2) / 2, rtol=1e-15)
    sq = (g**2 + g2**2) / 2
    by_hand = sq.mean(axis=1, keepdims=True) @ sq.mean(axis=0, keepdims=True) / sq.mean()
    assert np.allclose(res["factored"], by_hand, rtol=1e-14)


def test_factored_vs_full_orders_the_streams():
    errors = {
        kind: ad.factored_vs_full(ad.gradient_stream(kind, (32, 16), 50, seed=0))["rel_error"][-1]
        for kind in ("rank1", "rank1ish", "random")
    }
    assert errors["rank1"] < 1e-12 < errors["rank1ish"] < 0.05 < 0.5 < errors["random"]


def test_adafactor_trace_step_sizes_by_hand():
    tr = ad.adafactor_trace(lr=0.1, num_steps=150, outlier_step=0)
    t = np.arange(1, 151)
    assert np.array_equal(tr["t"], t)
    assert np.allclose(tr["rho"], np.minimum(0.1, 1 / np.sqrt(t)), rtol=0, atol=0)
    assert tr["rho"][99] == 0.1 and tr["rho"][100] == pytest.approx(1 / math.sqrt(101), rel=1e-15)
    # P starts at zero: the first step size is the eps2 floor times lr
    assert tr["rms_param"][0] == 0.0
    assert tr["alpha"][0] == pytest.approx(1e-3 * 0.1, rel=1e-15)
    assert np.allclose(tr["alpha"], np.maximum(1e-3, tr["rms_param"]) * tr["rho"], rtol=1e-15)
    # the optimizer's measured step is alpha * RMS(U) / max(1, RMS(U) / d)
    assert np.allclose(tr["step"], tr["predicted_step"], rtol=1e-10, atol=0)
    assert np.all(tr["step"] <= tr["alpha"] * (1 + 1e-12))


def test_adafactor_trace_clips_the_outlier_only_when_d_is_small():
    clipped = ad.adafactor_trace(num_steps=320, outlier_step=300, d=1.0)
    loose = ad.adafactor_trace(num_steps=320, outlier_step=300, d=100.0)
    i = 299
    # one outlier: V >= (1 - beta2_t) g**2 caps |U| near 1/sqrt(1 - beta2_t) = t**0.4
    assert 3.0 < clipped["rms_u"][i] < 300**0.4
    assert clipped["clip"][i] == pytest.approx(clipped["rms_u"][i], rel=1e-15)
    assert clipped["step"][i] == pytest.approx(clipped["alpha"][i], rel=1e-10)
    assert loose["clip"][i] == 1.0
    assert loose["step"][i] == pytest.approx(loose["alpha"][i] * loose["rms_u"][i], rel=1e-10)


def test_row_scaled_gradient_magnitudes():
    g = ad.row_scaled_gradient([1.0, 1e-3, 0.0], 7, seed=0)
    assert g.shape == (3, 7) and g.dtype == np.float32
    assert np.array_equal(np.abs(g), np.repeat(np.float32([[1.0], [1e-3], [0.0]]), 7, axis=1))
    assert ad.row_scaled_gradient([1.0], 4, seed=0, dtype=np.float64).dtype == np.float64


def test_row_rms():
    assert np.allclose(ad.row_rms(np.array([[3.0, 4.0], [0.0, 0.0]])), [math.sqrt(12.5), 0.0], rtol=1e-15)


SCALES = np.array([1.0, 1e-2, 1e-4, 1e-6, 1e-7, 1e-8, 0.0])


def test_torch_placement_floors_sqrt_v_at_eps1():
    # Every entry of row i is +-s_i: R_i = s_i**2, C_j = mean(s**2) = mean(R), so V_ij = s_i**2
    # and U = g / max(s_i, eps1): RMS(U) of row i = min(1, s_i / eps1) (0 for a zero row).
    g = ad.row_scaled_gradient(SCALES, 16, seed=0)
    u = ad.optimizer_update_direction(g)
    assert u.dtype == np.float32
    assert np.allclose(ad.row_rms(u), np.minimum(1.0, SCALES / EPS32), rtol=1e-5, atol=0)


def test_torch_placement_floors_the_row_mean_at_eps1():
    # All |g| = s with s**2 < eps1: V = s**2 * s**2 / eps1, so U = sqrt(eps1) / s (> 1!)
    s = 1e-5
    u = ad.optimizer_update_direction(ad.row_scaled_gradient([s] * 8, 16, seed=0))
    assert np.allclose(np.abs(u), math.sqrt(EPS32) / s, rtol=1e-5)
    # a 1-D parameter keeps the full V = s**2: U = sign(g)
    u1 = ad.optimizer_update_direction(np.full(16, s, np.float32))
    assert np.allclose(u1, 1.0, rtol=1e-6)


def test_paper_placement_adds_eps1_to_g_squared():
    # R_i = s_i**2 + eps1, C_j = mean(R): V_ij = s_i**2 + eps1, so RMS(U) of row i = s_i / sqrt(s_i**2 + eps1)
    g = ad.row_scaled_gradient(SCALES, 16, seed=0)
    u = ad.paper_eps_update_direction(g, EPS32)
    assert u.dtype == np.float32
    assert np.allclose(ad.row_rms(u), SCALES / np.sqrt(SCALES**2 + EPS32), rtol=1e-5, atol=0)
    tiny = ad.paper_eps_update_direction(ad.row_scaled_gradient([1e-5] * 8, 16, seed=0), EPS32)
    assert np.allclose(np.abs(tiny), 1e-5 / math.sqrt(1e-10 + EPS32), rtol=1e-5)


def test_both_placements_agree_without_eps1():
    g = np.random.default_rng(0).normal(size=(6, 5))
    assert np.allclose(ad.paper_eps_update_direction(g, 0.0), ad.optimizer_update_direction(g, 0.0), rtol=1e-13)


def test_step_size_legend_is_outside_the_axes_and_hides_no_curve():
    # The review found the legend over the curves after t = 100: it now sits right of the axes.
    fig = drawn(ad.plot_step_sizes(ad.adafactor_trace(num_steps=1000), lr=0.1))
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= fig.axes[0].get_window_extent(renderer).x1
    assert data_points_under_legends(fig) == 0


def outlier_lines(ax) -> list[float]:
    """The x positions of the vertical lines that mark an outlier step on one axes."""
    return [float(line.get_xdata()[0]) for line in ax.get_lines() if line.get_linestyle() == ":" and line.get_color() == "tab:red"]


def test_step_sizes_put_one_kind_of_quantity_on_each_axis_and_mark_the_outlier():
    # The review found one "value" axis over six quantities, with the planted outlier unmarked.
    tr = ad.adafactor_trace(num_steps=400, outlier_step=300, outlier_factor=30.0)
    assert tr["outlier"].sum() == 1 and tr["t"][tr["outlier"]][0] == 300
    fig = drawn(ad.plot_step_sizes(tr, lr=0.1))
    rho_ax, size_ax = fig.axes
    assert "value" not in (rho_ax.get_ylabel(), size_ax.get_ylabel())
    assert "rho" in rho_ax.get_ylabel() and "units of P" in size_ax.get_ylabel()
    curves = {line.get_label(): ax for ax in fig.axes for line in ax.get_lines()}
    assert curves["rho_t = min(lr, 1/sqrt(t))"] is rho_ax and curves["1/sqrt(t)"] is rho_ax
    for name in ("RMS(P) before the step", "alpha_t = max(eps2, RMS(P)) * rho_t", "measured RMS(P_new - P_old)"):
        assert curves[name] is size_ax, name
    assert outlier_lines(rho_ax) == outlier_lines(size_ax) == [300.0]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels.count("outlier gradient (x30), step 300") == 1
    clipping = ad.plot_clipping(tr, d=1.0)
    assert [outlier_lines(ax) for ax in clipping.axes] == [[300.0], [300.0]]


def test_no_outlier_no_mark():
    tr = ad.adafactor_trace(num_steps=50, outlier_step=0)
    assert not tr["outlier"].any()
    for fig in (ad.plot_step_sizes(tr, lr=0.1), ad.plot_clipping(tr, d=1.0)):
        assert all(outlier_lines(ax) == [] for ax in fig.axes)
        assert not any(t.get_text().startswith("outlier") for t in fig.legends[0].get_texts())


def test_every_plot_is_slide_ready():
    streams = {k: ad.factored_vs_full(ad.gradient_stream(k, (16, 8), 20, seed=0)) for k in ("rank1ish", "random")}
    tr = ad.adafactor_trace(num_steps=320, outlier_step=300)
    g = ad.row_scaled_gradient(SCALES[:-1], 16, seed=0)
    curves = {"torch": ad.row_rms(ad.optimizer_update_direction(g)), "paper": ad.row_rms(ad.paper_eps_update_direction(g, EPS32))}
    figs = [
        ad.plot_estimate_vs_truth(streams),
        ad.plot_step_sizes(tr, lr=0.1),
        ad.plot_clipping(tr, d=1.0),
        ad.plot_eps1_placement(SCALES[:-1], curves),
        ad.plot_adafactor_on_lookups(ad.adafactor_on_lookups(200, 4, 30, 16)),
    ]
    for fig in figs:
        assert_slide_ready(fig)


def test_a_legend_over_the_curves_is_detected():
    # the checker itself must be able to fail: a legend placed over the curves
    fig = ad.plot_step_sizes(ad.adafactor_trace(num_steps=200), lr=0.1)
    fig.legends[0].remove()
    fig.axes[0].legend(loc="center")
    drawn(fig)
    assert data_points_under_legends(fig) > 0


def test_embedding_table_state_for_a_million_row_table():
    st = ad.embedding_table_state(10**6, 64)
    assert st == {
        "table": 64_000_000,
        "adam": 128_000_000,
        "adafactor_row": 1_000_000,
        "adafactor_col": 64,
        "adafactor": 1_000_064,
        "itemsize": 4,
    }
    assert ad.embedding_table_state(3, 2, np.float64)["itemsize"] == 8


def test_adafactor_on_lookups_touches_only_looked_up_weights_but_all_row_factors():
    rows = 200
    run = ad.adafactor_on_lookups(rows, 4, 40, 16, seed=1)
    # weights of rows not looked up never move (U = 0 there, no weight decay)
    assert np.all(run["untouched_moved"] == 0)
    # but every row ever looked up has its row factor decayed on every later step
    seen = np.zeros(rows, dtype=bool)
    for t, ids in enumerate(zipf_id_batches(rows, 16, 40, 1.0, 1)):
        seen[ids] = True
        assert run["row_var_moved"][t] == seen.sum()
        assert run["touched"][t] == np.unique(ids).size
    assert run["row_var_moved"][-1] > 3 * run["touched"][-1]
    # U is zero off the looked-up rows, so the table's RMS(U) is the touched rows' RMS diluted
    np.testing.assert_allclose(run["rms_u_table"], run["rms_u_touched"] * np.sqrt(run["touched"] / rows), rtol=1e-12)
    assert run["touches"].sum() == run["touched"].sum()
    assert run["row_var"].shape == (rows,) and run["col_var"].shape == (4,)
    assert np.all(run["row_var"][~seen] == 0)


def test_rare_row_coupling_moves_other_rows_under_adafactor_only():
    c = ad.rare_row_coupling(200, 4, 30, 16, touch_step=10)
    assert c["row"] == 199
    assert c["adam_other_rows"] == 0.0 and c["adam_rows_differing"] == 0
    assert c["adafactor_other_rows"] > 0 and c["adafactor_rows_differing"] > 0
    assert 0 < c["adafactor_other_rows"] < c["adafactor_step_at_touch"]


def test_plots_return_figures_with_expected_axes():
    streams = {k: ad.factored_vs_full(ad.gradient_stream(k, (8, 4), 5, seed=0)) for k in ("rank1ish", "random")}
    fig = ad.plot_estimate_vs_truth(streams)
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    assert fig.axes[0].get_title().startswith("rank1ish")

    tr = ad.adafactor_trace(num_steps=20, outlier_step=10)
    fig = ad.plot_step_sizes(tr, lr=0.1)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("rho_t") for label in labels) and any(label.startswith("alpha_t") for label in labels)

    fig = ad.plot_clipping(tr, d=1.0)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_ylabel() == "RMS(U) / d"

    fig = ad.plot_eps1_placement(SCALES[:-1], {"torch": np.ones(6), "paper": np.linspace(1, 0, 6)})
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert len(fig.axes[0].get_lines()) == 2

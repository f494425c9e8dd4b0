"""Tests of sparse_opt.demos.gradients: lookup gradients, sparsity summaries, the pattern plot."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos.data import zipf_ids
from sparse_opt.demos.gradients import (
    dense_lookup_gradient,
    embedding_lookup_batch,
    expected_distinct_rows,
    explore_lookup,
    format_entries,
    pattern_xlim,
    plot_sparsity_pattern,
    quadratic_lookup_gradient,
    sparsity_summary,
    touch_probabilities,
)
from figure_checks import drawn, minor_tick_labels


def test_dense_lookup_gradient_sums_repeated_rows_by_hand():
    ids = np.array([2, 0, 2])
    row_grads = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    expected = np.array([[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]])
    np.testing.assert_array_equal(dense_lookup_gradient(ids, row_grads, 3), expected)


def test_embedding_lookup_batch_is_seeded_and_matches_the_dense_sum():
    a = embedding_lookup_batch(50, 4, 64, 1.0, seed=7)
    b = embedding_lookup_batch(50, 4, 64, 1.0, seed=7)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.row_grads, b.row_grads)
    # ids are drawn first from the seeded generator, then the gradients
    np.testing.assert_array_equal(a.ids, zipf_ids(50, 64, 1.0, np.random.default_rng(7)))
    assert a.row_grads.shape == (64, 4)
    assert a.grad.shape == (50, 4)
    np.testing.assert_array_equal(a.grad.touched_rows, np.unique(a.ids))
    np.testing.assert_allclose(a.grad.to_dense(), dense_lookup_gradient(a.ids, a.row_grads, 50), rtol=0, atol=1e-12)


def test_sparsity_summary_by_hand():
    ids = np.array([2, 0, 2])
    grad = so.CsrGradient.from_rows(ids, np.ones((3, 2)), 4)
    s = sparsity_summary(ids, grad)
    assert (s.lookups, s.distinct_rows, s.nnz, s.shape) == (3, 2, 4, (4, 2))
    assert (s.top_row, s.top_row_lookups) == (2, 2)
    assert s.repeated_lookups == 1
    assert s.fraction_rows_touched == 0.5
    assert s.fraction_table_touched == 0.5
    assert s.format().splitlines() == [
        "table 4 x 2 = 8 coordinates, batch of 3 lookups",
        "distinct rows touched : 2 (50.00% of rows)",
        "repeated lookups      : 1 (summed into their row)",
        "stored entries (nnz)  : 4 (50.00% of the table)",
        "most looked-up row    : 2 (2 lookups)",
    ]


def test_sparsity_summary_tie_picks_the_smallest_row_and_rejects_no_lookups():
    ids = np.array([3, 1])
    grad = so.CsrGradient.from_rows(ids, np.ones((2, 1)), 5)
    s = sparsity_summary(ids, grad)
    assert (s.top_row, s.top_row_lookups) == (1, 1)
    assert s.fraction_table_touched == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="at least one lookup"):
        sparsity_summary(np.zeros(0, dtype=np.int64), grad)


def test_touch_probabilities_by_hand():
    # uniform over 2 rows, 2 draws: a row is missed with probability (1/2)**2
    np.testing.assert_allclose(touch_probabilities(2, 2, 0.0), [0.75, 0.75], rtol=1e-15)
    assert expected_distinct_rows(2, 2, 0.0) == pytest.approx(1.5, rel=1e-15)
    # skew 1 over 2 rows: p = [2/3, 1/3]; one draw touches exactly one row
    np.testing.assert_allclose(touch_probabilities(2, 1, 1.0), [2 / 3, 1 / 3], rtol=1e-15)
    assert expected_distinct_rows(2, 1, 1.0) == pytest.approx(1.0, rel=1e-15)
    # a one-row table is touched by any non-empty batch, by no empty one
    assert touch_probabilities(1, 3, 1.0).tolist() == [1.0]
    assert touch_probabilities(4, 0, 1.0).tolist() == [0.0] * 4


def test_touch_probabilities_keep_precision_for_rare_rows():
    # 1 - (1 - 1e-6) evaluated naively loses about 10 digits; expm1/log1p keep them
    np.testing.assert_allclose(touch_probabilities(10**6, 1, 0.0)[:3], 1e-6, rtol=1e-12)


def test_expected_distinct_rows_matches_seeded_simulation():
    num_rows, batch, skew = 200, 64, 1.0
    rng = np.random.default_rng(0)
    counts = [np.unique(zipf_ids(num_rows, batch, skew, rng)).size for _ in range(400)]
    assert np.mean(counts) == pytest.approx(expected_distinct_rows(num_rows, batch, skew), rel=0.02)


def test_format_entries_by_hand():
    grad = so.CsrGradient([0, 1, 1, 3], [2, 0, 1], [1.5, -2.0, 0.25], (3, 4))
    assert format_entries(grad).splitlines() == [
        "  k   row   col  row*cols+col     value",
        "  0     0     2             2    1.5000",
        "  1     2     0             8   -2.0000",
        "  2     2     1             9    0.2500",
    ]
    assert format_entries(grad, max_entries=1).splitlines()[-1] == "... 2 more entries"


@given(
    ids=st.lists(st.integers(0, 9), min_size=1, max_size=30),
    cols=st.integers(1, 4),
)
def test_summary_and_from_rows_agree_with_the_dense_sum(ids, cols):
    ids = np.array(ids)
    row_grads = np.arange(ids.size * cols, dtype=np.float64).reshape(ids.size, cols) - 7.0
    grad = so.CsrGradient.from_rows(ids, row_grads, 10)
    np.testing.assert_array_equal(grad.to_dense(), dense_lookup_gradient(ids, row_grads, 10))
    s = sparsity_summary(ids, grad)
    assert s.distinct_rows == len(set(ids.tolist()))
    assert s.nnz == s.distinct_rows * cols
    assert s.top_row_lookups == max(ids.tolist().count(i) for i in set(ids.tolist()))


def test_quadratic_lookup_gradient_by_hand_and_against_the_dense_sum():
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    target = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 8.0]])
    ids = np.array([2, 0, 2])
    g = quadratic_lookup_gradient(table, target, ids)
    # row 2 looked up twice: 2 * (table[2] - target[2]) = (0, -4); row 0 once: (1, 2); row 1 never
    np.testing.assert_array_equal(g.to_dense(), [[1.0, 2.0], [0.0, 0.0], [0.0, -4.0]])
    np.testing.assert_array_equal(g.touched_rows, [0, 2])
    np.testing.assert_array_equal(g.to_dense(), dense_lookup_gradient(ids, table[ids] - target[ids], 3))


def test_pattern_xlim_leaves_a_margin_of_2_5_percent_or_half_a_row():
    assert pattern_xlim(1000) == (-25.5, 1024.5)
    assert pattern_xlim(4) == (-1.0, 4.0)  # 2.5% of 4 rows is less than half a row


def test_plot_sparsity_pattern_keeps_the_most_looked_up_row_off_the_spine():
    batch = embedding_lookup_batch(1000, 16, 256, 1.0, seed=0)
    assert np.bincount(batch.ids).argmax() == 0  # row 0 is the most looked-up row
    fig = drawn(plot_sparsity_pattern(batch.ids, batch.grad))
    for ax in fig.axes:
        # row 0 (and its stem) sits at least 1.5% of the axes width right of the left spine
        x_axes = ax.transAxes.inverted().transform(ax.transData.transform((0.0, 1.0)))[0]
        assert x_axes > 0.015
        assert ax.get_xlim() == pattern_xlim(1000)


def test_plot_sparsity_pattern_is_slide_ready():
    batch = embedding_lookup_batch(1000, 16, 256, 1.0, seed=0)
    fig = drawn(plot_sparsity_pattern(batch.ids, batch.grad))
    assert fig.dpi == 144
    assert minor_tick_labels(fig) == []
    ax_counts = fig.axes[1]
    low, high = ax_counts.get_ylim()
    labels = [t.get_text() for t in ax_counts.get_yticklabels() if low <= t.get_position()[1] <= high]
    assert labels == ["1", "2", "5", "10", "20", "50"]  # plain 1-2-5 labels on the log count axis (34 lookups max)
    assert ax_counts.yaxis.get_ticklabels()[0].get_fontsize() == 10.0  # slide tick size


def test_explore_lookup_reports_and_plots_one_setting():
    report, fig = explore_lookup(1000, 16, 256, 1.0, seed=0)
    batch = embedding_lookup_batch(1000, 16, 256, 1.0, seed=0)
    lines = report.splitlines()
    assert lines[:-1] == sparsity_summary(batch.ids, batch.grad).format().splitlines()
    assert lines[-1] == "expected distinct rows: 130.06 (13.01% of rows)"
    assert lines[1] == "distinct rows touched : 145 (14.50% of rows)"
    assert isinstance(fig, Figure) and fig.dpi == 144
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_xdata(), batch.grad.row_of_entries())
    assert explore_lookup(1000, 16, 256, 1.0, seed=0)[0] == report  # seeded


def test_plot_sparsity_pattern_draws_every_entry_and_every_touched_row():
    batch = embedding_lookup_batch(40, 3, 25, 1.0, seed=1)
    fig = plot_sparsity_pattern(batch.ids, batch.grad)
    assert isinstance(fig, Figure)
    ax_pattern, ax_counts = fig.axes
    assert len(ax_pattern.lines) == 1
    line = ax_pattern.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), batch.grad.row_of_entries())
    np.testing.assert_array_equal(line.get_ydata(), batch.grad.col_indices)
    (stems,) = [c for c in ax_counts.collections if isinstance(c, LineCollection)]
    segments = stems.get_segments()
    assert len(segments) == batch.grad.touched_rows.size
    heights = {int(seg[0, 0]): seg[1, 1] for seg in segments}
    counts = np.bincount(batch.ids, minlength=40)
    assert heights == {int(r): counts[r] for r in batch.grad.touched_rows}
    assert ax_counts.get_yscale() == "log"
    assert ax_pattern.get_xlim() == ax_counts.get_xlim() == pattern_xlim(40) == (-1.5, 40.5)
    assert fig.get_suptitle() == "gradient of an embedding lookup, table 40 x 3"
    assert plot_sparsity_pattern(batch.ids, batch.grad, title="t").get_suptitle() == "t"

"""sparse_opt.demos.perf_plots: pyplot-free slide figures, one line per contender, no minor-tick labels."""

from dataclasses import replace

import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from sparse_opt.demos import perf_plots as pp
from sparse_opt.demos.figures import DPI, TICK
from sparse_opt.demos.memory import StepMemory
from sparse_opt.demos.timing import CatchUpTiming, StepTiming
from sparse_opt.demos.workload import Workload

SMALL = Workload(rows=500, cols=4, batch=64, seed=3)


def timings(ms_a=(1.0, 1.2), ms_b=(2.0, 200.0)):
    out = []
    for name, ms, dense in (("a", ms_a, False), ("b", ms_b, True)):
        for (rows, batch, nnz), m in zip([(100, 8, 32.0), (1000, 32, 120.0)], ms):
            out.append(StepTiming(name, replace(SMALL, rows=rows, batch=batch), nnz, (m / 1e3,), dense))
    return out


def check_figure(fig):
    assert isinstance(fig, Figure) and fig.dpi == DPI and fig.canvas.manager is None  # never through pyplot
    fig.canvas.draw()  # the tick labels exist once drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                assert isinstance(axis.get_minor_formatter(), NullFormatter)
                assert not any(t.get_text() for t in axis.get_ticklabels(minor=True))
            labels = [t for t in axis.get_ticklabels() if t.get_text()]
            assert labels and {t.get_fontsize() for t in labels} == {TICK}
    return fig.axes[0]


def test_rows_sweep_one_line_per_contender_dense_dashed():
    ax = check_figure(pp.plot_rows_sweep(timings()))
    assert [line.get_label() for line in ax.lines] == ["a", "b"]
    assert [line.get_linestyle() for line in ax.lines] == ["-", "--"]
    assert list(ax.lines[0].get_xdata()) == [100, 1000]
    assert "64" not in ax.get_title() and "8, 32" in ax.get_title()
    assert pp.plot_rows_sweep(timings(), title="mine").axes[0].get_title() == "mine"


def test_batch_sweep_adds_the_slope_one_guide():
    ax = check_figure(pp.plot_batch_sweep(timings()))
    assert len(ax.lines) == 3 and ax.lines[-1].get_label() == "proportional to nnz"
    guide = ax.lines[-1]
    assert list(guide.get_xdata()) == [32.0, 120.0]
    assert list(guide.get_ydata()) == pytest.approx([1.0, 1.0 * 120 / 32])


@pytest.mark.parametrize(
    ("ms", "subs", "labels"),
    [((0.1, 0.3), list(range(1, 10)), ["0.1", "0.2", "0.3"]), ((0.1, 1.5), [1, 2, 5], ["0.1", "0.2", "0.5", "1"])],
)
def test_narrow_log_axes_still_get_a_few_labels(ms, subs, labels):
    """Data within a fraction of a decade, or one decade, get labelled major ticks; minor ticks stay unlabelled."""
    narrow = [t for t in timings(ms_a=ms) if t.contender == "a"]
    ax = check_figure(pp.plot_rows_sweep(narrow))
    assert list(ax.yaxis.get_major_locator()._subs) == subs
    low, high = ax.get_ylim()
    shown = [t.get_text() for t, v in zip(ax.yaxis.get_ticklabels(), ax.yaxis.get_ticklocs()) if low <= v <= high]
    assert shown == labels


def test_wide_log_axes_label_their_decades_only():
    ax = check_figure(pp.plot_rows_sweep(timings(ms_b=(2.0, 2000.0))))
    assert list(ax.yaxis.get_major_locator()._subs) == [1.0]
    assert list(ax.xaxis.get_major_locator()._subs) == [1.0, 2.0, 5.0]  # 100 to 1000 rows: one decade


def test_memory_plot_in_kib_with_the_table_for_scale():
    points = [StepMemory("a", SMALL, n, 8 * n, 8 * n, 0) for n in (1024, 8192)]
    ax = check_figure(pp.plot_memory(points))
    assert len(ax.lines) == 2  # the contender and the table's size
    assert list(ax.lines[0].get_xdata()) == [4.0, 32.0] and list(ax.lines[0].get_ydata()) == [8.0, 64.0]
    assert ax.lines[1].get_ydata()[0] == SMALL.table_bytes / 1024


def test_catch_up_plot_starts_at_zero():
    ts = [CatchUpTiming(g, 16, 2, (1e-6 * k,)) for k, g in enumerate([1, 10, 100], start=1)]
    ax = check_figure(pp.plot_catch_up(ts))
    assert list(ax.lines[0].get_xdata()) == [1, 10, 100]
    assert ax.get_ylim()[0] == 0 and "16 x 2" in ax.get_title()


def test_plain_numbers_on_the_axes():
    assert [pp.plain_number(x) for x in (1e7, 1000.0, 50.0, 0.2, 0.05)] == ["10,000,000", "1,000", "50", "0.2", "0.05"]

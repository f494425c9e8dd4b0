"""Figures of notebook 07: step time against table size and batch, step allocations, catch-up cost against gap.

Each function takes results of :mod:`sparse_opt.demos.timing` or
:mod:`sparse_opt.demos.memory` and returns a slide-ready
:class:`matplotlib.figure.Figure`, made without pyplot
(:func:`~sparse_opt.demos.figures.new_figure` and
:func:`~sparse_opt.demos.figures.finish`). Log axes label their decades (or 1-2-5
steps, or every step, when the data span less than a decade and a half or a
fraction of one; :func:`log_ticks`), and never their minor ticks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from sparse_opt.demos.figures import finish, new_figure
from sparse_opt.demos.memory import StepMemory
from sparse_opt.demos.timing import CatchUpTiming, StepTiming

#: Width and height of every figure here, in inches (16:9-friendly at the figures' dpi).
SIZE = (9.0, 4.5)

#: Log axes spanning fewer decades than this get major ticks at 1, 2 and 5 times the powers of ten ...
FEW_DECADES = 1.5
#: ... and fewer than this at every multiple 1 to 9 of them.
PART_OF_A_DECADE = 0.6


def plain_number(x: float, _pos: object = None) -> str:
    """A tick label without exponents: ``1,000,000``, ``20``, ``0.5``, ``0.002``.

    Examples
    --------
    >>> [plain_number(x) for x in (1e6, 20.0, 0.5, 0.002)]
    ['1,000,000', '20', '0.5', '0.002']
    """
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:g}"


def log_ticks(axis: Any, low: float, high: float) -> None:
    """Label a log ``axis`` whose data run from ``low`` to ``high`` (> 0) at a readable density.

    Major ticks at the powers of ten; at 1, 2 and 5 times them when the data
    span fewer than :data:`FEW_DECADES` decades, and at every multiple 1 to 9
    below :data:`PART_OF_A_DECADE` (so that a narrow axis still has a few
    labels). Labels without exponents (:func:`plain_number`); minor ticks
    unlabelled.
    """
    decades = np.log10(high / low) if high > low > 0 else 0.0
    if decades < PART_OF_A_DECADE:
        subs: tuple[float, ...] = tuple(float(k) for k in range(1, 10))
    elif decades < FEW_DECADES:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0,)
    axis.set_major_locator(LogLocator(base=10.0, subs=subs))
    axis.set_major_formatter(FuncFormatter(plain_number))
    axis.set_minor_formatter(NullFormatter())


def _by_contender(timings: Sequence[StepTiming]) -> dict[str, list[StepTiming]]:
    out: dict[str, list[StepTiming]] = {}
    for t in timings:
        out.setdefault(t.contender, []).append(t)
    return out


def _style(dense: bool) -> dict[str, Any]:
    """Solid lines with dots for lazy optimizers, dashed with squares for the dense ones."""
    return {"marker": "s" if dense else "o", "linestyle": "--" if dense else "-"}


def _plot_timings(
    timings: Sequence[StepTiming], x_of: Callable[[StepTiming], float], xlabel: str, title: str
) -> tuple[Figure, Any, dict[str, list[StepTiming]]]:
    """Log-log median step time against ``x_of(timing)``, one line per contender (dense ones dashed)."""
    fig = new_figure(*SIZE)
    ax = fig.add_subplot()
    groups = {name: sorted(ts, key=x_of) for name, ts in _by_contender(timings).items()}
    for name, ts in groups.items():
        ax.plot([x_of(t) for t in ts], [t.median_ms for t in ts], label=name, **_style(ts[0].dense))
    ax.set_xscale("log")
    ax.set_yscale("log")
    if timings:
        xs, ys = [x_of(t) for t in timings], [t.median_ms for t in timings]
        log_ticks(ax.xaxis, min(xs), max(xs))
        log_ticks(ax.yaxis, min(ys), max(ys))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("median step time (ms)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax, groups


def _legend_outside(ax: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def plot_rows_sweep(timings: Sequence[StepTiming], title: str | None = None) -> Figure:
    """Median step time against table rows (log-log), one line per contender.

    A lazy step that is O(nnz) draws a flat line; a dense one climbs with the table.
    """
    batch = sorted({t.workload.batch for t in timings})
    default = f"{', '.join(map(str, batch))} lookups per step: time against table size"
    fig, ax, _ = _plot_timings(timings, lambda t: t.workload.rows, "table rows", title or default)
    _legend_outside(ax)
    return finish(fig)


def plot_batch_sweep(timings: Sequence[StepTiming], title: str | None = None) -> Figure:
    """Median step time against gradient entries (nnz, log-log), one line per contender.

    A dotted line of slope 1 through the first point of the first contender
    shows what "proportional to nnz" looks like.
    """
    rows = sorted({t.workload.rows for t in timings})
    default = f"a {', '.join(f'{r:,}' for r in rows)}-row table: time against gradient size"
    xlabel = "gradient entries per step (nnz = distinct rows x cols)"
    fig, ax, groups = _plot_timings(timings, lambda t: t.nnz, xlabel, title or default)
    if groups:
        first = next(iter(groups.values()))
        x = np.array([first[0].nnz, first[-1].nnz])
        ax.plot(x, first[0].median_ms * x / x[0], ":", color="grey", label="proportional to nnz")
    _legend_outside(ax)
    return finish(fig)


def plot_memory(points: Sequence[StepMemory]) -> Figure:
    """Peak allocation of a step against the gradient's bytes (log-log, KiB), with the table's size for scale."""
    fig = new_figure(*SIZE)
    ax = fig.add_subplot()
    groups: dict[str, list[StepMemory]] = {}
    for p in points:
        groups.setdefault(p.contender, []).append(p)
    for name, ps in groups.items():
        ps = sorted(ps, key=lambda p: p.grad_bytes)
        ax.plot([p.grad_bytes / 1024 for p in ps], [p.step_peak / 1024 for p in ps], label=name, **_style(ps[0].dense))
    tables = sorted({p.workload.table_bytes for p in points})
    for b in tables:
        ax.axhline(b / 1024, color="black", linestyle="--", linewidth=1)
        ax.annotate(f"the table: {b / 2**20:,.1f} MiB", (0.02, b / 1024), xycoords=("axes fraction", "data"), va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if points:
        xs = [p.grad_bytes / 1024 for p in points]
        ys = [p.step_peak / 1024 for p in points] + [b / 1024 for b in tables]
        log_ticks(ax.xaxis, min(xs), max(xs))
        log_ticks(ax.yaxis, min(ys), max(ys))
    ax.set_xlabel("gradient values (nnz x itemsize), KiB")
    ax.set_ylabel("peak allocated in step, KiB")
    ax.set_title("what a step allocates grows with nnz, not with the table")
    ax.grid(True, which="major", alpha=0.3)
    _legend_outside(ax)
    return finish(fig)


def plot_catch_up(timings: Sequence[CatchUpTiming]) -> Figure:
    """``DENSE_EQUIVALENT`` catch-up time per entry against the rows' dormancy gap (log x, linear y from 0)."""
    fig = new_figure(*SIZE)
    ax = fig.add_subplot()
    ts = sorted(timings, key=lambda t: t.gap)
    ax.plot([t.gap for t in ts], [t.ns_per_entry for t in ts], marker="o", label="catch_up, median per entry")
    ax.set_xscale("log")
    if ts:
        log_ticks(ax.xaxis, ts[0].gap, max(ts[-1].gap, 10 * ts[0].gap))
        ax.set_ylim(0, 1.25 * max(t.ns_per_entry for t in ts))
    ax.set_xlabel("dormant steps caught up (gap)")
    ax.set_ylabel("time per entry (ns)")
    shapes = sorted({(t.rows, t.cols) for t in ts})
    ax.set_title(
        "DENSE_EQUIVALENT: the catch-up's cost per entry is bounded, whatever the gap"
        + (f"\n(blocks of {', '.join(f'{r:,} x {c}' for r, c in shapes)} entries)" if shapes else "")
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right")
    return finish(fig)

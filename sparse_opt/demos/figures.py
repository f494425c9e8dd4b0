"""Slide-ready figures without pyplot: one place for size, resolution and type sizes.

Every plotting function in :mod:`sparse_opt.demos` creates its figure with
:func:`new_figure` -- a :class:`matplotlib.figure.Figure` made without pyplot, so
it works under any backend, is never shown twice and keeps no global state --
and returns it through :func:`finish`, which sets the type sizes of every title,
label, tick label and legend for a projected slide. JupyterLab shows the figure
a cell returns; ``make figures`` writes every notebook figure as SVG and PNG.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

#: Resolution of figures as stored in the notebooks: crisp on a projector and in print.
DPI = 144

#: Type sizes in points.
TITLE, LABEL, TICK, LEGEND = 12.0, 11.0, 10.0, 10.0


def new_figure(width: float, height: float, **kwargs: Any) -> Figure:
    """A pyplot-free ``width`` x ``height`` inch figure at :data:`DPI` with constrained layout.

    Extra keyword arguments go to :class:`~matplotlib.figure.Figure`.

    Examples
    --------
    >>> fig = new_figure(4, 3)
    >>> float(fig.dpi), fig.get_size_inches().tolist()
    (144.0, [4.0, 3.0])
    """
    kwargs.setdefault("dpi", DPI)
    kwargs.setdefault("layout", "constrained")
    return Figure(figsize=(width, height), **kwargs)


def finish(fig: Figure) -> Figure:
    """Give every axes of ``fig`` the slide type sizes (titles, axis labels, ticks, legends); return ``fig``.

    Examples
    --------
    >>> fig = new_figure(4, 3)
    >>> ax = fig.add_subplot()
    >>> _ = ax.set_title("t")
    >>> finish(fig).axes[0].title.get_fontsize()
    12.0
    """
    for text in fig.texts:  # the suptitle, if any
        text.set_fontsize(TITLE + 1)
    for ax in fig.axes:
        ax.title.set_fontsize(TITLE)
        ax.xaxis.label.set_fontsize(LABEL)
        ax.yaxis.label.set_fontsize(LABEL)
        ax.tick_params(which="both", labelsize=TICK)
        legend = ax.get_legend()
        if legend is not None:
            for text in legend.get_texts():
                text.set_fontsize(LEGEND)
            if legend.get_title().get_text():
                legend.get_title().set_fontsize(LEGEND)
    return fig


def tidy_log_axes(fig: Figure) -> Figure:
    """No minor tick labels on any log axis (they clutter a slide); short log axes get 1-2-5 major labels.

    Returns ``fig``.
    """
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            axis.set_minor_formatter(NullFormatter())
            low, high = sorted(limits)
            if low > 0 and high / low < 100:
                axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    return fig

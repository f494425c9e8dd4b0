"""Checks that a demo figure is slide-ready: drawn at 144 dpi, no minor tick labels, no legend over the data."""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def drawn(fig: Figure) -> Figure:
    """Lay the figure out and draw it with Agg, so tick labels and extents are final."""
    FigureCanvasAgg(fig).draw()
    return fig


def minor_tick_labels(fig: Figure) -> list[str]:
    """Every non-empty minor tick label of every axis (slide figures have none)."""
    return [
        t.get_text()
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        for t in axis.get_minorticklabels()
        if t.get_visible() and t.get_text()
    ]


def legends(fig: Figure) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def data_points_under_legends(fig: Figure) -> int:
    """How many points of the drawn lines (densified 20x along each segment, in pixels) lie under a legend."""
    renderer = fig.canvas.get_renderer()
    boxes = [leg.get_window_extent(renderer) for leg in legends(fig)]
    hidden = 0
    for ax in fig.axes:
        for line in ax.get_lines():
            xy = line.get_transform().transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
            xy = xy[np.isfinite(xy).all(axis=1)]
            if len(xy) > 1:
                s = np.linspace(0, len(xy) - 1, 20 * (len(xy) - 1) + 1)
                xy = np.column_stack([np.interp(s, np.arange(len(xy)), xy[:, k]) for k in (0, 1)])
            for box in boxes:
                hidden += int(np.sum((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)))
    return hidden


def assert_slide_ready(fig: Figure) -> None:
    """144 dpi, no minor tick labels, and no legend over any drawn line."""
    drawn(fig)
    assert fig.dpi == 144
    assert minor_tick_labels(fig) == []
    assert data_points_under_legends(fig) == 0

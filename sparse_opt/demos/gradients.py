"""Where sparse gradients come from, and how COO and CSR store them (notebook 01).

An embedding lookup ``out = table[ids]`` reads one row per id. Its gradient with
respect to the table is zero everywhere except the looked-up rows, and a row
looked up several times receives the *sum* of its gradients. With Zipf-distributed
ids (:mod:`sparse_opt.demos.data`) a batch repeats the popular rows many times and
touches only a small fraction of a large table -- the reason lazy optimizers exist.

Computation functions return numbers and arrays; :func:`plot_sparsity_pattern`
takes their results and returns a :class:`matplotlib.figure.Figure` made by
:func:`sparse_opt.demos.figures.new_figure` (no pyplot, 144 dpi, slide type
sizes), so it works under any backend and is never shown twice.
:func:`explore_lookup` is everything the notebook's sliders redraw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from sparse_opt.csr import CsrGradient
from sparse_opt.demos.data import zipf_ids, zipf_probabilities
from sparse_opt.demos.figures import finish, new_figure


@dataclass(frozen=True)
class LookupBatch:
    """One embedding lookup and its gradient.

    Attributes
    ----------
    ids : ndarray of int64, shape (batch_size,)
        Looked-up rows in draw order (repeats allowed).
    row_grads : ndarray of float64, shape (batch_size, cols)
        Upstream gradient with respect to each looked-up row.
    grad : CsrGradient
        ``CsrGradient.from_rows(ids, row_grads, num_rows)``: repeats summed.
    """

    ids: np.ndarray
    row_grads: np.ndarray
    grad: CsrGradient


def embedding_lookup_batch(num_rows: int, cols: int, batch_size: int, skew: float, seed: int) -> LookupBatch:
    """Draw a batch of Zipf ids and standard-normal row gradients, and build the sparse gradient.

    Parameters
    ----------
    num_rows, cols : int
        Shape of the embedding table.
    batch_size : int
        Number of lookups (ids drawn, with repeats).
    skew : float
        Zipf exponent (0 = uniform), see :func:`sparse_opt.demos.data.zipf_probabilities`.
    seed : int
        Seed of ``np.random.default_rng``; ids are drawn first, then the gradients.

    Returns
    -------
    LookupBatch
    """
    rng = np.random.default_rng(seed)
    ids = zipf_ids(num_rows, batch_size, skew, rng)
    row_grads = rng.standard_normal((batch_size, cols))
    return LookupBatch(ids, row_grads, CsrGradient.from_rows(ids, row_grads, num_rows))


def dense_lookup_gradient(ids: np.ndarray, row_grads: np.ndarray, num_rows: int) -> np.ndarray:
    """The dense ``(num_rows, cols)`` gradient of a lookup: a scatter-add of ``row_grads``.

    The reference :meth:`CsrGradient.from_rows` is checked against: ``np.add.at``
    adds each looked-up row's gradient into a zero table, in the order given.
    """
    out = np.zeros((num_rows, row_grads.shape[1]), dtype=row_grads.dtype)
    np.add.at(out, ids, row_grads)
    return out


def quadratic_lookup_gradient(table: np.ndarray, target: np.ndarray, ids: np.ndarray) -> CsrGradient:
    """Gradient of ``0.5 * sum_i ||table[ids[i]] - target[ids[i]]||**2`` with respect to ``table``.

    The smallest embedding "model" with a real gradient: every lookup pulls its
    row towards that row's target. The row gradient of lookup ``i`` is
    ``table[ids[i]] - target[ids[i]]``, and a row looked up ``k`` times gets ``k``
    times it, as :meth:`CsrGradient.from_rows` sums repeated rows. Only the looked-up
    rows are read (O(batch * cols)).

    Parameters
    ----------
    table, target : ndarray, shape (rows, cols)
        The parameters and the row targets.
    ids : ndarray of int
        The looked-up rows (repeats allowed, any order).

    Examples
    --------
    >>> g = quadratic_lookup_gradient(np.ones((3, 2)), np.zeros((3, 2)), np.array([2, 2, 0]))
    >>> g.to_dense().tolist()
    [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
    """
    ids = np.asarray(ids)
    return CsrGradient.from_rows(ids, table[ids] - target[ids], table.shape[0])


@dataclass(frozen=True)
class SparsitySummary:
    """How much of a table one lookup batch touches.

    Attributes
    ----------
    lookups : int
        Ids in the batch (with repeats).
    distinct_rows : int
        Rows with a gradient entry (one per distinct id).
    nnz : int
        Stored gradient entries.
    shape : tuple of int
        ``(rows, cols)`` of the table.
    top_row, top_row_lookups : int
        The most looked-up row (smallest id on a tie) and how often it was looked up.
    """

    lookups: int
    distinct_rows: int
    nnz: int
    shape: tuple[int, int]
    top_row: int
    top_row_lookups: int

    @property
    def fraction_rows_touched(self) -> float:
        """``distinct_rows / rows`` (0 for a table without rows)."""
        return self.distinct_rows / self.shape[0] if self.shape[0] else 0.0

    @property
    def fraction_table_touched(self) -> float:
        """``nnz / (rows * cols)`` (0 for an empty table)."""
        size = self.shape[0] * self.shape[1]
        return self.nnz / size if size else 0.0

    @property
    def repeated_lookups(self) -> int:
        """Lookups merged into an earlier lookup of the same row: ``lookups - distinct_rows``."""
        return self.lookups - self.distinct_rows

    def format(self) -> str:
        """A fixed-precision, multi-line report (stable across numpy versions)."""
        rows, cols = self.shape
        return "\n".join(
            [
                f"table {rows} x {cols} = {rows * cols} coordinates, batch of {self.lookups} lookups",
                f"distinct rows touched : {self.distinct_rows} ({self.fraction_rows_touched:.2%} of rows)",
                f"repeated lookups      : {self.repeated_lookups} (summed into their row)",
                f"stored entries (nnz)  : {self.nnz} ({self.fraction_table_touched:.2%} of the table)",
                f"most looked-up row    : {self.top_row} ({self.top_row_lookups} lookups)",
            ]
        )


def sparsity_summary(ids: np.ndarray, grad: CsrGradient) -> SparsitySummary:
    """Summarise the gradient ``grad`` that the lookup of ``ids`` produced.

    Parameters
    ----------
    ids : ndarray of int
        The looked-up rows (with repeats), non-empty.
    grad : CsrGradient
        Their gradient, e.g. ``CsrGradient.from_rows(ids, row_grads, rows)``.

    Returns
    -------
    SparsitySummary
    """
    ids = np.asarray(ids)
    if ids.size == 0:
        raise ValueError("ids must hold at least one lookup")
    counts = np.bincount(ids, minlength=grad.shape[0])
    top = int(np.argmax(counts))
    return SparsitySummary(
        lookups=int(ids.size),
        distinct_rows=int(grad.touched_rows.size),
        nnz=grad.nnz,
        shape=grad.shape,
        top_row=top,
        top_row_lookups=int(counts[top]),
    )


def touch_probabilities(num_rows: int, batch_size: int, skew: float) -> np.ndarray:
    """Probability that each row is looked up at least once in a batch of Zipf ids.

    With per-draw probability ``p_k`` (:func:`~sparse_opt.demos.data.zipf_probabilities`)
    and ``batch_size`` independent draws, row ``k`` is touched with probability
    ``1 - (1 - p_k)**batch_size``, evaluated as ``-expm1(batch_size * log1p(-p_k))``
    so that rare rows keep their relative precision. Its mean touch period (steps
    between touches) is the reciprocal.
    """
    p = zipf_probabilities(num_rows, skew)
    with np.errstate(divide="ignore"):  # p == 1 (a one-row table): log1p(-1) = -inf, result 1
        return -np.expm1(batch_size * np.log1p(-p))


def expected_distinct_rows(num_rows: int, batch_size: int, skew: float) -> float:
    """Expected number of distinct rows in a batch: the sum of :func:`touch_probabilities`."""
    return float(touch_probabilities(num_rows, batch_size, skew).sum())


def format_entries(grad: CsrGradient, max_entries: int = 12) -> str:
    """COO and CSR side by side: one line per stored entry, up to ``max_entries``.

    Columns: entry position ``k``, its row (from ``row_offsets``), its column
    (``col_indices[k]``), the COO linear index ``row * cols + col`` and the value
    (4 decimals).
    """
    linear = grad.to_coo().indices
    # Entry k belongs to the row r with row_offsets[r] <= k < row_offsets[r + 1].
    rows = np.repeat(np.arange(grad.shape[0]), np.diff(grad.row_offsets))
    cols = grad.col_indices
    lines = [f"{'k':>3} {'row':>5} {'col':>5} {'row*cols+col':>13} {'value':>9}"]
    for k in range(min(grad.nnz, max_entries)):
        value = float(grad.values[k])
        lines.append(f"{k:>3} {int(rows[k]):>5} {int(cols[k]):>5} {int(linear[k]):>13} {value:>9.4f}")
    if grad.nnz > max_entries:
        lines.append(f"... {grad.nnz - max_entries} more entries")
    return "\n".join(lines)


def pattern_xlim(num_rows: int) -> tuple[float, float]:
    """Row-axis limits of :func:`plot_sparsity_pattern`: every row, plus a margin on both sides.

    The margin is 2.5% of the table (at least half a row) so that row 0, the most
    looked-up row of a Zipf batch, is drawn clear of the left spine instead of on it.
    """
    pad = max(0.5, 0.025 * num_rows)
    return (-0.5 - pad, num_rows - 0.5 + pad)


def plot_sparsity_pattern(ids: np.ndarray, grad: CsrGradient, title: str | None = None) -> Figure:
    """Picture the entries of a table gradient and the lookups behind them.

    Top axes: every stored entry as a mark at (row id, column) -- the table drawn
    sideways, one vertical stripe per touched row. Bottom axes: how many lookups
    each row received (log scale); rows looked up more than once had their
    gradients summed into one stripe. Both axes share the row axis, whose limits
    (:func:`pattern_xlim`) leave a margin so that no row sits on a spine.

    Parameters
    ----------
    ids : ndarray of int
        The looked-up rows (with repeats).
    grad : CsrGradient
        Their gradient.
    title : str, optional
        Figure title; by default the table shape and batch size.

    Returns
    -------
    matplotlib.figure.Figure
        A :func:`~sparse_opt.demos.figures.new_figure` (144 dpi, slide type sizes)
        with two axes sharing the row axis; the top one holds one line (the
        entries), the bottom one a collection of stems.
    """
    rows, cols = grad.shape
    counts = np.bincount(np.asarray(ids), minlength=rows)
    touched = np.flatnonzero(counts)
    fig = new_figure(9.0, 5.0)
    ax_pattern, ax_counts = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    # One vertical tick per entry, sized to its cell (in points) so that a complete
    # row reads as a solid stripe; at least 0.8 pt wide so no row vanishes.
    cell_width = 520.0 / max(rows, 1)
    cell_height = 190.0 / max(cols, 1)
    ax_pattern.plot(
        grad.row_of_entries(),
        grad.col_indices,
        ls="none",
        marker="|",
        ms=cell_height,
        mew=float(np.clip(0.8 * cell_width, 0.8, 12.0)),
        color="tab:blue",
    )
    ax_pattern.yaxis.get_major_locator().set_params(integer=True)
    ax_pattern.set_xlim(*pattern_xlim(rows))
    ax_pattern.set_ylim(cols - 0.5, -0.5)
    ax_pattern.set_ylabel("column")
    ax_pattern.set_title(f"stored entries: {grad.nnz} of {rows * cols} ({grad.nnz / max(rows * cols, 1):.2%})")
    ax_counts.vlines(touched, 0.8, counts[touched], color="tab:orange", lw=float(np.clip(0.5 * cell_width, 1.0, 4.0)))
    ax_counts.set_yscale("log")
    ax_counts.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax_counts.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax_counts.yaxis.set_minor_locator(NullLocator())
    ax_counts.set_ylim(0.8, max(2.0, 1.5 * float(counts.max(initial=1))))
    ax_counts.set_xlabel("row id (= popularity rank: 0 is the most frequent)")
    ax_counts.set_ylabel("lookups")
    ax_counts.set_title(f"lookups per row: {len(ids)} lookups, {touched.size} distinct rows")
    fig.suptitle(title if title is not None else f"gradient of an embedding lookup, table {rows} x {cols}")
    return finish(fig)


def explore_lookup(num_rows: int, cols: int, batch_size: int, skew: float, seed: int = 0) -> tuple[str, Figure]:
    """Everything the notebook's sliders show for one setting: a text report and the pattern plot.

    Draws :func:`embedding_lookup_batch` with these arguments and returns
    ``(report, figure)``: the report is :meth:`SparsitySummary.format` followed by
    the expected number of distinct rows (:func:`expected_distinct_rows`, 2
    decimals); the figure is :func:`plot_sparsity_pattern`.
    """
    batch = embedding_lookup_batch(num_rows, cols, batch_size, skew, seed)
    summary = sparsity_summary(batch.ids, batch.grad)
    expected = expected_distinct_rows(num_rows, batch_size, skew)
    report = f"{summary.format()}\nexpected distinct rows: {expected:.2f} ({expected / num_rows:.2%} of rows)"
    return report, plot_sparsity_pattern(batch.ids, batch.grad)

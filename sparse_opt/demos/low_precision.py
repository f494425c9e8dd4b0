r"""Half-precision embedding tables: stagnation, stochastic rounding, and a tuned experiment.

Behind ``notebooks/10_low_precision.ipynb``. Everything here runs the kit's own
optimizers on ``float16`` or ``bfloat16`` tables (``bfloat16`` from the optional
``ml_dtypes`` package); nothing re-implements an update or a rounding
(:mod:`sparse_opt._rounding` is the one place that rounds).

**Stagnation.** A half parameter ``p`` is written as ``R(p + d)`` where ``d`` is the
update computed in float32. With round-to-nearest ``R = fl``, ``fl(p + d) = p``
whenever ``|d|`` is below half the gap from ``p`` to its neighbour in the
direction of ``d`` (at a tie, when ``p``'s last bit is even too): the update is
lost, however many times it is applied (:func:`repeated_updates`).

**Stochastic rounding** rounds ``p + d`` to its upper neighbour with probability
equal to the fraction of the gap it covers, so ``E[R(p + d)] = p + d``: the
updates survive in expectation, at the cost of a random error of up to one gap
per write (a variance of ``f (1 - f)`` gaps squared for a fraction ``f``).

**Lazy and dense.** Dense Adam on a half table writes every entry at every step,
so a dormant row's coasting steps, which shrink by ``beta1 / sqrt(beta2)`` a step,
are each rounded, and lost as soon as they fall below half a gap;
``DENSE_EQUIVALENT`` sums the same steps in float32 and rounds once per catch-up
(:func:`coasting`, :func:`train_dense`).

**The experiment** (:func:`sweep`) trains notebook 04's model
(:mod:`sparse_opt.demos.divergence`: its :class:`~sparse_opt.demos.divergence.Problem`,
its gradient :func:`~sparse_opt.demos.divergence.logistic_grad`) with a LAZY
:class:`~sparse_opt.SparseAdamTable` in each :class:`Precision`, at every rate of
a grid, and counts the writes that changed nothing.

Source: IEEE 754-2019, section 4.3.1 (round to nearest, ties to even); Connolly,
Higham & Mary, "Stochastic Rounding and Its Probabilistic Backward Error
Analysis", SIAM J. Sci. Comput. 43(1), 2021; Gupta et al., "Deep Learning with
Limited Numerical Precision", ICML 2015 (stochastic rounding in training).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from sparse_opt import CsrGradient, DenseAdam, LazyMode, SparseAdamConfig, SparseAdamTable
from sparse_opt import SparseSgdConfig, SparseSgdTable
from sparse_opt._rounding import bfloat16
from sparse_opt.demos.divergence import Problem, logistic_grad, logistic_loss, mean_gaps, spread
from sparse_opt.demos.figures import LEGEND, finish, new_figure


@dataclass(frozen=True)
class Precision:
    """How a table is stored and written.

    Attributes
    ----------
    name : str
        Short label (``"fp16 nearest"``).
    dtype : str
        ``"float32"``, ``"float16"`` or ``"bfloat16"``.
    rounding : str
        ``"nearest"`` or ``"stochastic"`` (no effect for float32).
    """

    name: str
    dtype: str
    rounding: str = "nearest"

    def numpy_dtype(self) -> np.dtype:
        """The table's dtype (``bfloat16`` imports ``ml_dtypes``)."""
        return bfloat16() if self.dtype == "bfloat16" else np.dtype(self.dtype)


FLOAT32 = Precision("float32", "float32")
FP16_NEAREST = Precision("fp16 nearest", "float16", "nearest")
FP16_STOCHASTIC = Precision("fp16 stochastic", "float16", "stochastic")
BF16_NEAREST = Precision("bf16 nearest", "bfloat16", "nearest")
BF16_STOCHASTIC = Precision("bf16 stochastic", "bfloat16", "stochastic")

_COLORS = {
    "float32": "0.2",
    "fp16 nearest": "tab:blue",
    "fp16 stochastic": "tab:cyan",
    "bf16 nearest": "tab:red",
    "bf16 stochastic": "tab:orange",
}
_MARKERS = {"float32": "x", "fp16 nearest": "o", "fp16 stochastic": "s", "bf16 nearest": "^", "bf16 stochastic": "v"}


def has_bfloat16() -> bool:
    """Whether ``ml_dtypes`` (and so bfloat16) can be imported."""
    try:
        bfloat16()
    except ImportError:
        return False
    return True


def precisions(include_bf16: bool | None = None) -> tuple[Precision, ...]:
    """The compared precisions: float32, fp16 nearest and stochastic, and bf16 both ways if available.

    ``include_bf16=None`` includes bf16 when :func:`has_bfloat16`.
    """
    base = (FLOAT32, FP16_NEAREST, FP16_STOCHASTIC)
    bf16 = has_bfloat16() if include_bf16 is None else include_bf16
    return base + (BF16_NEAREST, BF16_STOCHASTIC) if bf16 else base


def gap_above(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The gap from each ``|value|`` (representable in ``dtype``) to the next larger magnitude, as float64.

    The unit in the last place, ``ulp``, on the side away from zero: at a power
    of two the gap below is half of it.

    Examples
    --------
    >>> import numpy as np
    >>> gap_above(np.array([1.0, 0.1, 1000.0]), np.float16).tolist()
    [0.0009765625, 6.103515625e-05, 0.5]
    """
    dtype = np.dtype(dtype)
    a = np.abs(np.asarray(values, dtype=np.float64)).astype(dtype)
    bits = a.view(np.uint16)
    return (bits + np.uint16(1)).view(dtype).astype(np.float64) - a.astype(np.float64)


# -- one coordinate ---------------------------------------------------------------------


def repeated_updates(
    start: float, update: float, steps: int, precision: Precision, copies: int = 1, seed: int = 0
) -> np.ndarray:
    """Apply ``p <- R(p + update)`` ``steps`` times to ``copies`` independent coordinates.

    The kit's :class:`~sparse_opt.SparseSgdTable` (``lr = 1``, gradient ``-update``
    on every coordinate, no momentum: the update is exact in float32 and the
    parameter rounded once per step as ``precision`` says, one generator draw per
    coordinate and step).

    Parameters
    ----------
    start : float
        The initial value (rounded to nearest in the table's dtype).
    update : float
        The update added at each step (exactly representable in float32).
    steps : int
    precision : Precision
    copies : int
        Independent coordinates (they differ only by their random draws).
    seed : int
        The optimizer's generator seed.

    Returns
    -------
    ndarray of float64, shape (steps + 1, copies)
        The values after 0, 1, ..., ``steps`` steps.
    """
    table = np.full((copies, 1), start, dtype=np.float64).astype(precision.numpy_dtype())
    opt = SparseSgdTable(table, SparseSgdConfig(lr=1.0, rounding=precision.rounding, seed=seed))
    grad = CsrGradient.from_rows(np.arange(copies), np.full((copies, 1), -update, dtype=np.float32), copies)
    out = np.empty((steps + 1, copies))
    out[0] = table[:, 0].astype(np.float64)
    for k in range(1, steps + 1):
        opt.step(grad)
        out[k] = table[:, 0].astype(np.float64)
    return out


@dataclass(frozen=True)
class Coasting:
    """A row trained for a few steps, then dormant: result of :func:`coasting`.

    Attributes
    ----------
    start : float
        The value before training (representable in the half type).
    exact : float
        The value after the gap with float32 dense Adam (what the half runs aim at).
    dense_nearest : float
        Dense Adam on a half table, round to nearest: every step written and rounded.
    dense_stochastic : ndarray of float64, shape (copies,)
        The same with stochastic rounding, one value per independent copy.
    dense_equivalent : float
        ``DENSE_EQUIVALENT`` on a half table, round to nearest: the dormant steps
        summed in float32 by ``catch_up``, rounded once.
    after_touches : float
        Dense Adam's value (float32) right after the last touch, before the coasting.
    stalled_at : int
        The first dormant step whose write did not change dense Adam's half
        parameter (round to nearest); ``gap`` if every one did.
    gap : int
        Dormant steps.
    """

    start: float
    exact: float
    dense_nearest: float
    dense_stochastic: np.ndarray
    dense_equivalent: float
    after_touches: float
    stalled_at: int
    gap: int


def coasting(
    start: float,
    grads: Sequence[float],
    gap: int,
    dtype: str = "float16",
    lr: float = 0.01,
    beta1: float = 0.9,
    beta2: float = 0.99,
    copies: int = 1000,
    seed: int = 0,
) -> Coasting:
    """One coordinate: gradients ``grads`` on consecutive steps, then ``gap`` steps without one.

    Runs float32 :class:`~sparse_opt.DenseAdam` (the reference), half DenseAdam
    with round to nearest, half DenseAdam with stochastic rounding on ``copies``
    independent coordinates, and a half ``DENSE_EQUIVALENT``
    :class:`~sparse_opt.SparseAdamTable` (round to nearest) whose
    ``catch_up()`` after the gap applies the dormant steps at once.

    Parameters
    ----------
    start : float
        Initial value, rounded to nearest in ``dtype`` (all runs start there).
    grads : sequence of float
        The gradient at each of the first ``len(grads)`` steps.
    gap : int
        Dormant steps after them (zero gradient for dense Adam, no gradient for the lazy table).
    dtype : {"float16", "bfloat16"}
    lr, beta1, beta2 : float
        Adam's hyper-parameters (``eps = 1e-8``).
    copies : int
        Copies for stochastic rounding.
    seed : int
        Generator seed of the stochastic run.

    Returns
    -------
    Coasting
    """
    half = Precision(dtype, dtype).numpy_dtype()
    start_half = np.array([start]).astype(half)
    steps = len(grads) + gap
    schedule = np.zeros(steps)
    schedule[: len(grads)] = grads

    def dense(table_dtype: np.dtype, rounding: str, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
        table = np.full((n, 1), start_half[0].astype(np.float64)).astype(table_dtype)
        opt = DenseAdam(table, lr=lr, beta1=beta1, beta2=beta2, rounding=rounding, seed=seed)
        trace = []
        for g in schedule:
            opt.step(np.full((n, 1), g, dtype=np.float32))
            trace.append(table[:, 0].astype(np.float64))
        return table[:, 0].astype(np.float64), trace

    exact, exact_trace = dense(np.dtype(np.float32), "nearest", 1)
    nearest, nearest_trace = dense(half, "nearest", 1)
    stochastic, _ = dense(half, "stochastic", copies)
    table = np.full((1, 1), start_half[0].astype(np.float64)).astype(half)
    lazy = SparseAdamTable(table, SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, mode=LazyMode.DENSE_EQUIVALENT))
    empty = CsrGradient.from_rows(np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32), 1)
    for g in schedule:
        lazy.step(CsrGradient.from_rows([0], np.array([[g]], dtype=np.float32), 1) if g else empty)
    lazy.catch_up()
    values = [float(v[0]) for v in nearest_trace]
    still = [k for k in range(len(grads), steps) if values[k] == values[k - 1]]
    return Coasting(
        start=float(start_half[0]),
        exact=float(exact[0]),
        dense_nearest=float(nearest[0]),
        dense_stochastic=stochastic,
        dense_equivalent=float(table[0, 0]),
        after_touches=float(exact_trace[len(grads) - 1][0]),
        stalled_at=(still[0] - len(grads) + 1) if still else gap,
        gap=gap,
    )


# -- the experiment ---------------------------------------------------------------------


class _Widened:
    """A read-only view of a table whose lookups come back as float64 (a lookup widens only the rows it reads)."""

    def __init__(self, table: np.ndarray) -> None:
        self._table = table
        self.shape = table.shape

    def __getitem__(self, index: np.ndarray) -> np.ndarray:
        return self._table[index].astype(np.float64)


def half_grad(table: np.ndarray, pairs: np.ndarray, labels: np.ndarray, batch_size: int) -> CsrGradient:
    """:func:`~sparse_opt.demos.divergence.logistic_grad` of a table in any dtype, computed in float64.

    The looked-up rows are widened to float64 as they are read (no table-sized
    temporary), so a half table's gradient is the float64 gradient at its
    stored values: the runs of :func:`sweep` differ only by how the table is stored.
    """
    return logistic_grad(_Widened(table), pairs, labels, batch_size)  # type: ignore[arg-type]


def make_table_optimizer(
    precision: Precision, table: np.ndarray, lr: float, beta1: float, beta2: float, seed: int = 0
) -> SparseAdamTable:
    """A LAZY :class:`~sparse_opt.SparseAdamTable` over ``table``, float32 state, ``precision``'s rounding."""
    config = SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, rounding=precision.rounding, seed=seed)
    return SparseAdamTable(table, config)


@dataclass(frozen=True)
class Run:
    """One precision at one learning rate, all seeds of the problem stacked: result of :func:`train`.

    Attributes
    ----------
    precision : Precision
    lr : float
    valid_loss, test_loss : ndarray of float64, shape (num_seeds,)
        Final losses per seed (the table read as float64).
    written : ndarray of int64, shape (num_seeds * num_rows,)
        Entries of each row written by a step (touches times ``dim``).
    stagnated : ndarray of int64, shape (num_seeds * num_rows,)
        Of those, the writes that left the entry unchanged.
    table : ndarray
        The final stacked table, in the precision's dtype.
    seconds : float
        Wall time of the training steps.
    """

    precision: Precision
    lr: float
    valid_loss: np.ndarray
    test_loss: np.ndarray
    written: np.ndarray
    stagnated: np.ndarray
    table: np.ndarray
    seconds: float


def train(
    problem: Problem, precision: Precision, lr: float, beta1: float = 0.9, beta2: float = 0.99, seed: int = 0
) -> Run:
    """Train ``problem``'s stacked table with LAZY Adam in ``precision``; count the writes that changed nothing.

    At every step the batch's rows are looked up (widened to float64), the
    gradient is :func:`half_grad`'s, and the optimizer steps; the touched rows are
    compared before and after the step.
    """
    table = problem.init.astype(precision.numpy_dtype())
    opt = make_table_optimizer(precision, table, lr, beta1, beta2, seed)
    rows = table.shape[0]
    written = np.zeros(rows, dtype=np.int64)
    stagnated = np.zeros(rows, dtype=np.int64)
    start = time.perf_counter()
    for k in range(problem.num_steps):
        pairs = problem.pairs[k]
        grad = half_grad(table, pairs, problem.labels[k], problem.batch_size)
        ids = grad.touched_rows
        before = table[ids]
        opt.step(grad)
        written[ids] += problem.dim
        stagnated[ids] += np.count_nonzero(table[ids] == before, axis=1)
    seconds = time.perf_counter() - start
    wide = table.astype(np.float64)
    losses = [
        np.array([logistic_loss(wide, p[j], y[j]) for j in range(problem.num_seeds)])
        for p, y in ((problem.valid_pairs, problem.valid_labels), (problem.test_pairs, problem.test_labels))
    ]
    return Run(precision, float(lr), losses[0], losses[1], written, stagnated, table, seconds)


def sweep(
    problem: Problem,
    precisions: Sequence[Precision],
    lrs: Sequence[float],
    beta1: float = 0.9,
    beta2: float = 0.99,
    report: Callable[[str], None] | None = None,
) -> dict[str, dict[float, Run]]:
    """:func:`train` for every precision at every learning rate: ``runs[precision.name][lr]``."""
    runs: dict[str, dict[float, Run]] = {}
    for p in precisions:
        runs[p.name] = {float(lr): train(problem, p, lr, beta1, beta2) for lr in lrs}
        if report is not None:
            best = min(runs[p.name].values(), key=lambda r: r.valid_loss.mean())
            report(f"{p.name:>16s}: {len(lrs)} rates done; best validation loss {best.valid_loss.mean():.4f} at lr {best.lr:g}")
    return runs


@dataclass(frozen=True)
class Tuned:
    """One precision at its own learning rate: result of :func:`tuned_results`.

    Attributes
    ----------
    lr : float
        The rate with the lowest mean validation loss (ties: the smaller rate).
    interior : bool
        Whether ``lr`` has a rate of the grid on each side.
    test : ndarray, shape (num_seeds,)
    test_minus_float32 : ndarray, shape (num_seeds,)
        ``test`` minus float32's test loss on the same seed, float32 at its own rate.
    """

    lr: float
    interior: bool
    test: np.ndarray
    test_minus_float32: np.ndarray


def tuned_results(runs: dict[str, dict[float, Run]], reference: str = "float32") -> dict[str, Tuned]:
    """Each precision at the rate its validation loss chose, compared with ``reference`` at its own."""
    chosen = {}
    for name, by_lr in runs.items():
        lrs = sorted(by_lr)
        means = [by_lr[lr].valid_loss.mean() for lr in lrs]
        chosen[name] = (lrs[int(np.argmin(means))], lrs)
    ref_lr = chosen[reference][0]
    ref = runs[reference][ref_lr].test_loss
    out = {}
    for name, (lr, lrs) in chosen.items():
        test = runs[name][lr].test_loss
        out[name] = Tuned(lr, 0 < lrs.index(lr) < len(lrs) - 1, test.copy(), test - ref)
    return out


def stagnation_by_gap(run: Run, problem: Problem, edges: Sequence[float]) -> np.ndarray:
    """Fraction of writes that changed nothing, per bucket of rows by mean gap between touches.

    Returns
    -------
    ndarray of float64, shape (num_seeds, len(edges) - 1)
        NaN for a bucket with no write.
    """
    gaps = mean_gaps(problem)
    out = np.full((problem.num_seeds, len(edges) - 1), np.nan)
    for j in range(problem.num_seeds):
        block = problem.block(j)
        g, w, s = gaps[block], run.written[block], run.stagnated[block]
        for i in range(len(edges) - 1):
            members = (g >= edges[i]) & (g < edges[i + 1])
            if w[members].sum():
                out[j, i] = s[members].sum() / w[members].sum()
    return out


def train_dense(
    problem: Problem, dtype: str, rounding: str, lr: float, dense: bool, beta1: float = 0.9, beta2: float = 0.99
) -> np.ndarray:
    """The final table of dense Adam (``dense=True``) or ``DENSE_EQUIVALENT`` (caught up) on ``problem``.

    Both write a table of ``dtype`` with float32 state; ``DENSE_EQUIVALENT`` calls
    ``catch_up(ids)`` before each lookup, as notebook 04's loop does.
    """
    table = problem.init.astype(Precision(dtype, dtype).numpy_dtype())
    if dense:
        opt: DenseAdam | SparseAdamTable = DenseAdam(table, lr=lr, beta1=beta1, beta2=beta2, rounding=rounding)
    else:
        config = SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, rounding=rounding, mode=LazyMode.DENSE_EQUIVALENT)
        opt = SparseAdamTable(table, config)
    for k in range(problem.num_steps):
        pairs = problem.pairs[k]
        if not dense:
            opt.catch_up(pairs.reshape(-1))  # type: ignore[union-attr]
        grad = half_grad(table, pairs, problem.labels[k], problem.batch_size)
        opt.step(grad.to_dense() if dense else grad)  # type: ignore[arg-type]
    if not dense:
        opt.catch_up()  # type: ignore[union-attr]
    return table


def distance_by_gap(table: np.ndarray, reference: np.ndarray, problem: Problem, edges: Sequence[float]) -> np.ndarray:
    """``||E - E_ref|| / ||E_ref - E_0||`` per seed and bucket of rows by mean gap (notebook 04's divergence).

    Returns
    -------
    ndarray of float64, shape (num_seeds, len(edges) - 1)
    """
    gaps = mean_gaps(problem)
    diff = np.sum((table.astype(np.float64) - reference.astype(np.float64)) ** 2, axis=1)
    moved = np.sum((reference.astype(np.float64) - problem.init) ** 2, axis=1)
    out = np.full((problem.num_seeds, len(edges) - 1), np.nan)
    for j in range(problem.num_seeds):
        block = problem.block(j)
        for i in range(len(edges) - 1):
            members = (gaps[block] >= edges[i]) & (gaps[block] < edges[i + 1])
            if moved[block][members].sum() > 0:
                out[j, i] = np.sqrt(diff[block][members].sum() / moved[block][members].sum())
    return out


def kept_bytes(precision: Precision, num_rows: int, dim: int) -> dict[str, int]:
    """Bytes a LAZY SparseAdamTable in ``precision`` keeps for a ``num_rows x dim`` table.

    Measured from the arrays after one step on one row: ``"params"`` is
    ``table.nbytes``; ``"state"`` the ``nbytes`` of every array in
    ``state_dict()`` (float32 ``m`` and ``v``, ``last_step`` per row, the
    generator's state when rounding is stochastic).
    """
    table = np.zeros((num_rows, dim), dtype=precision.numpy_dtype())
    opt = make_table_optimizer(precision, table, 1e-3, 0.9, 0.99)
    opt.step(CsrGradient.from_rows([0], np.ones((1, dim), dtype=np.float32), num_rows))
    state = sum(v.nbytes for v in opt.state_dict().values() if isinstance(v, np.ndarray))
    return {"params": int(table.nbytes), "state": int(state)}


# -- figures ------------------------------------------------------------------------------


def plot_repeated(nearest: np.ndarray, stochastic: np.ndarray, start: float, update: float, gap: float) -> Figure:
    """A sub-ulp update applied again and again: round to nearest against stochastic rounding.

    Left: the value over the steps in units of the gap above ``start``: the exact
    sum, round to nearest (one coordinate) and stochastic rounding (mean over the
    copies, 5th to 95th percentile band, two single copies). Right: the final
    values of the stochastic copies, with the exact value and their mean.

    Parameters
    ----------
    nearest, stochastic : ndarray, shape (steps + 1, copies)
        :func:`repeated_updates` with round to nearest and with stochastic rounding.
    start, update : float
    gap : float
        The unit of the vertical axis (the gap above ``start``).
    """
    fig = new_figure(11.0, 4.2)
    path_ax, hist_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    steps = np.arange(nearest.shape[0])
    units = lambda x: (x - start) / gap  # noqa: E731
    exact = units(start + steps * update)
    path_ax.plot(steps, exact, color="0.2", linewidth=2.0, linestyle="--", label="exact sum", zorder=5)
    path_ax.plot(steps, units(nearest[:, 0]), color="tab:blue", linewidth=2.5, label="round to nearest")
    lo, hi = np.percentile(units(stochastic), [5, 95], axis=1)
    path_ax.fill_between(steps, lo, hi, color="tab:orange", alpha=0.25, linewidth=0, label="stochastic: 5-95%")
    path_ax.plot(steps, units(stochastic).mean(axis=1), color="tab:orange", linewidth=2.0, label="stochastic: mean")
    for c in range(2):
        path_ax.step(steps, units(stochastic[:, c]), where="post", color="tab:orange", linewidth=0.8, alpha=0.7)
    path_ax.set_xlabel("step")
    path_ax.set_ylabel("p - p0, in gaps above p0")
    path_ax.set_title(f"adding {update / gap:.2f} of a gap, step after step")
    finals = units(stochastic[-1])
    values, counts = np.unique(finals, return_counts=True)
    hist_ax.bar(values, counts / counts.sum(), width=0.8, color="tab:orange", alpha=0.6)
    hist_ax.axvline(exact[-1], color="0.2", linestyle="--", linewidth=2.0)
    hist_ax.axvline(finals.mean(), color="tab:orange", linewidth=2.0)
    hist_ax.set_xlabel(f"p - p0 after {steps[-1]} steps, in gaps")
    hist_ax.set_ylabel("fraction of copies")
    hist_ax.set_title("stochastic: where the copies end")
    for ax in (path_ax, hist_ax):
        ax.grid(alpha=0.3)
    fig.legend(*path_ax.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=LEGEND)
    return finish(fig)


def plot_experiment(
    runs: dict[str, dict[float, Run]], problem: Problem, edges: Sequence[float], labels: Sequence[str]
) -> Figure:
    """The tuned comparison of precisions.

    Left: final validation loss minus float32's tuned one (same seed) against
    the learning rate, mean over seeds with min-max bars, a ring on each
    precision's choice. Middle: test loss minus float32's (same seed), each at
    its own rate, median with min-max. Right: fraction of writes that changed
    nothing, per bucket of rows by mean gap, at each precision's rate (median
    over seeds, min-max).
    """
    tuned = tuned_results(runs)
    fig = new_figure(14.0, 4.8)
    sweep_ax, test_ax, stag_ax = fig.subplots(1, 3)
    ref = runs["float32"][tuned["float32"].lr].valid_loss
    names = list(runs)
    for i, name in enumerate(names):
        lrs = np.array(sorted(runs[name]))
        paired = np.array([runs[name][lr].valid_loss - ref for lr in lrs])
        mean = paired.mean(axis=1)
        x = lrs * (0.94 + 0.03 * i)
        sweep_ax.errorbar(
            x, mean, yerr=[mean - paired.min(axis=1), paired.max(axis=1) - mean], color=_COLORS[name],
            marker=_MARKERS[name], capsize=3, label=name,
        )  # fmt: skip
        best = int(np.flatnonzero(lrs == tuned[name].lr)[0])
        sweep_ax.plot(x[best], mean[best], "o", markersize=14, markerfacecolor="none", color=_COLORS[name])
        mid, lo, hi = spread(tuned[name].test_minus_float32)
        test_ax.errorbar(
            [i], [mid], yerr=[[mid - lo], [hi - mid]], color=_COLORS[name], marker=_MARKERS[name], markersize=8,
            capsize=4, linestyle="none",
        )  # fmt: skip
        frac = stagnation_by_gap(runs[name][tuned[name].lr], problem, edges)
        mid, lo, hi = spread(frac, axis=0)
        xb = np.arange(len(labels)) + 0.12 * (i - (len(names) - 1) / 2)
        stag_ax.errorbar(
            xb, 100 * mid, yerr=[100 * (mid - lo), 100 * (hi - mid)], color=_COLORS[name], marker=_MARKERS[name],
            linestyle="none", capsize=3,
        )  # fmt: skip
    sweep_ax.axhline(0.0, color="0.2", linewidth=1.0, linestyle=":")
    sweep_ax.set_xscale("log")
    grid = sorted(next(iter(runs.values())))
    sweep_ax.set_xticks(grid, [f"{lr:g}" for lr in grid])
    sweep_ax.xaxis.set_minor_formatter(NullFormatter())
    sweep_ax.set_xlabel("learning rate")
    sweep_ax.set_ylabel("validation loss - tuned float32's")
    sweep_ax.set_title("sweep (mean, min-max over seeds)")
    test_ax.axhline(0.0, color="0.2", linewidth=1.0, linestyle="--")
    test_ax.set_xticks(range(len(names)), [n.replace(" ", "\n") for n in names])
    test_ax.set_ylabel("test loss - float32's (same seed)")
    test_ax.set_title("each at its own rate (median, min-max)")
    stag_ax.set_xticks(range(len(labels)), list(labels))
    stag_ax.set_xlabel("mean steps between a row's touches")
    stag_ax.set_ylabel("writes that changed nothing (%)")
    stag_ax.set_title("stagnation, at each one's rate")
    for ax in (sweep_ax, test_ax, stag_ax):
        ax.grid(alpha=0.3)
    fig.legend(*sweep_ax.get_legend_handles_labels(), loc="outside lower center", ncol=len(names), fontsize=LEGEND)
    return finish(fig)

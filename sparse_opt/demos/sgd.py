"""Lazy SGD against dense SGD, the zero-gradient principle, and the exact catch-up (notebook 02).

:class:`~sparse_opt.SparseSgd` applies coupled weight decay and momentum only on
the coordinates a gradient touches. Dense SGD (``torch.optim.SGD`` with
``dampening=0``, ``nesterov=False``) applies them to every coordinate on every
step, so a coordinate with a *zero* gradient still moves::

    buf = momentum * buf + weight_decay * p     (the gradient is 0)
    p   = p - lr * buf

The principle the notebook teaches: **a lazy optimizer equals its dense one
exactly when a zero-gradient step changes nothing** -- plain SGD and Adagrad
(:func:`zero_gradient_principle` checks it numerically). Weight decay and
momentum make the zero-gradient step the fixed linear map of ``(p, buf)``
whose matrix is :func:`dense_dormant_matrix`; ``k`` dormant steps are its
``k``-th power, which :func:`power_by_squaring` computes with at most
``k.bit_length() - 1`` squarings -- the catch-up of
``SparseSgd(mode="dense_equivalent")``, at a cost that does not grow with the gap.

Computation functions return arrays and records; the ``plot_*`` functions take
their results and return a :class:`matplotlib.figure.Figure` made with
:func:`~sparse_opt.demos.figures.new_figure` (no pyplot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from sparse_opt._arrays import as_size
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient
from sparse_opt.demos.data import zipf_ids
from sparse_opt.demos.figures import LEGEND, finish, new_figure
from sparse_opt.demos.gradients import dense_lookup_gradient
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adagrad import SparseAdagrad, SparseAdagradConfig
from sparse_opt.sparse_sgd import SparseSgd, SparseSgdConfig, SparseSgdTable


def caught_up(opt: Any) -> Any:
    """A copy of a sparse optimizer (over a copy of its parameters), caught up in DENSE_EQUIVALENT mode.

    ``caught_up(opt).params`` is what dense training holds after ``opt.step_count``
    steps; ``opt`` itself, lagging entries included, is not changed, so reading
    does not alter its trajectory. The copy is made through ``state_dict`` and
    ``load_state_dict``. In any other mode nothing lags: the copy is plain.
    """
    shadow = type(opt)(opt.params.copy(), opt.config)
    shadow.load_state_dict(opt.state_dict())
    if opt.config.mode is LazyMode.DENSE_EQUIVALENT:
        shadow.catch_up()
    return shadow


def touch_schedule(num_steps: int, period: int) -> np.ndarray:
    """Which of the steps ``1 .. num_steps`` touch a coordinate seen every ``period`` steps.

    Steps ``1, 1 + period, 1 + 2 * period, ...`` are touched (the first step always
    is). Returns a bool array of length ``num_steps``; entry ``t - 1`` is step ``t``.
    """
    num_steps = as_size("num_steps", num_steps)
    period = as_size("period", period)
    if period == 0:
        raise ValueError("period must be positive")
    return np.arange(num_steps) % period == 0


def lazy_sgd_trajectory(p0: np.ndarray, grads: np.ndarray, touched: np.ndarray, config: SparseSgdConfig) -> np.ndarray:
    """Run :class:`~sparse_opt.SparseSgd` and record the parameters after every step.

    Parameters
    ----------
    p0 : ndarray of float, shape (n,)
        Initial parameters (copied; float64 unless float32 is given).
    grads : ndarray of float, shape (steps, n)
        Gradient of each coordinate at each step; only touched entries are used.
    touched : ndarray of bool, shape (steps, n)
        Whether the step's sparse gradient has an entry for the coordinate. An
        entry whose gradient is 0 is still an entry: the coordinate is updated.
    config : SparseSgdConfig
        In ``DENSE_EQUIVALENT`` mode the recorded values are those a reader
        sees after ``catch_up`` (:func:`caught_up`); the run itself is never
        caught up except by its touches.

    Returns
    -------
    ndarray, shape (steps + 1, n)
        Row 0 is ``p0``; row ``t`` the parameters after step ``t``.
    """
    params = np.array(p0, dtype=np.result_type(np.asarray(p0).dtype, np.float32))
    grads = np.asarray(grads)
    touched = np.asarray(touched, dtype=bool)
    if grads.shape != touched.shape or grads.ndim != 2 or grads.shape[1] != params.size:
        raise ValueError(f"grads {grads.shape} and touched {touched.shape} must both be (steps, {params.size})")
    opt = SparseSgd(params, config)
    read = config.mode is LazyMode.DENSE_EQUIVALENT
    out = np.empty((grads.shape[0] + 1, params.size), dtype=params.dtype)
    out[0] = params
    for t in range(grads.shape[0]):
        index = np.flatnonzero(touched[t])
        opt.step(CooGradient(index, grads[t, index], params.size))
        out[t + 1] = caught_up(opt).params if read else params
    return out


def dense_sgd_step(params: np.ndarray, momentum_buffer: np.ndarray, grad: np.ndarray, config: SparseSgdConfig) -> None:
    """One dense SGD step on every coordinate, in place, in plain numpy.

    The same equations, in the same floating-point order, as the lazy update:
    ``g = grad + weight_decay * p``, ``buf = momentum * buf + g`` (when
    ``momentum > 0``; ``momentum_buffer`` is then updated), ``p -= lr * buf``.
    """
    g = -grad if config.maximize else grad
    if config.weight_decay != 0.0:
        g = g + config.weight_decay * params
    if config.momentum != 0.0:
        g = config.momentum * momentum_buffer + g
        momentum_buffer[...] = g
    params[...] = params - config.lr * g


def dense_sgd_trajectory(p0: np.ndarray, grads: np.ndarray, config: SparseSgdConfig) -> np.ndarray:
    """Run :func:`dense_sgd_step` (buffer starting at 0) and record the parameters after every step.

    ``grads`` has shape ``(steps, n)``; a dormant coordinate has gradient 0 and is
    still decayed and carried by momentum. Returns ``(steps + 1, n)``, row 0 = ``p0``.
    """
    params = np.array(p0, dtype=np.result_type(np.asarray(p0).dtype, np.float32))
    buf = np.zeros_like(params)
    grads = np.asarray(grads, dtype=params.dtype)
    out = np.empty((grads.shape[0] + 1, params.size), dtype=params.dtype)
    out[0] = params
    for t in range(grads.shape[0]):
        dense_sgd_step(params, buf, grads[t], config)
        out[t + 1] = params
    return out


@dataclass(frozen=True)
class SgdComparison:
    """One coordinate under lazy SGD, DENSE_EQUIVALENT SGD and dense SGD.

    Attributes
    ----------
    touched : ndarray of bool, shape (steps,)
        Entry ``t - 1``: whether step ``t`` has a gradient entry for the coordinate.
    lazy, dense_equivalent, dense : ndarray of float64, shape (steps + 1,)
        The coordinate's value before the first step (index 0) and after each
        step; ``dense_equivalent`` as read after ``catch_up``.
    period : int
        Steps between touches.
    config : SparseSgdConfig
        The hyper-parameters (mode ``LAZY``; the DENSE_EQUIVALENT run uses the same
        values in that mode).
    """

    touched: np.ndarray
    lazy: np.ndarray
    dense_equivalent: np.ndarray
    dense: np.ndarray
    period: int
    config: SparseSgdConfig

    @property
    def steps(self) -> np.ndarray:
        """``0 .. num_steps``: the step after which each value is taken."""
        return np.arange(self.lazy.size)

    @property
    def touch_steps(self) -> np.ndarray:
        """The 1-based steps with a gradient entry."""
        return np.flatnonzero(self.touched) + 1


def lazy_vs_dense_sgd_trajectory(
    config: SparseSgdConfig, num_steps: int, period: int, grad: float = -1.0, p0: float = 1.0
) -> SgdComparison:
    """Follow a coordinate touched every ``period`` steps under lazy, DENSE_EQUIVALENT and dense SGD.

    Each touch brings the same gradient ``grad`` (the default -1 pushes the value
    up); between touches the sparse optimizers see no entry and the dense one a
    gradient of 0. All start at ``p0`` with a zero momentum buffer, in float64.
    ``config.mode`` is ignored: the lazy run uses ``LAZY``, the other
    ``DENSE_EQUIVALENT``.

    Returns
    -------
    SgdComparison
    """
    touched = touch_schedule(num_steps, period)
    grads = np.where(touched, grad, 0.0)[:, None]
    p_init = np.array([p0], dtype=np.float64)
    values = {"lr": config.lr, "weight_decay": config.weight_decay, "momentum": config.momentum}
    lazy_cfg = SparseSgdConfig(**values, maximize=config.maximize, mode=LazyMode.LAZY)
    exact_cfg = SparseSgdConfig(**values, maximize=config.maximize, mode=LazyMode.DENSE_EQUIVALENT)
    lazy = lazy_sgd_trajectory(p_init, grads, touched[:, None], lazy_cfg)[:, 0]
    exact = lazy_sgd_trajectory(p_init, grads, touched[:, None], exact_cfg)[:, 0]
    dense = dense_sgd_trajectory(p_init, grads, lazy_cfg)[:, 0]
    return SgdComparison(touched, lazy, exact, dense, period, lazy_cfg)


def per_touch_moves(c: SgdComparison, which: str = "lazy") -> np.ndarray:
    """How far the coordinate moves from just before one touch to just before the next (or the end).

    For ``"lazy"`` that is the touch's own step (lazy SGD is frozen in between);
    for ``"dense"`` and ``"dense_equivalent"`` it also includes the coasting of
    the dormant steps that follow the touch.
    """
    values = getattr(c, which)
    starts = c.touch_steps - 1
    ends = np.r_[starts[1:], values.size - 1]
    return values[ends] - values[starts]


def dense_dormant_matrix(config: SparseSgdConfig) -> np.ndarray:
    """The 2x2 matrix ``M`` with ``(p, buf)_{next} = M @ (p, buf)`` for a zero-gradient dense step.

    With momentum: ``buf' = momentum * buf + wd * p`` and ``p' = p - lr * buf'``, so
    ``M = [[1 - lr * wd, -lr * momentum], [wd, momentum]]``. Without momentum the
    buffer is unused (``M = [[1 - lr * wd, 0], [0, 0]]``).
    """
    lr, wd, mom = config.lr, config.weight_decay, config.momentum
    if mom == 0.0:
        return np.array([[1.0 - lr * wd, 0.0], [0.0, 0.0]])
    return np.array([[1.0 - lr * wd, -lr * mom], [wd, mom]])


def dense_dormant_state(p: float, buf: float, config: SparseSgdConfig, k: int) -> tuple[float, float]:
    """Where dense SGD takes a coordinate ``(p, buf)`` after ``k`` zero-gradient steps.

    Closed form ``M**k @ (p, buf)`` with ``M`` from :func:`dense_dormant_matrix`.
    Lazy SGD, which sees no entry, leaves ``(p, buf)`` unchanged instead.
    """
    k = as_size("k", k)
    p_k, buf_k = np.linalg.matrix_power(dense_dormant_matrix(config), k) @ np.array([p, buf], dtype=np.float64)
    return float(p_k), float(buf_k)


@dataclass(frozen=True)
class Power:
    """``M**k`` by binary powering, with its operation counts.

    Attributes
    ----------
    matrix : ndarray, shape (2, 2)
    squarings : int
        Matrix squarings performed: ``k.bit_length() - 1`` (0 for ``k <= 1``).
    products : int
        Further matrix products, one per set bit of ``k`` after the first.
    """

    matrix: np.ndarray
    squarings: int
    products: int


def power_by_squaring(matrix: np.ndarray, k: int) -> Power:
    """``matrix**k`` for a square matrix and an int ``k >= 0`` by repeated squaring.

    Writes ``k`` in binary, ``k = sum_j bit_j 2**j``: squaring gives ``M**(2**j)``
    and the result multiplies the powers whose bit is set. The work is bounded by
    the number of bits of ``k`` (63 for an int64 gap), never by ``k`` itself.
    """
    k = as_size("k", k)
    base = np.array(matrix, dtype=np.float64)
    result: np.ndarray | None = None
    squarings = products = 0
    while True:
        if k & 1:
            if result is None:
                result = base.copy()
            else:
                result = result @ base
                products += 1
        k >>= 1
        if not k:
            break
        base = base @ base
        squarings += 1
    if result is None:
        result = np.eye(base.shape[0])
    return Power(result, squarings, products)


def sgd_state_after_gap(p: float, buf: float, config: SparseSgdConfig, gap: int) -> tuple[float, float]:
    """``(p, buf)`` of one coordinate caught up over ``gap`` dormant steps by ``SparseSgd(mode="dense_equivalent")``.

    The optimizer is loaded (through ``load_state_dict``) with the coordinate
    current at step 1 and the global step at ``1 + gap``, then ``catch_up`` runs:
    a gap of a billion steps costs what a gap of ten does.
    """
    gap = as_size("gap", gap)
    cfg = SparseSgdConfig(lr=config.lr, weight_decay=config.weight_decay, momentum=config.momentum, mode="dense_equivalent")
    params = np.array([p], dtype=np.float64)
    opt = SparseSgd(params, cfg)
    state = opt.state_dict()
    state["step_count"] = np.int64(1 + gap)
    state["last_step"] = np.array([1], dtype=np.int64)
    if "momentum_buffer" in state:
        state["momentum_buffer"] = np.array([buf], dtype=np.float64)
    opt.load_state_dict(state)
    opt.catch_up()
    return float(params[0]), float(opt.momentum_buffer[0]) if opt.momentum_buffer is not None else 0.0


# -- the principle: lazy == dense exactly when a zero-gradient step is a no-op ------------------


def dense_adagrad_step(params: np.ndarray, state_sum: np.ndarray, grad: np.ndarray, step: int, config: SparseAdagradConfig) -> None:
    """One dense element-wise Adagrad step (``torch.optim.Adagrad``) on every coordinate, in place, in plain numpy.

    ``clr = lr / (1 + (step - 1) * lr_decay)``, ``sum += g**2``,
    ``p -= clr * g / (sqrt(sum) + eps)``: the lazy kernel's equations in its order.
    """
    g = -grad if config.maximize else grad
    clr = config.lr / (1.0 + (step - 1) * config.lr_decay)
    state_sum[...] = state_sum + g * g
    params[...] = params - clr * (g / (np.sqrt(state_sum) + config.eps))


@dataclass(frozen=True)
class PrincipleCase:
    """One optimizer in :func:`zero_gradient_principle`.

    Attributes
    ----------
    name : str
    zero_step_change : float
        Largest change, over parameters and state, that one dense step with an
        all-zero gradient makes to a trained state.
    lazy_dense_difference : float
        Largest ``|lazy - dense|`` of the parameters after the sparse schedule.
    bit_identical : bool
        Whether the lazy and dense parameters are equal bit for bit.
    """

    name: str
    zero_step_change: float
    lazy_dense_difference: float
    bit_identical: bool


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)))


def zero_gradient_principle(num_steps: int = 200, n: int = 6, density: float = 0.2, seed: int = 0) -> list[PrincipleCase]:
    """Lazy vs dense for SGD (plain, momentum, weight decay) and Adagrad on a seeded sparse schedule.

    Each step gives each of ``n`` coordinates a standard-normal gradient with
    probability ``density``; the lazy optimizer gets exactly those entries, the
    dense one zeros elsewhere. ``zero_step_change`` is measured on the dense
    state reached at the end: one more step with an all-zero gradient.
    """
    rng = np.random.default_rng(seed)
    touched = rng.random((num_steps, n)) < density
    grads = np.where(touched, rng.standard_normal((num_steps, n)), 0.0)
    p0 = rng.standard_normal(n)
    cases: list[PrincipleCase] = []
    sgd_cases = [
        ("plain SGD", SparseSgdConfig(lr=0.1)),
        ("SGD with momentum 0.9", SparseSgdConfig(lr=0.1, momentum=0.9)),
        ("SGD with weight decay 0.05", SparseSgdConfig(lr=0.1, weight_decay=0.05)),
    ]
    for name, cfg in sgd_cases:
        lazy = lazy_sgd_trajectory(p0, grads, touched, cfg)[-1]
        params, buf = p0.copy(), np.zeros(n)
        for t in range(num_steps):
            dense_sgd_step(params, buf, grads[t], cfg)
        before = np.r_[params, buf]
        dense_sgd_step(params, buf, np.zeros(n), cfg)
        change = float(np.abs(np.r_[params, buf] - before).max())
        dense = before[:n]
        cases.append(PrincipleCase(name, change, float(np.abs(lazy - dense).max()), _bits_equal(lazy, dense)))
    cfg = SparseAdagradConfig(lr=0.1)
    lazy_p = p0.copy()
    opt = SparseAdagrad(lazy_p, cfg)
    params, acc = p0.copy(), np.zeros(n)
    for t in range(num_steps):
        index = np.flatnonzero(touched[t])
        opt.step(CooGradient(index, grads[t, index], n))
        dense_adagrad_step(params, acc, grads[t], t + 1, cfg)
    before = np.r_[params, acc]
    dense_adagrad_step(params, acc, np.zeros(n), num_steps + 1, cfg)
    change = float(np.abs(np.r_[params, acc] - before).max())
    dense = before[:n]
    cases.append(PrincipleCase("Adagrad", change, float(np.abs(lazy_p - dense).max()), _bits_equal(lazy_p, dense)))
    return cases


# -- an embedding training loop ----------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingRun:
    """Final tables of an embedding regression trained lazily and densely on the same batches.

    Attributes
    ----------
    sparse : ndarray, shape (rows, cols)
        The sparse optimizer's table, caught up at the end in DENSE_EQUIVALENT mode.
    dense : ndarray, shape (rows, cols)
        Dense SGD's table.
    touched_rows : ndarray of int64
        Rows looked up at least once.
    """

    sparse: np.ndarray
    dense: np.ndarray
    touched_rows: np.ndarray

    @property
    def max_relative_difference(self) -> float:
        """``max |sparse - dense| / max |dense|`` over the table."""
        return float(np.abs(self.sparse - self.dense).max() / np.abs(self.dense).max())


def train_embedding_sgd(
    config: SparseSgdConfig,
    *,
    num_rows: int = 500,
    cols: int = 8,
    num_steps: int = 300,
    batch_size: int = 32,
    skew: float = 1.1,
    seed: int = 0,
    catch_up_before_lookup: bool = True,
) -> EmbeddingRun:
    """Fit a table to a random target by SGD on Zipf lookups, sparse (``config``) and dense, side by side.

    Each step draws ``batch_size`` ids, looks up ``table[ids]``, and takes the
    loss ``0.5 * sum((table[ids] - target[ids])**2) / batch_size``, whose row
    gradients ``(table[ids] - target[ids]) / batch_size`` depend on the rows
    read. The sparse loop is SPEC's: in DENSE_EQUIVALENT mode
    ``opt.catch_up(ids)`` first (unless ``catch_up_before_lookup`` is False,
    to show what stale reads do), then the lookup, then
    ``opt.step(CsrGradient.from_rows(ids, grads, rows))``. Dense SGD gets the
    scatter-added dense gradient of the same loss on its own table.
    """
    rng = np.random.default_rng(seed)
    target = rng.standard_normal((num_rows, cols))
    init = 0.1 * rng.standard_normal((num_rows, cols))
    sparse, dense = init.copy(), init.copy()
    opt = SparseSgdTable(sparse, config)
    dense_buf = np.zeros_like(dense)
    exact = config.mode is LazyMode.DENSE_EQUIVALENT
    seen = np.zeros(num_rows, dtype=bool)
    for _ in range(num_steps):
        ids = zipf_ids(num_rows, batch_size, skew, rng)
        seen[ids] = True
        if exact and catch_up_before_lookup:
            opt.catch_up(ids)
        row_grads = (sparse[ids] - target[ids]) / batch_size
        opt.step(CsrGradient.from_rows(ids, row_grads, num_rows))
        dense_grad = dense_lookup_gradient(ids, (dense[ids] - target[ids]) / batch_size, num_rows)
        dense_sgd_step(dense, dense_buf, dense_grad, config)
    if exact:
        opt.catch_up()
    return EmbeddingRun(sparse, dense, np.flatnonzero(seen))


# -- which rows moved ----------------------------------------------------------------------------


def moved_rows(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Ids of the rows of a 2-D table whose value changed in any bit (int64, ascending)."""
    before, after = np.asarray(before), np.asarray(after)
    if before.shape != after.shape or before.ndim != 2:
        raise ValueError(f"before {before.shape} and after {after.shape} must be 2-D tables of the same shape")
    before_bits = np.ascontiguousarray(before).view(np.uint8)
    after_bits = np.ascontiguousarray(after).view(np.uint8)
    return np.flatnonzero((before_bits != after_bits).any(axis=1))


# -- figures ---------------------------------------------------------------------------------------


def plot_lazy_vs_dense_sgd(comparisons: Sequence[SgdComparison], show_dense_equivalent: bool = True) -> Figure:
    """One axes per comparison: the coordinate's value under lazy, DENSE_EQUIVALENT and dense SGD.

    Each axes holds, in this order: lazy SGD (a staircase: it moves only at
    touches), dense SGD (dashed), DENSE_EQUIVALENT as read after ``catch_up``
    (dots on the dense line; left out when ``show_dense_equivalent`` is False),
    and a rug of ticks along the bottom at the touched steps.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(comparisons) == 0:
        raise ValueError("comparisons is empty")
    fig = new_figure(max(5.4 * len(comparisons), 9.0), 4.6)
    axes = fig.subplots(1, len(comparisons), squeeze=False)[0]
    for ax, c in zip(axes, comparisons):
        steps = c.steps
        ax.plot(steps, c.lazy, drawstyle="steps-post", color="tab:blue", lw=2.5, label="LAZY SparseSgd")
        ax.plot(steps, c.dense, color="tab:orange", lw=1.8, ls="--", label="dense SGD (zero gradient when dormant)")
        if show_dense_equivalent:
            every = max(1, steps.size // 40)
            ax.plot(
                steps[::every],
                c.dense_equivalent[::every],
                ls="none",
                marker="o",
                ms=3.5,
                color="tab:green",
                label="DENSE_EQUIVALENT, read after catch_up",
            )
        # A rug of ticks along the bottom edge (x in data, y in axes coordinates).
        ax.plot(
            c.touch_steps,
            np.full(c.touch_steps.size, 0.03),
            ls="none",
            marker="|",
            ms=10,
            color="black",
            transform=ax.get_xaxis_transform(),
            label="step with a gradient entry",
        )
        every_txt = "every step" if c.period == 1 else f"every {c.period} steps"
        ax.set_title(f"coordinate touched {every_txt}")
        ax.set_xlabel("step")
        ax.set_ylabel("parameter value")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=LEGEND, frameon=False)
    cfg = comparisons[0].config
    fig.suptitle(f"lr = {cfg.lr:g}, weight decay = {cfg.weight_decay:g}, momentum = {cfg.momentum:g}")
    return finish(fig)


def sgd_figure(
    lr: float = 0.1, weight_decay: float = 0.05, momentum: float = 0.9, period: int = 30, num_steps: int = 120
) -> Figure:
    """The explore widget's figure: a row touched every ``period`` steps beside one touched every step.

    :func:`lazy_vs_dense_sgd_trajectory` with ``grad = -1`` and ``p0 = 1`` for
    both rows, drawn by :func:`plot_lazy_vs_dense_sgd` with DENSE_EQUIVALENT.
    """
    cfg = SparseSgdConfig(lr=lr, weight_decay=weight_decay, momentum=momentum)
    rare = lazy_vs_dense_sgd_trajectory(cfg, num_steps=num_steps, period=period)
    hot = lazy_vs_dense_sgd_trajectory(cfg, num_steps=num_steps, period=1)
    return plot_lazy_vs_dense_sgd([rare, hot])


def plot_row_changes(panels: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> Figure:
    """Heat maps of ``after - before`` for small tables: which rows an optimizer step moved.

    Parameters
    ----------
    panels : sequence of (title, before, after)
        One panel per entry; ``before`` and ``after`` are 2-D tables of the same
        shape (meant for tables of up to a few hundred rows).

    Returns
    -------
    matplotlib.figure.Figure
        Per panel, one image axes (rows down, columns across, a diverging colour
        scale centred on 0, so untouched rows are white) and its colour bar axes.
    """
    if len(panels) == 0:
        raise ValueError("panels is empty")
    fig = new_figure(4.6 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, before, after) in zip(axes, panels):
        moved = moved_rows(before, after)
        change = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
        scale = float(np.abs(change).max(initial=0.0)) or 1.0
        image = ax.imshow(change, cmap="RdBu_r", vmin=-scale, vmax=scale, aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax, label="after - before")
        rows = change.shape[0]
        if rows <= 24:
            ax.set_yticks(np.arange(rows))
        ax.set_xlabel("column")
        ax.set_ylabel("row id")
        ax.set_title(f"{title}\n{moved.size} of {rows} rows moved")
    return finish(fig)

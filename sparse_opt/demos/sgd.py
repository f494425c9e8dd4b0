"""Lazy SGD against dense SGD on a rarely touched coordinate (notebook 02).

:class:`~sparse_opt.SparseSgd` applies coupled weight decay and momentum only on
the coordinates a gradient touches. Dense SGD (``torch.optim.SGD`` with
``dampening=0``, ``nesterov=False``) applies them to every coordinate on every
step, so a coordinate with a *zero* gradient still moves::

    buf = momentum * buf + weight_decay * p     (the gradient is 0)
    p   = p - lr * buf

This is a linear map of ``(p, buf)``: :func:`dense_dormant_matrix` is its 2x2
matrix and :func:`dense_dormant_state` applies it ``k`` times. Without momentum
the parameter shrinks by ``(1 - lr * weight_decay)`` per dormant step; with
momentum alone, one touch leaving ``buf = b`` goes on to move ``p`` by
``-lr * b * momentum * (1 - momentum**k) / (1 - momentum)`` over the next ``k``
steps. The lazy optimizer freezes both during dormancy.

Computation functions return arrays; :func:`plot_lazy_vs_dense_sgd` and
:func:`plot_row_changes` take their results and return a
:class:`matplotlib.figure.Figure` (created without pyplot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from sparse_opt._arrays import as_size
from sparse_opt.coo import CooGradient
from sparse_opt.sparse_sgd import SparseSgd, SparseSgdConfig


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
    out = np.empty((grads.shape[0] + 1, params.size), dtype=params.dtype)
    out[0] = params
    for t in range(grads.shape[0]):
        index = np.flatnonzero(touched[t])
        opt.step(CooGradient(index, grads[t, index], params.size))
        out[t + 1] = params
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
    """One coordinate under lazy and dense SGD.

    Attributes
    ----------
    touched : ndarray of bool, shape (steps,)
        Entry ``t - 1``: whether step ``t`` has a gradient entry for the coordinate.
    lazy, dense : ndarray of float64, shape (steps + 1,)
        The coordinate's value before the first step (index 0) and after each step.
    period : int
        Steps between touches.
    config : SparseSgdConfig
    """

    touched: np.ndarray
    lazy: np.ndarray
    dense: np.ndarray
    period: int
    config: SparseSgdConfig

    @property
    def steps(self) -> np.ndarray:
        """``0 .. num_steps``: the step after which each value is taken."""
        return np.arange(self.lazy.size)


def lazy_vs_dense_sgd_trajectory(
    config: SparseSgdConfig, num_steps: int, period: int, grad: float = -1.0, p0: float = 1.0
) -> SgdComparison:
    """Follow a coordinate touched every ``period`` steps under lazy and dense SGD.

    Each touch brings the same gradient ``grad`` (the default -1 pushes the value
    up); between touches the lazy optimizer sees no entry and the dense one a
    gradient of 0. Both start at ``p0`` with a zero momentum buffer, in float64.

    Returns
    -------
    SgdComparison
    """
    touched = touch_schedule(num_steps, period)
    grads = np.where(touched, grad, 0.0)[:, None]
    p_init = np.array([p0], dtype=np.float64)
    lazy = lazy_sgd_trajectory(p_init, grads, touched[:, None], config)[:, 0]
    dense = dense_sgd_trajectory(p_init, grads, config)[:, 0]
    return SgdComparison(touched, lazy, dense, period, config)


def dense_dormant_matrix(config: SparseSgdConfig) -> np.ndarray:
    """The 2x2 matrix ``A`` with ``(p, buf)_{next} = A @ (p, buf)`` for a zero-gradient dense step.

    With momentum: ``buf' = momentum * buf + wd * p`` and ``p' = p - lr * buf'``, so
    ``A = [[1 - lr * wd, -lr * momentum], [wd, momentum]]``. Without momentum the
    buffer is unused (``A = [[1 - lr * wd, 0], [0, 0]]``).
    """
    lr, wd, mom = config.lr, config.weight_decay, config.momentum
    if mom == 0.0:
        return np.array([[1.0 - lr * wd, 0.0], [0.0, 0.0]])
    return np.array([[1.0 - lr * wd, -lr * mom], [wd, mom]])


def dense_dormant_state(p: float, buf: float, config: SparseSgdConfig, k: int) -> tuple[float, float]:
    """Where dense SGD takes a coordinate ``(p, buf)`` after ``k`` zero-gradient steps.

    Closed form ``A**k @ (p, buf)`` with ``A`` from :func:`dense_dormant_matrix`.
    Lazy SGD, which sees no entry, leaves ``(p, buf)`` unchanged instead.
    """
    k = as_size("k", k)
    p_k, buf_k = np.linalg.matrix_power(dense_dormant_matrix(config), k) @ np.array([p, buf], dtype=np.float64)
    return float(p_k), float(buf_k)


def moved_rows(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Ids of the rows of a 2-D table whose value changed in any bit (int64, ascending)."""
    before, after = np.asarray(before), np.asarray(after)
    if before.shape != after.shape or before.ndim != 2:
        raise ValueError(f"before {before.shape} and after {after.shape} must be 2-D tables of the same shape")
    before_bits = np.ascontiguousarray(before).view(np.uint8)
    after_bits = np.ascontiguousarray(after).view(np.uint8)
    return np.flatnonzero((before_bits != after_bits).any(axis=1))


def plot_lazy_vs_dense_sgd(comparisons: Sequence[SgdComparison]) -> Figure:
    """One axes per comparison: the coordinate's value under lazy and dense SGD.

    Each axes holds three lines: lazy SGD (a staircase: it moves only at touches),
    dense SGD (dashed), and a rug of ticks along the bottom at the touched steps.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(comparisons) == 0:
        raise ValueError("comparisons is empty")
    fig = Figure(figsize=(5.0 * len(comparisons), 3.8), dpi=80, layout="constrained")
    axes = fig.subplots(1, len(comparisons), squeeze=False)[0]
    for ax, c in zip(axes, comparisons):
        steps = c.steps
        touch_steps = steps[1:][c.touched]
        ax.plot(steps, c.lazy, drawstyle="steps-post", color="tab:blue", lw=2.5, label="lazy SGD (sparse_opt)")
        ax.plot(
            steps,
            c.dense,
            drawstyle="steps-post",
            color="tab:orange",
            lw=1.5,
            ls="--",
            label="dense SGD (zero gradient when dormant)",
        )
        # A rug of ticks along the bottom edge (x in data, y in axes coordinates).
        ax.plot(
            touch_steps,
            np.full(touch_steps.size, 0.03),
            ls="none",
            marker="|",
            ms=10,
            color="black",
            transform=ax.get_xaxis_transform(),
            label="step with a gradient entry",
        )
        every = "every step" if c.period == 1 else f"every {c.period} steps"
        ax.set_title(f"coordinate touched {every}")
        ax.set_xlabel("step")
        ax.set_ylabel("parameter value")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    cfg = comparisons[0].config
    fig.suptitle(f"lazy vs dense SGD: lr={cfg.lr:g}, weight_decay={cfg.weight_decay:g}, momentum={cfg.momentum:g}")
    return fig


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
    fig = Figure(figsize=(4.2 * len(panels), 3.6), dpi=80, layout="constrained")
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
    return fig

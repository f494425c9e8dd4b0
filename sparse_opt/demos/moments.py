"""Moments of one intermittently touched coordinate: LAZY, DORMANCY_DECAY and dense Adam.

Behind ``notebooks/03_lazy_vs_dormancy.ipynb``. A single coordinate receives a
gradient on its *touch* steps and nothing in between. The two lazy modes of
:class:`~sparse_opt.SparseAdam` see an empty gradient on the dormant steps (their
state is not touched); :class:`~sparse_opt.DenseAdam` is fed an explicit zero
gradient there. :func:`moment_traces` records ``m``, ``v`` and the parameter of
all three after every step, so the notebook can show that DORMANCY_DECAY's
moments equal dense Adam's at every touch while LAZY's over-remember, and
:func:`first_update` / :func:`first_update_ratio` quantify the global-step bias
correction at a coordinate's first touch.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from sparse_opt import CooGradient, DenseAdam, LazyAdamMode, SparseAdam, SparseAdamConfig

#: The three optimizers compared, in plotting order.
OPTIMIZERS: tuple[str, ...] = ("lazy", "dormancy_decay", "dense")

#: Human-readable name of each optimizer.
LABELS: dict[str, str] = {
    "lazy": "LAZY",
    "dormancy_decay": "DORMANCY_DECAY",
    "dense": "dense Adam (zeros when dormant)",
}

#: Touch patterns understood by :func:`touch_steps`.
PATTERNS: tuple[str, ...] = ("periodic", "random", "bursts")

#: Length of one burst in the ``"bursts"`` pattern.
BURST_LENGTH = 5

_STYLE: dict[str, dict[str, object]] = {
    "lazy": {"color": "tab:red", "marker": "o", "markerfacecolor": "none", "markersize": 6},
    "dormancy_decay": {"color": "tab:blue", "marker": "x", "markersize": 6},
    "dense": {"color": "0.35", "linestyle": "--", "linewidth": 1.2},
}


def touch_steps(pattern: str, num_steps: int, period: int, seed: int = 0) -> np.ndarray:
    """The 1-based global steps at which a coordinate is touched.

    Every pattern touches the coordinate on average once every ``period`` steps.

    Parameters
    ----------
    pattern : {"periodic", "random", "bursts"}
        ``"periodic"``: steps 1, 1 + period, 1 + 2 * period, ...
        ``"random"``: each step independently with probability ``1 / period``
        (seeded by ``seed``). ``"bursts"``: :data:`BURST_LENGTH` consecutive
        steps, a burst starting every ``BURST_LENGTH * period`` steps from step 1.
    num_steps : int
        Number of global steps (``>= 1``).
    period : int
        Mean number of steps between touches (``>= 1``; 1 means every step).
    seed : int
        Seed of the ``"random"`` pattern.

    Returns
    -------
    ndarray of int64
        Strictly ascending steps in ``[1, num_steps]``.
    """
    if num_steps < 1 or period < 1:
        raise ValueError(f"num_steps and period must be >= 1, got {num_steps} and {period}")
    if pattern == "periodic":
        return np.arange(1, num_steps + 1, period, dtype=np.int64)
    if pattern == "random":
        hit = np.random.default_rng(seed).random(num_steps) < 1.0 / period
        return np.flatnonzero(hit).astype(np.int64) + 1
    if pattern == "bursts":
        starts = np.arange(1, num_steps + 1, BURST_LENGTH * period, dtype=np.int64)
        steps = (starts[:, None] + np.arange(BURST_LENGTH, dtype=np.int64)).reshape(-1)
        return steps[steps <= num_steps]
    raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")


@dataclass(frozen=True)
class MomentTraces:
    """State of one coordinate after every step, under the three optimizers.

    Attributes
    ----------
    steps : ndarray of int64, shape (T,)
        Global steps 1..T.
    touched : ndarray of bool, shape (T,)
        Whether the coordinate received a gradient at each step.
    grad : ndarray of float64, shape (T,)
        The gradient at each step (0 on dormant steps).
    m, v, param : dict of str to ndarray, shape (T,)
        First moment, second moment and parameter after each step, keyed by
        ``"lazy"``, ``"dormancy_decay"`` and ``"dense"``. The lazy modes store
        their moments only at touches, so between touches their arrays hold the
        value of the last touch.
    beta1, beta2 : float
    """

    steps: np.ndarray
    touched: np.ndarray
    grad: np.ndarray
    m: dict[str, np.ndarray]
    v: dict[str, np.ndarray]
    param: dict[str, np.ndarray]
    beta1: float
    beta2: float

    def at_touches(self, field: str) -> dict[str, np.ndarray]:
        """``m``, ``v`` or ``param`` (``field``) at the touch steps only, per optimizer."""
        values: dict[str, np.ndarray] = getattr(self, field)
        return {name: trace[self.touched] for name, trace in values.items()}


def moment_traces(
    touch_steps: np.ndarray,
    num_steps: int,
    grads: float | np.ndarray,
    beta1: float = 0.9,
    beta2: float = 0.999,
    lr: float = 1e-3,
    eps: float = 1e-8,
) -> MomentTraces:
    """Run LAZY, DORMANCY_DECAY and dense Adam on one float64 coordinate.

    Parameters
    ----------
    touch_steps : array_like of int
        Strictly ascending 1-based steps in ``[1, num_steps]`` at which the
        coordinate receives a gradient.
    num_steps : int
        Number of global steps to run.
    grads : float or array_like of float
        Gradient at each touch (one value, or one per touch step).
    beta1, beta2, lr, eps : float
        Adam hyper-parameters, shared by the three optimizers.

    Returns
    -------
    MomentTraces
        The sparse optimizers get an empty :class:`~sparse_opt.CooGradient` on
        dormant steps (their step count still advances); dense Adam gets 0.0.
        All start from parameter 0.
    """
    touches = np.asarray(touch_steps, dtype=np.int64)
    if touches.ndim != 1 or (touches.size and (touches[0] < 1 or touches[-1] > num_steps)):
        raise ValueError(f"touch_steps must be 1-D and inside [1, num_steps = {num_steps}]")
    if (np.diff(touches) <= 0).any():
        raise ValueError("touch_steps must be strictly ascending")
    grad = np.zeros(num_steps, dtype=np.float64)
    grad[touches - 1] = np.broadcast_to(np.asarray(grads, dtype=np.float64), touches.shape)
    touched = np.zeros(num_steps, dtype=bool)
    touched[touches - 1] = True

    params = {name: np.zeros(1, dtype=np.float64) for name in OPTIMIZERS}
    config = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps}
    optimizers = {
        "lazy": SparseAdam(params["lazy"], SparseAdamConfig(**config, mode=LazyAdamMode.LAZY)),
        "dormancy_decay": SparseAdam(
            params["dormancy_decay"], SparseAdamConfig(**config, mode=LazyAdamMode.DORMANCY_DECAY)
        ),
        "dense": DenseAdam(params["dense"], **config),
    }
    m = {name: np.empty(num_steps) for name in OPTIMIZERS}
    v = {name: np.empty(num_steps) for name in OPTIMIZERS}
    param = {name: np.empty(num_steps) for name in OPTIMIZERS}
    no_index = np.zeros(0, dtype=np.int64)
    one_index = np.zeros(1, dtype=np.int64)
    for k in range(num_steps):
        if touched[k]:
            sparse = CooGradient(one_index, grad[k : k + 1], 1)
        else:
            sparse = CooGradient(no_index, np.zeros(0), 1)
        optimizers["lazy"].step(sparse)
        optimizers["dormancy_decay"].step(sparse)
        optimizers["dense"].step(grad[k : k + 1])
        for name, opt in optimizers.items():
            m[name][k] = opt.m[0]
            v[name][k] = opt.v[0]
            param[name][k] = params[name][0]
    return MomentTraces(
        steps=np.arange(1, num_steps + 1, dtype=np.int64),
        touched=touched,
        grad=grad,
        m=m,
        v=v,
        param=param,
        beta1=float(beta1),
        beta2=float(beta2),
    )


def max_relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max |a - b| / |b|`` over all entries (``b`` must have no zero)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if (b == 0).any():
        raise ValueError("b has a zero entry; the relative difference is undefined there")
    return float(np.max(np.abs(a - b) / np.abs(b)))


def first_update_ratio(first_touch: int | np.ndarray, beta1: float, beta2: float) -> np.ndarray:
    """Size of Adam's first update at global step ``t`` over its size at a per-coordinate count of 1.

    With ``m = (1 - beta1) g`` and ``v = (1 - beta2) g**2`` after the first
    touch, bias correction with the global step ``t`` gives (for ``eps`` much
    smaller than ``|g|``)::

        |update| = lr * (1 - beta1) / (1 - beta1**t) * sqrt((1 - beta2**t) / (1 - beta2))

    while a per-coordinate count (``t = 1`` for the first touch) gives ``lr``.
    The ratio is 1 at ``t = 1`` and tends to ``(1 - beta1) / sqrt(1 - beta2)``.

    Parameters
    ----------
    first_touch : int or ndarray of int
        Global step(s) of the first touch, ``>= 1``.
    beta1, beta2 : float

    Returns
    -------
    ndarray of float64
        The ratio for each ``first_touch`` (0-d for a scalar).
    """
    t = np.asarray(first_touch, dtype=np.float64)
    if (t < 1).any():
        raise ValueError("first_touch must be >= 1")
    return (1.0 - beta1) / (1.0 - beta1**t) * np.sqrt((1.0 - beta2**t) / (1.0 - beta2))


def first_update(
    first_touch: int, grad: float, beta1: float = 0.9, beta2: float = 0.999, lr: float = 1e-3, eps: float = 1e-8
) -> dict[str, float]:
    """Measure the first update of a coordinate first touched at global step ``first_touch``.

    Parameters
    ----------
    first_touch : int
        Global step of the first touch (``>= 1``); earlier steps are empty.
    grad : float
        The gradient at that touch.
    beta1, beta2, lr, eps : float

    Returns
    -------
    dict
        Parameter change (``new - old``) under ``"global_step"`` (SparseAdam, as
        implemented: bias correction with the global step; LAZY and
        DORMANCY_DECAY agree on a first touch), ``"dense"`` (DenseAdam fed zeros
        before the touch) and ``"per_coordinate"`` (what a per-coordinate visit
        count would give: a fresh optimizer's first step, ``t = 1``).
    """
    traces = moment_traces([first_touch], first_touch, grad, beta1, beta2, lr, eps)
    fresh = moment_traces([1], 1, grad, beta1, beta2, lr, eps)
    return {
        "global_step": float(traces.param["lazy"][-1]),
        "dense": float(traces.param["dense"][-1]),
        "per_coordinate": float(fresh.param["lazy"][-1]),
    }


def _mark_touches(ax: plt.Axes, steps: np.ndarray) -> None:
    ax.vlines(
        steps, 0.0, 1.0, transform=ax.get_xaxis_transform(), color="tab:green", alpha=0.35, linewidth=1.0, zorder=0
    )


def plot_moment_traces(traces: MomentTraces, title: str | None = None) -> Figure:
    """Three stacked panels over the global step: ``m``, ``v`` and the parameter.

    Dense Adam is a dashed line (it decays its moments and moves its parameter on
    every step); the lazy modes are step lines (their state changes only at a
    touch) with a marker at each touch. Faint green vertical lines mark the touches.

    Parameters
    ----------
    traces : MomentTraces
        From :func:`moment_traces`.
    title : str, optional
        Figure title; by default it names beta1, beta2 and the number of touches.

    Returns
    -------
    matplotlib.figure.Figure
        Axes ``m``, ``v`` and ``parameter``, sharing the x axis.
    """
    fig, axes = plt.subplots(3, 1, figsize=(8.5, 7.0), sharex=True, layout="constrained")
    touch_at = traces.steps[traces.touched]
    for ax, field, ylabel in zip(axes, ("m", "v", "param"), ("m (first moment)", "v (second moment)", "parameter")):
        values: dict[str, np.ndarray] = getattr(traces, field)
        for name in OPTIMIZERS:
            style = dict(_STYLE[name])
            if name == "dense":
                ax.plot(traces.steps, values[name], label=LABELS[name], **style)
                continue
            marker = {key: style.pop(key) for key in ("marker", "markerfacecolor", "markersize") if key in style}
            ax.plot(traces.steps, values[name], drawstyle="steps-post", linewidth=1.4, alpha=0.85, **style)
            ax.plot(touch_at, values[name][traces.touched], linestyle="none", label=LABELS[name], **style, **marker)
        _mark_touches(ax, touch_at)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=9)
    axes[-1].set_xlabel("global step t (green lines: touches)")
    if title is None:
        title = f"one coordinate, {touch_at.size} touches, beta1 = {traces.beta1:g}, beta2 = {traces.beta2:g}"
    fig.suptitle(title)
    return fig


def plot_first_update_ratio(
    max_step: int, beta1: float, beta2: float, highlight: int | None = None
) -> Figure:
    """The first-update ratio of :func:`first_update_ratio` against the first-touch step.

    Parameters
    ----------
    max_step : int
        Last first-touch step shown (log-scaled x axis from 1).
    beta1, beta2 : float
    highlight : int, optional
        A first-touch step to mark and annotate.

    Returns
    -------
    matplotlib.figure.Figure
        One axis.
    """
    t = np.unique(np.geomspace(1, max_step, 400).round().astype(np.int64))
    ratio = first_update_ratio(t, beta1, beta2)
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    ax.plot(t, ratio, color="tab:purple")
    ax.axhline(1.0, color="0.4", linestyle=":", label="per-coordinate count (= 1)")
    limit = (1.0 - beta1) / np.sqrt(1.0 - beta2)
    ax.axhline(limit, color="tab:purple", linestyle="--", alpha=0.5, label=f"limit (1-b1)/sqrt(1-b2) = {limit:.2f}")
    if highlight is not None:
        r = float(first_update_ratio(highlight, beta1, beta2))
        ax.plot([highlight], [r], "o", color="tab:purple")
        ax.annotate(f"t = {highlight}: {r:.3f}", (highlight, r), textcoords="offset points", xytext=(8, -14))
    ax.set_xscale("log")
    ax.set_xlabel("global step of the first touch")
    ax.set_ylabel("|first update| / lr")
    ax.set_title(f"first update under global-step bias correction (beta1 = {beta1:g}, beta2 = {beta2:g})")
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3, which="both")
    return fig

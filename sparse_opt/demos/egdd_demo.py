"""Experiments and plots behind ``notebooks/06_egdd.ipynb``.

The test problem is a quadratic ``f(x) = 0.5 * x @ H @ x`` whose curvatures differ
by orders of magnitude. :func:`run_egdd` drives the real
:class:`sparse_opt.egdd.EGDD`; :func:`momentum_sgd` is plain heavy-ball momentum
in numpy, written in lingvo's (TensorFlow's) form ``m = momentum * m + lr * g``,
``x -= m``, which is what EGDD reduces to when its gains and scale are frozen.
Computation functions return dicts of arrays; plotting functions return a
:class:`matplotlib.figure.Figure` and never call ``show``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from sparse_opt.egdd import EGDD


def quadratic_hessian(curvatures: Sequence[float], rotation_seed: int | None = None) -> np.ndarray:
    """Hessian ``H`` with eigenvalues ``curvatures``: diagonal, or rotated by a random orthogonal matrix.

    Parameters
    ----------
    curvatures : sequence of float
        The eigenvalues (positive for a convex problem).
    rotation_seed : int or None
        None: ``H = diag(curvatures)``, so every coordinate has its own curvature
        (the case per-coordinate gains are made for). An int: ``H = Q diag Q.T``
        with ``Q`` the orthogonal factor of a seeded Gaussian matrix, so the
        curvature directions mix all coordinates.

    Returns
    -------
    ndarray, shape (n, n)
        Symmetric, float64.
    """
    h = np.asarray(curvatures, dtype=np.float64)
    if rotation_seed is None:
        return np.diag(h)
    q, _ = np.linalg.qr(np.random.default_rng(rotation_seed).normal(size=(h.size, h.size)))
    return (q * h) @ q.T


def quadratic_loss(hessian: np.ndarray, x: np.ndarray) -> float:
    """``0.5 * x @ H @ x`` (``inf`` once ``x`` has overflowed)."""
    with np.errstate(over="ignore", invalid="ignore"):
        value = 0.5 * float(x @ hessian @ x)
    return value if np.isfinite(value) else np.inf


def momentum_sgd(
    hessian: np.ndarray, x0: np.ndarray, num_steps: int, learning_rate: float, momentum: float
) -> dict[str, np.ndarray]:
    """Heavy-ball momentum SGD on the quadratic, in numpy: ``m = momentum * m + lr * g``, ``x -= m``.

    This is TensorFlow's ``MomentumOptimizer`` form; with a constant learning rate
    it is the same trajectory as ``torch.optim.SGD``'s ``buf = momentum * buf + g``,
    ``x -= lr * buf`` up to rounding. A diverging run is carried on (entries may
    overflow to ``inf``); its loss is reported as ``inf``.

    Parameters
    ----------
    hessian : ndarray, shape (n, n)
        ``H`` of the loss ``0.5 * x @ H @ x`` (gradient ``H @ x``).
    x0 : ndarray, shape (n,)
        Start point (not modified).
    num_steps : int
        Number of steps.
    learning_rate, momentum : float
        As in the update above.

    Returns
    -------
    dict
        ``"x"``: iterates, shape ``(num_steps + 1, n)`` (row 0 is ``x0``);
        ``"loss"``: loss at every iterate, shape ``(num_steps + 1,)``.
    """
    x = np.array(x0, dtype=np.float64)
    m = np.zeros_like(x)
    xs = np.empty((num_steps + 1, x.size))
    xs[0] = x
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(num_steps):
            m = momentum * m + learning_rate * (hessian @ x)
            x = x - m
            xs[t + 1] = x
    return {"x": xs, "loss": np.array([quadratic_loss(hessian, xi) for xi in xs])}


def run_egdd(
    hessian: np.ndarray,
    x0: np.ndarray,
    num_steps: int,
    learning_rate: float,
    momentum: float,
    **options: Any,
) -> dict[str, np.ndarray]:
    """Run :class:`~sparse_opt.egdd.EGDD` on the quadratic and record its state after every step.

    Parameters
    ----------
    hessian : ndarray, shape (n, n)
        ``H`` of the loss ``0.5 * x @ H @ x``.
    x0 : ndarray, shape (n,)
        Start point (copied; the copy is the optimizer's float64 parameter).
    num_steps : int
        Number of steps.
    learning_rate, momentum : float
        EGDD's ``learning_rate`` and ``momentum``.
    **options
        Any other :class:`~sparse_opt.egdd.EGDD` keyword (``gain_learning_rate``,
        ``scale_learning_rate``, ``use_signs``, ...).

    Returns
    -------
    dict
        ``"x"`` ``(num_steps + 1, n)``, ``"loss"`` ``(num_steps + 1,)``,
        ``"gain"`` ``(num_steps + 1, n)`` and ``"lr_scale"`` ``(num_steps + 1,)``;
        row 0 is the state before the first step.
    """
    x = np.array(x0, dtype=np.float64)
    opt = EGDD([x], learning_rate, momentum, **options)
    state = opt.state[0]
    xs = np.empty((num_steps + 1, x.size))
    gains = np.empty((num_steps + 1, x.size))
    scales = np.empty(num_steps + 1)
    xs[0], gains[0], scales[0] = x, state["gain"], state["lr_scale"]
    for t in range(1, num_steps + 1):
        opt.step([hessian @ x])
        xs[t], gains[t], scales[t] = x, state["gain"], state["lr_scale"]
    return {
        "x": xs,
        "loss": np.array([quadratic_loss(hessian, xi) for xi in xs]),
        "gain": gains,
        "lr_scale": scales,
    }


def lr_sweep(
    hessian: np.ndarray,
    x0: np.ndarray,
    num_steps: int,
    learning_rates: Sequence[float],
    momentum: float,
    **options: Any,
) -> dict[str, np.ndarray]:
    """Final loss of momentum SGD and of EGDD for each learning rate (same ``momentum``).

    ``options`` go to :func:`run_egdd`. Returns ``"learning_rate"``,
    ``"sgd_loss"``, ``"egdd_loss"`` (``inf`` once a run has overflowed) and
    ``"egdd_lr_scale"`` (EGDD's final ``lr_scale``), each of shape
    ``(len(learning_rates),)``, and ``"initial_loss"``, the loss at ``x0`` (a float).
    """
    lrs = np.asarray(learning_rates, dtype=np.float64)
    sgd = [momentum_sgd(hessian, x0, num_steps, lr, momentum)["loss"][-1] for lr in lrs]
    egdd = [run_egdd(hessian, x0, num_steps, lr, momentum, **options) for lr in lrs]
    return {
        "learning_rate": lrs,
        "sgd_loss": np.array(sgd),
        "egdd_loss": np.array([r["loss"][-1] for r in egdd]),
        "egdd_lr_scale": np.array([r["lr_scale"][-1] for r in egdd]),
        "initial_loss": quadratic_loss(hessian, np.asarray(x0, dtype=np.float64)),
    }


def plot_egdd_run(egdd: Mapping[str, np.ndarray], sgd: Mapping[str, np.ndarray], curvatures: Sequence[float]) -> Figure:
    """Loss curves (EGDD against momentum SGD), EGDD's gains per coordinate, and its ``lr_scale``.

    Parameters
    ----------
    egdd : dict
        A :func:`run_egdd` result on a diagonal Hessian.
    sgd : dict
        A :func:`momentum_sgd` result on the same problem.
    curvatures : sequence of float
        The diagonal of the Hessian, to label each coordinate's gain.

    Returns
    -------
    Figure
        Three axes: loss (log y), gains (log y, one line per coordinate,
        coloured by curvature), ``lr_scale``.
    """
    steps = np.arange(len(egdd["loss"]))
    fig, (ax_loss, ax_gain, ax_scale) = plt.subplots(1, 3, figsize=(12, 3.4), layout="constrained")
    ax_loss.semilogy(steps, sgd["loss"], label="momentum SGD")
    ax_loss.semilogy(steps, egdd["loss"], label="EGDD")
    ax_loss.set(title="Loss 0.5 x^T H x", xlabel="step", ylabel="loss")
    ax_loss.legend()
    colors = plt.cm.viridis(np.linspace(0.0, 1.0, len(curvatures)))
    for i, (h, color) in enumerate(zip(curvatures, colors)):
        ax_gain.semilogy(steps, egdd["gain"][:, i], color=color, label=f"h = {h:.3g}")
    ax_gain.set(title="Per-coordinate gain", xlabel="step", ylabel="gain")
    ax_gain.legend(fontsize=7, ncols=2)
    ax_scale.plot(steps, egdd["lr_scale"])
    ax_scale.set(title="lr_scale (one per tensor)", xlabel="step", ylabel="lr_scale")
    return fig


def plot_lr_sweep(sweep: Mapping[str, np.ndarray]) -> Figure:
    """Final loss against the learning rate for momentum SGD and EGDD, from :func:`lr_sweep`.

    A run whose final loss is not below the initial loss has diverged; it is
    drawn as a cross at ``10 * initial_loss`` instead of at its (possibly
    infinite) value.

    Returns
    -------
    Figure
        One axes, log-log.
    """
    lrs = sweep["learning_rate"]
    top = 10 * sweep["initial_loss"]
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for key, label, marker in (("sgd_loss", "momentum SGD", "o"), ("egdd_loss", "EGDD", "s")):
        loss = sweep[key]
        ok = loss < sweep["initial_loss"]
        (line,) = ax.loglog(lrs[ok], loss[ok], marker=marker, label=label)
        if not ok.all():
            ax.loglog(lrs[~ok], np.full((~ok).sum(), top), "x", ms=10, color=line.get_color(), label=f"{label} diverged")
    ax.set(title="Final loss after the same number of steps", xlabel="learning_rate", ylabel="final loss")
    ax.legend(fontsize=8)
    return fig

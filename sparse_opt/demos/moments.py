r"""One intermittently touched coordinate under Adam's lazy modes, and the coasting sum (notebook 03).

A single coordinate receives a gradient on its *touch* steps and nothing in
between. :func:`moment_traces` runs :class:`~sparse_opt.SparseAdam` in ``LAZY``,
``DORMANCY_DECAY`` and ``DENSE_EQUIVALENT`` mode (empty gradients on dormant
steps) beside :class:`~sparse_opt.DenseAdam` fed explicit zeros, and records
``m``, ``v`` and the parameter of all four after every step;
DENSE_EQUIVALENT's are read through :func:`~sparse_opt.demos.sgd.caught_up`,
as a caller would read them after ``catch_up``.

The rest are the pieces of the lesson, each a plain function:

- the update of a touch after a gap, per mode (:func:`touch_update`), and of a
  first touch at a late global step (:func:`first_update_ratio`);
- dense Adam(W)'s zero-gradient steps, three ways: one by one
  (:func:`zero_gradient_steps`), as the coasting sum
  ``p_T = c**k p_s - lr m_s S(x)`` with ``S(x) = sum_i c**(k-i) a_i / (b_i x + eps)``
  (:func:`coasting_weights`, :func:`coasting_sum`), and as its expansion in
  ``eps / (b x)`` (:func:`coasting_expansion`), beside the optimizer's own
  catch-up (:func:`kernel_catch_up`).

Plots return a :class:`matplotlib.figure.Figure` made with
:func:`~sparse_opt.demos.figures.new_figure` (no pyplot).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sparse_opt._adam_coasting import AdamCoasting
from sparse_opt.coo import CooGradient
from sparse_opt.demos.figures import LEGEND, finish, new_figure
from sparse_opt.demos.sgd import caught_up
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adam import SparseAdam, SparseAdamConfig

#: The four optimizers compared, in plotting order.
OPTIMIZERS: tuple[str, ...] = ("lazy", "dormancy_decay", "dense_equivalent", "dense")

#: Human-readable name of each optimizer.
LABELS: dict[str, str] = {
    "lazy": "LAZY",
    "dormancy_decay": "DORMANCY_DECAY",
    "dense_equivalent": "DENSE_EQUIVALENT (read after catch_up)",
    "dense": "dense Adam (zeros when dormant)",
}

#: Touch patterns understood by :func:`touch_steps`.
PATTERNS: tuple[str, ...] = ("periodic", "random", "bursts")

#: Length of one burst in the ``"bursts"`` pattern.
BURST_LENGTH = 5

_MODES = {
    "lazy": LazyMode.LAZY,
    "dormancy_decay": LazyMode.DORMANCY_DECAY,
    "dense_equivalent": LazyMode.DENSE_EQUIVALENT,
}

_STYLE: dict[str, dict[str, object]] = {
    "lazy": {"color": "tab:red", "marker": "o", "markerfacecolor": "none", "markersize": 6},
    "dormancy_decay": {"color": "tab:blue", "marker": "x", "markersize": 6},
    "dense_equivalent": {"color": "tab:green", "marker": ".", "markersize": 5},
    "dense": {"color": "0.3", "linestyle": "--", "linewidth": 1.4},
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
    """State of one coordinate after every step, under the four optimizers.

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
        :data:`OPTIMIZERS`. LAZY and DORMANCY_DECAY store their state only at
        touches, so between touches their arrays hold the value of the last
        touch; DENSE_EQUIVALENT's are read after ``catch_up``.
    p0, beta1, beta2, lr, eps, weight_decay : float
        The starting value and the hyper-parameters, shared by the four.
    """

    steps: np.ndarray
    touched: np.ndarray
    grad: np.ndarray
    m: dict[str, np.ndarray]
    v: dict[str, np.ndarray]
    param: dict[str, np.ndarray]
    p0: float
    beta1: float
    beta2: float
    lr: float
    eps: float
    weight_decay: float

    def at_touches(self, field: str) -> dict[str, np.ndarray]:
        """``m``, ``v`` or ``param`` (``field``) at the touch steps only, per optimizer."""
        values: dict[str, np.ndarray] = getattr(self, field)
        return {name: trace[self.touched] for name, trace in values.items()}

    def before(self, step: int, field: str = "param") -> dict[str, float]:
        """``field`` just before global step ``step`` (after step ``step - 1``; ``p0`` or 0 before step 1)."""
        values: dict[str, np.ndarray] = getattr(self, field)
        if step == 1:
            start = self.p0 if field == "param" else 0.0
            return {name: start for name in values}
        return {name: float(trace[step - 2]) for name, trace in values.items()}

    def at(self, step: int, field: str = "param") -> dict[str, float]:
        """``field`` after global step ``step``, per optimizer."""
        values: dict[str, np.ndarray] = getattr(self, field)
        return {name: float(trace[step - 1]) for name, trace in values.items()}


def moment_traces(
    touch_steps: np.ndarray,
    num_steps: int,
    grads: float | np.ndarray,
    beta1: float = 0.9,
    beta2: float = 0.999,
    lr: float = 1e-3,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    p0: float = 0.0,
) -> MomentTraces:
    """Run LAZY, DORMANCY_DECAY, DENSE_EQUIVALENT and dense Adam(W) on one float64 coordinate.

    Parameters
    ----------
    touch_steps : array_like of int
        Strictly ascending 1-based steps in ``[1, num_steps]`` at which the
        coordinate receives a gradient.
    num_steps : int
        Number of global steps to run.
    grads : float or array_like of float
        Gradient at each touch (one value, or one per touch step).
    beta1, beta2, lr, eps, weight_decay : float
        Adam(W) hyper-parameters, shared by the four optimizers.
    p0 : float
        The starting value of the parameter.

    Returns
    -------
    MomentTraces
        The sparse optimizers get an empty :class:`~sparse_opt.CooGradient` on
        dormant steps (their step count still advances); dense Adam gets 0.0.
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

    params = {name: np.full(1, p0, dtype=np.float64) for name in OPTIMIZERS}
    hyper = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps, "weight_decay": weight_decay}
    sparse = {name: SparseAdam(params[name], SparseAdamConfig(**hyper, mode=mode)) for name, mode in _MODES.items()}
    dense = DenseAdam(params["dense"], **hyper)
    m = {name: np.empty(num_steps) for name in OPTIMIZERS}
    v = {name: np.empty(num_steps) for name in OPTIMIZERS}
    param = {name: np.empty(num_steps) for name in OPTIMIZERS}
    no_index = np.zeros(0, dtype=np.int64)
    one_index = np.zeros(1, dtype=np.int64)
    for k in range(num_steps):
        if touched[k]:
            g = CooGradient(one_index, grad[k : k + 1], 1)
        else:
            g = CooGradient(no_index, np.zeros(0), 1)
        for opt in sparse.values():
            opt.step(g)
        dense.step(grad[k : k + 1])
        readers = {**sparse, "dense": dense}
        readers["dense_equivalent"] = caught_up(sparse["dense_equivalent"])
        for name, opt in readers.items():
            m[name][k] = opt.m[0]
            v[name][k] = opt.v[0]
            param[name][k] = opt.params[0]
    return MomentTraces(
        steps=np.arange(1, num_steps + 1, dtype=np.int64),
        touched=touched,
        grad=grad,
        m=m,
        v=v,
        param=param,
        p0=float(p0),
        beta1=float(beta1),
        beta2=float(beta2),
        lr=float(lr),
        eps=float(eps),
        weight_decay=float(weight_decay),
    )


def max_relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max |a - b| / |b|`` over all entries; an entry where ``b == 0`` counts 0 if ``a`` is 0 too, else inf.

    Non-finite entries must match exactly (NaN with NaN, inf with inf of the
    same sign) and count 0; otherwise the result is inf.
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    if a.size == 0:
        return 0.0
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(same, 0.0, np.abs(a - b) / np.abs(b))
    rel = np.where(np.isnan(rel), np.inf, rel)
    return float(rel.max())


# -- the update at a touch ---------------------------------------------------------------------


def first_update_ratio(first_touch: int | np.ndarray, beta1: float, beta2: float) -> np.ndarray:
    """Size of Adam's first update at global step ``t``, in units of ``lr`` (``eps`` much smaller than ``|g|``).

    With ``m = (1 - beta1) g`` and ``v = (1 - beta2) g**2`` after the first
    touch, bias correction with the global step ``t`` gives::

        |update| / lr = (1 - beta1) / (1 - beta1**t) * sqrt((1 - beta2**t) / (1 - beta2))

    while a per-coordinate count (``t = 1`` for the first touch) gives 1.
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

    Returns
    -------
    dict
        Parameter change (``new - old``) under ``"global_step"`` (SparseAdam:
        bias correction with the global step; the three modes agree on a first
        touch), ``"dense"`` (DenseAdam fed zeros before the touch) and
        ``"per_coordinate"`` (what a per-coordinate visit count would give: a
        fresh optimizer's first step, ``t = 1``).
    """
    traces = moment_traces([first_touch], first_touch, grad, beta1, beta2, lr, eps)
    fresh = moment_traces([1], 1, grad, beta1, beta2, lr, eps)
    return {
        "global_step": float(traces.param["lazy"][-1]),
        "dense": float(traces.param["dense"][-1]),
        "per_coordinate": float(fresh.param["lazy"][-1]),
    }


def moments_after_touches(n: int, grad: float, beta1: float, beta2: float) -> tuple[float, float]:
    """``(m, v)`` after ``n`` consecutive touches (steps 1..n) with the same gradient, from zero moments.

    ``m = (1 - beta1**n) g`` and ``v = (1 - beta2**n) g**2`` (a geometric sum).
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return (1.0 - beta1**n) * grad, (1.0 - beta2**n) * grad * grad


def touch_update(
    m_s: float,
    v_s: float,
    grad: float,
    gap: int | np.ndarray,
    step: int | np.ndarray,
    mode: str,
    *,
    beta1: float = 0.9,
    beta2: float = 0.999,
    lr: float = 1e-3,
    eps: float = 1e-8,
) -> np.ndarray:
    """The Adam step a touch at global step ``step`` makes, ``gap`` steps after the moments were ``(m_s, v_s)``.

    ``mode`` ``"lazy"`` decays the moments once (``beta1 m_s + (1 - beta1) g``);
    ``"dormancy_decay"``, ``"dense_equivalent"`` and ``"dense"`` by ``beta**gap``
    (all three hold dense Adam's moments). Then, with the global step::

        update = -lr * (m / (1 - beta1**step)) / (sqrt(v / (1 - beta2**step)) + eps)

    This is the touch's own step: DENSE_EQUIVALENT and dense Adam have also
    coasted during the gap, and weight decay is left out.
    """
    gap = np.asarray(gap, dtype=np.float64)
    t = np.asarray(step, dtype=np.float64)
    if mode == "lazy":
        d1, d2 = beta1, beta2
    elif mode in ("dormancy_decay", "dense_equivalent", "dense"):
        d1, d2 = beta1**gap, beta2**gap
    else:
        raise ValueError(f"mode must be one of {OPTIMIZERS}, got {mode!r}")
    m = d1 * m_s + (1.0 - beta1) * grad
    v = d2 * v_s + (1.0 - beta2) * grad * grad
    return -lr * (m / (1.0 - beta1**t)) / (np.sqrt(v / (1.0 - beta2**t)) + eps)


# -- dense Adam's zero-gradient steps, three ways -----------------------------------------------


def zero_gradient_steps(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    s: int,
    k: int,
    *,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense Adam(W)'s steps ``s + 1 .. s + k`` with a zero gradient, one by one (the yardstick; new arrays)."""
    p, m, v = (np.array(a, dtype=np.float64) for a in (p, m, v))
    c = 1.0 - lr * weight_decay
    for j in range(s + 1, s + k + 1):
        m = beta1 * m
        v = beta2 * v
        p = c * p - lr * (m / (1.0 - beta1**j)) / (np.sqrt(v / (1.0 - beta2**j)) + eps)
    return p, m, v


def coasting_weights(s: int, k: int, beta1: float, beta2: float) -> tuple[np.ndarray, np.ndarray]:
    """``a_i = beta1**i / (1 - beta1**(s+i))`` and ``b_i = beta2**(i/2) / sqrt(1 - beta2**(s+i))`` for ``i = 1..k``.

    They depend only on the global steps, not on the coordinate: every entry of a
    row with the same last step ``s`` shares them.
    """
    if s < 0 or k < 0:
        raise ValueError(f"s and k must be >= 0, got {s} and {k}")
    i = np.arange(1, k + 1, dtype=np.float64)
    j = s + i
    return beta1**i / (1.0 - beta1**j), beta2 ** (i / 2) / np.sqrt(1.0 - beta2**j)


def coasting_sum(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    s: int,
    k: int,
    *,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same ``k`` zero-gradient steps in closed form: ``p_T = c**k p - lr m S(x)``, ``x = sqrt(v)``.

    ``S(x) = sum_{i=1..k} c**(k-i) a_i / (b_i x + eps)`` with the shared weights of
    :func:`coasting_weights`, summed term by term over the whole gap (O(k) per
    entry; the optimizer cuts the sum where the rest is below rounding).
    Moments: ``m beta1**k`` and ``v beta2**k``.
    """
    p, m, v = (np.asarray(a, dtype=np.float64) for a in (p, m, v))
    c = 1.0 - lr * weight_decay
    total = coasting_terms(v, s, k, beta1=beta1, beta2=beta2, eps=eps, c=c).sum(axis=-1)
    return c**k * p - lr * m * total, beta1**k * m, beta2**k * v


def coasting_terms(
    v: np.ndarray, s: int, k: int, *, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, c: float = 1.0
) -> np.ndarray:
    """The terms ``c**(k-i) a_i / (b_i x + eps)`` of ``S(x)``, ``x = sqrt(v)``, for ``i = 1..k`` (a last axis of ``k``)."""
    a, b = coasting_weights(s, k, beta1, beta2)
    i = np.arange(1, k + 1, dtype=np.float64)
    x = np.sqrt(np.asarray(v, dtype=np.float64))[..., None]
    return c ** (k - i) * a / (b * x + eps)


def coasting_rho(n: int | np.ndarray, beta1: float, beta2: float, c: float = 1.0) -> np.ndarray:
    """``rho_n = beta1 / (c beta2**((n+1)/2))``: the ratio of consecutive window terms of the ``n``-th expansion term."""
    return beta1 / (c * beta2 ** ((np.asarray(n, dtype=np.float64) + 1) / 2))


def coasting_expansion(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    s: int,
    k: int,
    *,
    terms: int | None = None,
    window: int | None = None,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p_T`` from the expansion of ``S`` in ``eps / (b x)`` over the window ``K = min(k, window)``.

    ``1 / (b x + eps) = sum_n (-eps / (b x))**n / (b x)`` turns the sum into::

        S(x) = c**k / x * sum_{n < N} P_n (-eps / x)**n,
        P_n = sum_{i=1..K} rho_n**i u_n(s + i),   u_n(j) = (1 - beta2**j)**((n+1)/2) / (1 - beta1**j)

    The ``P_n`` are a few numbers per row; per entry only ``x`` changes. ``N`` is
    ``terms``, or, when None, what each entry needs for float64 rounding
    (:func:`terms_needed` of :func:`expansion_ratio`, at most 400). Valid where
    that ratio is below 1; entries where it is not get NaN.
    """
    p, m, v = (np.asarray(a, dtype=np.float64) for a in (p, m, v))
    c = 1.0 - lr * weight_decay
    K = k if window is None else min(k, window)
    ratio = expansion_ratio(v, s, K, beta2, eps)
    per_entry = np.minimum(terms_needed(ratio), 400.0) if terms is None else np.full(ratio.shape, float(terms))
    n_max = int(np.max(np.where(np.isfinite(per_entry), per_entry, 1.0), initial=1.0))
    i = np.arange(1, K + 1, dtype=np.float64)
    j = s + i
    n = np.arange(n_max, dtype=np.float64)[:, None]
    u = (1.0 - beta2**j) ** ((n + 1) / 2) / (1.0 - beta1**j)
    with np.errstate(under="ignore"):
        weights = (coasting_rho(n, beta1, beta2, c) ** i * u).sum(axis=1)  # P_n, shape (n_max,)
    x = np.sqrt(v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = -eps / x
        series = np.zeros_like(x)
        for q in range(n_max):
            series = series + np.where(q < per_entry, weights[q] * z**q, 0.0)
        p_T = c**k * p - lr * m * (c**k / x * series)
    p_T = np.where(ratio < 1.0, p_T, np.nan)
    return p_T, beta1**k * m, beta2**k * v


def expansion_ratio(v: np.ndarray, s: int, k: int, beta2: float, eps: float) -> np.ndarray:
    """``eps / (b_k x)``, the worst ratio of the expansion over a window of ``k`` steps (``b_i`` falls with ``i``)."""
    x = np.sqrt(np.asarray(v, dtype=np.float64))
    b_k = beta2 ** (k / 2) / math.sqrt(1.0 - beta2 ** (s + k))
    with np.errstate(divide="ignore"):
        return eps / (b_k * x)


def terms_needed(ratio: np.ndarray, tol: float = 2.0**-56) -> np.ndarray:
    """Expansion terms after which the rest is below ``tol`` of the sum: ``ceil(log(tol) / log(ratio))`` (ratio < 1)."""
    ratio = np.asarray(ratio, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil(np.log(tol) / np.log(ratio))
    return np.where(ratio < 1.0, np.maximum(n, 1.0), np.inf)


def kernel_catch_up(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    s: int,
    k: int,
    *,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same ``k`` steps by ``SparseAdam(mode="dense_equivalent").catch_up``.

    The optimizer is loaded (``load_state_dict``) with entries ``p``, ``m``,
    ``v`` current at step ``s`` and the global step at ``s + k``; ``catch_up``
    then applies the gap, at a cost that does not grow with ``k``.
    """
    params = np.array(p, dtype=np.float64).reshape(-1)
    cfg = SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, mode="dense_equivalent")
    opt = SparseAdam(params, cfg)
    state = opt.state_dict()
    state.update(
        step_count=np.int64(s + k),
        m=np.array(m, dtype=np.float64).reshape(-1),
        v=np.array(v, dtype=np.float64).reshape(-1),
        last_step=np.full(params.size, s, dtype=np.int64),
    )
    opt.load_state_dict(state)
    opt.catch_up()
    return params, opt.m.copy(), opt.v.copy()


def catch_up_window(lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, weight_decay: float = 0.0) -> int:
    """The window ``L`` the float64 catch-up sums over (0: no fast path; it falls back to the bounded replay).

    ``L`` is where the rest of the coasting sum is provably below rounding for
    any last step ``s``: a constant of ``beta1``, ``beta2`` and ``lr * weight_decay``.
    """
    return AdamCoasting(lr, beta1, beta2, 1e-8, weight_decay, np.dtype(np.float64)).window


def replay_length(
    m: float, p: float, s: int, *, lr: float = 1e-3, beta1: float = 0.9, eps: float = 1e-8, tol: float = 2.0**-56
) -> int:
    """Steps after which dense Adam's remaining coasting is provably below ``tol * |p|`` (``eps > 0``).

    After step ``j`` the rest is at most ``lr |m_j| beta1 / ((1 - beta1)(1 - beta1**(j+1)) eps)``
    with ``m_j = beta1**(j - s) m``: the bound the replay fallback stops on. The
    count depends on ``beta1`` and the sizes, never on the length of the gap.
    """
    if eps <= 0 or not 0 < beta1 < 1:
        raise ValueError("replay_length needs eps > 0 and 0 < beta1 < 1")
    i = 0
    while True:
        i += 1
        j = s + i
        bound = lr * abs(m) * beta1**i * beta1 / ((1.0 - beta1) * (1.0 - beta1 ** (j + 1)) * eps)
        if bound <= tol * abs(p):
            return i


# -- figures ---------------------------------------------------------------------------------------


def _mark_touches(ax: Axes, steps: np.ndarray) -> None:
    ax.vlines(
        steps, 0.0, 1.0, transform=ax.get_xaxis_transform(), color="tab:olive", alpha=0.3, linewidth=1.0, zorder=0
    )


_YLABELS = {"m": "m (first moment)", "v": "v (second moment)", "param": "parameter"}


def plot_moment_traces(
    traces: MomentTraces, title: str | None = None, fields: Sequence[str] = ("m", "v", "param")
) -> Figure:
    """Stacked panels over the global step, one per field (``m``, ``v``, ``param``).

    Dense Adam is a dashed line (it decays its moments and moves its parameter on
    every step); DENSE_EQUIVALENT, read after ``catch_up``, is dots on it; LAZY
    and DORMANCY_DECAY are step lines (their state changes only at a touch) with
    a marker at each touch. Faint vertical lines mark the touches.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per field, sharing the x axis.
    """
    if not fields or any(f not in _YLABELS for f in fields):
        raise ValueError(f"fields must be a non-empty selection of {tuple(_YLABELS)}, got {fields!r}")
    fig = new_figure(9.0, 2.5 * len(fields) + 1.3)
    axes = fig.subplots(len(fields), 1, sharex=True, squeeze=False)[:, 0]
    touch_at = traces.steps[traces.touched]
    every = max(1, traces.steps.size // 60)
    for ax, field in zip(axes, fields):
        values: dict[str, np.ndarray] = getattr(traces, field)
        for name in OPTIMIZERS:
            style = dict(_STYLE[name])
            if name == "dense":
                ax.plot(traces.steps, values[name], label=LABELS[name], **style)
                continue
            if name == "dense_equivalent":
                ax.plot(traces.steps[::every], values[name][::every], ls="none", label=LABELS[name], **style)
                continue
            marker = {key: style.pop(key) for key in ("marker", "markerfacecolor", "markersize") if key in style}
            ax.plot(traces.steps, values[name], drawstyle="steps-post", linewidth=1.5, alpha=0.85, **style)
            ax.plot(touch_at, values[name][traces.touched], linestyle="none", label=LABELS[name], **style, **marker)
        _mark_touches(ax, touch_at)
        ax.set_ylabel(_YLABELS[field])
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=LEGEND, frameon=False)
    axes[-1].set_xlabel("global step t (vertical lines: touches)")
    if title is None:
        wd = f", weight decay = {traces.weight_decay:g}" if traces.weight_decay else ""
        title = f"one coordinate, {touch_at.size} touches, beta1 = {traces.beta1:g}, beta2 = {traces.beta2:g}{wd}"
    fig.suptitle(title)
    return finish(fig)


def moment_figure(
    beta1: float = 0.9,
    beta2: float = 0.999,
    pattern: str = "periodic",
    period: int = 10,
    weight_decay: float = 0.0,
    num_steps: int = 100,
    seed: int = 0,
) -> Figure:
    """The explore widget's figure: ``g = 1`` at each touch of ``pattern``, ``lr = 1e-3``, from ``p0 = 0``."""
    steps = touch_steps(pattern, num_steps, period, seed=seed)
    traces = moment_traces(steps, num_steps, 1.0, beta1, beta2, weight_decay=weight_decay)
    return plot_moment_traces(traces)


def plot_touch_after_gap(gaps: np.ndarray, history: int, beta1: float = 0.9, beta2: float = 0.999) -> Figure:
    """``|update| / lr`` of a touch after a gap, LAZY against the other three, as the gap grows (log x).

    The row was touched at steps ``1 .. history`` with ``g = 1`` and comes back
    at step ``history + gap`` with ``g = 1`` (:func:`touch_update`, ``lr = 1``,
    ``eps`` negligible). Dashed: the first-ever touch at a late step,
    ``(1 - beta1) / sqrt(1 - beta2)``.
    """
    gaps = np.asarray(gaps)
    m_s, v_s = moments_after_touches(history, 1.0, beta1, beta2)
    t = history + gaps
    hyper = {"beta1": beta1, "beta2": beta2, "lr": 1.0, "eps": 0.0}
    lazy = -touch_update(m_s, v_s, 1.0, gaps, t, "lazy", **hyper)
    dense = -touch_update(m_s, v_s, 1.0, gaps, t, "dense", **hyper)
    fig = new_figure(8.0, 4.2)
    ax = fig.add_subplot()
    ax.plot(gaps, lazy, color=_STYLE["lazy"]["color"], lw=2.0, label="LAZY")
    ax.plot(gaps, dense, color=_STYLE["dormancy_decay"]["color"], lw=2.0, label="DORMANCY_DECAY = DENSE_EQUIVALENT = dense")
    limit = (1.0 - beta1) / math.sqrt(1.0 - beta2)
    ax.axhline(limit, color="0.4", ls="--", label=f"(1 - beta1) / sqrt(1 - beta2) = {limit:.2f}")
    ax.axhline(1.0, color="0.4", ls=":", label="lr")
    ax.set_xscale("log")
    ax.set_xlabel(f"gap before the touch (steps; touched at steps 1..{history} before)")
    ax.set_ylabel("|update at the touch| / lr")
    ax.set_title(f"the touch after a gap (beta1 = {beta1:g}, beta2 = {beta2:g})")
    ax.legend(loc="best")
    ax.grid(alpha=0.3, which="both")
    return finish(fig)


def plot_coasting_terms(
    v: np.ndarray, s: int, k: int, window: int, *, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
) -> Figure:
    """Each entry's coasting terms (:func:`coasting_terms`) as a share of its sum ``S``, against the dormant step (log y).

    One line per entry of ``v``, labelled by ``x / eps``; the window ``window``
    (a vertical line) and the rounding level ``2**-56`` (a horizontal one)
    show that every term beyond the window is below rounding of its sum.
    """
    terms = coasting_terms(v, s, k, beta1=beta1, beta2=beta2, eps=eps)
    shares = terms / terms.sum(axis=-1, keepdims=True)
    i = np.arange(1, k + 1)
    fig = new_figure(8.0, 5.2)
    ax = fig.add_subplot()
    colors = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, len(shares)))
    for share, x, color in zip(shares, np.sqrt(v), colors):
        ax.plot(i, share, color=color, lw=1.6, label=f"x / eps = {x / eps:.0e}")
    ax.axvline(window, color="0.3", ls="--", label=f"window L = {window}")
    ax.axhline(2.0**-56, color="0.3", ls=":", label="2**-56 (float64 rounding / 16)")
    ax.set_yscale("log")
    ax.set_ylim(1e-40, 1.0)
    ax.set_xlabel(f"dormant step i (last step s = {s})")
    ax.set_ylabel("term i / S(x)")
    ax.set_title(f"the coasting terms of each entry (beta1 = {beta1:g}, beta2 = {beta2:g}, eps = {eps:g})")
    ax.grid(alpha=0.3, which="both")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=LEGEND)
    return finish(fig)


def plot_first_update_ratio(max_step: int, beta1: float, beta2: float, highlight: int | None = None) -> Figure:
    """The first-update ratio of :func:`first_update_ratio` against the first-touch step (log x).

    Returns
    -------
    matplotlib.figure.Figure
        One axes; ``highlight`` (a first-touch step) is marked and annotated.
    """
    t = np.unique(np.geomspace(1, max_step, 400).round().astype(np.int64))
    ratio = first_update_ratio(t, beta1, beta2)
    fig = new_figure(8.0, 4.0)
    ax = fig.add_subplot()
    ax.plot(t, ratio, color="tab:purple", lw=2.0)
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
    ax.set_title(f"the first-ever touch (beta1 = {beta1:g}, beta2 = {beta2:g})")
    ax.legend(loc="best")
    ax.grid(alpha=0.3, which="both")
    return finish(fig)

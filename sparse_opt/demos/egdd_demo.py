"""Experiments and plots behind ``notebooks/06_egdd.ipynb``.

The test problem is a quadratic ``f(x) = 0.5 * x @ H @ x`` whose curvatures differ
by orders of magnitude. :func:`run_egdd` drives the real
:class:`sparse_opt.egdd.EGDD`; :func:`momentum_sgd` is plain heavy-ball momentum
in numpy in either of its two forms: learning rate inside the buffer
(``m = momentum * m + lr * g``, ``x -= m``: Keras' ``SGD`` and
``ResourceApplyKerasMomentum``, and what EGDD reduces to when its gains and scale
are frozen) or outside it (``accum = momentum * accum + g``, ``x -= lr * accum``:
TensorFlow's ``MomentumOptimizer`` / ``ResourceApplyMomentum`` and
``torch.optim.SGD``). The two agree for a constant learning rate and differ
under a schedule. :func:`egdd_on_lookups` feeds EGDD the dense form of
embedding-lookup gradients, zero on most rows. Computation functions return
dicts of arrays; plotting functions return a :class:`matplotlib.figure.Figure`
made by :func:`sparse_opt.demos.figures.new_figure` (no pyplot, 144 dpi, slide
type sizes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from sparse_opt.demos.data import zipf_id_batches
from sparse_opt.demos.figures import finish, new_figure, tidy_log_axes
from sparse_opt.demos.gradients import quadratic_lookup_gradient
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
    hessian: np.ndarray,
    x0: np.ndarray,
    num_steps: int,
    learning_rate: float | Sequence[float],
    momentum: float,
    *,
    lr_inside: bool = True,
) -> dict[str, np.ndarray]:
    """Heavy-ball momentum SGD on the quadratic, in numpy, with the learning rate inside or outside the buffer.

    ``lr_inside=True`` (the default): ``m = momentum * m + lr_t * g``, ``x -= m``.
    This is Keras' ``SGD`` (``ResourceApplyKerasMomentum``: ``accum = accum *
    momentum - lr * grad``, ``var += accum``) and what :class:`~sparse_opt.egdd.EGDD`
    computes when its gain and scale learning rates are 0.

    ``lr_inside=False``: ``accum = momentum * accum + g``, ``x -= lr_t * accum``.
    This is TensorFlow's ``MomentumOptimizer`` (``ResourceApplyMomentum``) and
    ``torch.optim.SGD`` (``dampening=0``).

    With a constant learning rate the two are the same iteration up to rounding
    (``m = lr * accum``). Under a schedule they differ: inside, a new learning rate
    only scales the new gradients and the buffer keeps the old ones' scale;
    outside, it rescales the whole accumulated buffer at once.

    A diverging run is carried on (entries may overflow to ``inf``); its loss is
    reported as ``inf``.

    Parameters
    ----------
    hessian : ndarray, shape (n, n)
        ``H`` of the loss ``0.5 * x @ H @ x`` (gradient ``H @ x``).
    x0 : ndarray, shape (n,)
        Start point (not modified).
    num_steps : int
        Number of steps.
    learning_rate : float or sequence of float
        A constant, or one value per step (``lr_t`` of step ``t + 1`` is
        ``learning_rate[t]``).
    momentum : float
        Decay of the buffer.
    lr_inside : bool
        Which of the two forms above.

    Returns
    -------
    dict
        ``"x"``: iterates, shape ``(num_steps + 1, n)`` (row 0 is ``x0``);
        ``"loss"``: loss at every iterate, shape ``(num_steps + 1,)``.
    """
    lrs = np.broadcast_to(np.asarray(learning_rate, dtype=np.float64), (num_steps,))
    x = np.array(x0, dtype=np.float64)
    m = np.zeros_like(x)
    xs = np.empty((num_steps + 1, x.size))
    xs[0] = x
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(num_steps):
            if lr_inside:
                m = momentum * m + lrs[t] * (hessian @ x)
                x = x - m
            else:
                m = momentum * m + hessian @ x
                x = x - lrs[t] * m
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


def egdd_state_numbers(shape: Sequence[int]) -> dict[str, int]:
    """State :class:`~sparse_opt.egdd.EGDD` keeps for one parameter of ``shape``, in numbers.

    Read from the state EGDD allocates for a small probe parameter with the same
    number of dimensions (so a huge ``shape`` costs nothing): which slots are the
    size of the weights and which are one number per tensor (``shape`` needs at
    least one dimension). Returns
    ``"weight_sized_slots"`` (the count), ``"per_tensor"`` (numbers held once per
    tensor: ``lr_scale`` and ``counter``), ``"weights"`` (``prod(shape)``) and
    ``"total"`` (``weight_sized_slots * weights + per_tensor``).

    Examples
    --------
    >>> egdd_state_numbers((1000, 8))["total"]
    24002
    """
    shape = tuple(int(n) for n in shape)
    if not shape:
        raise ValueError("shape must have at least one dimension (a 0-d slot cannot be told from a per-tensor one)")
    probe_shape = tuple(2 for _ in shape)
    state = EGDD([np.zeros(probe_shape)], learning_rate=0.1, momentum=0.9).state[0]
    weight_sized = [k for k, v in state.items() if np.shape(v) == probe_shape]
    per_tensor = len(state) - len(weight_sized)
    weights = int(np.prod(shape, dtype=np.int64))
    return {
        "weight_sized_slots": len(weight_sized),
        "per_tensor": per_tensor,
        "weights": weights,
        "total": len(weight_sized) * weights + per_tensor,
    }


def egdd_on_lookups(
    rows: int = 1000,
    cols: int = 8,
    num_steps: int = 300,
    batch_size: int = 32,
    skew: float = 1.0,
    seed: int = 0,
    *,
    learning_rate: float = 0.05,
    momentum: float = 0.9,
    **options: Any,
) -> dict[str, Any]:
    """Dense :class:`~sparse_opt.egdd.EGDD` on an embedding table whose gradients are zero outside the looked-up rows.

    The table starts at ``N(0, 0.1**2)``; each lookup pulls its row towards a fixed
    ``N(0, 1)`` target (:func:`~sparse_opt.demos.gradients.quadratic_lookup_gradient`),
    ids from :func:`~sparse_opt.demos.data.zipf_id_batches`. Every step's sparse
    gradient is handed over as ``csr.to_dense()`` (lingvo would drop the sparse
    form: its ``_apply_sparse`` is a no-op; :class:`~sparse_opt.egdd.EGDD` refuses it).

    Parameters
    ----------
    rows, cols, num_steps, batch_size, skew, seed
        The table, the run and the id stream (``seed`` also seeds start and targets).
    learning_rate, momentum, **options
        EGDD's arguments.

    Returns
    -------
    dict
        Per step, shape ``(num_steps,)``: ``"touched"`` (rows looked up),
        ``"gain_moved_untouched"`` (rows not looked up whose gains changed),
        ``"rows_moved"`` (rows whose weights changed), ``"lr_scale"`` (after the
        step), ``"cosine"`` (the ``lr_scale`` signal ``<g/|g|, m_old/|m_old|>`` over
        the table) and ``"cosine_touched"`` (the same over the looked-up rows
        only). Per touch of any row after its first, in step order, the arrays
        ``"touch_gap"`` (steps since that row's previous touch), ``"touch_gbar"``
        (the largest ``|gbar_old|`` of the row, stale by the gap) and
        ``"touch_gain_moves"`` (the row's mean ``log(gain_new / gain_old) /
        gain_learning_rate``). Final: ``"touches"`` ``(rows,)``, ``"gain_moves"``
        (``log(gain) / gain_learning_rate`` rounded, ``(rows, cols)``, whole numbers
        under the sign rule), ``"gain"``, ``"params"``, ``"start"`` and ``"target"``.
    """
    rng = np.random.default_rng(seed)
    table = 0.1 * rng.standard_normal((rows, cols))
    start = table.copy()
    target = rng.standard_normal((rows, cols))
    opt = EGDD([table], learning_rate, momentum, **options)
    state = opt.state[0]
    gain_lr = opt.hyper_params.gain_learning_rate
    out: dict[str, Any] = {k: np.zeros(num_steps, dtype=int) for k in ("touched", "gain_moved_untouched", "rows_moved")}
    out.update({k: np.zeros(num_steps) for k in ("lr_scale", "cosine", "cosine_touched")})
    last_touch = np.zeros(rows, dtype=int)  # 0: never touched
    touches = np.zeros(rows, dtype=int)
    gaps, stale, moves = [], [], []
    for t, ids in enumerate(zipf_id_batches(rows, batch_size, num_steps, skew, seed)):
        grad = quadratic_lookup_gradient(table, target, ids).to_dense()
        looked_up = np.zeros(rows, dtype=bool)
        looked_up[ids] = True
        before, gain_before, m_old = table.copy(), state["gain"].copy(), state["momentum"].copy()
        again = looked_up & (last_touch > 0)
        gbar_old = np.abs(state["gbar"][again]).max(axis=1)
        opt.step([grad])
        out["touched"][t] = looked_up.sum()
        changed_gain = np.any(state["gain"] != gain_before, axis=1)
        out["gain_moved_untouched"][t] = (changed_gain & ~looked_up).sum()
        out["rows_moved"][t] = np.any(table != before, axis=1).sum()
        out["lr_scale"][t] = state["lr_scale"]
        out["cosine"][t] = _cosine(grad, m_old)
        out["cosine_touched"][t] = _cosine(grad[looked_up], m_old[looked_up])
        gaps.append(t + 1 - last_touch[again])
        stale.append(gbar_old)
        if gain_lr > 0:
            moves.append(np.log(state["gain"][again] / gain_before[again]).mean(axis=1) / gain_lr)
        last_touch[looked_up] = t + 1
        touches += looked_up
    out.update(
        touch_gap=np.concatenate(gaps),
        touch_gbar=np.concatenate(stale),
        touch_gain_moves=np.concatenate(moves) if moves else np.zeros(0),
        touches=touches,
        gain_moves=np.round(np.log(state["gain"]) / gain_lr) if gain_lr > 0 else np.zeros((rows, cols)),
        gain=state["gain"].copy(),
        params=table,
        start=start,
        target=target,
    )
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """``<a / (|a| + 1e-10), b / (|b| + 1e-10)>``, the normalisation of EGDD's ``lr_scale`` signal."""
    return float(np.sum((a / (np.linalg.norm(a) + 1e-10)) * (b / (np.linalg.norm(b) + 1e-10))))


def touch_buckets(
    run: Mapping[str, Any], edges: Sequence[int] = (0, 1, 2, 6, 51)
) -> list[dict[str, float | int | str]]:
    """Summarise an :func:`egdd_on_lookups` run by how often each row was looked up.

    ``edges`` are the lower bounds of the buckets of touch counts (the last one is
    open). For each non-empty bucket: ``"label"`` (e.g. ``"2-5"``), ``"rows"``,
    ``"mean_abs_moves"`` and ``"max_abs_moves"`` (of ``|gain_moves|`` over the
    bucket's entries: net factors ``exp(+-gain_learning_rate)`` the gains took),
    and ``"distance_left"`` (mean over the rows of ``|p - target| / |p0 - target|``).
    """
    touches, moves = run["touches"], np.abs(run["gain_moves"])
    left = np.linalg.norm(run["params"] - run["target"], axis=1) / np.linalg.norm(run["start"] - run["target"], axis=1)
    out = []
    bounds = [*edges, None]
    for low, high in zip(bounds[:-1], bounds[1:]):
        mask = touches >= low if high is None else (touches >= low) & (touches < high)
        if not mask.any():
            continue
        label = f"{low}+" if high is None else (f"{low}" if high == low + 1 else f"{low}-{high - 1}")
        out.append({
            "label": label,
            "rows": int(mask.sum()),
            "mean_abs_moves": float(moves[mask].mean()),
            "max_abs_moves": float(moves[mask].max()),
            "distance_left": float(left[mask].mean()),
        })
    return out


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
        coloured by curvature), ``lr_scale``; the gains' legend sits below them.
    """
    steps = np.arange(len(egdd["loss"]))
    fig = new_figure(12.0, 4.4)
    ax_loss, ax_gain, ax_scale = fig.subplots(1, 3)
    ax_loss.semilogy(steps, sgd["loss"], label="momentum SGD")
    ax_loss.semilogy(steps, egdd["loss"], label="EGDD")
    ax_loss.set(title="Loss 0.5 x^T H x", xlabel="step", ylabel="loss")
    ax_loss.legend(loc="lower left")
    colors = matplotlib.colormaps["viridis"](np.linspace(0.0, 1.0, len(curvatures)))
    for i, (h, color) in enumerate(zip(curvatures, colors)):
        ax_gain.semilogy(steps, egdd["gain"][:, i], color=color, label=f"h = {h:.3g}")
    ax_gain.set(title="Per-coordinate gain", xlabel="step", ylabel="gain")
    ax_gain.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=4, title="curvature of the coordinate")
    ax_scale.plot(steps, egdd["lr_scale"])
    ax_scale.set(title="lr_scale (one per tensor)", xlabel="step", ylabel="lr_scale")
    return finish(tidy_log_axes(fig))


#: Share of the axes height, at the top, reserved for the "diverged" band of :func:`plot_lr_sweep`.
DIVERGED_BAND = 0.12


def plot_lr_sweep(sweep: Mapping[str, np.ndarray], stability_limit: float | None = None) -> Figure:
    """Final loss against the learning rate for momentum SGD and EGDD, from :func:`lr_sweep`.

    A run whose final loss is not below the initial loss has diverged. It has no
    loss worth plotting (often ``inf``), so it is not drawn at a loss at all: a
    grey band across the top of the axes (the top :data:`DIVERGED_BAND` of its
    height, in axes coordinates) is labelled "diverged", and such a run is a
    cross inside that band at its learning rate. The y limits keep every plotted
    loss and the initial loss (dotted) below the band. ``stability_limit``
    (optional) draws momentum SGD's stability limit
    ``learning_rate = 2 (1 + momentum) / h_max``.

    Returns
    -------
    Figure
        One axes, log-log, legend to its right.
    """
    lrs = sweep["learning_rate"]
    initial = float(sweep["initial_loss"])
    fig = new_figure(9.0, 4.2)
    ax = fig.add_subplot()
    ax.axhline(initial, color="gray", ls=":", lw=1, label="initial loss")
    finite = [initial]
    for key, label, marker, color in (("sgd_loss", "momentum SGD", "o", "C0"), ("egdd_loss", "EGDD", "s", "C1")):
        loss = sweep[key]
        ok = loss < initial
        finite += loss[ok].tolist()
        ax.loglog(lrs[ok], loss[ok], marker=marker, color=color, label=label)
        if not ok.all():
            ax.plot(lrs[~ok], np.full((~ok).sum(), 1 - DIVERGED_BAND / 2), "x", ms=12, mew=2.5, color=color,
                    transform=ax.get_xaxis_transform(), label=f"{label} diverged")
    # y limits: the data fill the axes below the band, with a small margin.
    low, high = np.log10(min(finite)) - 0.5, np.log10(max(finite)) + 0.5
    top = low + (high - low) / (1 - DIVERGED_BAND)
    ax.set_ylim(10**low, 10**top)
    ax.axhspan(10**high, 10**top, color="0.9", lw=0, zorder=0)
    ax.text(0.01, 1 - DIVERGED_BAND / 2, "diverged: no final loss", transform=ax.transAxes, va="center", ha="left",
            fontsize=9, color="0.3")
    if stability_limit is not None:
        ax.axvline(stability_limit, color="C3", ls="--", lw=1,
                   label=f"momentum SGD stability limit, lr = {stability_limit:.3g}")
    ax.set(title="Final loss after the same number of steps", xlabel="learning_rate", ylabel="final loss")
    fig.legend(loc="outside right upper")
    tidy_log_axes(fig)
    # The band is not a loss scale: no tick labels inside it.
    loss_labels = ax.yaxis.get_major_formatter()
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos: "" if v > 10**high else loss_labels(v, pos)))
    return finish(fig)


def plot_egdd_on_lookups(run: Mapping[str, Any]) -> Figure:
    """Gains and ``lr_scale`` of EGDD on an embedding table, from :func:`egdd_on_lookups`.

    Left: each row's net gain moves (mean ``log(gain) / gain_learning_rate`` over its
    entries) against the number of steps it was looked up (log x), with the bound
    ``touches - 1`` (the first touch meets ``gbar = 0`` and cannot move a gain).
    Right: ``lr_scale`` over the steps.

    Returns
    -------
    Figure
        Two axes.
    """
    touches = run["touches"]
    seen = touches > 0
    moves = run["gain_moves"].mean(axis=1)
    fig = new_figure(11.0, 4.0)
    ax_gain, ax_scale = fig.subplots(1, 2, width_ratios=[3, 2])
    ax_gain.semilogx(touches[seen], moves[seen], ".", ms=5, alpha=0.6, label="one row")
    n = np.unique(touches[seen])
    ax_gain.semilogx(n, n - 1, "k--", lw=1, label="+-(touches - 1)")
    ax_gain.semilogx(n, -(n - 1), "k--", lw=1)
    top = float(np.abs(moves).max()) + 2
    ax_gain.set(title="Gains move only when a row is looked up", xlabel="steps on which the row was looked up",
                ylabel="net gain moves (log(gain) / gain_lr)", ylim=(-top, top))
    ax_gain.legend(loc="lower left")
    steps = np.arange(1, len(run["lr_scale"]) + 1)
    ax_scale.plot(steps, run["lr_scale"])
    ax_scale.set(title="lr_scale: one number for the table", xlabel="step", ylabel="lr_scale")
    return finish(tidy_log_axes(fig))

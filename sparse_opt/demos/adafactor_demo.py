"""Experiments and plots behind ``notebooks/05_adafactor.ipynb``.

Every experiment drives the real :class:`sparse_opt.adafactor.Adafactor` and reads
its state or its parameters. :func:`~sparse_opt.adafactor.factored_second_moment` rebuilds ``V`` from
that state, so that ``U`` can be inspected (and the notebook
asserts that the optimizer's measured steps agree with it).
:func:`paper_eps_update_direction` is the paper's additive-``eps1`` placement,
kept as a *comparison variant* for the notebook and not part of the optimizer's
API. :func:`embedding_table_state`, :func:`adafactor_on_lookups` and
:func:`rare_row_coupling` put the factored state next to an embedding table and
its sparse gradients. Computation functions return plain numbers, arrays and
dicts; plotting functions return a :class:`matplotlib.figure.Figure` made by
:func:`sparse_opt.demos.figures.new_figure` (no pyplot, 144 dpi, slide type
sizes, no minor tick labels, legends outside the data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from sparse_opt.adafactor import Adafactor, factored_second_moment
from sparse_opt.demos.data import zipf_id_batches
from sparse_opt.demos.figures import finish, new_figure, tidy_log_axes
from sparse_opt.demos.gradients import quadratic_lookup_gradient
from sparse_opt.dense_adam import DenseAdam


def _rms(x: np.ndarray) -> float:
    """Root mean square of all entries, ``sqrt(mean(x**2))``."""
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


def second_moment_memory(shape: Sequence[int], dtype: np.dtype | type = np.float32) -> dict[str, int]:
    """Second-moment memory of a parameter of ``shape``: Adam's full ``V`` against Adafactor's.

    Parameters
    ----------
    shape : sequence of int
        The parameter's shape (at least one element).
    dtype : numpy dtype, default float32
        The parameter's dtype (state has the same dtype).

    Returns
    -------
    dict
        ``"full"``: entries of a full second moment (``prod(shape)``, as Adam keeps);
        ``"factored"``: the textbook count, ``batch * (R + C)`` for 2+ dims (the
        leading dims are a batch of ``(R, C)`` matrices) and ``prod(shape)`` for
        0-d and 1-d; ``"state"``: the number of second-moment entries the
        optimizer actually allocated (read from :attr:`Adafactor.state`);
        ``"state_bytes"``: their size in bytes.
    """
    shape = tuple(int(n) for n in shape)
    full = math.prod(shape)
    if len(shape) >= 2:
        factored = math.prod(shape[:-2]) * (shape[-2] + shape[-1])
    else:
        factored = full
    # np.zeros maps untouched pages lazily, so a large shape costs no real memory here.
    state = Adafactor([np.zeros(shape, dtype=dtype)]).state[0]
    arrays = [v for k, v in state.items() if k != "step"]
    return {
        "full": full,
        "factored": factored,
        "state": sum(a.size for a in arrays),
        "state_bytes": sum(a.nbytes for a in arrays),
    }


def gradient_stream(kind: str, shape: tuple[int, int], num_steps: int, seed: int) -> np.ndarray:
    """A reproducible stream of matrix gradients, shape ``(num_steps, R, C)`` (float64).

    Parameters
    ----------
    kind : {"rank1", "rank1ish", "random"}
        ``"rank1"``: ``g_t = s_t * outer(a, b)`` with fixed positive log-normal
        ``a``, ``b`` and a standard normal scalar ``s_t``, so every ``g_t**2`` is
        the same rank-1 matrix up to a scalar. ``"rank1ish"``: the same plus
        independent ``N(0, 0.05**2)`` noise on every entry. ``"random"``:
        independent ``N(0, sigma_ij**2)`` entries with fixed log-normal
        ``sigma_ij`` (no row/column structure at all).
    shape : (int, int)
        ``(R, C)``.
    num_steps : int
        Number of gradients.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    ndarray
        The gradients, one ``(R, C)`` matrix per step.
    """
    rng = np.random.default_rng(seed)
    rows, cols = shape
    if kind in ("rank1", "rank1ish"):
        a = np.exp(rng.normal(0.0, 1.0, rows))
        b = np.exp(rng.normal(0.0, 1.0, cols))
        grads = rng.normal(size=(num_steps, 1, 1)) * np.outer(a, b)
        if kind == "rank1ish":
            grads += rng.normal(0.0, 0.05, size=grads.shape)
        return grads
    if kind == "random":
        sigma = np.exp(rng.normal(0.0, 1.0, shape))
        return sigma * rng.normal(size=(num_steps, rows, cols))
    raise ValueError(f"kind must be 'rank1', 'rank1ish' or 'random', got {kind!r}")


def factored_vs_full(grads: np.ndarray, beta2_decay: float = -0.8) -> dict[str, np.ndarray]:
    """Feed one gradient stream to a factored and to an unfactored Adafactor state.

    One :class:`Adafactor` holds a matrix parameter (factored: row and column
    EMAs) and a flat copy of it (1-D: the full EMA of ``g**2``); both get the
    same gradients with the same ``1 - beta2_t = t**beta2_decay``. ``lr=0`` keeps
    the parameters fixed, so only the statistics move.

    Parameters
    ----------
    grads : ndarray, shape (T, R, C)
        The gradient stream (float64).
    beta2_decay : float
        As for :class:`Adafactor`.

    Returns
    -------
    dict
        ``"factored"`` and ``"full"``: the two estimates after the last step,
        ``(R, C)``; ``"rel_error"``: ``||factored - full||_F / ||full||_F`` after
        every step, shape ``(T,)``.
    """
    matrix = np.zeros(grads.shape[1:])
    flat = np.zeros(matrix.size)
    opt = Adafactor([matrix, flat], lr=0.0, beta2_decay=beta2_decay)
    eps1 = float(np.finfo(matrix.dtype).eps)
    rel_error = np.empty(len(grads))
    for t, g in enumerate(grads):
        opt.step([g, g.ravel()])
        factored = factored_second_moment(opt.state[0]["row_var"], opt.state[0]["col_var"], eps1)
        full = opt.state[1]["variance"].reshape(matrix.shape)
        rel_error[t] = np.linalg.norm(factored - full) / np.linalg.norm(full)
    return {"factored": factored, "full": full, "rel_error": rel_error}


def adafactor_trace(
    lr: float = 0.1,
    beta2_decay: float = -0.8,
    d: float = 1.0,
    *,
    eps2: float = 1e-3,
    shape: tuple[int, int] = (32, 16),
    num_steps: int = 1000,
    noise: float = 0.1,
    outlier_step: int = 300,
    outlier_factor: float = 30.0,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Run Adafactor on a noisy quadratic and record its step-size bookkeeping.

    The loss is ``0.5 * ||P - T||**2`` for a fixed target ``T`` with ``N(0, 1)``
    entries; the gradient is ``P - T`` plus ``N(0, noise**2)`` noise, and at step
    ``outlier_step`` (1-based) the whole gradient is multiplied by
    ``outlier_factor`` (one bad batch). ``P`` starts at zero, so the ``eps2``
    floor of the relative step size is visible at the start.

    Parameters
    ----------
    lr, beta2_decay, d, eps2 : float
        Adafactor's hyperparameters (``eps = (None, eps2)``).
    shape : (int, int)
        Shape of the (factored) matrix parameter ``P``.
    num_steps : int
        Number of steps.
    noise : float
        Standard deviation of the gradient noise.
    outlier_step : int
        The step whose gradient is scaled (0 or ``> num_steps``: none).
    outlier_factor : float
        The scale of that gradient.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    dict of ndarray, each of shape (num_steps,)
        ``"t"`` (1, 2, ...); ``"rho"``: ``min(lr, 1/sqrt(t))``; ``"rms_param"``:
        ``RMS(P)`` before the step; ``"alpha"``: ``max(eps2, RMS(P)) * rho``;
        ``"rms_u"``: ``RMS(U)`` of the unclipped update ``U = g / sqrt(max(V, eps1**2))``,
        with ``V`` rebuilt from the optimizer's row and column state after the
        step; ``"clip"``: ``max(1, RMS(U) / d)``; ``"predicted_step"``:
        ``alpha * RMS(U) / clip``; ``"step"``: the measured ``RMS(P_new - P_old)``;
        ``"outlier"``: True at the step whose gradient was scaled (all False without one);
        ``"outlier_factor"``: that scale at every step (the figures label the outlier with it).
    """
    rng = np.random.default_rng(seed)
    target = rng.normal(size=shape)
    param = np.zeros(shape)
    opt = Adafactor([param], lr=lr, beta2_decay=beta2_decay, eps=(None, eps2), d=d)
    eps1 = float(np.finfo(param.dtype).eps)
    t = np.arange(1, num_steps + 1)
    rho = np.minimum(lr, 1.0 / np.sqrt(t))
    rms_param, rms_u, step = (np.empty(num_steps) for _ in range(3))
    for i in range(num_steps):
        grad = param - target + rng.normal(0.0, noise, shape)
        if i + 1 == outlier_step:
            grad *= outlier_factor
        before = param.copy()
        rms_param[i] = _rms(before)
        opt.step([grad])
        v = factored_second_moment(opt.state[0]["row_var"], opt.state[0]["col_var"], eps1)
        rms_u[i] = _rms(grad / np.sqrt(np.maximum(v, eps1 * eps1)))
        step[i] = _rms(param - before)
    alpha = np.maximum(eps2, rms_param) * rho
    clip = np.maximum(1.0, rms_u / d)
    return {
        "t": t,
        "rho": rho,
        "rms_param": rms_param,
        "alpha": alpha,
        "rms_u": rms_u,
        "clip": clip,
        "predicted_step": alpha * rms_u / clip,
        "step": step,
        "outlier": t == outlier_step,
        "outlier_factor": np.full(num_steps, float(outlier_factor)),
    }


def row_scaled_gradient(row_scales: Sequence[float], cols: int, seed: int, dtype: type = np.float32) -> np.ndarray:
    """A gradient whose row ``i`` has entries ``+-row_scales[i]`` (random signs).

    Every entry of a row has the same magnitude, so every statistic of ``g**2``
    is known by hand: ``mean(g**2, axis=-1) = row_scales**2``.
    """
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(len(row_scales), cols))
    return (np.asarray(row_scales, dtype=np.float64)[:, None] * signs).astype(dtype)


def optimizer_update_direction(grad: np.ndarray, eps1: float | None = None) -> np.ndarray:
    """The unclipped update ``U`` of :class:`Adafactor`'s first step on ``grad``, read off the parameter.

    With a zero parameter, ``eps2 = 1`` and ``lr = 1`` the step size is
    ``alpha = max(1, 0) * min(1, 1) = 1``, and ``d = inf`` turns clipping off,
    so the new parameter is exactly ``-U``. On the first step the EMAs equal the
    current statistics (``1 - beta2_1 = 1``).

    Parameters
    ----------
    grad : ndarray
        A gradient of any shape (2+ dims are factored); its dtype is the parameter's.
    eps1 : float or None
        Adafactor's ``eps1`` (None: the dtype's epsilon).
    """
    param = np.zeros_like(grad)
    Adafactor([param], lr=1.0, eps=(eps1, 1.0), d=math.inf).step([grad])
    return -param


def paper_eps_update_direction(grad: np.ndarray, eps1: float) -> np.ndarray:
    """COMPARISON VARIANT, not the optimizer: the first-step ``U`` with the paper's additive ``eps1``.

    Shazeer & Stern (2018, Algorithm 4) add ``eps1`` to ``g**2`` before the row
    and column statistics and use no clamp afterwards::

        R = mean(g**2 + eps1, axis=-1)     C = mean(g**2 + eps1, axis=-2)
        V = R @ C / mean(R, axis=-2)       U = g / sqrt(V)

    (first step, where the EMAs equal the current statistics). The paper's own
    default is ``eps1 = 1e-30``. :class:`Adafactor` follows torch instead; see
    :func:`optimizer_update_direction`.

    Parameters
    ----------
    grad : ndarray, 2+ dims
        The gradient; computed in its dtype.
    eps1 : float
        Added to every ``g**2``.
    """
    sq = grad * grad + grad.dtype.type(eps1)
    row = sq.mean(axis=-1, keepdims=True)
    col = sq.mean(axis=-2, keepdims=True)
    return grad / np.sqrt(row @ col / row.mean(axis=-2, keepdims=True))


def row_rms(u: np.ndarray) -> np.ndarray:
    """``RMS`` of each row of a 2-D array (float64)."""
    return np.sqrt(np.mean(np.square(u, dtype=np.float64), axis=-1))


def embedding_table_state(rows: int, cols: int, dtype: np.dtype | type = np.float32) -> dict[str, int]:
    """Optimizer-state sizes for a ``rows x cols`` embedding table, in numbers and bytes.

    ``"table"``: the table's entries. ``"adam"``: Adam's ``m`` and ``v`` (two
    numbers per entry). ``"adafactor_row"``, ``"adafactor_col"``: the entries of
    :class:`Adafactor`'s ``row_var`` and ``col_var``, read from the state it
    allocates for a zero table (``np.zeros`` maps its pages lazily, so a large
    table costs no real memory here); ``"adafactor"`` their sum. ``"itemsize"``:
    bytes per number of ``dtype``.
    """
    state = Adafactor([np.zeros((rows, cols), dtype=dtype)]).state[0]
    return {
        "table": rows * cols,
        "adam": 2 * rows * cols,
        "adafactor_row": int(state["row_var"].size),
        "adafactor_col": int(state["col_var"].size),
        "adafactor": int(state["row_var"].size + state["col_var"].size),
        "itemsize": np.dtype(dtype).itemsize,
    }


def adafactor_on_lookups(
    rows: int = 2000,
    cols: int = 16,
    num_steps: int = 200,
    batch_size: int = 64,
    skew: float = 1.0,
    seed: int = 0,
    *,
    lr: float = 0.01,
    extra_touch: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Dense :class:`Adafactor` on an embedding table whose gradients are zero outside the looked-up rows.

    The table starts at ``N(0, 0.1**2)`` and each lookup pulls its row towards a
    fixed ``N(0, 1)`` target (:func:`~sparse_opt.demos.gradients.quadratic_lookup_gradient`);
    the ids are :func:`~sparse_opt.demos.data.zipf_id_batches`. Each step's sparse
    gradient is handed to the optimizer as ``csr.to_dense()``, the only way
    :class:`Adafactor` accepts it. Default hyperparameters except ``lr``.

    Parameters
    ----------
    rows, cols, num_steps, batch_size, skew, seed
        The table, the length of the run and the id stream (``seed`` also seeds
        the start and the targets).
    lr : float
        Adafactor's ``lr`` (the cap of ``rho_t``).
    extra_touch : (step, row), optional
        Add one lookup of ``row`` to the batch of ``step`` (1-based): the same run
        with a single extra touch, for :func:`rare_row_coupling`.

    Returns
    -------
    dict
        Per step, shape ``(num_steps,)``: ``"touched"`` (distinct rows looked up),
        ``"untouched_moved"`` (rows not looked up whose parameters changed),
        ``"row_var_moved"`` (rows whose ``row_var`` changed), ``"rms_u_table"`` and
        ``"rms_u_touched"`` (``RMS(U)``, ``U = g / sqrt(max(V, eps1**2))`` with ``V``
        rebuilt from the state after the step, over the whole table and over the
        looked-up rows only), ``"rms_u_first"`` (over the rows looked up for the
        first time, NaN on a step without any), ``"max_step"`` (largest ``|change|`` of a weight). Final: ``"params"`` ``(rows, cols)``, ``"touches"``
        (steps on which each row was looked up, ``(rows,)``), ``"row_var"``
        ``(rows,)`` and ``"col_var"`` ``(cols,)``.
    """
    table, target, batches = _lookup_problem(rows, cols, num_steps, batch_size, skew, seed, extra_touch)
    opt = Adafactor([table], lr=lr)
    state = opt.state[0]
    eps1 = float(np.finfo(table.dtype).eps)
    out = {key: np.zeros(num_steps, dtype=int) for key in ("touched", "untouched_moved", "row_var_moved")}
    out.update({key: np.zeros(num_steps) for key in ("rms_u_table", "rms_u_touched", "rms_u_first", "max_step")})
    touches = np.zeros(rows, dtype=int)
    for t, ids in enumerate(batches):
        grad = quadratic_lookup_gradient(table, target, ids).to_dense()
        looked_up = np.zeros(rows, dtype=bool)
        looked_up[ids] = True
        first = looked_up & (touches == 0)
        touches += looked_up
        before, row_before = table.copy(), state["row_var"].copy()
        opt.step([grad])
        v = factored_second_moment(state["row_var"], state["col_var"], eps1)
        u = grad / np.sqrt(np.maximum(v, eps1 * eps1))
        out["touched"][t] = looked_up.sum()
        out["untouched_moved"][t] = np.any(table[~looked_up] != before[~looked_up], axis=1).sum()
        out["row_var_moved"][t] = (state["row_var"] != row_before).sum()
        out["rms_u_table"][t] = _rms(u)
        out["rms_u_touched"][t] = _rms(u[looked_up])
        out["rms_u_first"][t] = _rms(u[first]) if first.any() else np.nan
        out["max_step"][t] = np.abs(table - before).max()
    out.update(
        params=table,
        touches=touches,
        row_var=state["row_var"][:, 0].copy(),
        col_var=state["col_var"][0].copy(),
    )
    return out


def rare_row_coupling(
    rows: int = 2000, cols: int = 16, num_steps: int = 200, batch_size: int = 64, skew: float = 1.0, seed: int = 0,
    *, touch_step: int = 100, lr: float = 0.01,
) -> dict[str, float | int]:
    """How much one extra lookup of the rarest row moves the *other* rows, under Adafactor and under dense Adam.

    Two runs of :func:`adafactor_on_lookups` (same seed) differ only in one
    lookup of row ``rows - 1`` added at ``touch_step``. The same pair of
    streams is fed to :class:`~sparse_opt.dense_adam.DenseAdam` (``lr``, default
    betas), whose update is per coordinate, as the control.

    Returns
    -------
    dict
        ``"row"``: the rare row; ``"rare_touches"``: its lookups in the run without
        the extra one; ``"adafactor_other_rows"``, ``"adam_other_rows"``: the
        largest ``|difference|`` between the two runs' final parameters over every
        row except the rare one; ``"adafactor_rows_differing"``,
        ``"adam_rows_differing"``: how many other rows differ at all;
        ``"adafactor_step_at_touch"``: for scale, the largest change of any weight
        in Adafactor's step ``touch_step`` (run without the extra lookup).
    """
    rare = rows - 1
    runs = [adafactor_on_lookups(rows, cols, num_steps, batch_size, skew, seed, lr=lr, extra_touch=extra)
            for extra in (None, (touch_step, rare))]
    adam = [_dense_adam_on_lookups(rows, cols, num_steps, batch_size, skew, seed, lr, extra)
            for extra in (None, (touch_step, rare))]
    others = np.arange(rows) != rare
    result: dict[str, float | int] = {
        "row": rare,
        "rare_touches": int(runs[0]["touches"][rare]),
        "adafactor_step_at_touch": float(runs[0]["max_step"][touch_step - 1]),
    }
    for name, (a, b) in (("adafactor", (runs[0]["params"], runs[1]["params"])), ("adam", adam)):
        diff = np.abs(a[others] - b[others])
        result[f"{name}_other_rows"] = float(diff.max())
        result[f"{name}_rows_differing"] = int(np.any(diff != 0, axis=1).sum())
    return result


def _dense_adam_on_lookups(
    rows: int, cols: int, num_steps: int, batch_size: int, skew: float, seed: int, lr: float,
    extra_touch: tuple[int, int] | None,
) -> np.ndarray:
    """The :func:`adafactor_on_lookups` problem trained by dense Adam; returns the final table."""
    table, target, batches = _lookup_problem(rows, cols, num_steps, batch_size, skew, seed, extra_touch)
    opt = DenseAdam(table, lr=lr)
    for ids in batches:
        opt.step(quadratic_lookup_gradient(table, target, ids).to_dense())
    return table


def _lookup_problem(
    rows: int, cols: int, num_steps: int, batch_size: int, skew: float, seed: int,
    extra_touch: tuple[int, int] | None,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The table (``0.1 N(0, 1)``), the target (``N(0, 1)``) and the id batches of ``seed``.

    ``extra_touch = (t, row)`` appends one lookup of ``row`` to step ``t``'s
    batch. Adafactor and its dense-Adam control train on exactly this.
    """
    rng = np.random.default_rng(seed)
    table = 0.1 * rng.standard_normal((rows, cols))
    target = rng.standard_normal((rows, cols))
    batches = list(zipf_id_batches(rows, batch_size, num_steps, skew, seed))
    if extra_touch is not None and 1 <= extra_touch[0] <= len(batches):
        t, row = extra_touch
        batches[t - 1] = np.append(batches[t - 1], row)
    return table, target, batches


def plot_estimate_vs_truth(results: Mapping[str, Mapping[str, np.ndarray]]) -> Figure:
    """Factored estimate against the full EMA of ``g**2``, one panel per stream, plus the error over steps.

    Parameters
    ----------
    results : mapping of label to :func:`factored_vs_full` result
        One entry per gradient stream.

    Returns
    -------
    Figure
        ``len(results) + 1`` axes: log-log scatters of factored (y) against full
        (x) with the diagonal, then the relative error per step (log-log). One
        legend for the whole figure, below the axes, so it covers no data.
    """
    n = len(results)
    fig = new_figure(3.4 * (n + 1), 3.6)
    axes = fig.subplots(1, n + 1)
    colors = [f"C{i}" for i in range(n)]
    for ax, (label, res), color in zip(axes, results.items(), colors):
        full, factored = res["full"].ravel(), res["factored"].ravel()
        ax.loglog(full, factored, ".", ms=3, alpha=0.6, color=color)
        lo, hi = min(full.min(), factored.min()), max(full.max(), factored.max())
        ax.loglog([lo, hi], [lo, hi], "k--", lw=1, label="factored = full (exact)" if ax is axes[0] else None)
        ax.set(title=f"{label}: entries of V", xlabel="full EMA of g**2", ylabel="factored estimate")
    err_ax = axes[-1]
    for (label, res), color in zip(results.items(), colors):
        steps = np.arange(1, len(res["rel_error"]) + 1)
        err_ax.loglog(steps, res["rel_error"], color=color, label=f"relative error, {label}")
    err_ax.set(title="relative error of V_fact", xlabel="step t", ylabel="relative error")
    fig.legend(loc="outside lower center", ncols=n + 1)
    return finish(tidy_log_axes(fig))


def _mark_outlier(trace: Mapping[str, np.ndarray], axes: Sequence) -> None:
    """A vertical line on every axes at the step whose gradient was scaled, labelled once (no line without one)."""
    steps = trace["t"][trace["outlier"]]
    for step in steps:
        label = f"outlier gradient (x{trace['outlier_factor'][0]:g}), step {step}"
        for k, ax in enumerate(axes):
            ax.axvline(step, color="tab:red", ls=":", lw=1.5, label=label if k == 0 else None)


def plot_step_sizes(trace: Mapping[str, np.ndarray], lr: float, eps2: float = 1e-3) -> Figure:
    """The relative step ``rho_t``, then the absolute sizes ``RMS(P)``, ``alpha_t`` and the measured step (log-log).

    Two panels, each of quantities of one kind: the top one is dimensionless (``rho_t``
    with its two bounds ``lr`` and ``1/sqrt(t)``), the bottom one in the units of the
    parameter (``RMS(P)`` before the step, the ``eps2`` floor, ``alpha_t`` and the
    measured ``RMS(P_new - P_old)``). ``lr`` and ``eps2`` are the values the trace was
    run with (drawn as guides); the step whose gradient was scaled (``trace["outlier"]``)
    is a dotted red line on both panels. The legend sits to the right of the axes, so
    no curve is hidden behind it.

    Returns
    -------
    Figure
        Two axes sharing the step axis, and one figure legend outside them.
    """
    t = trace["t"]
    fig = new_figure(9.0, 5.6)
    ax_rho, ax_size = fig.subplots(2, 1, sharex=True)
    ax_rho.loglog(t, 1.0 / np.sqrt(t), ":", color="gray", label="1/sqrt(t)")
    ax_rho.axhline(lr, ls="--", color="gray", lw=1, label=f"lr = {lr:.3g}")
    ax_rho.loglog(t, trace["rho"], lw=2, label="rho_t = min(lr, 1/sqrt(t))")
    ax_rho.set(title="Relative step size", ylabel="rho_t (no unit)")
    ax_size.loglog(t, trace["rms_param"], color="tab:orange", label="RMS(P) before the step")
    ax_size.axhline(eps2, ls="-.", color="gray", lw=1, label=f"eps2 = {eps2:.3g}")
    ax_size.loglog(t, trace["alpha"], lw=2, color="tab:green", label="alpha_t = max(eps2, RMS(P)) * rho_t")
    ax_size.loglog(t, trace["step"], ".", ms=2, color="tab:purple", label="measured RMS(P_new - P_old)")
    ax_size.set(title="Absolute sizes, in the units of P", xlabel="step t", ylabel="size (units of P)")
    _mark_outlier(trace, (ax_size, ax_rho))
    fig.legend(loc="outside right upper", markerscale=3)
    return finish(tidy_log_axes(fig))


def plot_clipping(trace: Mapping[str, np.ndarray], d: float) -> Figure:
    """``RMS(U) / d`` over steps and the shrink factor ``1 / max(1, RMS(U) / d)``, from :func:`adafactor_trace`.

    Returns
    -------
    Figure
        Two axes sharing the step axis: the clipping ratio (log y, threshold 1
        drawn), then the factor the update was multiplied by; the step whose
        gradient was scaled is a dotted red line on both; the legend is to the
        right of the axes.
    """
    t = trace["t"]
    ratio = trace["rms_u"] / d
    fig = new_figure(9.0, 4.2)
    ax_ratio, ax_factor = fig.subplots(2, 1, sharex=True)
    ax_ratio.semilogy(t, ratio, lw=1, label="RMS(U) / d")
    ax_ratio.axhline(1.0, color="red", ls="--", lw=1, label="clipping threshold")
    clipped = ratio > 1
    ax_ratio.semilogy(t[clipped], ratio[clipped], "r.", ms=4, label=f"clipped ({int(clipped.sum())} steps)")
    ax_ratio.set(title=f"Update clipping, d = {d:g}", ylabel="RMS(U) / d")
    ax_factor.plot(t, 1.0 / trace["clip"], lw=1)
    ax_factor.set(xlabel="step t", ylabel="1 / max(1, RMS(U)/d)", ylim=(0, 1.05))
    _mark_outlier(trace, (ax_ratio, ax_factor))
    fig.legend(loc="outside right upper")
    return finish(tidy_log_axes(fig))


def plot_eps1_placement(row_scales: np.ndarray, curves: Mapping[str, np.ndarray]) -> Figure:
    """Per-row ``RMS(U)`` against the row's gradient magnitude, one line per ``eps1`` placement.

    Parameters
    ----------
    row_scales : ndarray
        Positive gradient magnitude of each row (x axis, log).
    curves : mapping of label to ndarray
        ``RMS(U)`` of each row for each variant (y axis, log; zeros are not drawn).

    Returns
    -------
    Figure
        One axes, legend to its right.
    """
    fig = new_figure(8.0, 3.6)
    ax = fig.add_subplot()
    for (label, values), marker in zip(curves.items(), "osd^v"):
        ax.loglog(row_scales, np.where(values > 0, values, np.nan), marker=marker, label=label)
    ax.set(title="Where eps1 bites: RMS(U) of each row", xlabel="|g| in the row", ylabel="RMS(U) of the row")
    fig.legend(loc="outside right upper")
    return finish(tidy_log_axes(fig))


def plot_adafactor_on_lookups(run: Mapping[str, np.ndarray]) -> Figure:
    """What a dense Adafactor step does to an embedding table fed sparse gradients, from :func:`adafactor_on_lookups`.

    Left: per step, the rows looked up, the rows whose ``row_var`` changed (every
    row ever touched: its factor decays) and the untouched rows whose parameters
    moved (none). Right: ``RMS(U)`` over the looked-up rows and over the whole
    table (log y), with the clipping threshold ``d = 1``.

    Returns
    -------
    Figure
        Two axes, each with its legend below it.
    """
    steps = np.arange(1, len(run["touched"]) + 1)
    rows = len(run["touches"])
    fig = new_figure(11.0, 4.2)
    ax_rows, ax_rms = fig.subplots(1, 2)
    ax_rows.plot(steps, run["row_var_moved"], lw=2, label="rows whose row_var changed")
    ax_rows.plot(steps, run["touched"], lw=1, label="rows looked up")
    ax_rows.plot(steps, run["untouched_moved"], lw=1, ls="--", label="untouched rows whose weights moved")
    ax_rows.axhline(rows, color="gray", lw=1, ls=":", label=f"all {rows} rows")
    ax_rows.set(title="Work per step: the whole table's statistics", xlabel="step t", ylabel="rows",
                ylim=(-0.03 * rows, 1.1 * rows))
    ax_rows.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    ax_rms.semilogy(steps, run["rms_u_touched"], label="RMS(U) over the looked-up rows")
    ax_rms.semilogy(steps, run["rms_u_table"], label="RMS(U) over the whole table")
    ax_rms.axhline(1.0, color="red", ls="--", lw=1, label="clipping threshold d = 1")
    ax_rms.set(title="Clipping sees the whole table", xlabel="step t", ylabel="RMS(U)")
    ax_rms.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    return finish(tidy_log_axes(fig))

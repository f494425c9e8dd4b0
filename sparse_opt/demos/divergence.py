"""How far lazy Adam drifts from dense Adam on a real (small) embedding problem.

Behind ``notebooks/04_divergence_from_dense_adam.ipynb``. The model is a logistic
factorisation model on one embedding table ``E`` (``num_rows x dim``): an example
is a pair of Zipf-distributed row ids ``(a, b)`` with a binary label, and::

    z = E[a] . E[b]                 (logit)
    loss = mean(log(1 + exp(z)) - y * z)

Labels come from a hidden *teacher* table ``T`` of the same shape:
``y ~ Bernoulli(sigmoid(T[a] . T[b]))``, so the teacher's own loss is the best
a model can expect.

The gradient with respect to ``E`` only has rows ``a`` and ``b`` of each
example, so :func:`logistic_grad` builds it with :meth:`~sparse_opt.CsrGradient.from_rows`
(repeated rows summed), exactly as an embedding lookup's backward pass does.

:func:`train_side_by_side` trains LAZY, DORMANCY_DECAY (both
:class:`~sparse_opt.SparseAdamTable`) and :class:`~sparse_opt.DenseAdam` (fed
``csr.to_dense()``) from the same initial table on the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sparse_opt import CsrGradient, DenseAdam, LazyAdamMode, SparseAdamConfig, SparseAdamTable
from sparse_opt.demos.data import zipf_ids

#: The three optimizers compared, in plotting order.
OPTIMIZERS: tuple[str, ...] = ("lazy", "dormancy_decay", "dense")

#: The two lazy modes whose divergence from dense Adam is measured.
LAZY_MODES: tuple[str, ...] = ("lazy", "dormancy_decay")

#: Human-readable name of each optimizer.
LABELS: dict[str, str] = {"lazy": "LAZY", "dormancy_decay": "DORMANCY_DECAY", "dense": "dense Adam"}

#: Bucket edges on a row's mean gap between touches (steps / touches).
GAP_EDGES: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0, np.inf)

_COLORS: dict[str, str] = {"lazy": "tab:red", "dormancy_decay": "tab:blue", "dense": "0.3"}


@dataclass(frozen=True)
class Problem:
    """A seeded training problem: initial table, batches and a held-out set.

    Attributes
    ----------
    teacher : ndarray of float64, shape (num_rows, dim)
        The table that generated the labels: ``P(y = 1) = sigmoid(T[a] . T[b])``.
    init : ndarray of float64, shape (num_rows, dim)
        Initial embedding table (shared by the three optimizers).
    pairs : ndarray of int64, shape (num_steps, batch_size, 2)
        Row ids ``(a, b)`` of every training example, batch by batch.
    labels : ndarray of float64, shape (num_steps, batch_size)
        Their 0/1 labels.
    eval_pairs : ndarray of int64, shape (num_eval, 2)
    eval_labels : ndarray of float64, shape (num_eval,)
        A held-out set drawn from the same distribution.
    skew : float
        Zipf exponent of the row ids.
    """

    teacher: np.ndarray
    init: np.ndarray
    pairs: np.ndarray
    labels: np.ndarray
    eval_pairs: np.ndarray
    eval_labels: np.ndarray
    skew: float


def _frobenius(x: np.ndarray) -> float:
    # elementwise + pairwise sum, not BLAS: the same bits on every machine
    return float(np.sqrt(np.sum(x * x)))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # tanh form: no overflow for large |z|
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def make_problem(
    num_rows: int = 2000,
    dim: int = 8,
    skew: float = 1.1,
    num_steps: int = 300,
    batch_size: int = 256,
    num_eval: int = 4096,
    teacher_scale: float = 2.0,
    init_scale: float = 0.1,
    seed: int = 0,
) -> Problem:
    """Draw a teacher table, an initial table, all training batches and a held-out set.

    Parameters
    ----------
    num_rows, dim : int
        Table shape.
    skew : float
        Zipf exponent of both ids of a pair (:func:`~sparse_opt.demos.data.zipf_ids`).
    num_steps, batch_size : int
        Number of batches and examples per batch.
    num_eval : int
        Size of the held-out set.
    teacher_scale : float
        The teacher's entries are normal with variance ``teacher_scale / sqrt(dim)``,
        so its logits ``T[a] . T[b]`` have standard deviation about ``teacher_scale``.
    init_scale : float
        Standard deviation of the initial table's entries.
    seed : int
        Seeds everything.

    Returns
    -------
    Problem
    """
    rng = np.random.default_rng(seed)
    teacher = np.sqrt(teacher_scale / np.sqrt(dim)) * rng.standard_normal((num_rows, dim))
    init = init_scale * rng.standard_normal((num_rows, dim))

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        pairs = zipf_ids(num_rows, 2 * n, skew, rng).reshape(n, 2)
        logits = np.sum(teacher[pairs[:, 0]] * teacher[pairs[:, 1]], axis=1)
        labels = (rng.random(n) < _sigmoid(logits)).astype(np.float64)
        return pairs, labels

    pairs, labels = draw(num_steps * batch_size)
    eval_pairs, eval_labels = draw(num_eval)
    return Problem(
        teacher=teacher,
        init=init,
        pairs=pairs.reshape(num_steps, batch_size, 2),
        labels=labels.reshape(num_steps, batch_size),
        eval_pairs=eval_pairs,
        eval_labels=eval_labels,
        skew=float(skew),
    )


def logistic_loss(table: np.ndarray, pairs: np.ndarray, labels: np.ndarray) -> float:
    """Mean logistic loss of the logits ``table[a] . table[b]`` against 0/1 ``labels``."""
    z = np.sum(table[pairs[:, 0]] * table[pairs[:, 1]], axis=1)
    return float(np.mean(np.logaddexp(0.0, z) - labels * z))


def logistic_grad(table: np.ndarray, pairs: np.ndarray, labels: np.ndarray) -> CsrGradient:
    """Gradient of :func:`logistic_loss` with respect to ``table``, as an embedding lookup's.

    ``d loss / d z_i = (sigmoid(z_i) - y_i) / n``; row ``a_i`` receives that times
    ``table[b_i]`` and row ``b_i`` that times ``table[a_i]`` (a pair ``a == b``
    gets both, i.e. twice, as ``d(E[a] . E[a]) / dE[a] = 2 E[a]``).

    Parameters
    ----------
    table : ndarray, shape (num_rows, dim)
    pairs : ndarray of int, shape (n, 2)
    labels : ndarray, shape (n,)

    Returns
    -------
    CsrGradient
        Shape ``table.shape``, one complete row per distinct id of ``pairs``
        (built by :meth:`~sparse_opt.CsrGradient.from_rows`, repeats summed).
    """
    rows_a, rows_b = table[pairs[:, 0]], table[pairs[:, 1]]
    z = np.sum(rows_a * rows_b, axis=1)
    dz = (_sigmoid(z) - labels) / labels.size
    row_ids = np.concatenate([pairs[:, 0], pairs[:, 1]])
    row_grads = np.concatenate([dz[:, None] * rows_b, dz[:, None] * rows_a])
    return CsrGradient.from_rows(row_ids, row_grads, table.shape[0])


@dataclass(frozen=True)
class SideBySide:
    """Result of :func:`train_side_by_side`.

    Attributes
    ----------
    divergence : dict of str to ndarray, shape (num_steps,)
        For ``"lazy"`` and ``"dormancy_decay"``: after each step,
        ``||E_mode - E_dense||_F / ||E_dense - E_init||_F``, the distance from
        dense Adam's table relative to how far dense Adam has moved.
    eval_steps : ndarray of int64
        Steps at which the held-out loss was measured (0 = initial table).
    eval_loss : dict of str to ndarray
        Held-out loss at ``eval_steps``, per optimizer.
    teacher_loss : float
        Held-out loss of the teacher table (the best to expect).
    tables : dict of str to ndarray
        Final tables, per optimizer.
    init : ndarray
        The initial table.
    touch_counts : ndarray of int64, shape (num_rows,)
        Number of steps at which each row received a gradient.
    num_steps : int
    skew, lr, beta1, beta2 : float
        The problem's Zipf exponent and the Adam hyper-parameters used.
    """

    divergence: dict[str, np.ndarray]
    eval_steps: np.ndarray
    eval_loss: dict[str, np.ndarray]
    teacher_loss: float
    tables: dict[str, np.ndarray]
    init: np.ndarray
    touch_counts: np.ndarray
    num_steps: int
    skew: float
    lr: float
    beta1: float
    beta2: float


def train_side_by_side(
    problem: Problem,
    lr: float = 0.01,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    eval_every: int = 10,
) -> SideBySide:
    """Train LAZY, DORMANCY_DECAY and dense Adam from ``problem.init`` on the same batches.

    Each optimizer computes the gradient at its own table (so the runs can drift
    apart); dense Adam receives that gradient as ``csr.to_dense()``. Everything
    is float64. Costs O(num_steps * (batch_size * dim + num_rows * dim)).

    Parameters
    ----------
    problem : Problem
        From :func:`make_problem`.
    lr, beta1, beta2, eps : float
        Adam hyper-parameters shared by the three optimizers.
    eval_every : int
        Held-out loss every this many steps (and at steps 0 and ``num_steps``).

    Returns
    -------
    SideBySide
    """
    num_steps = problem.pairs.shape[0]
    tables = {name: problem.init.copy() for name in OPTIMIZERS}
    config = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps}
    sparse = {
        "lazy": SparseAdamTable(tables["lazy"], SparseAdamConfig(**config, mode=LazyAdamMode.LAZY)),
        "dormancy_decay": SparseAdamTable(
            tables["dormancy_decay"], SparseAdamConfig(**config, mode=LazyAdamMode.DORMANCY_DECAY)
        ),
    }
    dense = DenseAdam(tables["dense"], **config)
    eval_steps = np.unique(np.r_[np.arange(0, num_steps, eval_every), num_steps]).astype(np.int64)
    eval_loss = {name: np.empty(eval_steps.size) for name in OPTIMIZERS}
    divergence = {name: np.empty(num_steps) for name in LAZY_MODES}
    touch_counts = np.zeros(problem.init.shape[0], dtype=np.int64)
    next_eval = 0

    for k in range(num_steps + 1):
        if k == eval_steps[next_eval]:
            for name in OPTIMIZERS:
                eval_loss[name][next_eval] = logistic_loss(tables[name], problem.eval_pairs, problem.eval_labels)
            next_eval += 1
        if k == num_steps:
            break
        pairs, labels = problem.pairs[k], problem.labels[k]
        for name, opt in sparse.items():
            opt.step(logistic_grad(tables[name], pairs, labels))
        grad = logistic_grad(tables["dense"], pairs, labels)
        dense.step(grad.to_dense())
        touch_counts[grad.touched_rows] += 1
        moved = _frobenius(tables["dense"] - problem.init)
        for name in LAZY_MODES:
            divergence[name][k] = _frobenius(tables[name] - tables["dense"]) / moved

    return SideBySide(
        divergence=divergence,
        eval_steps=eval_steps,
        eval_loss=eval_loss,
        teacher_loss=logistic_loss(problem.teacher, problem.eval_pairs, problem.eval_labels),
        tables=tables,
        init=problem.init,
        touch_counts=touch_counts,
        num_steps=num_steps,
        skew=problem.skew,
        lr=float(lr),
        beta1=float(beta1),
        beta2=float(beta2),
    )


def divergence_by_frequency(result: SideBySide, gap_edges: tuple[float, ...] = GAP_EDGES) -> dict[str, object]:
    """Final divergence from dense Adam, and distance travelled, per bucket of touch frequency.

    A row's mean gap is ``num_steps / touch_count`` (1 = touched every step).
    Rows never touched are left out (no optimizer moves them).

    Parameters
    ----------
    result : SideBySide
    gap_edges : tuple of float
        Ascending bucket edges on the mean gap; bucket ``i`` is
        ``gap_edges[i] <= gap < gap_edges[i + 1]``.

    Returns
    -------
    dict
        ``"labels"`` (ndarray of str), ``"rows"`` (rows per bucket), ``"touches"``
        (mean touches per row), and two dicts keyed by lazy mode, with one value
        per bucket (NaN for an empty bucket), both over the bucket's rows:
        ``"divergence"``: ``||E_mode - E_dense||_F / ||E_dense - E_init||_F``;
        ``"travel"``: ``||E_mode - E_init||_F / ||E_dense - E_init||_F``, how far
        the mode moved the rows compared with dense Adam.
    """
    counts = result.touch_counts
    touched = counts > 0
    gap = np.full(counts.shape, np.inf)
    gap[touched] = result.num_steps / counts[touched]
    edges = np.asarray(gap_edges, dtype=np.float64)
    bucket = np.searchsorted(edges, gap, side="right") - 1
    num_buckets = edges.size - 1
    dense = result.tables["dense"]
    moved_sq = np.sum((dense - result.init) ** 2, axis=1)
    diff_sq = {name: np.sum((result.tables[name] - dense) ** 2, axis=1) for name in LAZY_MODES}
    travel_sq = {name: np.sum((result.tables[name] - result.init) ** 2, axis=1) for name in LAZY_MODES}
    rows = np.zeros(num_buckets, dtype=np.int64)
    touches = np.full(num_buckets, np.nan)
    divergence = {name: np.full(num_buckets, np.nan) for name in LAZY_MODES}
    travel = {name: np.full(num_buckets, np.nan) for name in LAZY_MODES}
    for i in range(num_buckets):
        members = touched & (bucket == i)
        rows[i] = int(members.sum())
        if rows[i] == 0:
            continue
        touches[i] = counts[members].mean()
        moved = moved_sq[members].sum()
        for name in LAZY_MODES:
            divergence[name][i] = np.sqrt(diff_sq[name][members].sum() / moved)
            travel[name][i] = np.sqrt(travel_sq[name][members].sum() / moved)
    return {
        "labels": np.array([_gap_label(edges[i], edges[i + 1]) for i in range(num_buckets)]),
        "rows": rows,
        "touches": touches,
        "divergence": divergence,
        "travel": travel,
    }


def _gap_label(low: float, high: float) -> str:
    if np.isinf(high):
        return f">= {low:g}"
    return f"{low:g}-{high:g}"


def _draw_divergence_over_steps(ax: Axes, result: SideBySide) -> None:
    steps = np.arange(1, result.num_steps + 1)
    for name in LAZY_MODES:
        ax.plot(steps, result.divergence[name], color=_COLORS[name], label=LABELS[name])
    ax.set_xlabel("step")
    ax.set_ylabel("||E - E_dense|| / ||E_dense - E_0||")
    ax.set_title("divergence from dense Adam's table")
    ax.set_ylim(bottom=0.0)


def _draw_losses(ax: Axes, result: SideBySide) -> None:
    for name in OPTIMIZERS:
        style = {"linestyle": "--"} if name == "dense" else {}
        ax.plot(result.eval_steps, result.eval_loss[name], color=_COLORS[name], label=LABELS[name], **style)
    ax.axhline(result.teacher_loss, color="tab:green", linestyle=":", label="teacher (best to expect)")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out logistic loss")
    ax.set_title("held-out loss")


def _draw_buckets(ax: Axes, buckets: dict[str, object], key: str, ylabel: str, title: str) -> None:
    labels, rows, values = buckets["labels"], buckets["rows"], buckets[key]
    x = np.arange(labels.size)
    width = 0.38
    for offset, name in zip((-width / 2, width / 2), LAZY_MODES):
        ax.bar(x + offset, np.nan_to_num(values[name]), width, color=_COLORS[name], label=LABELS[name])
    ax.set_xticks(x, [f"{label}\n({n} rows)" for label, n in zip(labels, rows)], fontsize=8)
    ax.set_xlabel("mean gap between a row's touches (steps)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def plot_side_by_side(result: SideBySide) -> Figure:
    """Four panels summarising :func:`train_side_by_side`.

    Top left: divergence from dense Adam over the steps. Top right: held-out
    loss of the three optimizers and of the teacher. Bottom: final divergence
    and travel per touch-frequency bucket (:func:`divergence_by_frequency`), one
    bar per lazy mode.

    Parameters
    ----------
    result : SideBySide

    Returns
    -------
    matplotlib.figure.Figure
        Axes in the order top left, top right, bottom left, bottom right.
    """
    fig, axes = plt.subplots(2, 2, figsize=(11.0, 6.6), layout="constrained")
    buckets = divergence_by_frequency(result)
    _draw_divergence_over_steps(axes[0, 0], result)
    _draw_losses(axes[0, 1], result)
    _draw_buckets(
        axes[1, 0], buckets, "divergence", "||E - E_dense|| / ||E_dense - E_0||", "final divergence, by touch frequency"
    )
    _draw_buckets(axes[1, 1], buckets, "travel", "||E - E_0|| / ||E_dense - E_0||", "distance travelled vs dense Adam")
    axes[1, 1].axhline(1.0, color=_COLORS["dense"], linestyle="--", linewidth=1.0, label="dense Adam")
    for ax in axes.flat:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"LAZY and DORMANCY_DECAY vs dense Adam: skew {result.skew:g}, lr {result.lr:g}, "
        f"beta1 {result.beta1:g}, beta2 {result.beta2:g}"
    )
    return fig

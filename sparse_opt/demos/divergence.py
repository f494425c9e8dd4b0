"""Lazy Adam against dense Adam on a small Zipfian embedding model: a tuned, seeded experiment.

Behind ``notebooks/04_divergence_from_dense_adam.ipynb``. The model is a logistic
factorisation model on one embedding table ``E`` (``num_rows x dim``): an example
is a pair of Zipf-distributed row ids ``(a, b)`` with a binary label, and::

    z = E[a] . E[b]                 (logit)
    loss = mean(log(1 + exp(z)) - y * z)

Labels come from a hidden *teacher* table ``T`` of the same shape:
``y ~ Bernoulli(sigmoid(T[a] . T[b]))``, so the teacher's own loss is the best
a model can expect. The gradient with respect to ``E`` only has rows ``a`` and
``b`` of each example, so :func:`logistic_grad` builds it with
:meth:`~sparse_opt.CsrGradient.from_rows` (repeated rows summed), exactly as an
embedding lookup's backward pass does.

Four optimizers are trained in lockstep on the same batches (:func:`train`),
each computing its gradient at its own table: the three lazy modes of
:class:`~sparse_opt.SparseAdamTable` (``LAZY``, ``DORMANCY_DECAY`` and
``DENSE_EQUIVALENT``, which calls ``catch_up(ids)`` before each lookup) and
:class:`~sparse_opt.DenseAdam`, fed ``csr.to_dense()``.

**Seeds side by side.** A :class:`Problem` holds one independent problem per
seed (its own teacher, initial table, batches, validation and test sets) in one
*block* of rows of a stacked table: seed ``j`` owns rows ``j * num_rows ..
(j + 1) * num_rows - 1``. Adam updates each coordinate from that coordinate's
own state and gradient only, and each block's gradient is the gradient of that
seed's own mean loss, so the blocks never interact: training the stack is
training each seed on its own, at the per-step overhead of one run (tested).

The rest summarises a run or a learning-rate sweep: divergence from dense Adam
by a row's gap between touches (:func:`divergence_by_gap`), the learning rate
each method does best at on validation (:func:`choose_lrs`), test losses at
those rates with their spread over seeds (:func:`tuned_results`), the work and
state each method needs (:func:`state_bytes`), and the figures.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sparse_opt import CsrGradient, DenseAdam, LazyMode, SparseAdamConfig, SparseAdamTable
from sparse_opt._adam_coasting import AdamCoasting
from sparse_opt._sparse_base import CATCH_UP_BLOCK
from sparse_opt.sparse_adam import adam_catch_up, sparse_adam_update
from sparse_opt.demos.data import zipf_ids
from sparse_opt.demos.figures import LEGEND, finish, new_figure

#: The four optimizers compared, in plotting order: the three lazy modes, then dense Adam.
METHODS: tuple[str, ...] = ("lazy", "dormancy_decay", "dense_equivalent", "dense")

#: The lazy modes, whose distance from dense Adam's table is measured.
LAZY_MODES: tuple[str, ...] = ("lazy", "dormancy_decay", "dense_equivalent")

#: Human-readable name of each optimizer.
LABELS: dict[str, str] = {
    "lazy": "LAZY",
    "dormancy_decay": "DORMANCY_DECAY",
    "dense_equivalent": "DENSE_EQUIVALENT",
    "dense": "dense Adam",
}

_COLORS: dict[str, str] = {
    "lazy": "tab:red",
    "dormancy_decay": "tab:blue",
    "dense_equivalent": "tab:green",
    "dense": "0.25",
}
_MARKERS: dict[str, str] = {"lazy": "o", "dormancy_decay": "s", "dense_equivalent": "^", "dense": "x"}


@dataclass(frozen=True)
class Problem:
    """Seeded training problems, one block of table rows per seed.

    Attributes
    ----------
    seeds : tuple of int
        One independent problem per seed; block ``j`` (rows ``j * num_rows`` to
        ``(j + 1) * num_rows - 1`` of every table) belongs to ``seeds[j]``.
    teacher : ndarray of float64, shape (num_seeds * num_rows, dim)
        The tables that generated the labels: ``P(y = 1) = sigmoid(T[a] . T[b])``.
    init : ndarray of float64, shape (num_seeds * num_rows, dim)
        Initial embedding tables (shared by the four optimizers).
    pairs : ndarray of int64, shape (num_steps, num_seeds * batch_size, 2)
        Row ids ``(a, b)`` of every training example, step by step; entries
        ``j * batch_size .. (j + 1) * batch_size - 1`` of a step are seed ``j``'s
        batch, with ids in its block.
    labels : ndarray of float64, shape (num_steps, num_seeds * batch_size)
        Their 0/1 labels.
    valid_pairs, test_pairs : ndarray of int64, shape (num_seeds, n, 2)
    valid_labels, test_labels : ndarray of float64, shape (num_seeds, n)
        Per seed, a validation set (to choose learning rates) and a test set
        (to report), drawn from the same distribution as the batches.
    num_rows : int
        Rows per seed (per block).
    batch_size : int
        Examples per step and seed.
    skew : float
        Zipf exponent of the row ids.
    """

    seeds: tuple[int, ...]
    teacher: np.ndarray
    init: np.ndarray
    pairs: np.ndarray
    labels: np.ndarray
    valid_pairs: np.ndarray
    valid_labels: np.ndarray
    test_pairs: np.ndarray
    test_labels: np.ndarray
    num_rows: int
    batch_size: int
    skew: float

    @property
    def num_seeds(self) -> int:
        return len(self.seeds)

    @property
    def num_steps(self) -> int:
        return int(self.pairs.shape[0])

    @property
    def dim(self) -> int:
        return int(self.init.shape[1])

    def block(self, j: int) -> slice:
        """The rows of seed ``seeds[j]`` in the stacked tables."""
        return slice(j * self.num_rows, (j + 1) * self.num_rows)


def _frobenius_sq(x: np.ndarray) -> float:
    # elementwise + pairwise sum, not BLAS: the same bits on every machine
    return float(np.sum(x * x))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # tanh form: no overflow for large |z|
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def make_problem(
    seeds: Sequence[int] = (0,),
    num_rows: int = 4000,
    dim: int = 8,
    skew: float = 1.3,
    num_steps: int = 12000,
    batch_size: int = 64,
    num_valid: int = 8192,
    num_test: int = 32768,
    teacher_scale: float = 2.0,
    init_scale: float = 0.1,
) -> Problem:
    """Draw, for each seed, a teacher table, an initial table, all batches, a validation and a test set.

    Each seed's block is drawn from its own ``numpy.random.default_rng(seed)``, so
    it is the same whichever other seeds are stacked with it.

    Parameters
    ----------
    seeds : sequence of int
        One problem per seed (distinct, at least one).
    num_rows, dim : int
        Table shape of one seed.
    skew : float
        Zipf exponent of both ids of a pair (:func:`~sparse_opt.demos.data.zipf_ids`).
    num_steps, batch_size : int
        Number of steps, and examples per step and seed.
    num_valid, num_test : int
        Sizes of the validation and test sets of each seed.
    teacher_scale : float
        The teacher's entries are normal with variance ``teacher_scale / sqrt(dim)``,
        so its logits ``T[a] . T[b]`` have standard deviation about ``teacher_scale``.
    init_scale : float
        Standard deviation of the initial table's entries (``torch.nn.Embedding``
        starts its tables at 1).

    Returns
    -------
    Problem
    """
    seeds = tuple(int(s) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    blocks = []
    for j, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        teacher = np.sqrt(teacher_scale / np.sqrt(dim)) * rng.standard_normal((num_rows, dim))
        init = init_scale * rng.standard_normal((num_rows, dim))

        def draw(
            n: int, rng: np.random.Generator = rng, teacher: np.ndarray = teacher
        ) -> tuple[np.ndarray, np.ndarray]:
            pairs = zipf_ids(num_rows, 2 * n, skew, rng).reshape(n, 2)
            logits = np.sum(teacher[pairs[:, 0]] * teacher[pairs[:, 1]], axis=1)
            labels = (rng.random(n) < _sigmoid(logits)).astype(np.float64)
            return pairs + j * num_rows, labels

        train = draw(num_steps * batch_size)
        blocks.append((teacher, init, train, draw(num_valid), draw(num_test)))
    return Problem(
        seeds=seeds,
        teacher=np.concatenate([b[0] for b in blocks]),
        init=np.concatenate([b[1] for b in blocks]),
        pairs=np.concatenate([b[2][0].reshape(num_steps, batch_size, 2) for b in blocks], axis=1),
        labels=np.concatenate([b[2][1].reshape(num_steps, batch_size) for b in blocks], axis=1),
        valid_pairs=np.stack([b[3][0] for b in blocks]),
        valid_labels=np.stack([b[3][1] for b in blocks]),
        test_pairs=np.stack([b[4][0] for b in blocks]),
        test_labels=np.stack([b[4][1] for b in blocks]),
        num_rows=int(num_rows),
        batch_size=int(batch_size),
        skew=float(skew),
    )


def logistic_loss(table: np.ndarray, pairs: np.ndarray, labels: np.ndarray) -> float:
    """Mean logistic loss of the logits ``table[a] . table[b]`` against 0/1 ``labels``."""
    z = np.sum(table[pairs[:, 0]] * table[pairs[:, 1]], axis=1)
    return float(np.mean(np.logaddexp(0.0, z) - labels * z))


def logistic_grad(
    table: np.ndarray, pairs: np.ndarray, labels: np.ndarray, batch_size: int | None = None
) -> CsrGradient:
    """Gradient of the logistic loss with respect to ``table``, as an embedding lookup's.

    ``d loss / d z_i = (sigmoid(z_i) - y_i) / batch_size``; row ``a_i`` receives
    that times ``table[b_i]`` and row ``b_i`` that times ``table[a_i]`` (a pair
    ``a == b`` gets both, i.e. twice, as ``d(E[a] . E[a]) / dE[a] = 2 E[a]``).

    Parameters
    ----------
    table : ndarray, shape (num_rows, dim)
    pairs : ndarray of int, shape (n, 2)
    labels : ndarray, shape (n,)
    batch_size : int, optional
        The loss is a mean over this many examples; default ``n``, the gradient
        of :func:`logistic_loss`. With the batches of several seeds side by side
        (:class:`Problem`), ``Problem.batch_size``: the gradient of the sum of
        each seed's own mean loss.

    Returns
    -------
    CsrGradient
        Shape ``table.shape``, one complete row per distinct id of ``pairs``
        (built by :meth:`~sparse_opt.CsrGradient.from_rows`, repeats summed).
    """
    rows_a, rows_b = table[pairs[:, 0]], table[pairs[:, 1]]
    z = np.sum(rows_a * rows_b, axis=1)
    dz = (_sigmoid(z) - labels) / (labels.size if batch_size is None else batch_size)
    row_ids = np.concatenate([pairs[:, 0], pairs[:, 1]])
    row_grads = np.concatenate([dz[:, None] * rows_b, dz[:, None] * rows_a])
    return CsrGradient.from_rows(row_ids, row_grads, table.shape[0])


# -- how rarely rows are touched ------------------------------------------------------


def touch_counts(problem: Problem) -> np.ndarray:
    """Number of steps at which each row of the stacked table receives a gradient, int64 ``(num_seeds * num_rows,)``."""
    return np.bincount(_touched_rows(problem)[0], minlength=problem.init.shape[0]).astype(np.int64)


def mean_gaps(problem: Problem) -> np.ndarray:
    """Each row's mean gap between touches, ``num_steps / touches`` (``inf`` for a row never touched)."""
    counts = touch_counts(problem)
    gaps = np.full(counts.shape, np.inf)
    gaps[counts > 0] = problem.num_steps / counts[counts > 0]
    return gaps


def dormant_spells(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Every stretch between two consecutive touches of a row: ``(rows, lengths)``, int64, 1-D.

    A row touched at steps ``s`` and ``t`` (and not in between) has a spell of
    length ``t - s``: ``t - s - 1`` dormant steps, then the touch. Its steps
    before the first touch are not a spell (its moments are still zero then).
    Sorted by row, then by step.
    """
    key = _touches(problem)
    row, step = key // problem.num_steps, key % problem.num_steps
    same_row = row[1:] == row[:-1]
    return row[1:][same_row], (step[1:] - step[:-1])[same_row]


def _touched_rows(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, step) with a gradient, once: ``(rows, steps)``, int64, sorted by step, then by row.

    A sort within each step's batch, not over the whole run: O(steps * batch log batch).
    """
    ids = np.sort(problem.pairs.reshape(problem.num_steps, -1), axis=1)
    first = np.ones(ids.shape, dtype=bool)
    first[:, 1:] = ids[:, 1:] != ids[:, :-1]
    steps = np.broadcast_to(np.arange(problem.num_steps, dtype=np.int64)[:, None], ids.shape)
    return ids[first], steps[first]


def _touches(problem: Problem) -> np.ndarray:
    """Sorted unique ``row * num_steps + step`` over every (row, step) with a gradient."""
    rows, steps = _touched_rows(problem)
    return np.sort(rows * problem.num_steps + steps)


# -- training -------------------------------------------------------------------------


def make_optimizer(
    method: str,
    table: np.ndarray,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> SparseAdamTable | DenseAdam:
    """The optimizer of ``method`` (one of :data:`METHODS`) over ``table`` (updated in place).

    ``weight_decay`` is AdamW's decoupled decay, for every method.
    """
    if method == "dense":
        return DenseAdam(table, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    if method not in LAZY_MODES:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    config = SparseAdamConfig(
        lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, mode=LazyMode(method)
    )
    return SparseAdamTable(table, config)


def training_step(
    method: str,
    opt: SparseAdamTable | DenseAdam,
    table: np.ndarray,
    pairs: np.ndarray,
    labels: np.ndarray,
    batch_size: int | None = None,
) -> CsrGradient:
    """One step of the embedding training loop; returns the gradient it applied.

    ``DENSE_EQUIVALENT`` first brings the rows about to be looked up current
    (``opt.catch_up(ids)``), so the lookup reads exactly what dense Adam holds;
    then every method looks the rows up, computes the loss's row gradients
    (:func:`logistic_grad`) and steps: the lazy modes with the sparse gradient,
    dense Adam with ``csr.to_dense()``.
    """
    if method == "dense_equivalent":
        opt.catch_up(pairs.reshape(-1))
    grad = logistic_grad(table, pairs, labels, batch_size)
    opt.step(grad.to_dense() if method == "dense" else grad)  # type: ignore[arg-type]
    return grad


@dataclass(frozen=True)
class Work:
    """What one method did over a run (all seeds together).

    Attributes
    ----------
    entries_stepped : int
        Table entries its steps updated (dense Adam: the whole table every step).
    entries_caught_up : int
        Entries ``catch_up`` brought current before the lookups (DENSE_EQUIVALENT
        only; 0 otherwise): those of the looked-up rows not touched at the step before.
    dormant_steps_caught_up : int
        The dormant steps those catch-ups applied, summed over the caught-up rows.
    rows_caught_up : int
        The rows behind ``entries_caught_up``.
    seconds : float
        Wall time of its training steps (gradient included), evaluation excluded.
    """

    entries_stepped: int
    entries_caught_up: int
    dormant_steps_caught_up: int
    rows_caught_up: int
    seconds: float


@dataclass(frozen=True)
class Run:
    """The four methods trained in lockstep at one learning rate: result of :func:`train`.

    Per-seed arrays have the seeds on axis 0.

    Attributes
    ----------
    lr, beta1, beta2, eps, weight_decay : float
    eval_steps : ndarray of int64
        Steps after which the validation loss and the divergences were measured (0 = initial tables).
    valid_loss : dict of str to ndarray, shape (num_seeds, len(eval_steps))
        Validation loss per method.
    test_loss : dict of str to ndarray, shape (num_seeds,)
        Test loss of the final tables, per method.
    divergence : dict of str to ndarray, shape (num_seeds, len(eval_steps))
        Per lazy mode: ``||E_mode - E_dense||_F / ||E_dense - E_0||_F`` over the
        seed's block, the distance from dense Adam's table relative to how far
        dense Adam has moved (0 where dense Adam has not moved yet).
    max_difference : dict of str to ndarray, shape (num_seeds, len(eval_steps))
        Per lazy mode: ``max |E_mode - E_dense| / max |E_dense|`` over the block.
    tables : dict of str to ndarray
        Final stacked tables, per method (DENSE_EQUIVALENT's caught up).
    work : dict of str to Work
    """

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    eval_steps: np.ndarray
    valid_loss: dict[str, np.ndarray]
    test_loss: dict[str, np.ndarray]
    divergence: dict[str, np.ndarray]
    max_difference: dict[str, np.ndarray]
    tables: dict[str, np.ndarray]
    work: dict[str, Work]


def train(
    problem: Problem,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    eval_every: int = 500,
    weight_decay: float = 0.0,
) -> Run:
    """Train the four :data:`METHODS` from ``problem.init`` on the same batches, in lockstep.

    Each method computes its gradient at its own table (:func:`training_step`),
    so the runs can drift apart. At step 0, every ``eval_every`` steps and at the
    end, DENSE_EQUIVALENT's whole table is caught up (``catch_up()``: the
    evaluation reads every row) and the validation losses and distances from
    dense Adam's table are measured per seed. Everything is float64.

    Parameters
    ----------
    problem : Problem
    lr, beta1, beta2, eps : float
        Adam's hyper-parameters, the same for the four methods.
    eval_every : int
        Steps between evaluations.
    weight_decay : float
        AdamW's decoupled decay, the same for the four methods.

    Returns
    -------
    Run
    """
    tables = {name: problem.init.copy() for name in METHODS}
    opts = {name: make_optimizer(name, tables[name], lr, beta1, beta2, eps, weight_decay) for name in METHODS}
    num_steps, seeds, dim = problem.num_steps, problem.num_seeds, problem.dim
    eval_steps = np.unique(np.r_[np.arange(0, num_steps, eval_every), num_steps]).astype(np.int64)
    valid = {name: np.empty((seeds, eval_steps.size)) for name in METHODS}
    divergence = {name: np.empty((seeds, eval_steps.size)) for name in LAZY_MODES}
    max_diff = {name: np.empty((seeds, eval_steps.size)) for name in LAZY_MODES}
    stepped = dict.fromkeys(METHODS, 0)
    seconds = dict.fromkeys(METHODS, 0.0)
    dormant = caught_rows = 0
    de = opts["dense_equivalent"]
    next_eval = 0
    for k in range(num_steps + 1):
        if k == eval_steps[next_eval]:
            de.catch_up()  # type: ignore[union-attr]
            _evaluate(problem, tables, next_eval, valid, divergence, max_diff)
            next_eval += 1
        if k == num_steps:
            break
        pairs, labels = problem.pairs[k], problem.labels[k]
        ids = np.unique(pairs)
        last = de.last_step[ids, 0]  # type: ignore[union-attr, index]
        stale = last < k
        caught_rows += int(stale.sum())
        dormant += int((k - last[stale]).sum())
        for name in METHODS:
            start = time.perf_counter()
            grad = training_step(name, opts[name], tables[name], pairs, labels, problem.batch_size)
            seconds[name] += time.perf_counter() - start
            stepped[name] += tables[name].size if name == "dense" else grad.nnz
    caught = caught_rows * dim
    work = {
        name: Work(
            entries_stepped=stepped[name],
            entries_caught_up=caught if name == "dense_equivalent" else 0,
            dormant_steps_caught_up=dormant if name == "dense_equivalent" else 0,
            rows_caught_up=caught_rows if name == "dense_equivalent" else 0,
            seconds=seconds[name],
        )
        for name in METHODS
    }
    test = {
        name: np.array(
            [logistic_loss(tables[name], problem.test_pairs[j], problem.test_labels[j]) for j in range(seeds)]
        )
        for name in METHODS
    }
    return Run(
        lr=float(lr),
        beta1=float(beta1),
        beta2=float(beta2),
        eps=float(eps),
        weight_decay=float(weight_decay),
        eval_steps=eval_steps,
        valid_loss=valid,
        test_loss=test,
        divergence=divergence,
        max_difference=max_diff,
        tables=tables,
        work=work,
    )


def _evaluate(
    problem: Problem,
    tables: dict[str, np.ndarray],
    i: int,
    valid: dict[str, np.ndarray],
    divergence: dict[str, np.ndarray],
    max_diff: dict[str, np.ndarray],
) -> None:
    for j in range(problem.num_seeds):
        rows = problem.block(j)
        for name in METHODS:
            valid[name][j, i] = logistic_loss(tables[name], problem.valid_pairs[j], problem.valid_labels[j])
        dense = tables["dense"][rows]
        moved = _frobenius_sq(dense - problem.init[rows])
        scale = float(np.max(np.abs(dense)))
        for name in LAZY_MODES:
            diff = tables[name][rows] - dense
            divergence[name][j, i] = np.sqrt(_frobenius_sq(diff) / moved) if moved > 0 else 0.0
            max_diff[name][j, i] = float(np.max(np.abs(diff))) / scale


def sweep(
    problem: Problem,
    lrs: Sequence[float],
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    eval_every: int = 500,
    report: Callable[[str], None] | None = None,
    weight_decay: float = 0.0,
) -> dict[float, Run]:
    """:func:`train` at every learning rate of ``lrs`` at once, in one stacked, vectorised run.

    The result is :func:`train`'s at each rate, bit for bit (tested), but each
    step costs one gradient computation for every method, rate and seed
    together instead of one per method and rate (:func:`sweep_grid`, with
    every rate at the same ``weight_decay``).

    Parameters
    ----------
    problem : Problem
    lrs : sequence of float
        Distinct learning rates.
    beta1, beta2, eps : float
        As for :func:`train`, shared by every rate.
    eval_every : int
        Steps between evaluations.
    report : callable, optional
        Called with a line of text at four evaluations a quarter of the run
        apart: the step, and each method's validation loss then at the middle
        rate of ``lrs`` (mean over seeds).
    weight_decay : float
        As for :func:`train`, shared by every rate.

    Returns
    -------
    dict of float to Run
        Keyed by learning rate, in the order of ``lrs``. ``Work.seconds`` is the
        stacked run's time per method (its optimizer calls, plus a quarter of
        the shared gradient computation) divided by the number of rates.
    """
    lrs = tuple(float(lr) for lr in lrs)
    if not lrs or len(set(lrs)) != len(lrs):
        raise ValueError(f"lrs must be distinct and at least one, got {lrs}")
    runs = sweep_grid(problem, [(lr, weight_decay) for lr in lrs], beta1, beta2, eps, eval_every, report)
    return {lr: runs[lr, float(weight_decay)] for lr in lrs}


def sweep_grid(
    problem: Problem,
    settings: Sequence[tuple[float, float]],
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    eval_every: int = 500,
    report: Callable[[str], None] | None = None,
) -> dict[tuple[float, float], Run]:
    """:func:`train` at every ``(lr, weight_decay)`` of ``settings`` at once, in one stacked, vectorised run.

    The result is :func:`train`'s at each setting, bit for bit (tested), but
    each step costs one gradient computation for every method, setting and
    seed together instead of one per method and setting. Every method's table
    is stacked over the settings: setting ``settings[l]`` owns rows
    ``l * R .. (l + 1) * R - 1`` (``R = num_seeds * num_rows``, the stacked
    seeds of :class:`Problem`), and the four methods' stacks sit one after
    another in a single array, so one :func:`logistic_grad` call over all of
    them gives every block its own gradient (blocks never share a row). The
    gradient is then cut at the block boundaries and each block is stepped by
    the kit's own code with its own learning rate and weight decay:
    :class:`~sparse_opt.DenseAdam` over the block for dense Adam, and the
    functional cores :func:`~sparse_opt.sparse_adam.sparse_adam_update` and
    :func:`~sparse_opt.sparse_adam.adam_catch_up` (with ``last_step`` kept as
    one int64 per row) for the lazy modes, with the rows and arguments
    :class:`~sparse_opt.SparseAdamTable` would pass them.

    Parameters
    ----------
    problem : Problem
    settings : sequence of (float, float)
        Distinct ``(lr, weight_decay)`` pairs; ``weight_decay`` is AdamW's
        decoupled decay.
    beta1, beta2, eps : float
        As for :func:`train`, shared by every setting.
    eval_every : int
        Steps between evaluations.
    report : callable, optional
        Called with a line of text at four evaluations a quarter of the run
        apart: the step, and each method's validation loss then at the middle
        setting of ``settings`` (mean over seeds).

    Returns
    -------
    dict of (float, float) to Run
        Keyed by ``(lr, weight_decay)``, in the order of ``settings``.
        ``Work.seconds`` is the stacked run's time per method (its optimizer
        calls, plus a quarter of the shared gradient computation) divided by
        the number of settings.
    """
    settings = tuple((float(lr), float(wd)) for lr, wd in settings)
    if not settings or len(set(settings)) != len(settings):
        raise ValueError(f"settings must be distinct and at least one, got {settings}")
    configs = {
        (name, setting): SparseAdamConfig(
            lr=setting[0], beta1=beta1, beta2=beta2, eps=eps, weight_decay=setting[1], mode=LazyMode(name)
        )
        for name in LAZY_MODES
        for setting in settings
    }
    if eval_every < 1:
        raise ValueError(f"eval_every must be at least 1, got {eval_every}")
    num_settings, size, dim, seeds = len(settings), problem.init.shape[0], problem.dim, problem.num_seeds
    num_steps = problem.num_steps
    # block b = (method i, setting l) owns rows b * size .. (b + 1) * size - 1 of `stack`
    blocks = len(METHODS) * num_settings
    stack = np.tile(problem.init, (blocks, 1))

    def rows_of(b: int) -> slice:
        return slice(b * size, (b + 1) * size)

    tables = {
        name: [stack[rows_of(i * num_settings + l)] for l in range(num_settings)] for i, name in enumerate(METHODS)
    }
    moments = {name: [(np.zeros((size, dim)), np.zeros((size, dim))) for _ in settings] for name in LAZY_MODES}
    last_step = {name: [np.zeros(size, dtype=np.int64) for _ in settings] for name in LAZY_MODES}
    coastings = [  # as SparseAdamTable in DENSE_EQUIVALENT mode makes its own, one per setting
        AdamCoasting(c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, stack.dtype)
        for c in (configs["dense_equivalent", setting] for setting in settings)
    ]
    dense_opts = [
        DenseAdam(t, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd)
        for t, (lr, wd) in zip(tables["dense"], settings)
    ]
    dense_first = len(METHODS) - 1  # dense Adam's blocks start at block dense_first * num_settings
    dense_grad = np.zeros((num_settings * size, dim))
    offsets = np.arange(blocks, dtype=np.int64) * size
    bounds = np.arange(blocks + 1, dtype=np.int64) * size

    eval_steps = np.unique(np.r_[np.arange(0, num_steps, eval_every), num_steps]).astype(np.int64)
    valid = {name: [np.empty((seeds, eval_steps.size)) for _ in settings] for name in METHODS}
    divergence = {name: [np.empty((seeds, eval_steps.size)) for _ in settings] for name in LAZY_MODES}
    max_diff = {name: [np.empty((seeds, eval_steps.size)) for _ in settings] for name in LAZY_MODES}
    stepped = dict.fromkeys(METHODS, 0)
    seconds = dict.fromkeys(METHODS, 0.0)
    dormant = caught_rows = 0
    reports = {int(eval_steps[(eval_steps.size - 1) * q // 4]) for q in range(1, 5)}  # evaluations, a quarter apart
    middle = num_settings // 2  # reported: the middle setting, a stable one (training at the largest rate may not be)
    lr_mid, wd_mid = settings[middle]
    at = f"lr {lr_mid:g}" if len({wd for _, wd in settings}) == 1 else f"lr {lr_mid:g}, weight decay {wd_mid:g}"
    next_eval = 0
    de = METHODS.index("dense_equivalent")

    def catch_up_all(l: int, through: int) -> None:
        # what SparseAdamTable.catch_up() does: every row, in blocks of CATCH_UP_BLOCK entries
        block = max(1, CATCH_UP_BLOCK // dim)
        for start in range(0, size, block):
            index = np.arange(start, min(size, start + block))
            de_catch_up(l, index, through)

    def de_catch_up(l: int, index: np.ndarray, through: int) -> None:
        m, v = moments["dense_equivalent"][l]
        last = last_step["dense_equivalent"][l]
        adam_catch_up(tables["dense_equivalent"][l], m, v, last[index], index, through=through, coasting=coastings[l])
        last[index] = through

    for k in range(num_steps + 1):
        if k == eval_steps[next_eval]:
            for l in range(num_settings):
                catch_up_all(l, k)
                _evaluate(
                    problem,
                    {name: tables[name][l] for name in METHODS},
                    next_eval,
                    {name: valid[name][l] for name in METHODS},
                    {name: divergence[name][l] for name in LAZY_MODES},
                    {name: max_diff[name][l] for name in LAZY_MODES},
                )
            next_eval += 1
        if report is not None and k in reports:
            means = "; ".join(f"{LABELS[name]} {valid[name][middle][:, next_eval - 1].mean():.3f}" for name in METHODS)
            report(
                f"step {k:>6d} of {num_steps}: validation loss at {at}, "
                f"mean over seeds: {means}"
            )
        if k == num_steps:
            break
        pairs, labels = problem.pairs[k], problem.labels[k]
        ids = np.unique(pairs)
        last = last_step["dense_equivalent"][0][ids]
        stale = last < k
        caught_rows += int(stale.sum())
        dormant += int((k - last[stale]).sum())
        start = time.perf_counter()
        for l in range(num_settings):  # DENSE_EQUIVALENT: catch_up(ids) before the lookup
            de_catch_up(l, ids, k)
        seconds["dense_equivalent"] += time.perf_counter() - start
        start = time.perf_counter()
        all_pairs = (pairs[None] + offsets[:, None, None]).reshape(-1, 2)
        grad = logistic_grad(stack, all_pairs, np.tile(labels, blocks), problem.batch_size)
        rows = grad.touched_rows
        values = grad.values.reshape(rows.size, dim)
        cut = np.searchsorted(rows, bounds)
        shared = (time.perf_counter() - start) / len(METHODS)
        for i, name in enumerate(METHODS):
            start = time.perf_counter()
            if name == "dense":
                lo, hi = cut[dense_first * num_settings], cut[-1]
                touched = rows[lo:hi] - dense_first * num_settings * size
                dense_grad[touched] = values[lo:hi]
                for b, opt in enumerate(dense_opts):
                    opt.step(dense_grad[rows_of(b)])
                dense_grad[touched] = 0.0
                stepped[name] += tables[name][0].size
            else:
                for l in range(num_settings):
                    b = i * num_settings + l
                    index = rows[cut[b] : cut[b + 1]] - b * size
                    m, v = moments[name][l]
                    c = configs[name, settings[l]]
                    previous = None if c.mode is LazyMode.LAZY else last_step[name][l][index]
                    sparse_adam_update(
                        tables[name][l], m, v, previous, index, values[cut[b] : cut[b + 1]], step=k + 1,
                        lr=c.lr, beta1=c.beta1, beta2=c.beta2, eps=c.eps, weight_decay=c.weight_decay,
                        maximize=c.maximize, mode=c.mode, coasting=coastings[l] if i == de else None,
                    )  # fmt: skip
                    last_step[name][l][index] = k + 1
                stepped[name] += (cut[i * num_settings + 1] - cut[i * num_settings]) * dim
            seconds[name] += time.perf_counter() - start + shared
    caught = caught_rows * dim
    runs = {}
    for l, (lr, wd) in enumerate(settings):
        runs[lr, wd] = Run(
            lr=lr,
            beta1=float(beta1),
            beta2=float(beta2),
            eps=float(eps),
            weight_decay=wd,
            eval_steps=eval_steps.copy(),
            valid_loss={name: valid[name][l] for name in METHODS},
            test_loss={
                name: np.array(
                    [logistic_loss(tables[name][l], problem.test_pairs[j], problem.test_labels[j]) for j in range(seeds)]
                )
                for name in METHODS
            },
            divergence={name: divergence[name][l] for name in LAZY_MODES},
            max_difference={name: max_diff[name][l] for name in LAZY_MODES},
            tables={name: tables[name][l].copy() for name in METHODS},
            work={
                name: Work(
                    entries_stepped=stepped[name],
                    entries_caught_up=caught if name == "dense_equivalent" else 0,
                    dormant_steps_caught_up=dormant if name == "dense_equivalent" else 0,
                    rows_caught_up=caught_rows if name == "dense_equivalent" else 0,
                    seconds=seconds[name] / num_settings,
                )
                for name in METHODS
            },
        )
    return runs


# -- summaries ------------------------------------------------------------------------


def _buckets(gaps: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bucket index of each mean gap: ``edges[i] <= gap < edges[i + 1]`` (``inf`` goes to the last bucket)."""
    e = np.asarray(edges, dtype=np.float64)
    return np.minimum(np.searchsorted(e, gaps, side="right") - 1, e.size - 2)


def memory_edges(beta1: float, beta2: float) -> tuple[float, ...]:
    """Bucket edges on a row's mean gap between touches: 1, Adam's two memories, infinity.

    The memories are the time constants ``1 / (1 - beta1)`` of ``m`` and
    ``1 / (1 - beta2)`` of ``v`` (rounded to 12 significant digits, so that
    ``beta1 = 0.9`` gives 10), each kept only if above 1 (``beta = 0`` has no memory).

    Examples
    --------
    >>> memory_edges(0.9, 0.99)
    (1.0, 10.0, 100.0, inf)
    >>> memory_edges(0.0, 0.999)
    (1.0, 1000.0, inf)
    """
    memories = {float(f"{1.0 / (1.0 - b):.12g}") for b in (beta1, beta2)}
    return (1.0, *sorted(m for m in memories if m > 1.0), float(np.inf))


def gap_labels(edges: Sequence[float]) -> list[str]:
    """Readable bucket names, e.g. ``"10-100"`` and ``">= 100"``."""
    return [f">= {lo:g}" if np.isinf(hi) else f"{lo:g}-{hi:g}" for lo, hi in zip(edges[:-1], edges[1:])]


def divergence_by_gap(run: Run, problem: Problem, edges: Sequence[float] | None = None) -> dict[str, object]:
    """Final divergence from dense Adam per bucket of rows grouped by mean gap between touches, per seed.

    A row's mean gap is ``num_steps / touches`` (:func:`mean_gaps`). Rows never
    touched are left out (no optimizer moves them). The bucket edges default to
    the run's :func:`memory_edges`.

    Returns
    -------
    dict
        ``"labels"`` (list of str), ``"rows"`` (int64, ``(num_seeds, buckets)``:
        rows per bucket), and ``"divergence"``: per lazy mode, ``(num_seeds,
        buckets)`` of ``||E_mode - E_dense||_F / ||E_dense - E_0||_F`` over the
        bucket's rows (NaN for an empty bucket).
    """
    edges = memory_edges(run.beta1, run.beta2) if edges is None else edges
    gaps = mean_gaps(problem)
    bucket = _buckets(gaps, edges)
    touched = np.isfinite(gaps)
    nb = len(edges) - 1
    dense = run.tables["dense"]
    moved_sq = np.sum((dense - problem.init) ** 2, axis=1)
    diff_sq = {name: np.sum((run.tables[name] - dense) ** 2, axis=1) for name in LAZY_MODES}
    rows = np.zeros((problem.num_seeds, nb), dtype=np.int64)
    divergence = {name: np.full((problem.num_seeds, nb), np.nan) for name in LAZY_MODES}
    for j in range(problem.num_seeds):
        in_block = np.zeros(touched.shape, dtype=bool)
        in_block[problem.block(j)] = True
        for i in range(nb):
            members = in_block & touched & (bucket == i)
            rows[j, i] = int(members.sum())
            moved = moved_sq[members].sum()
            if rows[j, i] == 0 or moved == 0:
                continue
            for name in LAZY_MODES:
                divergence[name][j, i] = np.sqrt(diff_sq[name][members].sum() / moved)
    return {"labels": gap_labels(edges), "rows": rows, "divergence": divergence}


def held_out_loss_by_gap(
    tables: dict[str, np.ndarray], problem: Problem, edges: Sequence[float]
) -> dict[str, object]:
    """Test loss per bucket of test pairs grouped by the mean gap of their *rarer* row, per seed.

    Parameters
    ----------
    tables : dict of str to ndarray
        A stacked table per method (e.g. each method's final table at its own learning rate).
    problem : Problem
    edges : sequence of float
        Bucket edges on the mean gap (e.g. :func:`memory_edges`).

    Returns
    -------
    dict
        ``"labels"``, ``"pairs"`` (int64 ``(num_seeds, buckets)``: test pairs per
        bucket) and ``"loss"``: per method, ``(num_seeds, buckets)`` mean test
        loss over the bucket's pairs (NaN for an empty bucket).
    """
    gaps = mean_gaps(problem)
    nb = len(edges) - 1
    counts = np.zeros((problem.num_seeds, nb), dtype=np.int64)
    loss = {name: np.full((problem.num_seeds, nb), np.nan) for name in tables}
    for j in range(problem.num_seeds):
        pairs, labels = problem.test_pairs[j], problem.test_labels[j]
        bucket = _buckets(np.maximum(gaps[pairs[:, 0]], gaps[pairs[:, 1]]), edges)
        for i in range(nb):
            members = bucket == i
            counts[j, i] = int(members.sum())
            if counts[j, i]:
                for name, table in tables.items():
                    loss[name][j, i] = logistic_loss(table, pairs[members], labels[members])
    return {"labels": gap_labels(edges), "pairs": counts, "loss": loss}


def final_valid_loss(runs: dict[float, Run], method: str, at_step: int | None = None) -> np.ndarray:
    """Validation loss of ``method`` at the end (or at evaluation step ``at_step``), shape ``(len(runs), num_seeds)``.

    Learning rates ascending on axis 0.
    """
    out = []
    for lr in sorted(runs):
        run = runs[lr]
        i = -1 if at_step is None else int(np.flatnonzero(run.eval_steps == at_step)[0])
        out.append(run.valid_loss[method][:, i])
    return np.array(out)


def choose_lrs(runs: dict[float, Run], at_step: int | None = None) -> dict[str, float]:
    """Each method's learning rate: the lowest final validation loss averaged over seeds.

    ``at_step`` chooses from the validation loss at that evaluation step instead
    (to check the choice does not depend on the horizon). A tie goes to the
    smaller learning rate.
    """
    lrs = sorted(runs)
    return {name: lrs[int(np.argmin(final_valid_loss(runs, name, at_step).mean(axis=1)))] for name in METHODS}


def loss_change(run: Run, method: str, from_step: int) -> np.ndarray:
    """Validation loss at the end minus at evaluation step ``from_step``, per seed (negative: still improving)."""
    i = int(np.flatnonzero(run.eval_steps == from_step)[0])
    return run.valid_loss[method][:, -1] - run.valid_loss[method][:, i]


def work_per_step(run: Run, problem: Problem) -> dict[str, dict[str, float]]:
    """Per method, the work of an average training step of one seed.

    Returns
    -------
    dict of str to dict
        ``"stepped"``: table entries the step updates; ``"caught_up"``: entries
        ``catch_up`` brought current before the lookup (DENSE_EQUIVALENT);
        ``"gap"``: dormant steps applied per caught-up row, on average (0 when
        none); ``"seconds"``: wall time of a step of all seeds together.
    """
    steps = problem.num_steps
    per = steps * problem.num_seeds
    out = {}
    for name, w in run.work.items():
        out[name] = {
            "stepped": w.entries_stepped / per,
            "caught_up": w.entries_caught_up / per,
            "gap": w.dormant_steps_caught_up / w.rows_caught_up if w.rows_caught_up else 0.0,
            "seconds": w.seconds / steps,
        }
    return out


@dataclass(frozen=True)
class Tuned:
    """One method at its own learning rate: result of :func:`tuned_results`.

    Attributes
    ----------
    lr : float
        Chosen by :func:`choose_lrs`.
    interior : bool
        Whether ``lr`` has a smaller and a larger learning rate of the grid on both sides.
    valid_mean : float
        Its final validation loss averaged over seeds (what chose it).
    test : ndarray, shape (num_seeds,)
        Final test loss per seed.
    test_minus_dense : ndarray, shape (num_seeds,)
        ``test`` minus dense Adam's test loss on the same seed, dense Adam at *its* own learning rate.
    """

    lr: float
    interior: bool
    valid_mean: float
    test: np.ndarray
    test_minus_dense: np.ndarray


def tuned_results(runs: dict[float, Run], chosen: dict[str, float] | None = None) -> dict[str, Tuned]:
    """Each method at its own learning rate (``chosen``, default :func:`choose_lrs`), per method."""
    chosen = choose_lrs(runs) if chosen is None else chosen
    lrs = sorted(runs)
    dense = runs[chosen["dense"]].test_loss["dense"]
    out = {}
    for name in METHODS:
        lr = chosen[name]
        run = runs[lr]
        out[name] = Tuned(
            lr=lr,
            interior=0 < lrs.index(lr) < len(lrs) - 1,
            valid_mean=float(run.valid_loss[name][:, -1].mean()),
            test=run.test_loss[name].copy(),
            test_minus_dense=run.test_loss[name] - dense,
        )
    return out


def spread(values: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, minimum and maximum over ``axis`` (seeds), ignoring NaN (all NaN gives NaN, silently)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty bucket: all NaN
        return np.nanmedian(values, axis=axis), np.nanmin(values, axis=axis), np.nanmax(values, axis=axis)


def choose_settings(
    runs: dict[tuple[float, float], Run], weight_decay: float | None = None
) -> dict[str, tuple[float, float]]:
    """Each method's ``(lr, weight_decay)`` of a :func:`sweep_grid`: the lowest final validation loss averaged over seeds.

    ``weight_decay`` restricts the choice to the settings with that decay
    (``0.0``: each method tuned over the learning rate alone, without decay).
    A tie goes to the first setting in ascending order.
    """
    keys = sorted(k for k in runs if weight_decay is None or k[1] == weight_decay)
    if not keys:
        raise ValueError(f"no setting with weight decay {weight_decay}")
    return {name: min(keys, key=lambda k: float(runs[k].valid_loss[name][:, -1].mean())) for name in METHODS}


@dataclass(frozen=True)
class DecayResult:
    """One method in a learning rate x weight decay sweep: result of :func:`weight_decay_study`.

    Attributes
    ----------
    setting : (float, float)
        Its ``(lr, weight_decay)``, chosen on validation over the whole grid.
    interior : bool
        Whether its ``lr`` has a smaller and a larger rate of the grid, and its
        ``weight_decay`` a larger one (0, no decay, is a choice at the grid's natural end).
    without : (float, float)
        Its ``(lr, 0.0)``, chosen on validation among the settings without decay.
    test_minus_dense : ndarray, shape (num_seeds,)
        Test loss at ``setting`` minus dense Adam's at dense Adam's own ``setting``, per seed.
    without_minus_dense : ndarray, shape (num_seeds,)
        The same without decay: at ``without``, minus dense Adam's at its own ``without``.
    decay_gain : ndarray, shape (num_seeds,)
        Test loss at ``without`` minus at ``setting``: what tuning the decay bought it (above 0: it helped).
    """

    setting: tuple[float, float]
    interior: bool
    without: tuple[float, float]
    test_minus_dense: np.ndarray
    without_minus_dense: np.ndarray
    decay_gain: np.ndarray


def weight_decay_study(runs: dict[tuple[float, float], Run]) -> dict[str, DecayResult]:
    """Each method tuned over the grid of a :func:`sweep_grid`, and over its learning rates alone without decay.

    The grid must hold every ``(lr, wd)`` of its rates and decays, ``wd = 0`` among them.
    """
    lrs, decays = sorted({lr for lr, _ in runs}), sorted({wd for _, wd in runs})
    if len(runs) != len(lrs) * len(decays) or decays[0] != 0.0:
        raise ValueError("the sweep must be a full grid of learning rates x weight decays, 0 among the decays")
    tuned, without = choose_settings(runs), choose_settings(runs, 0.0)

    def test(name: str, key: tuple[float, float]) -> np.ndarray:
        return runs[key].test_loss[name]

    out = {}
    for name in METHODS:
        lr, wd = tuned[name]
        out[name] = DecayResult(
            setting=tuned[name],
            interior=0 < lrs.index(lr) < len(lrs) - 1 and decays.index(wd) < len(decays) - 1,
            without=without[name],
            test_minus_dense=test(name, tuned[name]) - test("dense", tuned["dense"]),
            without_minus_dense=test(name, without[name]) - test("dense", without["dense"]),
            decay_gain=test(name, without[name]) - test(name, tuned[name]),
        )
    return out


def format_weight_decay_study(study: dict[str, DecayResult]) -> str:
    """A text table of :func:`weight_decay_study`: settings, and test-loss differences as median [min, max] over seeds."""

    def cell(x: np.ndarray) -> str:
        mid, lo, hi = (round(float(f(x)), 4) + 0.0 for f in (np.median, np.min, np.max))  # + 0.0: no -0.0000
        return f"{mid:+.4f} [{lo:+.4f}, {hi:+.4f}]"

    head = (
        f"{'method':>16s} {'lr, wd':>13s} | {'test - dense AdamW':>26s} | {'without decay: lr':>17s} "
        f"{'test - dense Adam':>26s} | {'gain from the decay':>26s}"
    )
    lines = [head]
    for name in METHODS:
        r = study[name]
        lines.append(
            f"{LABELS[name]:>16s} {r.setting[0]:>6g}, {r.setting[1]:<5g} | {cell(r.test_minus_dense):>26s} | "
            f"{r.without[0]:>17g} {cell(r.without_minus_dense):>26s} | {cell(r.decay_gain):>26s}"
        )
    return "\n".join(lines)


def row_rms_by_gap(tables: dict[str, np.ndarray], problem: Problem, edges: Sequence[float]) -> dict[str, object]:
    """Root mean square of the entries of each bucket of rows grouped by mean gap between touches, per seed.

    Parameters
    ----------
    tables : dict of str to ndarray
        A stacked table per name (e.g. each method's final table, the initial one, the teacher).
    problem : Problem
    edges : sequence of float
        Bucket edges on the mean gap (:func:`memory_edges`); rows never touched are left out.

    Returns
    -------
    dict
        ``"labels"``, ``"rows"`` (int64 ``(num_seeds, buckets)``) and ``"rms"``: per
        name, ``(num_seeds, buckets)``, ``sqrt(mean(E[rows]**2))`` (NaN for an empty bucket).
    """
    gaps = mean_gaps(problem)
    bucket = np.where(np.isfinite(gaps), _buckets(gaps, edges), -1)
    nb = len(edges) - 1
    rows = np.zeros((problem.num_seeds, nb), dtype=np.int64)
    rms = {name: np.full((problem.num_seeds, nb), np.nan) for name in tables}
    for j in range(problem.num_seeds):
        block = bucket[problem.block(j)]
        for i in range(nb):
            members = np.flatnonzero(block == i) + j * problem.num_rows
            rows[j, i] = members.size
            if members.size:
                for name, table in tables.items():
                    rms[name][j, i] = np.sqrt(_frobenius_sq(table[members]) / table[members].size)
    return {"labels": gap_labels(edges), "rows": rows, "rms": rms}


def format_rows_by_gap(
    rms: dict[str, object], loss: dict[str, object], methods: Sequence[str], reference: str = "dense"
) -> str:
    """A text table by bucket of rows: :func:`row_rms_by_gap` and :func:`held_out_loss_by_gap`, medians over seeds.

    Per bucket: its rows; the root mean square of their entries in each table
    of ``rms`` (named by :data:`LABELS`, or by their own key); its test pairs
    (those whose rarer row is in the bucket); and, for each of ``methods``,
    the test loss over them minus ``reference``'s.
    """
    names = list(rms["rms"])  # type: ignore[call-overload]
    columns = [LABELS.get(n, n) for n in names] + ["pairs"] + [LABELS[m] for m in methods]
    widths = [max(len(c), 7) for c in columns]
    block = sum(widths[: len(names)]) + len(names) - 1
    title = f"{'':15s}  {'root mean square of the entries':^{block}s} test pairs, loss minus {LABELS[reference]}'s"
    lines = [title, f"{'mean gap':>9s} {'rows':>4s} | " + " ".join(f"{c:>{w}s}" for c, w in zip(columns, widths))]
    for i, label in enumerate(rms["labels"]):  # type: ignore[call-overload]
        values = [f"{np.median(rms['rms'][n][:, i]):.2f}" for n in names]  # type: ignore[index]
        values.append(f"{np.median(loss['pairs'][:, i]):.0f}")  # type: ignore[index]
        values += [
            f"{round(float(np.median(loss['loss'][m][:, i] - loss['loss'][reference][:, i])), 4) + 0.0:+.4f}"  # type: ignore[index]
            for m in methods
        ]
        lines.append(
            f"{label:>9s} {np.median(rms['rows'][:, i]):4.0f} | "  # type: ignore[index]
            + " ".join(f"{v:>{w}s}" for v, w in zip(values, widths))
        )
    return "\n".join(lines)


def state_bytes(method: str, num_rows: int, dim: int, dtype: type = np.float64) -> int:
    """Bytes of optimizer state ``method`` keeps for a ``num_rows x dim`` table (its ``state_dict()`` arrays).

    Measured on a fresh optimizer after one step on one row.
    """
    table = np.zeros((num_rows, dim), dtype=dtype)
    opt = make_optimizer(method, table, lr=1e-3)
    grad = CsrGradient.from_rows([0], np.ones((1, dim), dtype=dtype), num_rows)
    opt.step(grad.to_dense() if method == "dense" else grad)  # type: ignore[arg-type]
    return int(sum(v.nbytes for v in opt.state_dict().values() if isinstance(v, np.ndarray) and v.ndim > 0))


# -- figures ----------------------------------------------------------------------------


def _band(ax: Axes, x: np.ndarray, values: np.ndarray, name: str, label: str) -> None:
    """Median over seeds (axis 0) as a line, min-max as a shaded band."""
    mid, lo, hi = spread(values, axis=0)
    style = {"linestyle": "--"} if name == "dense" else {}
    ax.plot(x, mid, color=_COLORS[name], label=label, linewidth=1.8, **style)
    ax.fill_between(x, lo, hi, color=_COLORS[name], alpha=0.2, linewidth=0)


def _error_points(ax: Axes, x: np.ndarray, values: np.ndarray, name: str, label: str) -> None:
    """Median over seeds (axis 0) as a marker, min-max as an error bar."""
    mid, lo, hi = spread(values, axis=0)
    ax.errorbar(
        x, mid, yerr=[mid - lo, hi - mid], color=_COLORS[name], marker=_MARKERS[name], markersize=7,
        linestyle="none", capsize=4, elinewidth=1.5, label=label,
    )  # fmt: skip


def plot_divergence(run: Run, problem: Problem) -> Figure:
    """Distance of each lazy mode's table from dense Adam's, by step and by row frequency.

    Left: LAZY's and DORMANCY_DECAY's divergence over the steps (median over
    seeds, min-max band). Right: final divergence per bucket of rows by mean gap
    between touches (:func:`divergence_by_gap`, edges at the run's
    :func:`memory_edges`), median over seeds with min-max error bars. Both are
    linear: DENSE_EQUIVALENT's divergence is rounding, a line on zero, so the
    left panel leaves it out and a note on each panel gives its largest value.
    One legend for the figure, below the panels.

    Returns
    -------
    matplotlib.figure.Figure
        Axes: over steps, by gap.
    """
    fig = new_figure(11.0, 4.6)
    over_steps, by_gap = fig.subplots(1, 2)
    keep = run.eval_steps > 0
    for name in ("lazy", "dormancy_decay"):
        _band(over_steps, run.eval_steps[keep], run.divergence[name][:, keep], name, LABELS[name])
    over_steps.set_ylim(bottom=0.0)
    over_steps.set_xlabel("step")
    over_steps.set_ylabel("||E - E_dense|| / ||E_dense - E_0||")
    over_steps.set_title("distance from dense Adam's table")
    buckets = divergence_by_gap(run, problem)
    x = np.arange(len(buckets["labels"]), dtype=np.float64)
    for offset, name in zip((-0.2, 0.0, 0.2), LAZY_MODES):
        _error_points(by_gap, x + offset, buckets["divergence"][name], name, LABELS[name])
    rows = np.median(buckets["rows"], axis=0).astype(np.int64)
    by_gap.set_xticks(x, [f"{label}\n({n} rows)" for label, n in zip(buckets["labels"], rows)])
    by_gap.set_ylim(bottom=-0.03)
    by_gap.set_xlabel("mean steps between a row's touches (rows per seed)")
    by_gap.set_ylabel("||E - E_dense|| / ||E_dense - E_0||")
    by_gap.set_title("final distance, by how rarely a row is touched")
    worst = {
        over_steps: float(np.nanmax(run.divergence["dense_equivalent"])),
        by_gap: float(np.nanmax(buckets["divergence"]["dense_equivalent"])),
    }
    corners = {over_steps: (0.98, 0.03, "right", "bottom"), by_gap: (0.02, 0.97, "left", "top")}  # empty corners
    for ax, value in worst.items():
        x_note, y_note, ha, va = corners[ax]
        ax.annotate(
            f"DENSE_EQUIVALENT: at most {value:.0e}", xy=(x_note, y_note), xycoords="axes fraction", ha=ha, va=va,
            color=_COLORS["dense_equivalent"], fontsize=10,
        )  # fmt: skip
        ax.grid(alpha=0.3, which="major")
    fig.legend(*by_gap.get_legend_handles_labels(), loc="outside lower center", ncol=len(LAZY_MODES), fontsize=LEGEND)
    fig.suptitle(
        f"lr {run.lr:g} for all three; {problem.num_seeds} seeds (median, min-max); "
        f"beta1 {run.beta1:g}, beta2 {run.beta2:g}"
    )
    return finish(fig)


def plot_tuned(runs: dict[float, Run], chosen: dict[str, float] | None = None) -> Figure:
    """The tuned comparison: the learning-rate sweep, the learning curves and the test loss at each method's own rate.

    Left: final validation loss minus dense Adam's on the same seed (dense Adam
    at its own rate) against learning rate; mean over seeds with min-max error
    bars, a ring on each method's choice; the vertical range stops a little
    above the chosen points, and a mean that runs off the top is drawn as a
    hollow triangle on the top edge. Middle: validation loss over the steps at
    each method's own rate, mean over seeds; dense Adam is a thick dashed line
    under DENSE_EQUIVALENT's markers, which would otherwise hide it. Right: test
    loss minus dense Adam's on the same seed, each at its own rate (median,
    min-max). One legend for the figure, below the panels, with each method's rate.

    Returns
    -------
    matplotlib.figure.Figure
        Axes: sweep, learning curves, test loss.
    """
    chosen = choose_lrs(runs) if chosen is None else chosen
    lrs = np.array(sorted(runs))
    fig = new_figure(13.0, 4.8)
    sweep_ax, curve_ax, test_ax = fig.subplots(1, 3)
    factor = {name: f for name, f in zip(METHODS, (0.94, 0.98, 1.02, 1.06))}  # side by side on the log axis
    dense_best = runs[chosen["dense"]].valid_loss["dense"][:, -1]
    at_choice, lowest = [], []
    for name in METHODS:
        paired = final_valid_loss(runs, name) - dense_best
        mean, lo, hi = paired.mean(axis=1), paired.min(axis=1), paired.max(axis=1)
        x = lrs * factor[name]
        style = "--" if name == "dense" else "-"
        sweep_ax.errorbar(
            x, mean, yerr=[mean - lo, hi - mean], color=_COLORS[name], marker=_MARKERS[name], capsize=3,
            linestyle=style, label=LABELS[name],
        )  # fmt: skip
        best = int(np.flatnonzero(lrs == chosen[name])[0])
        sweep_ax.plot(x[best], mean[best], "o", markersize=14, markerfacecolor="none", color=_COLORS[name])
        at_choice.append(hi[best])
        lowest.append(lo.min())
        run = runs[chosen[name]]
        marks = {"marker": _MARKERS[name], "markevery": max(1, run.eval_steps.size // 8), "markersize": 6}
        curve_ax.plot(
            run.eval_steps, run.valid_loss[name].mean(axis=0), color=_COLORS[name], linestyle=style,
            linewidth=3.0 if name == "dense" else 1.6, label=f"{LABELS[name]} (lr {chosen[name]:g})",
            **({} if name == "dense" else marks),
        )  # fmt: skip
    sweep_ax.axhline(0.0, color=_COLORS["dense"], linewidth=1.0, linestyle=":")
    sweep_ax.set_xscale("log")
    bottom, top = min(lowest) - 0.004, max(at_choice) + 0.02
    sweep_ax.set_ylim(bottom, top)
    for name in METHODS:
        mean = (final_valid_loss(runs, name) - dense_best).mean(axis=1)
        off = mean > top
        sweep_ax.plot(
            lrs[off] * factor[name], np.full(int(off.sum()), top), linestyle="none", marker="^", markersize=9,
            markerfacecolor="none", color=_COLORS[name], clip_on=False, label="_off the top",
        )  # fmt: skip
    sweep_ax.set_xlabel("learning rate")
    sweep_ax.set_ylabel("validation loss - tuned dense Adam's")
    sweep_ax.set_title("sweep (mean, min-max over seeds)", pad=12)  # room for the triangles on the top edge
    curve_ax.set_xlabel("step")
    curve_ax.set_ylabel("validation loss (mean over seeds)")
    curve_ax.set_title("each at its own learning rate")
    dense_curve = runs[chosen["dense"]].valid_loss["dense"].mean(axis=0)
    curve_ax.set_ylim(top=float(dense_curve[min(2, dense_curve.size - 1)]) + 0.005)
    tuned = tuned_results(runs, chosen)
    x = np.arange(len(METHODS), dtype=np.float64)
    for i, name in enumerate(METHODS):
        _error_points(test_ax, x[i : i + 1], tuned[name].test_minus_dense[:, None], name, LABELS[name])
    test_ax.axhline(0.0, color=_COLORS["dense"], linewidth=1.0, linestyle="--")
    test_ax.set_xticks(x, [LABELS[name].replace("_", "_\n", 1) for name in METHODS])
    test_ax.set_ylabel("test loss - dense Adam's (same seed)")
    test_ax.set_title("test loss, each at its own learning rate")
    for ax in (sweep_ax, curve_ax, test_ax):
        ax.grid(alpha=0.3)
    fig.legend(*curve_ax.get_legend_handles_labels(), loc="outside lower center", ncol=len(METHODS), fontsize=LEGEND)
    return finish(fig)

"""Learning-rate schedules and lazy rows: the rates of a row's skipped steps.

Behind ``notebooks/09_schedules.ipynb``. Under a schedule ``lr_j``, dense Adam
moves a row on each of its dormant steps ``j = s+1 .. t-1`` (it was last
updated at step ``s`` and is next touched at step ``t``) by its *coasting*::

    p  <-  p - lr_j * c_j,      c_j = m_hat_j / (sqrt(v_hat_j) + eps),
    m_j = beta1**(j-s) m_s,     v_j = beta2**(j-s) v_s,
    m_hat_j = m_j / (1 - beta1**j),   v_hat_j = v_j / (1 - beta2**j)

(without weight decay). ``DENSE_EQUIVALENT`` applies exactly these steps at
the next read, each with its own rate ``lr_j``. The production catch-ups
(TorchRec's fused optimizers, FBGEMM's ``DECOUPLE_GLOBAL`` weight decay,
HugeCTR's ``LazyGlobal``) apply the skipped steps at the rate of the step
that catches the row up, ``lr_t`` for all of them: the *current-rate*
catch-up, whose displacement is ``lr_t * sum_j c_j`` instead of
``sum_j lr_j c_j``. Where the schedule changes inside the gap (a warm-up
ending, a step decay), the two differ by ``sum_j (lr_t - lr_j) c_j``.

:func:`coasting_terms` gives ``c_j`` for one coordinate by the formula above
(a plain loop over the gap, the reference a reader can check by hand);
:func:`skipped_steps` compares the two catch-ups of one coordinate;
:func:`train` trains the notebook-04 model (:mod:`sparse_opt.demos.divergence`)
under a schedule with dense Adam, ``DENSE_EQUIVALENT``, the current-rate
catch-up and ``LAZY`` in lockstep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from sparse_opt import DenseAdam, LazyMode, SparseAdamConfig, SparseAdamTable
from sparse_opt._adam_coasting import AdamCoasting
from sparse_opt._rates import LearningRate
from sparse_opt.demos.divergence import Problem, logistic_grad, logistic_loss
from sparse_opt.demos.figures import finish, new_figure
from sparse_opt.schedules import lr_at, resolve
from sparse_opt.sparse_adam import adam_catch_up, sparse_adam_update

#: The methods :func:`train` runs, in order.
METHODS: tuple[str, ...] = ("dense", "dense_equivalent", "current_rate", "lazy")

#: Human-readable name of each method.
LABELS: dict[str, str] = {
    "dense": "dense Adam",
    "dense_equivalent": "DENSE_EQUIVALENT",
    "current_rate": "current-rate catch-up",
    "lazy": "LAZY",
}


def coasting_terms(
    m: float, v: float, last: int, gap: int, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
) -> np.ndarray:
    """Dense Adam's coasting direction ``c_j`` on the dormant steps ``j = last+1 .. last+gap``.

    Parameters
    ----------
    m, v : float
        The coordinate's moments after its step ``last`` (``v >= 0``).
    last : int
        The step that last updated it (``>= 1``).
    gap : int
        Number of dormant steps (``>= 0``).
    beta1, beta2, eps : float
        Adam's hyper-parameters.

    Returns
    -------
    ndarray of float64, shape (gap,)
        ``c_j = m_hat_j / (sqrt(v_hat_j) + eps)``: step ``j`` moves the parameter
        by ``-lr_j * c_j`` (module docstring).
    """
    if last < 1 or gap < 0 or v < 0:
        raise ValueError(f"need last >= 1, gap >= 0 and v >= 0, got last={last}, gap={gap}, v={v}")
    out = np.empty(gap)
    for k in range(1, gap + 1):
        j = last + k
        m_hat = beta1**k * m / (1.0 - beta1**j)
        v_hat = beta2**k * v / (1.0 - beta2**j)
        out[k - 1] = m_hat / (np.sqrt(v_hat) + eps)
    return out


@dataclass(frozen=True)
class Skipped:
    """The displacement of one coordinate's skipped steps, exact and at the current rate.

    Attributes
    ----------
    exact : float
        ``-sum_j lr_j c_j``: dense Adam's, and ``DENSE_EQUIVALENT``'s.
    current_rate : float
        ``-lr_t sum_j c_j``: every skipped step at the rate of the step ``t`` that catches up.
    """

    exact: float
    current_rate: float

    @property
    def ratio(self) -> float:
        """``current_rate / exact``: 1 when the rate is constant over the gap."""
        return self.current_rate / self.exact


def skipped_steps(
    schedule: Callable[[int], float],
    m: float,
    v: float,
    last: int,
    touch: int,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> Skipped:
    """Both catch-ups of a coordinate last updated at step ``last`` and next touched at step ``touch``.

    The skipped steps are ``last+1 .. touch-1``; the current rate is
    ``schedule(touch)``, the rate of the step that catches the row up.
    """
    if touch <= last:
        raise ValueError(f"touch must come after last, got last={last}, touch={touch}")
    terms = coasting_terms(m, v, last, touch - last - 1, beta1, beta2, eps)
    rates = np.array([lr_at(schedule, j) for j in range(last + 1, touch)])
    return Skipped(exact=-float(np.dot(rates, terms)), current_rate=-lr_at(schedule, touch) * float(terms.sum()))


def current_rate_ratios(
    schedule: Callable[[int], float],
    lasts: np.ndarray,
    gap: int,
    m: float = 0.1,
    v: float = 0.01,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> np.ndarray:
    """:attr:`Skipped.ratio` for a coordinate last updated at each step of ``lasts`` and touched ``gap + 1`` steps later.

    The state ``(m, v)`` is the same at every step (by default that of a steady
    gradient of 0.1), so the ratio shows the schedule alone: 1 where the rate is
    flat over the gap.
    """
    return np.array([skipped_steps(schedule, m, v, int(s), int(s) + gap + 1, beta1, beta2, eps).ratio for s in lasts])


def plot_ratios(lasts: np.ndarray, ratios: dict[str, np.ndarray]) -> Figure:
    """The current-rate catch-up's coasting over dense Adam's, against the step of the last gradient (log scale).

    ``ratios`` maps a curve's label to :func:`current_rate_ratios` at ``lasts``;
    labels with "step decay" are drawn solid, the others dashed.
    """
    fig = new_figure(9.0, 3.6)
    ax = fig.subplots()
    for label, ratio in ratios.items():
        ax.plot(lasts, ratio, label=label, linestyle="-" if "step decay" in label else "--")
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step s of the coordinate's last gradient")
    ax.set_ylabel("current-rate / exact coasting")
    ax.legend(loc="lower center", ncol=2)
    ax.grid(alpha=0.3, which="both")
    return finish(fig)


@dataclass(frozen=True)
class ScheduleRun:
    """:func:`train`'s result: per method the final stacked table and its losses per seed.

    Attributes
    ----------
    tables : dict of str to ndarray
        Final tables (``DENSE_EQUIVALENT``'s and the current-rate one's caught up).
    valid_loss, test_loss : dict of str to ndarray, shape (num_seeds,)
        Final validation and test losses.
    caught_up : int
        Rows a catch-up brought current before a lookup (the same for both catch-ups).
    """

    tables: dict[str, np.ndarray]
    valid_loss: dict[str, np.ndarray]
    test_loss: dict[str, np.ndarray]
    caught_up: int


def train(
    problem: Problem,
    schedule: float | Callable[[int], float],
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    methods: Sequence[str] = METHODS,
) -> ScheduleRun:
    """Train ``methods`` (of :data:`METHODS`) in lockstep on ``problem`` under ``schedule``, each at its own table.

    Dense Adam is :class:`~sparse_opt.DenseAdam` and ``DENSE_EQUIVALENT`` and
    ``LAZY`` are :class:`~sparse_opt.SparseAdamTable`, all with ``lr=schedule``.
    The current-rate catch-up is ``DENSE_EQUIVALENT``'s training loop with one
    change: before the lookup of step ``t``, the stale rows are caught up by the
    kit's catch-up (:func:`~sparse_opt.sparse_adam.adam_catch_up`) at the
    constant rate ``schedule(t)``, then stepped by the kit's Adam update
    (:func:`~sparse_opt.sparse_adam.sparse_adam_update`) at ``schedule(t)``.
    At the end every lazy table is caught up (the current-rate one at the
    rate of a step ``num_steps + 1``, as a read after training would).

    ``DENSE_EQUIVALENT`` under a schedule replays its dormant steps one by one
    (its cost grows with the gaps), so it is the slowest of the four here.
    """
    rate = resolve(schedule)  # the rate of step t is lr_at(rate, t); the optimizers take `schedule` as given
    methods = tuple(methods)
    if not methods or any(name not in METHODS for name in methods) or len(set(methods)) != len(methods):
        raise ValueError(f"methods must be distinct names of {METHODS}, got {methods}")
    tables = {name: problem.init.copy() for name in methods}
    dense = (
        DenseAdam(tables["dense"], lr=schedule, beta1=beta1, beta2=beta2, eps=eps) if "dense" in methods else None
    )
    lazy_opts = {
        name: SparseAdamTable(
            tables[name], SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=eps, mode=LazyMode(name))
        )
        for name in ("dense_equivalent", "lazy")
        if name in methods
    }
    size, dim = problem.init.shape
    m, v = np.zeros((size, dim)), np.zeros((size, dim))
    last = np.zeros(size, dtype=np.int64)
    current = tables.get("current_rate")
    caught = 0

    def at_rate_of(t: int) -> AdamCoasting:
        # the catch-up of DENSE_EQUIVALENT at the constant rate of step t
        return AdamCoasting(LearningRate(lr_at(rate, t), 0.0), beta1, beta2, eps, 0.0, problem.init.dtype)

    def catch_up_at_current_rate(index: np.ndarray, t: int, coasting: AdamCoasting) -> None:
        stale = index[last[index] < t - 1]
        if stale.size:
            adam_catch_up(current, m, v, last[stale], stale, through=t - 1, coasting=coasting)
            last[stale] = t - 1

    for k in range(problem.num_steps):
        t = k + 1
        pairs, labels = problem.pairs[k], problem.labels[k]
        ids = np.unique(pairs)
        caught += int(np.count_nonzero(last[ids] < k))
        if "dense_equivalent" in lazy_opts:
            lazy_opts["dense_equivalent"].catch_up(ids)
        if current is not None:
            coasting = at_rate_of(t)
            catch_up_at_current_rate(ids, t, coasting)
        for name in methods:
            grad = logistic_grad(tables[name], pairs, labels, problem.batch_size)
            if dense is not None and name == "dense":
                dense.step(grad.to_dense())
            elif name == "current_rate":
                index = grad.touched_rows
                sparse_adam_update(
                    current, m, v, last[index], index, grad.values.reshape(index.size, dim), step=t,
                    lr=lr_at(rate, t), beta1=beta1, beta2=beta2, eps=eps, weight_decay=0.0, maximize=False,
                    mode=LazyMode.DENSE_EQUIVALENT, coasting=coasting,
                )  # fmt: skip
            else:
                lazy_opts[name].step(grad)
        last[ids] = t  # every looked-up row is current after the step (the count above, for every method)
    if "dense_equivalent" in lazy_opts:
        lazy_opts["dense_equivalent"].catch_up()
    if current is not None:
        catch_up_at_current_rate(np.arange(size), problem.num_steps + 1, at_rate_of(problem.num_steps + 1))
    losses = {
        split: {
            name: np.array(
                [logistic_loss(tables[name], pairs[j], labels[j]) for j in range(problem.num_seeds)]
            )
            for name in methods
        }
        for split, (pairs, labels) in {
            "valid": (problem.valid_pairs, problem.valid_labels),
            "test": (problem.test_pairs, problem.test_labels),
        }.items()
    }
    return ScheduleRun(tables=tables, valid_loss=losses["valid"], test_loss=losses["test"], caught_up=caught)

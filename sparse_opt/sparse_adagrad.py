"""Lazy sparse Adagrad, element-wise (``torch.optim.Adagrad``) or row-wise (FBGEMM's exact row-wise Adagrad).

On global step ``t`` (``step`` calls so far) each touched coordinate with
gradient ``g`` (negated first when ``maximize``) is updated as in
``torch.optim.Adagrad``'s sparse path::

    clr   = lr / (1 + (t - 1) * lr_decay)
    sum_i = sum_i + g**2
    p_i   = p_i - clr * (g / (sqrt(sum_i) + eps))

``rowwise=True`` (tables only) keeps one accumulator per row, FBGEMM's
``EXACT_ROWWISE_ADAGRAD`` (``fbgemm_gpu/codegen/genscript/optimizers.py``,
``rowwise_adagrad``): for a touched row ``r`` of width ``cols``::

    sum_r = sum_r + mean(g_r**2)            (the mean over all cols; a missing entry is a zero gradient)
    p_r   = p_r - (clr / (sqrt(sum_r) + eps)) * g_r

so its state is ``rows`` numbers instead of ``rows * cols``.

This is the case where lazy already *is* dense: a zero-gradient step adds 0 to
the accumulator and moves the parameter by ``0 / (sqrt(sum) + eps) = 0``, so
skipping the dormant steps changes nothing (with ``eps > 0`` or a positive
accumulator; with ``eps = 0`` and ``sum = 0`` dense Adagrad computes ``0 / 0``).
The learning-rate decay uses the global step, as torch does, so a row first
touched late gets the decayed rate.

**Low-precision parameters** (float16, bfloat16; :mod:`sparse_opt._rounding`).
``state_dtype="float32"`` (the default): float32 accumulators, the update in
float32, the parameter rounded once where written -- FBGEMM's
``EXACT_ROWWISE_ADAGRAD`` with fp16 weights bit for bit (its ``EXACT_ADAGRAD``
rounds the update to fp16 before subtracting it, a second rounding the kit does
not make). ``state_dtype="param"``: accumulators in the parameters' dtype, every
operation rounded as torch's sparse Adagrad (bit for bit against torch 2.13;
rounding points in :func:`sparse_adagrad_update`). ``rounding`` is ``"nearest"``
or ``"stochastic"`` (seeded by ``seed``).

Source: Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online Learning
and Stochastic Optimization" (JMLR 2011); ``torch/optim/adagrad.py``; FBGEMM's
row-wise Adagrad (modelled from its published source: its CPU wheels do not load
beside torch 2.13 here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_opt._gather import gather, scatter
from sparse_opt._rates import LearningRate
from sparse_opt._rounding import Precision, check_rounding, check_seed, check_state_dtype
from sparse_opt._sparse_base import SparseOptimizer, Target, addressed
from sparse_opt._state import Entry, config_scalars, counter, float_array
from sparse_opt._validation import check_bool, check_lr, check_new_state, check_scalar


@dataclass(frozen=True)
class SparseAdagradConfig:
    """Hyper-parameters of :class:`SparseAdagrad` and :class:`SparseAdagradTable`.

    Parameters
    ----------
    lr : float or callable
        Learning rate, ``>= 0``, or a schedule ``t -> lr_t`` of the 1-based
        global step (:mod:`sparse_opt.schedules`).
    lr_decay : float
        ``>= 0``; the rate at global step ``t`` is ``lr_t / (1 + (t - 1) * lr_decay)``
        (torch's ``lr_decay`` on top of a ``LambdaLR`` schedule).
    eps : float
        ``>= 0``, added to ``sqrt(sum)``.
    initial_accumulator_value : float
        ``>= 0``, the accumulators' starting value.
    maximize : bool
        Ascend instead of descend.
    rowwise : bool
        One accumulator per table row (tables only).
    state_dtype : {"float32", "param"}
        Half-precision (float16, bfloat16) parameters only: float32 accumulators
        (default; the update in float32, the parameter rounded once where written)
        or accumulators in the parameters' dtype with its per-operation rounding,
        as ``torch.optim.Adagrad`` keeps them (:mod:`sparse_opt._rounding`).
    rounding : {"nearest", "stochastic"}
        How a half-precision parameter is rounded where it is written.
    seed : int
        Seed of the generator of stochastic rounding (its state is in ``state_dict()``).

    Examples
    --------
    >>> import sparse_opt as so
    >>> so.SparseAdagradConfig(lr=0.1, rowwise=True).rowwise
    True
    """

    lr: float | Callable[[int], float] = 1e-2
    lr_decay: float = 0.0
    eps: float = 1e-10
    initial_accumulator_value: float = 0.0
    maximize: bool = False
    rowwise: bool = False
    state_dtype: str = "float32"
    rounding: str = "nearest"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_lr(self.lr))
        object.__setattr__(self, "lr_decay", check_scalar("lr_decay", self.lr_decay, low=0.0))
        object.__setattr__(self, "eps", check_scalar("eps", self.eps, low=0.0))
        value = check_scalar("initial_accumulator_value", self.initial_accumulator_value, low=0.0)
        object.__setattr__(self, "initial_accumulator_value", value)
        object.__setattr__(self, "maximize", check_bool("maximize", self.maximize))
        object.__setattr__(self, "rowwise", check_bool("rowwise", self.rowwise))
        object.__setattr__(self, "state_dtype", check_state_dtype(self.state_dtype))
        object.__setattr__(self, "rounding", check_rounding(self.rounding))
        object.__setattr__(self, "seed", check_seed(self.seed))

    def as_dict(self) -> dict[str, float | bool | str]:
        """The fields as plain Python scalars (a schedule as :mod:`sparse_opt._rates` says)."""
        return {**config_scalars(self), "lr": LearningRate(self.lr).config_value()}


def sparse_adagrad_update(
    param: np.ndarray,
    state_sum: np.ndarray,
    index: np.ndarray,
    grad: np.ndarray,
    *,
    step: int,
    lr: float,
    lr_decay: float = 0.0,
    eps: float = 1e-10,
    maximize: bool = False,
    rowwise: bool = False,
    precision: Precision | None = None,
) -> None:
    """One lazy Adagrad step at global step ``step`` on the coordinates ``index``, in place.

    Element-wise: ``param`` and ``state_sum`` share a shape and are indexed
    along axis 0 by ``index``; ``grad`` is shaped like ``param[index]``.
    Row-wise: ``index`` are rows of the table ``param``, ``grad`` holds whole
    rows and ``state_sum`` one value per row. Raises ``ValueError`` before
    writing anything if the new accumulator would not be finite, or (half
    parameters) the new parameter would overflow.

    ``precision`` (:class:`~sparse_opt._rounding.Precision`; default: the
    parameters' own dtype, no rounding) sets the arithmetic. Its rounding points,
    in torch's sparse Adagrad's order (``q``: to the half state with per-operation
    rounding, else nothing; ``R``: the parameter's rounding where written)::

        sum = q(sum + q(g * g))                     row-wise: q(sum + sum(g * g) / cols)
        std = q(q(sqrt(sum)) + eps)
        p   = R(p - q(qs(clr) * q(g / std)))        row-wise: R(p - q(q(clr / std) * g))

    (``qs``: ``clr`` rounded to the half state, as torch's ``add_(..., alpha=-clr)``
    rounds ``alpha``; :meth:`~sparse_opt._rounding.Precision.qs`.)

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt.sparse_adagrad import sparse_adagrad_update
    >>> p, acc = np.ones(3), np.zeros(3)
    >>> sparse_adagrad_update(p, acc, np.array([1]), np.array([2.0]), step=1, lr=0.5, eps=0.0)
    >>> p, acc
    (array([1. , 0.5, 1. ]), array([0., 4., 0.]))
    """
    prec = Precision(param.dtype) if precision is None else precision
    q = prec.q
    g = prec.wide(-grad if maximize else grad)
    clr = lr / (1.0 + (step - 1) * lr_decay)
    p = prec.wide(gather(param, index))
    s = prec.wide(gather(state_sum, index))
    with np.errstate(all="ignore"):  # a non-finite accumulator is refused below, before anything is written
        if rowwise:  # one accumulator per row: the mean of g**2 over the row
            s = q(s + np.sum(g * g, axis=1) / g.shape[1])
            p = p - q(q(clr / q(q(np.sqrt(s)) + eps))[:, None] * g)
        else:
            s = q(s + q(g * g))
            p = p - q(prec.qs(clr) * q(g / q(q(np.sqrt(s)) + eps)))
    where = "table row" if g.ndim == 2 else "coordinate"
    check_new_state("sum", s, index, where, nonnegative=True)
    p = prec.written(p, index, where)
    scatter(state_sum, index, prec.stored(s))
    scatter(param, index, p)


class SparseAdagrad(SparseOptimizer):
    """Lazy Adagrad over a 1-D parameter vector, stepped with :class:`~sparse_opt.CooGradient`.

    Parameters
    ----------
    params : ndarray, 1-D, float32, float64, float16 or bfloat16
        Updated in place.
    config : SparseAdagradConfig
        ``rowwise`` must be False (a vector has no rows).

    Attributes
    ----------
    sum : ndarray
        The accumulators (the parameters' shape and dtype).
    step_count : int
        The global step: ``step`` calls so far.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> p = np.ones(4)
    >>> opt = so.SparseAdagrad(p, so.SparseAdagradConfig(lr=0.5, eps=0.0))
    >>> opt.step(so.CooGradient([2], [3.0], 4))
    >>> p.tolist(), opt.sum.tolist()
    ([1.0, 1.0, 0.5, 1.0], [0.0, 0.0, 9.0, 0.0])
    """

    _ndim = 1
    _config_type = SparseAdagradConfig

    def __init__(self, params: np.ndarray, config: SparseAdagradConfig | None = None) -> None:
        super().__init__(params, SparseAdagradConfig() if config is None else config)
        if self.config.rowwise and self._ndim == 1:
            raise ValueError("rowwise=True needs a table (SparseAdagradTable): a 1-D parameter has no rows")
        shape = self.params.shape[:1] if self.config.rowwise else self.params.shape
        prec = self._precision
        with np.errstate(over="ignore"):
            init = prec.q(prec.wide(np.asarray(self.config.initial_accumulator_value, np.float64)))
        if not np.isfinite(init):  # an accumulator the optimizer's own load_state_dict would refuse
            hint = " (state_dtype='param'; 'float32' holds it)" if prec.per_op else ""
            raise ValueError(
                f"Invalid initial_accumulator_value: {self.config.initial_accumulator_value} overflows the "
                f"{prec.state.name} state{hint}"
            )
        self.sum = np.full(shape, self._precision.stored(init), dtype=self._precision.state)
        self._lr = LearningRate(self.config.lr)

    def _why_no_catch_up(self) -> str:
        return (
            "lazy Adagrad already is dense Adagrad (a zero-gradient step adds 0 to the accumulator and moves "
            "the parameter by 0), so there is nothing to catch up"
        )

    def _apply(self, target: Target, step: int) -> None:
        c = self.config
        if c.rowwise and not target.by_rows:
            _rowwise_partial(self.params, self.sum, target, step, c, self._lr.at(step), self._precision)
            return
        sparse_adagrad_update(
            addressed(self.params, target.by_rows),
            self.sum if c.rowwise else addressed(self.sum, target.by_rows),
            target.index,
            target.grad,
            step=step,
            lr=self._lr.at(step),  # checked before anything changes
            lr_decay=c.lr_decay,
            eps=c.eps,
            maximize=c.maximize,
            rowwise=c.rowwise,
            precision=self._precision,
        )

    def _config(self) -> dict[str, float | bool]:
        return self.config.as_dict()

    def _state_entries(self) -> list[Entry]:
        return [counter("step_count"), float_array("sum", self.sum, nonnegative=True)]

    def _state_values(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "sum": self.sum}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        self.sum, self.step_count = loaded["sum"], loaded["step_count"]


def _rowwise_partial(
    params: np.ndarray,
    state_sum: np.ndarray,
    target: Target,
    step: int,
    c: SparseAdagradConfig,
    lr: float,
    prec: Precision,
) -> None:
    """Row-wise Adagrad for a gradient with incomplete rows: per row, the mean of ``g**2`` over all columns.

    Rounding points as :func:`sparse_adagrad_update`'s row-wise ones.
    """
    cols = params.shape[1]
    rows, first, counts = np.unique(target.index // cols, return_index=True, return_counts=True)
    q = prec.q
    g = prec.wide(-target.grad if c.maximize else target.grad)
    with np.errstate(all="ignore"):  # a non-finite accumulator is refused below, before anything is written
        s = q(prec.wide(state_sum[rows]) + np.add.reduceat(g * g, first) / cols)
    check_new_state("sum", s, rows, "table row", nonnegative=True)
    clr = lr / (1.0 + (step - 1) * c.lr_decay)
    multiplier = np.repeat(q(clr / q(q(np.sqrt(s)) + c.eps)), counts)
    flat = params.reshape(-1)
    p = prec.written(prec.wide(flat[target.index]) - q(multiplier * g), target.index, "coordinate")
    flat[target.index] = p
    state_sum[rows] = prec.stored(s)


class SparseAdagradTable(SparseAdagrad):
    """Lazy Adagrad over a 2-D embedding table, stepped with :class:`~sparse_opt.CsrGradient`.

    Element-wise, identical to :class:`SparseAdagrad` on ``params.reshape(-1)``
    with ``csr.to_coo()``. With ``rowwise=True`` ``sum`` has shape ``(rows,)``
    (FBGEMM's exact row-wise Adagrad, module docstring).

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> table = np.ones((4, 2))
    >>> opt = so.SparseAdagradTable(table, so.SparseAdagradConfig(lr=1.0, eps=0.0, rowwise=True))
    >>> opt.step(so.CsrGradient.from_rows([1], np.array([[3.0, 4.0]]), num_rows=4))
    >>> opt.sum.tolist(), table[1].round(4).tolist()
    ([0.0, 12.5, 0.0, 0.0], [0.1515, -0.1314])
    """

    _ndim = 2

"""Lazy sparse Adam(W): moments and parameters change only where the gradient has entries.

Each coordinate ``i`` keeps ``m_i``, ``v_i`` and ``last_step_i``, the global step
at which it was last brought current (0 = never). At global step ``t`` (the
number of ``step`` calls so far, empty gradients included) a touched coordinate
with gradient ``g`` (negated first when ``maximize``) and ``c = 1 - lr *
weight_decay`` is updated as follows; ``s = last_step_i`` and ``gap = t - s``.

``LazyMode.LAZY`` (TensorFlow Addons' LazyAdam; ``torch.optim.SparseAdam`` up to
its eps placement) decays once, however long ``i`` was dormant::

    p_i = c * p_i
    m_i = beta1 * m_i + (1 - beta1) * g
    v_i = beta2 * v_i + (1 - beta2) * g**2

``LazyMode.DORMANCY_DECAY`` first applies the decay dense Adam(W) fed zero
gradients would have applied while ``i`` was dormant (the seed's "dormancy
catch-up"); the parameter does not coast::

    p_i = c**gap * p_i
    m_i = beta1**gap * m_i + (1 - beta1) * g
    v_i = beta2**gap * v_i + (1 - beta2) * g**2

``LazyMode.DENSE_EQUIVALENT`` first applies dense Adam(W)'s zero-gradient steps
``s + 1 .. t - 1`` exactly (moments decay, the parameter decays and coasts by
``lr * m_hat / (sqrt(v_hat) + eps)`` each step; see
:mod:`sparse_opt._adam_coasting` for how, at a cost bounded whatever the gap),
then the LAZY update of step ``t``: its whole trajectory is dense AdamW's.

With a learning-rate schedule (``lr`` a callable ``t -> lr_t``,
:mod:`sparse_opt.schedules`) each step uses its own rate: LAZY's update and
decay at ``t`` use ``lr_t``; DORMANCY_DECAY decays the parameter by
``prod_{j=s+1}^{t} (1 - lr_j * weight_decay)``; DENSE_EQUIVALENT applies each
dormant step ``j`` with ``lr_j``, exactly as dense AdamW driven by the same
schedule.

All modes then use the *global* step for bias correction::

    p_i = p_i - lr / (1 - beta1**t) * m_i / (sqrt(v_i) / sqrt(1 - beta2**t) + eps)

with ``eps`` added to ``sqrt(v_hat)`` as in ``torch.optim.Adam`` (that is the
evaluation order too), and record ``last_step_i = t``. A coordinate touched on
every step has ``gap == 1``: the three modes coincide and follow AdamW exactly.

**Low-precision parameters** (float16, bfloat16; :mod:`sparse_opt._rounding`).
``state_dtype="float32"`` (the default): float32 moments, every update (a
DENSE_EQUIVALENT catch-up's coasting included) computed in float32 from the
parameter's exact value, the parameter rounded once where it is written: once
per touch and once per ``catch_up``, where dense Adam on a float16 table rounds
on every step (a caught-up row holds float32 dense Adam's value, to the
catch-up's float32 accuracy, rounded once; not float16 dense Adam's). ``state_dtype="param"``: moments in
the parameters' dtype, every operation rounded as torch's Adam(W) kernels do
(bit for bit against torch 2.13; rounding points in
:func:`sparse_adam_update`). ``rounding`` is ``"nearest"`` or ``"stochastic"``
(seeded by ``seed``). A step that would overflow the half type is refused.

Source: the sparse optimizer module's specification (lazy Adam with dormancy
catch-up); Kingma & Ba, "Adam" (2015); Loshchilov & Hutter, "Decoupled Weight
Decay Regularization" (2019) for ``weight_decay``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_opt._adam_coasting import AdamCoasting, dormant_factors
from sparse_opt._gather import gather, scatter
from sparse_opt._powers import power
from sparse_opt._rates import LearningRate
from sparse_opt._rounding import Precision, check_rounding, check_seed, check_state_dtype, fma, lerp
from sparse_opt._sparse_base import SparseOptimizer, Target, addressed
from sparse_opt._state import Entry, config_scalars, counter, float_array
from sparse_opt._step_record import as_column
from sparse_opt._validation import check_bool, check_lr, check_new_state, check_scalar
from sparse_opt.modes import LazyMode

Coasting = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SparseAdamConfig:
    """Hyper-parameters of :class:`SparseAdam` and :class:`SparseAdamTable`.

    Parameters
    ----------
    lr : float or callable
        Learning rate, ``>= 0``, or a schedule ``t -> lr_t`` of the 1-based
        global step (:mod:`sparse_opt.schedules`; its values are checked at the
        steps that use them).
    beta1, beta2 : float
        Moment decay rates, in ``[0, 1)``.
    eps : float
        Added to ``sqrt(v_hat)``, ``>= 0``. With ``eps = 0`` an explicit zero
        gradient on a coordinate whose moments are still zero computes ``0 / 0``
        (NaN), as in torch.
    mode : LazyMode or {"lazy", "dormancy_decay", "dense_equivalent"}
        Strings are matched case-insensitively.
    maximize : bool
        Ascend instead of descend.
    weight_decay : float
        Decoupled (AdamW) decay, ``>= 0`` with ``lr_t * weight_decay <= 1``:
        ``p *= 1 - lr_t * weight_decay`` before the update of each step ``t``
        the mode applies (once per touch in LAZY, for each of the ``gap`` steps
        in DORMANCY_DECAY, on every step in DENSE_EQUIVALENT).
    state_dtype : {"float32", "param"}
        Half-precision (float16, bfloat16) parameters only: float32 moments
        (default; the update in float32, the parameter rounded once where written)
        or moments in the parameters' dtype with its per-operation rounding, as
        torch keeps them (:mod:`sparse_opt._rounding`; rounding points in
        :func:`sparse_adam_update`).
    rounding : {"nearest", "stochastic"}
        How a half-precision parameter is rounded where it is written.
    seed : int
        Seed of the generator of stochastic rounding (its state is in ``state_dict()``).

    Examples
    --------
    >>> import sparse_opt as so
    >>> so.SparseAdamConfig(lr=0.01, mode="DENSE_EQUIVALENT", weight_decay=0.1).mode
    <LazyMode.DENSE_EQUIVALENT: 'dense_equivalent'>
    """

    lr: float | Callable[[int], float] = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    mode: LazyMode = LazyMode.LAZY
    maximize: bool = False
    weight_decay: float = 0.0
    state_dtype: str = "float32"
    rounding: str = "nearest"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_lr(self.lr))
        object.__setattr__(self, "beta1", check_scalar("beta1", self.beta1, low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "beta2", check_scalar("beta2", self.beta2, low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "eps", check_scalar("eps", self.eps, low=0.0))
        object.__setattr__(self, "maximize", check_bool("maximize", self.maximize))
        object.__setattr__(self, "weight_decay", check_scalar("weight_decay", self.weight_decay, low=0.0))
        LearningRate(self.lr, self.weight_decay)  # a constant lr * weight_decay <= 1
        object.__setattr__(self, "mode", LazyMode.parse(self.mode))
        object.__setattr__(self, "state_dtype", check_state_dtype(self.state_dtype))
        object.__setattr__(self, "rounding", check_rounding(self.rounding))
        object.__setattr__(self, "seed", check_seed(self.seed))

    def as_dict(self) -> dict[str, float | bool | str]:
        """The fields as plain Python scalars (``mode`` as its string value, a schedule as :mod:`sparse_opt._rates` says)."""
        return {**config_scalars(self), "lr": LearningRate(self.lr, self.weight_decay).config_value()}


def sparse_adam_update(
    param: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    last: np.ndarray | None,
    index: np.ndarray,
    grad: np.ndarray,
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float = 0.0,
    maximize: bool = False,
    mode: LazyMode = LazyMode.LAZY,
    coasting: Coasting | None = None,
    param_decay: np.ndarray | None = None,
    precision: Precision | None = None,
) -> None:
    """One lazy Adam(W) step at global step ``step`` on the coordinates ``index``, in place.

    The functional core of :class:`SparseAdam` and :class:`SparseAdamTable`, as
    ``torch.optim._functional`` is torch's; the equations are in the module
    docstring. Nothing is checked except the new moments: if they are not
    finite, ``ValueError`` is raised before anything is written. The caller
    records ``step`` as the new last step of ``index`` once this returns.

    Parameters
    ----------
    param, m, v : ndarray
        Parameters and moments, indexed along axis 0 by ``index``: coordinates of
        a 1-D array, or rows of a table.
    last : ndarray of int64, or None
        The previous steps of the coordinates ``index`` (``(k,)``; for table
        rows ``(k,)``, one per row, or ``(k, cols)``). Not read in LAZY mode
        (may be None there).
    index : ndarray of int64
        Ascending, unique, in range.
    grad : ndarray
        Finite gradient, shaped like ``param[index]``, ``param``'s dtype.
    step : int
        The global step ``t >= 1`` of this update.
    lr, beta1, beta2, eps, weight_decay, maximize, mode
        As in :class:`SparseAdamConfig`.
    coasting : callable, optional
        DENSE_EQUIVALENT only: ``coasting(p, m, v, last, through)`` applies the
        dormant steps; an :class:`~sparse_opt._adam_coasting.AdamCoasting`
        (reuse one across steps: it caches weights by global step; under a
        schedule it must be the one built with that schedule).
    param_decay : ndarray, optional
        DORMANCY_DECAY under a schedule: ``prod_{j=last+1}^{step} (1 - lr_j *
        weight_decay)``, shaped like ``last``. Default ``(1 - lr * weight_decay)**gap``.
    precision : Precision, optional
        The arithmetic (:class:`~sparse_opt._rounding.Precision`; default the
        parameters' own dtype, no rounding). Its rounding points, at torch
        Adam(W)'s (``q``: to the half state with per-operation rounding, else
        nothing, as torch's ``lerp_``, ``mul_``, ``addcmul_``, ``sqrt``, ``div``,
        ``add_``; ``R``: the parameter's rounding where written)::

            m = q(decay1 * m + (1 - beta1) * g)
            v = q(q(decay2 * v) + (1 - beta2) * g**2)
            p = q(decay_p * p)                          (weight decay, half state only)
            d = q(q(q(sqrt(v)) / sqrt(1 - beta2**t)) + eps)
            p = R(p - lr / (1 - beta1**t) * (m / d))

        With a half state (LAZY, DENSE_EQUIVALENT) each rounded expression is
        evaluated as torch's kernel evaluates it: ``m`` as ``lerp_`` (``m + (1 -
        beta1) (g - m)``), ``v`` as ``addcmul_`` (``((1 - beta2) g) g + v``) and
        ``p`` as ``addcdiv_``, each with its multiply-add fused
        (:func:`~sparse_opt._rounding.fma`).

        DENSE_EQUIVALENT's dormant steps are computed in the work dtype
        (float32 for half parameters) and the parameter is rounded once per
        touch (catch-up and step together), where dense low-precision training
        rounds on every step.

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt.sparse_adam import sparse_adam_update
    >>> p, m, v, last_step = np.ones(4), np.zeros(4), np.zeros(4), np.zeros(4, np.int64)
    >>> index = np.array([1, 3])
    >>> sparse_adam_update(p, m, v, last_step[index], index, np.array([0.5, -0.5]),
    ...                    step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=0.0)
    >>> last_step[index] = 1
    >>> p
    array([1. , 0.9, 1. , 1.1])
    """
    prec = Precision(param.dtype) if precision is None else precision
    dtype, q = prec.work, prec.q
    g = prec.wide(-grad if maximize else grad)
    m_i, v_i = prec.wide(gather(m, index)), prec.wide(gather(v, index))
    p_i = None
    shrink = 1.0 - lr * weight_decay
    decay1, decay2, decay_p = beta1, beta2, shrink
    if mode is not LazyMode.LAZY:
        last = as_column(last, g.ndim)
        if mode is LazyMode.DENSE_EQUIVALENT:
            if coasting is None:
                coasting = AdamCoasting(lr, beta1, beta2, eps, weight_decay, dtype)
            p_i, m_i, v_i = coasting(prec.wide(gather(param, index)), m_i, v_i, last, step - 1)  # steps s+1 .. t-1
        else:  # DORMANCY_DECAY: gap zero-gradient steps' factors, as dense Adam in this dtype applies them
            gap = (step - last).astype(np.float64)
            factors = dormant_factors(beta1, beta2, shrink, dtype)
            decay1, decay2, decay_p = (power(f, gap).astype(dtype) for f in factors)
            if param_decay is not None:
                decay_p = as_column(param_decay, g.ndim).astype(dtype)
    with np.errstate(all="ignore"):  # a non-finite v is refused below, before anything is written
        if prec.per_op and mode is not LazyMode.DORMANCY_DECAY:  # a half state: torch's lerp_ and addcmul_
            m_i = q(lerp(m_i, g, 1.0 - beta1))
            v_i = q(fma((1.0 - beta2) * g, g, q(v_i * decay2)))
        else:
            m_i *= decay1
            m_i += (1.0 - beta1) * g  # m = decay1 * m + (1 - beta1) * g
            m_i = q(m_i)
            v_i *= decay2
            v_i = q(v_i)
            v_i += (1.0 - beta2) * (g * g)  # v = decay2 * v + (1 - beta2) * g**2
            v_i = q(v_i)
    # m is finite whenever v is: |(1 - beta1) g| <= |g| and g * g is finite
    where = "table row" if g.ndim == 2 else "coordinate"
    check_new_state("v", v_i, index, where, nonnegative=True)
    if p_i is None:
        p_i = prec.wide(gather(param, index))
    # eps = 0: 0 / 0 where m = v = 0, as in torch; a half parameter's overflow is refused by prec.written
    with np.errstate(divide="ignore", invalid="ignore", **({"over": "ignore"} if prec.half else {})):
        if weight_decay:
            p_i *= decay_p
            p_i = q(p_i)
        denom = q(np.sqrt(v_i))
        denom /= math.sqrt(1.0 - beta2**step)
        denom = q(denom)
        denom += eps
        denom = q(denom)
        step_size = lr / (1.0 - beta1**step)
        if prec.per_op:  # a half state: torch's addcdiv_, fused
            p_i = fma(np.float32(-step_size), m_i / denom, p_i)
        else:
            p_i -= step_size * (m_i / denom)
    p_i = prec.written(p_i, index, where)  # may refuse (overflow): nothing is written before it
    scatter(m, index, prec.stored(m_i))
    scatter(v, index, prec.stored(v_i))
    scatter(param, index, p_i)


def adam_catch_up(
    param: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    last: np.ndarray,
    index: np.ndarray,
    *,
    through: int,
    coasting: Coasting,
    precision: Precision | None = None,
) -> None:
    """Bring the coordinates ``index`` current through step ``through`` (DENSE_EQUIVALENT), in place.

    Applies dense Adam(W)'s zero-gradient steps ``last + 1 .. through`` with
    ``coasting``; the caller then records ``through`` as the last step of
    ``index``. Arguments as for :func:`sparse_adam_update`. With half parameters
    the dormant steps are computed in the work dtype and the parameter (and a
    half state) rounded once, at the end of the catch-up.
    """
    prec = Precision(param.dtype) if precision is None else precision
    p_i, m_i, v_i = (prec.wide(gather(a, index)) for a in (param, m, v))
    p_i, m_i, v_i = coasting(p_i, m_i, v_i, as_column(last, p_i.ndim), through)
    p_i = prec.written(p_i, index, "table row" if p_i.ndim == 2 else "coordinate")
    scatter(param, index, p_i)
    scatter(m, index, prec.stored(prec.q(m_i)))
    scatter(v, index, prec.stored(prec.q(v_i)))


class SparseAdam(SparseOptimizer):
    """Lazy Adam(W) over a 1-D parameter vector, stepped with :class:`~sparse_opt.CooGradient`.

    Parameters
    ----------
    params : ndarray, 1-D, float32, float64, float16 or bfloat16
        Updated in place (the caller's array is the model).
    config : SparseAdamConfig
        ``mode`` picks LAZY, DORMANCY_DECAY or DENSE_EQUIVALENT (module docstring).

    Attributes
    ----------
    m, v : ndarray
        First and second moments (the parameters' dtype and shape).
    last_step : ndarray of int64, read-only
        Global step through which each coordinate is current, 0 if never
        updated. It is the optimizer's own record: restore it with
        :meth:`load_state_dict`.
    step_count : int
        The global step ``t``: ``step`` calls so far.

    Notes
    -----
    A step refused for its gradient (wrong ``dim``, a non-finite value, a value
    that overflows the parameters' dtype, or one that would make ``m`` or ``v``
    non-finite) changes nothing, so every state reached is one
    :meth:`load_state_dict` accepts. In DENSE_EQUIVALENT mode a dormant
    coordinate's entries of ``params``, ``m`` and ``v`` lag behind until it is
    touched or :meth:`catch_up` is called: call ``catch_up(ids)`` before reading
    ``params[ids]``.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> p = np.zeros(4)
    >>> opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, mode="dense_equivalent"))
    >>> opt.step(so.CooGradient([0], [1.0], 4))
    >>> opt.step(so.CooGradient([], [], 4))        # coordinate 0 is dormant: p[0] lags
    >>> opt.catch_up([0])                          # now p[0] is what dense Adam holds
    >>> round(float(p[0]), 6), opt.last_step.tolist()
    (-0.167006, [2, 0, 0, 0])
    >>> dense = np.zeros(4)
    >>> ref = so.DenseAdam(dense, lr=0.1)
    >>> ref.step(np.array([1.0, 0, 0, 0])); ref.step(np.zeros(4))
    >>> bool(abs(dense[0] - p[0]) < 1e-15)
    True
    """

    _ndim = 1
    _config_type = SparseAdamConfig

    def __init__(self, params: np.ndarray, config: SparseAdamConfig | None = None) -> None:
        super().__init__(params, SparseAdamConfig() if config is None else config)
        self.m = np.zeros(self.params.shape, self._precision.state)
        self.v = np.zeros(self.params.shape, self._precision.state)
        c = self.config
        self._lr = LearningRate(c.lr, c.weight_decay)
        self._coasting: AdamCoasting | None = None
        if c.mode is LazyMode.DENSE_EQUIVALENT:
            self._coasting = AdamCoasting(self._lr, c.beta1, c.beta2, c.eps, c.weight_decay, self._precision.work)

    def _keeps_steps(self) -> bool:
        return True

    def _dense_equivalent(self) -> bool:
        return self.config.mode is LazyMode.DENSE_EQUIVALENT

    def _hyper(self) -> dict[str, Any]:
        c = self.config
        return {
            "beta1": c.beta1,
            "beta2": c.beta2,
            "eps": c.eps,
            "weight_decay": c.weight_decay,
            "maximize": c.maximize,
            "mode": c.mode,
        }

    def _apply(self, target: Target, step: int) -> None:
        by_rows, record, mode = target.by_rows, self._record, self.config.mode
        assert record is not None
        lr = self._lr.at(step)  # checked before anything changes
        last = None if mode is LazyMode.LAZY else record.previous(target.index, by_rows)
        decay = None
        if mode is LazyMode.DORMANCY_DECAY and self._lr.constant is None:
            decay = self._lr.decay(last, step, self._precision.work)
        sparse_adam_update(
            addressed(self.params, by_rows),
            addressed(self.m, by_rows),
            addressed(self.v, by_rows),
            last,
            target.index,
            target.grad,
            step=step,
            lr=lr,
            coasting=self._coasting,
            param_decay=decay,
            precision=self._precision,
            **self._hyper(),
        )
        record.stamp(target.index, step, by_rows)

    def _catch_up(self, index: np.ndarray, by_rows: bool) -> None:
        assert self._record is not None and self._coasting is not None
        adam_catch_up(
            addressed(self.params, by_rows),
            addressed(self.m, by_rows),
            addressed(self.v, by_rows),
            self._record.previous(index, by_rows),
            index,
            through=self.step_count,
            coasting=self._coasting,
            precision=self._precision,
        )
        self._record.stamp(index, self.step_count, by_rows)

    def _config(self) -> dict[str, float | bool | str]:
        return self.config.as_dict()

    def _state_entries(self) -> list[Entry]:
        return [
            counter("step_count"),
            float_array("m", self.m),
            float_array("v", self.v, nonnegative=True),
            *self._step_entries(),
        ]

    def _state_values(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "m": self.m, "v": self.v, **self._step_values()}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        self.m, self.v = loaded["m"], loaded["v"]
        self._record.load(loaded)  # type: ignore[union-attr]
        self.step_count = loaded["step_count"]


class SparseAdamTable(SparseAdam):
    """Lazy Adam(W) over a 2-D embedding table, stepped with :class:`~sparse_opt.CsrGradient`.

    Identical results to :class:`SparseAdam` run on ``params.reshape(-1)`` with
    ``csr.to_coo()``; ``m``, ``v`` and ``last_step`` have the table's shape.
    Complete rows (an embedding lookup's gradient) are gathered and scattered
    row-wise, and ``last_step`` is kept as one int64 per row while the entries
    of a row share it (see :mod:`sparse_opt._step_record`), so its
    ``state_dict()['last_step']`` has shape ``(rows,)`` then: 8 bytes per row.
    ``catch_up`` takes row ids.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> table = np.zeros((1000, 4))
    >>> opt = so.SparseAdamTable(table, so.SparseAdamConfig(lr=0.1))
    >>> opt.step(so.CsrGradient.from_rows([7, 3, 7], np.ones((3, 4)), num_rows=1000))
    >>> table[[3, 7]].round(3).tolist(), opt.state_dict()["last_step"].shape
    ([[-0.1, -0.1, -0.1, -0.1], [-0.1, -0.1, -0.1, -0.1]], (1000,))
    """

    _ndim = 2

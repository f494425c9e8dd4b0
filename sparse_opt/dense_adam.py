"""Dense Adam(W): the yardstick the lazy optimizers are measured against.

Plain Adam (Kingma & Ba, 2015) on a dense gradient, every coordinate every step,
with ``eps`` added to ``sqrt(v_hat)`` as in ``torch.optim.Adam``, and optional
decoupled weight decay as in ``torch.optim.AdamW`` (``c = 1 - lr * weight_decay``)::

    t = t + 1
    p = c * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

Half-precision parameters (float16, bfloat16; :mod:`sparse_opt._rounding`):
with ``state_dtype="float32"`` (default) the step is computed in float32 and
the parameters rounded once per step (``rounding`` nearest or stochastic);
with ``state_dtype="param"`` the moments are half and every operation rounds
at torch Adam(W)'s points (bit for bit against torch 2.13).

Fed zero gradients on a coordinate's dormant steps, its ``m`` and ``v`` at the
next touch equal those of :class:`~sparse_opt.SparseAdam` in ``DORMANCY_DECAY``
mode (to rounding), and its parameter equals ``DENSE_EQUIVALENT``'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sparse_opt._arrays import INT64_MAX
from sparse_opt._rates import LearningRate
from sparse_opt._rounding import Precision, check_rounding, check_seed, check_state_dtype, fma, lerp
from sparse_opt._state import Entry, Stateful, counter, float_array
from sparse_opt._validation import (
    check_dense_grads,
    check_lr,
    check_new_state,
    check_param_array,
    check_scalar,
)


class DenseAdam(Stateful):
    """Adam(W) over a dense float array of any shape, updated in place.

    Parameters
    ----------
    params : ndarray, float32, float64, float16 or bfloat16
        Updated in place (the caller's array).
    lr : float or callable
        Learning rate, ``>= 0``, or a schedule ``t -> lr_t`` of the 1-based step
        (:mod:`sparse_opt.schedules`): step ``t`` uses ``lr_t`` for its update
        and its decay, as torch's Adam(W) under ``LambdaLR``.
    beta1, beta2 : float
        In ``[0, 1)``.
    eps : float
        ``>= 0``, added to ``sqrt(v_hat)``. With ``eps = 0`` a coordinate whose
        gradients have all been zero computes ``0 / 0`` (NaN), as in torch.
    weight_decay : float
        Decoupled decay (AdamW), ``>= 0`` with ``lr * weight_decay <= 1``.
    state_dtype : {"float32", "param"}
        Half-precision (float16, bfloat16) parameters only: float32 moments
        (default; the update computed in float32, the parameter rounded once per
        step) or moments in the parameters' dtype with per-operation rounding at
        torch Adam(W)'s points (:func:`sparse_opt.sparse_adam.sparse_adam_update`
        lists them; :mod:`sparse_opt._rounding`).
    rounding : {"nearest", "stochastic"}
        How a half-precision parameter is rounded each step.
    seed : int
        Seed of the generator of stochastic rounding (its state is in ``state_dict()``).

    Attributes
    ----------
    m, v : ndarray
        Moments, the parameters' shape and the state's dtype. Besides them the optimizer
        keeps two work arrays of that size (the next ``v`` is computed beside the current
        one and checked before anything changes), so it holds four table-sized arrays;
        with half parameters a step also allocates the new ``m`` and the parameters in
        float32 (a refused step, an overflow of the half type included, changes nothing).
    step_count : int
        Number of ``step`` calls so far.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> p = np.array([1.0, -1.0])
    >>> opt = so.DenseAdam(p, lr=0.1)
    >>> opt.step(np.array([0.5, 0.0]))
    >>> p.round(6)
    array([ 0.9, -1. ])
    """

    def __init__(
        self,
        params: np.ndarray,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        state_dtype: str = "float32",
        rounding: str = "nearest",
        seed: int = 0,
    ) -> None:
        self.params = check_param_array(params, None, "params", allow_half=True)
        self.lr = check_lr(lr)
        self.beta1 = check_scalar("beta1", beta1, low=0.0, high=1.0, high_open=True)
        self.beta2 = check_scalar("beta2", beta2, low=0.0, high=1.0, high_open=True)
        self.eps = check_scalar("eps", eps, low=0.0)
        self.weight_decay = check_scalar("weight_decay", weight_decay, low=0.0)
        self._lr = LearningRate(self.lr, self.weight_decay)  # a constant lr * weight_decay <= 1
        self.state_dtype = check_state_dtype(state_dtype)
        self.rounding = check_rounding(rounding)
        self.seed = check_seed(seed)
        self._precision = Precision(self.params.dtype, self.state_dtype, self.rounding, self.seed)
        self.m = np.zeros(self.params.shape, self._precision.state)
        self.v = np.zeros(self.params.shape, self._precision.state)
        self.step_count = 0
        self._buffers: tuple[np.ndarray, np.ndarray] | None = None

    def step(self, grad: np.ndarray) -> None:
        """One Adam step with the dense gradient ``grad`` (the parameters' shape, finite).

        The gradient is checked, and the new moments computed and checked, before
        anything changes; a gradient that aliases ``params``, ``m`` or ``v`` is
        copied first. Half parameters: the step is computed in float32 and the
        parameters rounded once (rounding points as
        :func:`sparse_opt.sparse_adam.sparse_adam_update`'s); a step whose result
        would overflow the half type is refused with nothing changed.
        """
        if grad is None:
            raise TypeError("grad must be an ndarray, got None")
        prec = self._precision
        owned = [self.m, self.v, *(self._buffers or ())]  # an old v is reused as a buffer: copy it too
        (g,) = check_dense_grads([grad], [self.params], state=owned, dtypes=[prec.state])
        if self.step_count >= INT64_MAX:
            raise ValueError(f"step_count = {self.step_count} has reached 2**63 - 1")
        t = self.step_count + 1
        lr = self._lr.at(t)  # checked before anything changes
        if self._buffers is None:  # kept, not allocated per step: fresh table-sized arrays page-fault every step
            self._buffers = (np.empty(self.v.shape, prec.work), np.empty(self.params.shape, prec.work))
        v, work = self._buffers
        g = prec.wide(g)
        with np.errstate(all="ignore"):
            np.multiply(prec.wide(self.v), self.beta2, out=v)
            prec.q_(v)
            if prec.per_op:  # a half state: torch's addcmul_, fused
                v[...] = fma(np.multiply(g, 1.0 - self.beta2, out=work), g, v)
            else:
                np.multiply(g, g, out=work)
                work *= 1.0 - self.beta2
                v += work  # v = beta2 * v + (1 - beta2) * g**2, beside the old v
            prec.q_(v)
        check_new_state("v", v, nonnegative=True)  # refused before anything changes; m is finite whenever v is
        if prec.per_op:  # a half state: torch's lerp_, rounded once
            m = prec.q_(lerp(prec.wide(self.m), g, 1.0 - self.beta1))
        else:  # m = beta1 * m + (1 - beta1) * g: in place, or beside the old m where the step may still be refused
            m = np.multiply(self.m, self.beta1, out=None if prec.half else self.m)
            m += np.multiply(g, 1.0 - self.beta1, out=work)
        p = prec.wide(self.params) if prec.half else self.params  # half: a float32 copy, rounded once below
        # eps = 0: 0 / 0 where m = v = 0, as in torch; a half parameter's overflow is refused by prec.written
        with np.errstate(divide="ignore", invalid="ignore", **({"over": "ignore"} if prec.half else {})):
            if self.weight_decay:
                p *= 1.0 - lr * self.weight_decay
                prec.q_(p)
            denom = prec.q_(np.sqrt(v, out=work))
            denom /= math.sqrt(1.0 - self.beta2**t)
            prec.q_(denom)
            denom += self.eps
            prec.q_(denom)
            update = np.divide(m, denom, out=work)
            if prec.per_op:  # a half state: torch's addcdiv_, fused
                p = fma(np.float32(-lr / (1.0 - self.beta1**t)), update, p)
            else:
                update *= lr / (1.0 - self.beta1**t)
                p -= update
        if prec.half:
            self.params[...] = prec.written(p)  # may refuse (overflow): nothing has changed yet
            self.m = prec.stored(m)
        if self.v.dtype == v.dtype:
            self._buffers = (self.v, work)
            self.v = v
        else:
            self.v = prec.stored(v)
        self.step_count = t

    def _config(self) -> dict[str, float | str]:
        return {
            "lr": self._lr.config_value(),
            "beta1": self.beta1,
            "beta2": self.beta2,
            "eps": self.eps,
            "weight_decay": self.weight_decay,
            "state_dtype": self.state_dtype,
            "rounding": self.rounding,
            "seed": self.seed,
        }

    def _state_entries(self) -> list[Entry]:
        return [counter("step_count"), float_array("m", self.m), float_array("v", self.v, nonnegative=True)]

    def _state_values(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "m": self.m, "v": self.v}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        self.m, self.v, self.step_count = loaded["m"], loaded["v"], loaded["step_count"]

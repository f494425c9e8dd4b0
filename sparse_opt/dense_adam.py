"""Dense Adam(W): the yardstick the lazy optimizers are measured against.

Plain Adam (Kingma & Ba, 2015) on a dense gradient, every coordinate every step,
with ``eps`` added to ``sqrt(v_hat)`` as in ``torch.optim.Adam``, and optional
decoupled weight decay as in ``torch.optim.AdamW`` (``c = 1 - lr * weight_decay``)::

    t = t + 1
    p = c * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

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
    params : ndarray, float32 or float64
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

    Attributes
    ----------
    m, v : ndarray
        Moments, the parameters' shape and dtype. Besides them the optimizer keeps two
        work arrays of that size (the next ``v`` is computed beside the current one and
        checked before anything changes), so it holds four table-sized arrays.
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
    ) -> None:
        self.params = check_param_array(params, None, "params")
        self.lr = check_lr(lr)
        self.beta1 = check_scalar("beta1", beta1, low=0.0, high=1.0, high_open=True)
        self.beta2 = check_scalar("beta2", beta2, low=0.0, high=1.0, high_open=True)
        self.eps = check_scalar("eps", eps, low=0.0)
        self.weight_decay = check_scalar("weight_decay", weight_decay, low=0.0)
        self._lr = LearningRate(self.lr, self.weight_decay)  # a constant lr * weight_decay <= 1
        self.m = np.zeros_like(self.params)
        self.v = np.zeros_like(self.params)
        self.step_count = 0
        self._buffers: tuple[np.ndarray, np.ndarray] | None = None

    def step(self, grad: np.ndarray) -> None:
        """One Adam step with the dense gradient ``grad`` (the parameters' shape, finite).

        The gradient is checked, and the new moments computed and checked, before
        anything changes; a gradient that aliases ``params``, ``m`` or ``v`` is
        copied first.
        """
        if grad is None:
            raise TypeError("grad must be an ndarray, got None")
        owned = [self.m, self.v, *(self._buffers or ())]  # an old v is reused as a buffer: copy it too
        (g,) = check_dense_grads([grad], [self.params], state=owned)
        if self.step_count >= INT64_MAX:
            raise ValueError(f"step_count = {self.step_count} has reached 2**63 - 1")
        t = self.step_count + 1
        lr = self._lr.at(t)  # checked before anything changes
        if self._buffers is None:  # kept, not allocated per step: fresh table-sized arrays page-fault every step
            self._buffers = (np.empty_like(self.v), np.empty_like(self.params))
        v, work = self._buffers
        with np.errstate(all="ignore"):
            np.multiply(self.v, self.beta2, out=v)
            np.multiply(g, g, out=work)
            work *= 1.0 - self.beta2
            v += work  # v = beta2 * v + (1 - beta2) * g**2, beside the old v
        check_new_state("v", v, nonnegative=True)  # refused before anything changes; m is finite whenever v is
        self._buffers = (self.v, work)
        self.v = v
        self.m *= self.beta1
        self.m += np.multiply(g, 1.0 - self.beta1, out=work)  # m = beta1 * m + (1 - beta1) * g
        with np.errstate(divide="ignore", invalid="ignore"):  # eps = 0: 0 / 0 where m = v = 0, as in torch
            if self.weight_decay:
                self.params *= 1.0 - lr * self.weight_decay
            denom = np.sqrt(v, out=work)
            denom /= math.sqrt(1.0 - self.beta2**t)
            denom += self.eps
            update = np.divide(self.m, denom, out=work)
            update *= lr / (1.0 - self.beta1**t)
            self.params -= update
        self.step_count = t

    def _config(self) -> dict[str, float | str]:
        return {
            "lr": self._lr.config_value(),
            "beta1": self.beta1,
            "beta2": self.beta2,
            "eps": self.eps,
            "weight_decay": self.weight_decay,
        }

    def _state_entries(self) -> list[Entry]:
        return [counter("step_count"), float_array("m", self.m), float_array("v", self.v, nonnegative=True)]

    def _state_values(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "m": self.m, "v": self.v}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        self.m, self.v, self.step_count = loaded["m"], loaded["v"], loaded["step_count"]

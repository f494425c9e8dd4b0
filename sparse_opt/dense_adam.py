"""Dense Adam: the yardstick the lazy optimizers are measured against.

Plain Adam (Kingma & Ba, 2015) on a dense gradient, every coordinate every step,
with ``eps`` added to ``sqrt(v_hat)`` as in ``torch.optim.Adam``::

    t = t + 1
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

Fed zero gradients on a coordinate's dormant steps, its ``m`` and ``v`` at the
next touch equal those of :class:`~sparse_opt.SparseAdam` in ``DORMANCY_DECAY``
mode (to rounding), while its parameter keeps moving on the dormant steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sparse_opt._state_io import check_config, check_keys, take_array, take_int
from sparse_opt._validation import check_dense_grads, check_finite, check_param_array, check_scalar


class DenseAdam:
    """Adam over a dense float array of any shape, updated in place.

    Parameters
    ----------
    params : ndarray, float32 or float64
        Updated in place (the caller's array).
    lr : float
        Learning rate, ``>= 0``.
    beta1, beta2 : float
        In ``[0, 1)``.
    eps : float
        ``>= 0``, added to ``sqrt(v_hat)``. With ``eps = 0`` a coordinate whose
        gradients have all been zero computes ``0 / 0`` (NaN), as in torch.

    Attributes
    ----------
    m, v : ndarray
        Moments, the parameters' shape and dtype.
    step_count : int
        Number of ``step`` calls so far.
    """

    def __init__(
        self, params: np.ndarray, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        self.params = check_param_array(params, None, "params")
        self.lr = check_scalar("lr", lr, low=0.0)
        self.beta1 = check_scalar("beta1", beta1, low=0.0, high=1.0, high_open=True)
        self.beta2 = check_scalar("beta2", beta2, low=0.0, high=1.0, high_open=True)
        self.eps = check_scalar("eps", eps, low=0.0)
        self.m = np.zeros_like(self.params)
        self.v = np.zeros_like(self.params)
        self.step_count = 0

    def step(self, grad: np.ndarray) -> None:
        """One Adam step with the dense gradient ``grad`` (the parameters' shape, finite)."""
        if grad is None:
            raise TypeError("grad must be an ndarray, got None")
        (g,) = check_dense_grads([grad], [self.params])
        t = self.step_count + 1
        self.m *= self.beta1
        self.m += (1.0 - self.beta1) * g
        self.v *= self.beta2
        self.v += (1.0 - self.beta2) * (g * g)
        denom = np.sqrt(self.v)
        denom /= math.sqrt(1.0 - self.beta2**t)
        denom += self.eps
        update = self.m / denom
        update *= self.lr / (1.0 - self.beta1**t)
        self.params -= update
        self.step_count = t

    def _config(self) -> dict[str, float]:
        return {"lr": self.lr, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}

    def state_dict(self) -> dict[str, Any]:
        """Config, ``step_count`` and copies of ``m``, ``v`` (plain numpy values)."""
        return {**self._config(), "step_count": np.int64(self.step_count), "m": self.m.copy(), "v": self.v.copy()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; raises ``ValueError`` on any mismatch."""
        check_keys(state_dict, [*self._config(), "step_count", "m", "v"])
        check_config(state_dict, self._config())
        step_count = take_int(state_dict, "step_count")
        m = take_array(state_dict, "m", self.params.shape, self.params.dtype)
        v = take_array(state_dict, "v", self.params.shape, self.params.dtype)
        check_finite(m, "state_dict['m']")
        check_finite(v, "state_dict['v']")
        self.m, self.v, self.step_count = m, v, step_count

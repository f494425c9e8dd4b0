r"""Adafactor with the semantics of ``torch.optim.Adafactor`` (PyTorch >= 2.5).

Adafactor (Shazeer & Stern, 2018, "Adafactor: Adaptive Learning Rates with
Sublinear Memory Cost", https://arxiv.org/abs/1804.04235) keeps, for a matrix
gradient, only a row and a column statistic of ``g**2`` instead of Adam's full
second moment: ``R + C`` numbers for an ``(R, C)`` matrix, not ``R * C``.

This module follows ``torch.optim.Adafactor`` (``torch/optim/_adafactor.py``,
``_single_tensor_adafactor``), including where it deviates from the paper. For
parameter ``p`` with gradient ``G`` and its own step count ``t``::

    G       = -grad if maximize else grad
    t       = t + 1
    1 - beta2_t = t ** beta2_decay                       # beta2_decay <= 0
    rho     = min(lr, 1 / sqrt(t))                        # paper: min(1e-2, 1/sqrt(t))
    alpha   = max(eps2, RMS(p)) * rho                     # RMS of p before the decay
    p       = p * (1 - lr * weight_decay)                 # decoupled weight decay
    if G.ndim >= 2:                                       # factored over the last two dims
        R   = lerp(R, mean(G**2, axis=-1), 1 - beta2_t)   # (..., R, 1)
        C   = lerp(C, mean(G**2, axis=-2), 1 - beta2_t)   # (..., 1, C)
        V   = (R @ C) / max(mean(R, axis=-2), eps1)
    else:                                                 # 0-d and 1-d: full V
        V   = lerp(V, G**2, 1 - beta2_t)
    U       = G / sqrt(max(V, eps1**2))
    p       = p - alpha * U / max(1, RMS(U) / d)

``RMS(x) = norm(x) / sqrt(x.size)`` and ``lerp(a, b, w) = a + w * (b - a)``.
Leading dimensions of a 3-D+ parameter are a batch: each trailing matrix has
its own factors.

The eps1 deviation from the paper (torch's, kept here): the paper adds ``eps1``
to ``G**2`` before the row/column statistics. ``torch.optim.Adafactor`` leaves
the statistics alone and applies ``eps1`` afterwards, once as a floor of the
row-factor mean that divides ``V`` and once as a floor ``eps1**2`` of ``V``
(``eps1`` on ``sqrt(V)``). ``eps1=None`` means ``np.finfo(p.dtype).eps``.

The op order follows torch's source: the row/column means are ``norm(G,
axis)**2 / n`` (a square root, then a square); the EMAs use torch's two-branch
``lerp`` (the one that measurably matters: the symmetric form ``state * (1 - w)
+ w * end`` moves the goldens from 2.5 to 3.8 units in the last place); ``V`` is
clamped in place and its reciprocal square root taken; ``1 / t**0.5``, ``RMS``
and the clipping denominator are Python floats; a norm over a single element is
its absolute value, as torch's CPU kernel returns it (so a one-element float32
parameter of ``1e20`` keeps a finite RMS). What remains different is the
summation order of the norms and torch's fused multiply-adds, so after 25
steps parameters and state agree with torch to 2.5 units in the last place of
each array's largest entry (float64 5.6e-16, float32 2.9e-7 on
``tests/golden/adafactor_*.npz``; the tests allow 3).

Choices where torch is silent or awkward, made here on purpose:

- ``eps1=None`` resolves to the epsilon of each parameter's own dtype (the
  contract). torch resolves it once per ``step`` from the first parameter with
  a gradient, so in a group mixing float32 and float64 the later ones get the
  first one's epsilon.
- A parameter with no elements is refused at construction (torch raises
  ``ZeroDivisionError`` in ``step``).
- The step count is a Python int (torch keeps a float32 tensor, which stops
  counting at ``2**24``).
- State is allocated at construction (``step`` 0, zero statistics), so
  ``state_dict`` has the same keys before and after the first step; a step 1
  update overwrites the zeros exactly (``lerp`` with weight 1).
- ``d = inf`` is accepted and turns update clipping off, as in torch.
- A gradient that shares memory with a parameter (``opt.step([p])`` for the
  loss ``0.5 * ||p||**2``) is copied first, so it means the gradient's values
  at the call, as torch's ``p.grad`` (never a parameter itself) does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sparse_opt._arrays import INT64_MAX
from sparse_opt._rates import LearningRate
from sparse_opt._state import Entry, Stateful, counter, float_array
from sparse_opt._validation import (
    as_param_list,
    check_bool,
    check_dense_grads,
    check_lr,
    check_new_state,
    check_scalar,
)


def _norm(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Euclidean norm as torch's CPU kernel computes it: squares summed in ``x``'s dtype.

    A norm over a single element is ``|x|`` (torch returns it without squaring,
    so a float32 ``1e20`` stays finite where ``sqrt(1e20**2)`` overflows).
    ``axis`` keeps its dimension.
    """
    if (x.size if axis is None else x.shape[axis]) == 1:
        out = np.abs(x)
        return out.reshape(()) if axis is None else out
    if axis is None:
        return np.asarray(np.linalg.norm(x.reshape(-1)))
    return np.linalg.norm(x, axis=axis, keepdims=True)


def _rms(x: np.ndarray) -> float:
    """``norm(x) / sqrt(x.size)`` as a Python float, in torch's order of operations."""
    return float(_norm(x)) / (x.size**0.5)


def _lerp(state: np.ndarray, end: np.ndarray, weight: float) -> np.ndarray:
    """``state + weight * (end - state)`` (a new array), with ``torch.lerp``'s two branches.

    torch computes ``end - (end - state) * (1 - weight)`` when ``|weight| >= 0.5``
    (exact at ``weight == 1``), and casts ``weight`` to the arrays' dtype first.
    """
    w = state.dtype.type(weight)
    if abs(w) < 0.5:
        return np.asarray(state + w * (end - state))
    return np.asarray(end - (end - state) * (1 - w))


def _factor_mean(grad: np.ndarray, axis: int) -> np.ndarray:
    """``mean(grad**2, axis, keepdims=True)`` computed as torch does: ``norm**2 / n``."""
    mean = np.square(_norm(grad, axis))
    mean /= grad.shape[axis]
    return mean


def factored_second_moment(row_var: np.ndarray, col_var: np.ndarray, eps1: float) -> np.ndarray:
    """Adafactor's second-moment estimate ``V = R @ C / max(mean(R, axis=-2), eps1)`` (torch's form).

    ``row_var`` is ``(..., R, 1)`` and ``col_var`` ``(..., 1, C)``; the result
    is a fresh ``(..., R, C)`` array.
    """
    estimate = row_var @ col_var
    estimate /= np.maximum(row_var.mean(axis=-2, keepdims=True), eps1)
    return estimate


def adafactor_update(
    param: np.ndarray,
    grad: np.ndarray,
    step: int,
    state: Mapping[str, np.ndarray],
    *,
    lr: float,
    beta2_decay: float,
    eps1: float,
    eps2: float,
    d: float,
    weight_decay: float,
    maximize: bool,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One Adafactor update of one parameter: returns the new parameter and state, mutates nothing.

    The functional core, like torch's ``_single_tensor_adafactor`` for one
    tensor; the equations are in the module docstring. No argument is checked.

    Parameters
    ----------
    param : ndarray
        The parameter (float32 or float64, at least one element).
    grad : ndarray
        Finite gradient, ``param``'s shape and dtype.
    step : int
        The step number ``t >= 1`` of this update (the count after incrementing).
    state : mapping
        ``"row_var"`` ``(..., R, 1)`` and ``"col_var"`` ``(..., 1, C)`` if
        ``param.ndim >= 2``, else ``"variance"`` (``param``'s shape).
    lr, beta2_decay, eps2, d, weight_decay, maximize
        As for :class:`Adafactor`.
    eps1 : float
        Already resolved (``None`` replaced by the dtype's epsilon).
    """
    with np.errstate(all="ignore"):  # Adafactor.step refuses non-finite state before writing anything
        if maximize:
            grad = -grad
        t = float(step)
        one_minus_beta2 = t**beta2_decay
        rho = min(lr, 1 / (t**0.5))
        alpha = max(eps2, _rms(param)) * rho

        new_param = np.asarray(param * (1 - lr * weight_decay)) if weight_decay != 0 else param.copy()

        if grad.ndim > 1:
            row_var = _lerp(state["row_var"], _factor_mean(grad, -1), one_minus_beta2)
            col_var = _lerp(state["col_var"], _factor_mean(grad, -2), one_minus_beta2)
            new_state = {"row_var": row_var, "col_var": col_var}
            var_estimate = factored_second_moment(row_var, col_var, eps1)
        else:
            variance = _lerp(state["variance"], grad * grad, one_minus_beta2)
            new_state = {"variance": variance}
            var_estimate = variance.copy()

        # eps1 is squared because the square root comes after.
        update = np.maximum(var_estimate, eps1 * eps1, out=var_estimate)
        np.sqrt(update, out=update)
        np.divide(1, update, out=update)
        update *= grad
        denom = max(1.0, float(_norm(update)) / ((update.size**0.5) * d))
        update *= -alpha / denom
        new_param += update
    return new_param, new_state


class Adafactor(Stateful):
    r"""Adafactor over a list of dense float arrays, as ``torch.optim.Adafactor``.

    Update equations, their source and the deviations from the paper are in the
    module docstring of :mod:`sparse_opt.adafactor`. In short, per parameter and
    its own step count ``t``: ``rho = min(lr, t**-0.5)``,
    ``alpha = max(eps2, RMS(p)) * rho``, ``p *= 1 - lr * weight_decay``, second
    moment ``V`` (factored into row and column EMAs of ``mean(g**2)`` over the
    last two dims when ``p.ndim >= 2``) with ``1 - beta2_t = t**beta2_decay``,
    ``U = g / sqrt(max(V, eps1**2))``, ``p -= alpha * U / max(1, RMS(U) / d)``.

    Parameters
    ----------
    params : ndarray or list of ndarray
        Writeable, C-contiguous float32/float64 arrays of any number of
        dimensions (at least one element each), updated in place.
    lr : float or callable
        ``>= 0``. Cap of the relative step size ``rho`` and coefficient of the
        weight decay. Default 1e-2. Or a schedule ``t -> lr_t`` of the global
        step ``t`` (the number of ``step`` calls, :attr:`step_count`), as
        torch's Adafactor under ``LambdaLR``.
    beta2_decay : float
        ``<= 0``. ``1 - beta2_t = t**beta2_decay``. Default -0.8.
    eps : (float or None, float)
        ``(eps1, eps2)``, each ``>= 0``. ``eps1`` floors the row-factor mean and
        ``sqrt(V)``; ``None`` means the epsilon of each parameter's dtype.
        ``eps2`` floors ``RMS(p)`` in the step size. Default ``(None, 1e-3)``.
    d : float
        ``>= 1`` (``inf`` allowed: no clipping). Update clipping threshold on
        ``RMS(U)``. Default 1.0.
    weight_decay : float
        ``>= 0``. Decoupled: ``p *= 1 - lr * weight_decay``. Default 0.0.
    maximize : bool
        Ascend instead of descend (the gradient is negated first).

    Attributes
    ----------
    params : list of ndarray
        The caller's arrays.
    state : list of dict
        ``state[i]`` holds ``"step"`` (int, the number of updates of
        ``params[i]``) and ``"row_var"`` ``(..., R, 1)`` and ``"col_var"``
        ``(..., 1, C)`` if ``params[i].ndim >= 2``, else ``"variance"``
        (the parameter's shape); arrays in the parameter's dtype.

    Raises
    ------
    ValueError
        A hyperparameter out of range (the message names the value), or an
        empty parameter.
    TypeError
        A hyperparameter or parameter of the wrong type.

    Notes
    -----
    ``state_dict()`` keys: ``lr`` (a schedule as its repr, or ``"callable"``),
    ``beta2_decay``, ``eps1`` (NaN for ``None``), ``eps2``, ``d``,
    ``weight_decay``, ``maximize``, ``num_params``, ``step_count``, and per
    parameter ``i``: ``param.{i}.step`` and ``param.{i}.row_var`` /
    ``param.{i}.col_var`` or ``param.{i}.variance``. A step that would make a
    statistic non-finite is refused before anything changes.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> w = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> opt = so.Adafactor([w], lr=0.01)
    >>> opt.step([np.array([[0.5, -0.5], [1.0, 0.0]])])
    >>> w.round(4).tolist(), opt.state[0]["row_var"].shape, opt.state[0]["col_var"].shape
    ([[0.9806, 2.0433], [2.9726, 4.0]], (2, 1), (1, 2))
    """

    def __init__(
        self,
        params: np.ndarray | Sequence[np.ndarray],
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        maximize: bool = False,
    ) -> None:
        self.lr = check_lr(lr)
        self._lr = LearningRate(self.lr)
        self.beta2_decay = check_scalar("beta2_decay", beta2_decay, high=0.0)
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise TypeError(f"eps must be a pair (eps1 or None, eps2), got {eps!r}")
        self.eps1 = None if eps[0] is None else check_scalar("eps1", eps[0], low=0.0)
        self.eps2 = check_scalar("eps2", eps[1], low=0.0)
        self.d = check_scalar("d", d, low=1.0, allow_inf=True)
        self.weight_decay = check_scalar("weight_decay", weight_decay, low=0.0)
        self.maximize = check_bool("maximize", maximize)
        self.params = as_param_list(params)
        for i, p in enumerate(self.params):
            if p.size == 0:
                raise ValueError(f"params[{i}] has shape {p.shape}: Adafactor needs at least one element")
        self.state: list[dict[str, Any]] = [{"step": 0, **_zero_state(p)} for p in self.params]
        #: ``step`` calls so far (the global step of a schedule; each parameter also counts its own steps).
        self.step_count = 0

    @property
    def eps(self) -> tuple[float | None, float]:
        """``(eps1, eps2)`` as given (``eps1`` may be ``None``)."""
        return (self.eps1, self.eps2)

    def step(self, grads: Sequence[np.ndarray | None] | np.ndarray) -> None:
        """Update every parameter whose gradient is not ``None``.

        Parameters
        ----------
        grads : list of (ndarray or None), or one ndarray for a single parameter
            One dense gradient per parameter, its shape, finite; cast to the
            parameter's dtype. ``None`` skips that parameter: neither it nor its
            state changes and its step count does not advance (as in torch).

        Raises
        ------
        TypeError
            A sparse gradient object (anything with ``nnz``) or a non-numeric one.
        ValueError
            Wrong number of gradients, a wrong shape, or a NaN/infinite value.
            Every gradient is checked before anything is updated, so on any
            error the parameters and the state are exactly as before.
        """
        arrays = [a for state in self.state for key, a in state.items() if key != "step"]
        checked = check_dense_grads(grads, self.params, state=arrays)
        if self.step_count >= INT64_MAX:
            raise ValueError(f"step_count = {self.step_count} has reached 2**63 - 1")
        lr = self._lr.at(self.step_count + 1)  # checked before anything changes
        updates: list[tuple[int, np.ndarray, dict[str, np.ndarray]] | None] = []
        for i, (p, g, state) in enumerate(zip(self.params, checked, self.state)):
            if g is None:
                updates.append(None)
                continue
            if state["step"] >= INT64_MAX:
                raise ValueError(f"params[{i}] has taken 2**63 - 1 steps, the most an int64 step counts")
            new_param, new_state = adafactor_update(
                p,
                g,
                state["step"] + 1,
                state,
                lr=lr,
                beta2_decay=self.beta2_decay,
                eps1=float(np.finfo(p.dtype).eps) if self.eps1 is None else self.eps1,
                eps2=self.eps2,
                d=self.d,
                weight_decay=self.weight_decay,
                maximize=self.maximize,
            )
            for key, value in new_state.items():
                check_new_state(f"params[{i}] {key}", value)
            updates.append((state["step"] + 1, new_param, new_state))
        for p, state, update in zip(self.params, self.state, updates):
            if update is not None:
                step, new_param, new_state = update
                p[...] = new_param
                state.update(new_state, step=step)
        self.step_count += 1

    def _config(self) -> dict[str, Any]:
        """Hyperparameters as state_dict entries (``eps1=None`` stored as NaN)."""
        return {
            "lr": self._lr.config_value(),
            "beta2_decay": self.beta2_decay,
            "eps1": math.nan if self.eps1 is None else self.eps1,
            "eps2": self.eps2,
            "d": self.d,
            "weight_decay": self.weight_decay,
            "maximize": self.maximize,
            "num_params": len(self.params),
        }

    def _state_entries(self) -> list[Entry]:
        """Per parameter ``i``: ``param.{i}.step`` and ``param.{i}.row_var``/``col_var`` or ``.variance`` (>= 0)."""
        entries = [counter("step_count")]
        for i, state in enumerate(self.state):
            entries.append(counter(f"param.{i}.step"))
            for key, value in state.items():
                if key != "step":
                    entries.append(float_array(f"param.{i}.{key}", value, nonnegative=True))
        return entries

    def _state_values(self) -> dict[str, Any]:
        per_param = {f"param.{i}.{key}": value for i, state in enumerate(self.state) for key, value in state.items()}
        return {"step_count": self.step_count, **per_param}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        self.step_count = loaded["step_count"]
        self.state = [
            {key: loaded[f"param.{i}.{key}"] for key in state} for i, state in enumerate(self.state)
        ]


def _zero_state(param: np.ndarray) -> dict[str, np.ndarray]:
    """Zero second-moment statistics for ``param``, shaped as torch allocates them."""
    if param.ndim > 1:
        row_shape = (*param.shape[:-1], 1)
        col_shape = (*param.shape[:-2], 1, param.shape[-1])
        return {"row_var": np.zeros(row_shape, param.dtype), "col_var": np.zeros(col_shape, param.dtype)}
    return {"variance": np.zeros_like(param)}

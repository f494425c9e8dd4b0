"""Exponentiated Gradient Delta-Delta (EGDD), with the semantics of lingvo's ``egdd.py``.

EGDD is gradient descent with momentum whose step is adapted twice: every weight
has its own multiplicative ``gain`` and every parameter tensor one multiplicative
``lr_scale``, both updated by the unnormalised exponentiated-gradient rule of
Kivinen & Warmuth (1997) and clipped to a box. This module is a numpy port of
``lingvo.core.egdd.EGDD`` (TensorFlow): :func:`egdd_update` is one parameter's
update, :class:`EGDD` the optimizer over a list of parameters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import NamedTuple

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

__all__ = ["EGDD", "EGDDHyperParams", "EGDDUpdate", "egdd_update"]

_SLOTS = ("momentum", "gbar", "gain", "lr_scale", "counter")


@dataclasses.dataclass(frozen=True)
class EGDDHyperParams:
    """The 13 options of :class:`EGDD`, already validated (see its docstring)."""

    learning_rate: float
    momentum: float
    beta: float
    gain_learning_rate: float
    scale_learning_rate: float
    initial_gain: float
    min_gain: float
    max_gain: float
    initial_scale: float
    min_scale: float
    max_scale: float
    use_directions: bool
    use_signs: bool


class EGDDUpdate(NamedTuple):
    """New values for one parameter and its state, as :func:`egdd_update` returns them."""

    param: np.ndarray
    momentum: np.ndarray
    gbar: np.ndarray
    gain: np.ndarray
    lr_scale: np.ndarray
    counter: int


def _norm(x: np.ndarray) -> np.floating:
    """Euclidean norm over the whole tensor, computed like ``tf.norm``: ``sqrt(sum(x * x))``."""
    return np.sqrt(np.sum(x * x))


def egdd_update(
    param: np.ndarray,
    grad: np.ndarray,
    momentum: np.ndarray,
    gbar: np.ndarray,
    gain: np.ndarray,
    lr_scale: np.ndarray,
    counter: int,
    hp: EGDDHyperParams,
) -> EGDDUpdate:
    """One EGDD step for one parameter; returns new arrays, mutates nothing.

    ``grad``, ``momentum``, ``gbar`` and ``gain`` have ``param``'s shape and dtype,
    ``lr_scale`` is a 0-d array of that dtype and ``counter`` the number of earlier
    updates. Inputs are assumed valid (:class:`EGDD` checks them). Every quantity
    is computed in the parameter's dtype, with Python-float constants cast to it,
    as TensorFlow does; see :class:`EGDD` for the equations.

    Returns
    -------
    EGDDUpdate
        The new parameter, ``momentum``, ``gbar``, ``gain``, ``lr_scale`` and
        ``counter`` (``counter + 1``).
    """
    dtype = param.dtype.type
    counter += 1
    # exp may overflow to inf (and, for huge values, the squared norms or the raw
    # inner product): the clip then yields the bound, as lingvo's clip_by_value
    # does, and an infinite norm gives a zero direction, as in lingvo.
    with np.errstate(over="ignore"):
        if hp.use_directions:
            inner = np.sum((grad / (_norm(grad) + 1e-10)) * (momentum / (_norm(momentum) + 1e-10)))
        else:
            inner = np.sum(grad * momentum)
        new_scale = np.clip(lr_scale * np.exp(hp.scale_learning_rate * inner), hp.min_scale, hp.max_scale)
        if hp.use_signs:
            exponent = hp.gain_learning_rate * np.sign(grad) * np.sign(gbar)
        else:
            corrected_gbar = gbar / (dtype(1.0) - dtype(hp.beta) ** dtype(max(counter - 1, 1)))
            exponent = hp.gain_learning_rate * grad * corrected_gbar
        new_gain = np.clip(gain * np.exp(exponent), hp.min_gain, hp.max_gain)
    with np.errstate(over="ignore", invalid="ignore"):  # EGDD.step refuses non-finite state before writing
        new_momentum = hp.momentum * momentum + hp.learning_rate * new_gain * grad
        new_gbar = hp.beta * gbar + (1.0 - hp.beta) * grad
        new_param = param - new_scale * new_momentum
    return EGDDUpdate(
        new_param, new_momentum, new_gbar, new_gain, np.asarray(new_scale, dtype=param.dtype), counter
    )


class EGDD(Stateful):
    r"""Exponentiated Gradient Delta-Delta: momentum SGD with adaptive gains (lingvo's EGDD).

    Every weight starts with a gain of ``initial_gain`` and every parameter tensor
    with one ``lr_scale`` of ``initial_scale``. ``step`` applies, per parameter
    with gradient :math:`g` and in exactly the order of lingvo's ``_apply_dense``
    (subscript "old" = the state before this step)::

        counter  <- counter + 1
        # lr_scale: one scalar per parameter, from the OLD momentum
        u, v      = g / (||g|| + 1e-10), m_old / (||m_old|| + 1e-10)   if use_directions
                  = g, m_old                                          otherwise
        lr_scale <- clip(lr_scale * exp(scale_learning_rate * sum(u * v)),
                         min_scale, max_scale)
        # gain: per weight, from the OLD gbar
        gain     <- clip(gain * exp(gain_learning_rate * sign(g) * sign(gbar_old)),
                         min_gain, max_gain)                           if use_signs
        gain     <- clip(gain * exp(gain_learning_rate * g * gbar_old
                                    / (1 - beta ** max(counter - 1, 1))),
                         min_gain, max_gain)                           otherwise
        m        <- momentum * m_old + learning_rate * gain * g        (the NEW gain)
        gbar     <- beta * gbar_old + (1 - beta) * g
        param    <- param - lr_scale * m                               (the NEW lr_scale)

    Norms are Euclidean over the whole tensor (``sqrt(sum(x * x))``, as
    ``tf.norm``), ``sum`` runs over the whole tensor, the bias correction uses the
    already incremented ``counter`` (so the first two steps both divide by
    ``1 - beta``; on the first step ``gbar_old`` is 0 anyway), and the clip
    follows the ``exp`` (an ``exp`` that overflows to ``inf`` is clipped to the
    upper bound, as in lingvo). ``sign(0) = 0``, so a zero gradient or a zero
    ``gbar`` leaves that gain unchanged.

    Parameters
    ----------
    params : numpy.ndarray or list of numpy.ndarray
        The parameters, updated in place (the caller's arrays are the model):
        writeable, C-contiguous, float32 or float64, any number of dimensions
        (0-d included; lingvo refuses 0-d variables, here they behave like a
        1-element vector). All arithmetic is done in each parameter's dtype.
    learning_rate : float or callable
        ``>= 0``. Multiplies ``gain * g`` in the momentum update. Or a schedule
        ``t -> lr_t`` of the global step ``t`` (the number of ``step`` calls,
        :attr:`step_count`; lingvo feeds the optimizer its learning rate per step).
    momentum : float
        ``>= 0``. Decay of the momentum buffer.
    beta : float, default 0.9
        Decay of the gradient EMA ``gbar``, in ``[0, 1)``. With
        ``use_signs=False`` it must also round to a value below 1 in every
        parameter's dtype (the bias correction divides by ``1 - beta**k``).
    gain_learning_rate, scale_learning_rate : float, default 0.01, 0.001
        ``>= 0``. Rates of the exponentiated-gradient updates of ``gain`` and
        ``lr_scale`` (0 freezes them).
    initial_gain, min_gain, max_gain : float, default 1.0, 0.01, 100.0
        ``0 < min_gain <= initial_gain <= max_gain``.
    initial_scale, min_scale, max_scale : float, default 1.0, 0.1, 10.0
        ``0 < min_scale <= initial_scale <= max_scale``.
    use_directions : bool, default True
        Update ``lr_scale`` from the inner product of the unit-normalised
        gradient and momentum (dimension free) rather than of the raw ones.
    use_signs : bool, default True
        Update the gains from ``sign(g) * sign(gbar_old)`` rather than from the
        bias-corrected ``g * gbar_old``.

    Attributes
    ----------
    params : list of numpy.ndarray
        The caller's arrays.
    state : list of dict
        ``state[i]`` holds parameter ``i``'s ``"momentum"``, ``"gbar"``, ``"gain"``
        (arrays of its shape and dtype), ``"lr_scale"`` (0-d array of its dtype)
        and ``"counter"`` (int, the number of steps that updated it). State is
        created in the constructor, as lingvo creates its slots up front.
    hyper_params : EGDDHyperParams
        The validated options.

    Raises
    ------
    TypeError
        A non-real option, a non-bool ``use_*`` flag, or bad ``params``.
    ValueError
        A non-finite or out-of-range option (the bounds above).

    Notes
    -----
    Differences from lingvo, all deliberate:

    - lingvo silently ignores sparse gradients (``_apply_sparse`` is a no-op);
      here a sparse gradient object (anything with ``nnz``, such as
      :class:`~sparse_opt.CooGradient`) is refused with ``TypeError``. Call
      ``.to_dense()`` for a dense update.
    - lingvo's ``lr_scale`` and ``counter`` slots are always float32 of shape
      ``(1,)`` (so float64 variables fail, and the float32 counter stops counting
      at ``2**24``); here ``lr_scale`` has the parameter's dtype and ``counter`` is
      an exact int. Float32 trajectories agree with lingvo's to rounding.
    - lingvo accepts any option values and tensors or callables as rates; here
      the options are plain numbers checked as above, and ``learning_rate``
      may also be a schedule of the global step.

    ``state_dict()`` holds the 13 options (a schedule as its repr, or
    ``"callable"``), ``num_params`` and ``step_count``, then per parameter
    ``i`` ``param.{i}.momentum``, ``param.{i}.gbar``, ``param.{i}.gain``,
    ``param.{i}.lr_scale`` (0-d) and ``param.{i}.counter``; ``load_state_dict``
    refuses non-finite values and negative gains or scales.

    ``step`` checks every gradient and computes every new value (refusing any
    that is not finite) before it writes
    anything (so one step's new values for all parameters are held at once), and a
    refused step leaves parameters and state bit-identical. A
    ``None`` gradient skips its parameter (its ``counter`` does not advance), as
    ``apply_gradients`` does with a missing gradient.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> w = np.array([0.5, 1.0])
    >>> opt = so.EGDD([w], learning_rate=0.1, momentum=0.9, beta=0.1)
    >>> opt.step([np.array([0.1, -0.5])])
    >>> w
    array([0.49, 1.05])
    """

    def __init__(
        self,
        params: np.ndarray | Sequence[np.ndarray],
        learning_rate: float | Callable[[int], float],
        momentum: float,
        beta: float = 0.9,
        gain_learning_rate: float = 0.01,
        scale_learning_rate: float = 0.001,
        initial_gain: float = 1.0,
        min_gain: float = 0.01,
        max_gain: float = 100.0,
        initial_scale: float = 1.0,
        min_scale: float = 0.1,
        max_scale: float = 10.0,
        use_directions: bool = True,
        use_signs: bool = True,
    ) -> None:
        self.params = as_param_list(params)
        self.hyper_params = EGDDHyperParams(
            learning_rate=check_lr(learning_rate, "learning_rate"),  # type: ignore[arg-type]
            momentum=check_scalar("momentum", momentum, low=0.0),
            beta=check_scalar("beta", beta, low=0.0, high=1.0, high_open=True),
            gain_learning_rate=check_scalar("gain_learning_rate", gain_learning_rate, low=0.0),
            scale_learning_rate=check_scalar("scale_learning_rate", scale_learning_rate, low=0.0),
            initial_gain=check_scalar("initial_gain", initial_gain),
            min_gain=check_scalar("min_gain", min_gain, low=0.0, low_open=True),
            max_gain=check_scalar("max_gain", max_gain),
            initial_scale=check_scalar("initial_scale", initial_scale),
            min_scale=check_scalar("min_scale", min_scale, low=0.0, low_open=True),
            max_scale=check_scalar("max_scale", max_scale),
            use_directions=check_bool("use_directions", use_directions),
            use_signs=check_bool("use_signs", use_signs),
        )
        _check_hyper_params(self.hyper_params, self.params)
        self._lr = LearningRate(learning_rate, name="learning_rate")
        #: ``step`` calls so far (the global step of a schedule; each parameter also counts its own updates).
        self.step_count = 0
        hp = self.hyper_params
        self.state: list[dict[str, np.ndarray | int]] = [
            {
                "momentum": np.zeros_like(p),
                "gbar": np.zeros_like(p),
                "gain": np.full_like(p, hp.initial_gain),
                "lr_scale": np.asarray(hp.initial_scale, dtype=p.dtype),
                "counter": 0,
            }
            for p in self.params
        ]

    def step(self, grads: np.ndarray | Sequence[np.ndarray | None]) -> None:
        """Apply one EGDD update to every parameter that has a gradient.

        Parameters
        ----------
        grads : list of (numpy.ndarray or None), or one ndarray for one parameter
            One dense gradient per parameter, of its exact shape; cast to its
            dtype. ``None`` skips that parameter (state untouched).

        Raises
        ------
        TypeError
            ``grads`` is not a list, or an entry is a sparse gradient object or
            not real numbers.
        ValueError
            Wrong number of gradients, a wrong shape, or a NaN/inf entry.
            Nothing is modified when anything is refused.
        """
        arrays = [s[k] for s in self.state for k in ("momentum", "gbar", "gain", "lr_scale")]
        checked = check_dense_grads(grads, self.params, state=arrays)
        if self.step_count >= INT64_MAX:
            raise ValueError(f"step_count = {self.step_count} has reached 2**63 - 1")
        hp = dataclasses.replace(self.hyper_params, learning_rate=self._lr.at(self.step_count + 1))  # checked first
        updates: list[EGDDUpdate | None] = []
        for i, (p, g, s) in enumerate(zip(self.params, checked, self.state)):
            if g is None:
                updates.append(None)
                continue
            if s["counter"] >= INT64_MAX:
                raise ValueError(f"params[{i}] has taken 2**63 - 1 steps, the most an int64 counter counts")
            u = egdd_update(p, g, **{k: s[k] for k in _SLOTS}, hp=hp)
            for key in ("momentum", "gbar", "gain", "lr_scale"):
                check_new_state(f"params[{i}] {key}", np.asarray(getattr(u, key)))
            updates.append(u)
        for p, s, u in zip(self.params, self.state, updates):
            if u is None:
                continue
            p[...] = u.param
            for key in ("momentum", "gbar", "gain", "lr_scale"):
                s[key][...] = getattr(u, key)
            s["counter"] = u.counter
        self.step_count += 1

    def _config(self) -> dict[str, float | bool | int | str]:
        config = {**dataclasses.asdict(self.hyper_params), "num_params": len(self.params)}
        return {**config, "learning_rate": self._lr.config_value()}

    def _state_entries(self) -> list[Entry]:
        """Per parameter ``i``: ``param.{i}.momentum``, ``.gbar``, ``.gain`` (> 0), ``.lr_scale`` (0-d, > 0), ``.counter``."""
        entries = [counter("step_count")]
        for i, s in enumerate(self.state):
            entries += [float_array(f"param.{i}.{key}", s[key]) for key in ("momentum", "gbar")]
            entries += [float_array(f"param.{i}.{key}", s[key], nonnegative=True) for key in ("gain", "lr_scale")]
            entries.append(counter(f"param.{i}.counter"))
        return entries

    def _state_values(self) -> dict[str, object]:
        per_param = {f"param.{i}.{key}": s[key] for i, s in enumerate(self.state) for key in _SLOTS}
        return {"step_count": self.step_count, **per_param}

    def _adopt_state(self, loaded: dict[str, object]) -> None:
        self.step_count = loaded["step_count"]  # type: ignore[assignment]
        self.state = [{key: loaded[f"param.{i}.{key}"] for key in _SLOTS} for i in range(len(self.params))]


def _check_hyper_params(hp: EGDDHyperParams, params: list[np.ndarray]) -> None:
    """Check the relations between options that ``check_scalar`` cannot see alone."""
    for what in ("gain", "scale"):
        low, init, high = (getattr(hp, f"{k}_{what}") for k in ("min", "initial", "max"))
        if not low <= high:
            raise ValueError(f"Invalid min_{what} / max_{what}: {low} > {high}")
        if not low <= init <= high:
            raise ValueError(f"Invalid initial_{what}: {init} (must be in [min_{what}, max_{what}] = [{low}, {high}])")
    if not hp.use_signs:
        for dtype in {p.dtype for p in params}:
            if dtype.type(hp.beta) >= 1:
                raise ValueError(
                    f"Invalid beta: {hp.beta} rounds to 1 in {dtype}, so the bias correction 1 - beta**k "
                    "would divide by zero (use a smaller beta or use_signs=True)"
                )

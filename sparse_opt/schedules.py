"""Learning-rate schedules: the rate of step ``t`` as a pure function of ``t``.

Every optimizer of the kit takes as its learning rate either a float or a
*schedule*: a callable ``schedule(t) -> float`` of the global step ``t``
(1-based: the step being taken) that returns a finite float ``>= 0``. The
learning rate of step ``t`` is ``schedule(t)``, and a float ``lr`` is the
constant schedule. A schedule must be a pure function of ``t``: an optimizer
may ask for any past or present step, in any order, any number of times, or
keep the values it needs (a catch-up needs the rates of the dormant steps).

Torch equivalence: a kit optimizer with ``lr=f`` follows the torch optimizer
built with base lr ``1.0`` and
``torch.optim.lr_scheduler.LambdaLR(opt, lambda e: f(e + 1))``, stepped as
``opt.step(); sched.step()``: the ``t``-th ``opt.step()`` runs at scheduler
epoch ``t - 1``, whose rate is ``1.0 * f(t)``.

The built-in schedules are small immutable objects (frozen dataclasses: equal
when their parameters are, hashable, picklable, with a repr that is the call
that builds them), made by five functions:

=======================================================  ====================================================
``constant(lr)``                                         ``lr``
``linear_warmup(lr, warmup_steps)``                      ``lr * min(1, t / warmup_steps)``
``warmup_cosine(lr, warmup_steps, total_steps, final)``  warm-up, half cosine to ``final`` at ``total_steps``
``step_decay(lr, step_size, gamma)``                     ``lr * gamma ** ((t - 1) // step_size)``
``exponential(lr, gamma)``                               ``lr * gamma ** (t - 1)``
=======================================================  ====================================================

Each function's docstring gives the torch scheduler it equals. Those are
equalities of the closed forms; torch's schedulers compute their rates
recursively (each epoch's rate from the previous one), which rounds
differently: ``tests/golden/make_torch_schedules.py`` measures by how much.

Three helpers serve the optimizers: :func:`resolve` turns a config's ``lr``
(float or callable) into a schedule, :func:`lr_at` evaluates one step's rate
and refuses a value that is not a finite float ``>= 0`` (naming the step and
the value), and :func:`values` gives the rates of a range of steps at once
(vectorised for the built-ins, bit for bit what the per-step calls give).

Every built-in accepts any positive integer ``t`` (Python or numpy integer
types; ``2**62`` included): ``t`` is compared and subtracted as an exact
integer and converted to a float only where the formula divides or
exponentiates, and powers of ``gamma <= 1`` underflow to ``0.0`` silently.
Every built-in's value is finite and ``>= 0`` for every ``t``.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from sparse_opt._coalesce import distinct
from sparse_opt._validation import check_scalar

__all__ = [
    "Constant",
    "Exponential",
    "LinearWarmup",
    "Schedule",
    "StepDecay",
    "WarmupCosine",
    "constant",
    "constant_from",
    "exponential",
    "linear_warmup",
    "lr_at",
    "resolve",
    "step_decay",
    "peak",
    "values",
    "values_at",
    "warmup_cosine",
]

#: Integers up to this are exact in float64; a larger power exponent is split (:func:`_int_power`).
_EXACT_INT = 2**53


# -- checks ---------------------------------------------------------------------------------------------
def check_step(t: object, name: str = "t") -> int:
    """Return the step ``t`` as a Python int, or raise.

    Any integer type is accepted (``int``, numpy integers, 0-d integer arrays);
    ``bool``, floats (even ``3.0``) and other objects are a ``TypeError``, an
    integer ``< 1`` a ``ValueError``.

    Examples
    --------
    >>> import numpy as np
    >>> check_step(np.int64(7))
    7
    """
    if isinstance(t, (bool, np.bool_)):
        raise TypeError(f"schedule step {name} must be a positive integer, got {t!r}")
    try:
        step = operator.index(t)
    except TypeError:
        raise TypeError(f"schedule step {name} must be a positive integer, got {t!r}") from None
    if step < 1:
        raise ValueError(f"Invalid schedule step {name}: {step} (must be >= 1; steps are 1-based)")
    return step


def _check_count(name: str, value: object, low: int) -> int:
    """Return the integer hyper-parameter ``value`` (any integer type, not bool) if ``>= low``, else raise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    count = int(value)
    if count < low:
        raise ValueError(f"Invalid {name}: {count} (must be >= {low})")
    return count


def _zero_from(gamma: float) -> float:
    """An exponent from which ``gamma ** n`` is below ``2**-1100``, so rounds to ``0.0`` (``inf`` for ``gamma = 1``)."""
    if gamma == 0.0:
        return 1.0
    if gamma == 1.0:
        return math.inf
    return math.ceil(1100.0 / -math.log2(gamma))


def _int_power(gamma: float, n: int) -> float:
    """``gamma ** n`` for ``0 <= gamma <= 1`` and an integer ``n >= 0`` of any size, without warnings.

    ``0.0`` from :func:`_zero_from` on (no float conversion of a huge ``n``);
    below it ``math.pow`` with the exponent as an exact float up to ``2**53``, and
    beyond ``n = a * 2**53 + b`` and ``(gamma ** 2**53) ** a * gamma ** b``: only
    ``gamma`` within about ``1e-13`` of 1 gets there with a nonzero result, and then
    ``a < 800``, so the 1-ulp error of ``gamma ** 2**53`` raised to the ``a``-th power
    stays below 1e-13 relative. ``math.pow`` does not raise on underflow, and
    ``gamma <= 1`` cannot overflow.
    """
    if n >= _zero_from(gamma):
        return 0.0
    if n <= _EXACT_INT:
        return math.pow(gamma, float(n))
    a, b = divmod(n, _EXACT_INT)
    return _int_power(math.pow(gamma, float(_EXACT_INT)), a) * math.pow(gamma, float(b))


_vector_power = np.frompyfunc(_int_power, 2, 1)
_vector_pow = np.frompyfunc(math.pow, 2, 1)
_vector_sin = np.frompyfunc(math.sin, 1, 1)


def _as_floats(objects: np.ndarray) -> np.ndarray:
    """The float64 array of a ``np.frompyfunc`` result (an object array of Python floats)."""
    return np.asarray(objects, dtype=np.float64)


def _int_powers(gamma: float | np.ndarray, n: np.ndarray) -> np.ndarray:
    """``_int_power(gamma, k)`` for every ``k`` of the int64 array ``n``, the same floats.

    ``gamma`` is one float or an array of ``n``'s shape (one base per
    exponent). For one float, exponents at or past :func:`_zero_from` give 0.0
    without a call (``math.pow`` would round them to 0.0 too); exponents up to
    ``2**53`` go straight to ``math.pow`` with their exact float value (what
    :func:`_int_power` does with them), the rest through :func:`_int_power`.
    """
    base = np.broadcast_to(np.asarray(gamma, dtype=np.float64), n.shape)
    out = np.zeros(n.shape)
    alive = n < _zero_from(float(gamma)) if np.ndim(gamma) == 0 else np.ones(n.shape, dtype=bool)
    direct = alive & (n <= _EXACT_INT)
    out[direct] = _as_floats(_vector_pow(base[direct], n[direct].astype(np.float64)))
    split = alive & ~direct
    if split.any():
        out[split] = _as_floats(_vector_power(base[split], n[split].astype(object)))
    return out


# -- the schedules --------------------------------------------------------------------------------------
class Schedule:
    """Base of the built-in schedules: ``schedule(t)`` checks ``t`` and returns the rate as a Python float.

    Subclasses are frozen dataclasses that implement ``_rate(t)`` for a checked
    Python int ``t`` and ``_rates(t)`` for an int64 array of steps (the same
    floats, bit for bit; :func:`values` uses it).
    """

    def __call__(self, t: object) -> float:
        """The learning rate of step ``t`` (a positive integer)."""
        return self._rate(check_step(t))

    def _rate(self, t: int) -> float:
        raise NotImplementedError

    def _rates(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))  # type: ignore[arg-type]
        return f"sparse_opt.schedules.{_FUNCTION_NAMES[type(self)]}({args})"


@dataclass(frozen=True, repr=False)
class Constant(Schedule):
    """``lr`` on every step (made by :func:`constant`)."""

    lr: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))

    def _rate(self, t: int) -> float:
        return self.lr

    def _rates(self, t: np.ndarray) -> np.ndarray:
        return np.full(t.shape, self.lr)


@dataclass(frozen=True, repr=False)
class LinearWarmup(Schedule):
    """``lr * min(1, t / warmup_steps)`` (made by :func:`linear_warmup`)."""

    lr: float
    warmup_steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "warmup_steps", _check_count("warmup_steps", self.warmup_steps, 1))

    def _rate(self, t: int) -> float:
        if t >= self.warmup_steps:
            return self.lr
        return self.lr * (float(t) / float(self.warmup_steps))

    def _rates(self, t: np.ndarray) -> np.ndarray:
        ramp = self.lr * (t.astype(np.float64) / float(self.warmup_steps))
        return np.where(t >= self.warmup_steps, self.lr, ramp)


@dataclass(frozen=True, repr=False)
class WarmupCosine(Schedule):
    """Linear warm-up, half cosine down to ``final_lr`` at ``total_steps``, then ``final_lr`` (``warmup_cosine``)."""

    lr: float
    warmup_steps: int
    total_steps: int
    final_lr: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "warmup_steps", _check_count("warmup_steps", self.warmup_steps, 0))
        total = _check_count("total_steps", self.total_steps, 1)
        if total <= self.warmup_steps:
            raise ValueError(
                f"Invalid total_steps: {total} (must be > warmup_steps = {self.warmup_steps}: "
                "the cosine needs at least one step)"
            )
        object.__setattr__(self, "total_steps", total)
        object.__setattr__(self, "final_lr", check_scalar("final_lr", self.final_lr, low=0.0))

    def _rate(self, t: int) -> float:
        if t <= self.warmup_steps:
            return self.lr * (float(t) / float(self.warmup_steps))
        if t >= self.total_steps:
            return self.final_lr
        half = math.sin(math.pi * float(self.total_steps - t) / float(2 * (self.total_steps - self.warmup_steps)))
        return self.final_lr + (self.lr - self.final_lr) * (half * half)

    def _rates(self, t: np.ndarray) -> np.ndarray:
        out = np.full(t.shape, self.final_lr)
        warm = t <= self.warmup_steps
        out[warm] = self.lr * (t[warm].astype(np.float64) / float(self.warmup_steps))
        middle = ~warm & (t < self.total_steps)
        if middle.any():
            remaining = (self.total_steps - t[middle]).astype(np.float64)
            angle = math.pi * remaining / float(2 * (self.total_steps - self.warmup_steps))
            half = _as_floats(_vector_sin(angle))  # math.sin, as _rate: numpy's SIMD sin rounds differently
            out[middle] = self.final_lr + (self.lr - self.final_lr) * (half * half)
        return out


@dataclass(frozen=True, repr=False)
class StepDecay(Schedule):
    """``lr * gamma ** ((t - 1) // step_size)`` (made by :func:`step_decay`)."""

    lr: float
    step_size: int
    gamma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "step_size", _check_count("step_size", self.step_size, 1))
        object.__setattr__(self, "gamma", check_scalar("gamma", self.gamma, low=0.0, high=1.0))

    def _rate(self, t: int) -> float:
        return self.lr * _int_power(self.gamma, (t - 1) // self.step_size)

    def _rates(self, t: np.ndarray) -> np.ndarray:
        n = (t - 1) // self.step_size
        first, last = int(n[0]), int(n[-1])  # t ascending: one power per decay period in the range
        powers = _int_powers(self.gamma, np.arange(first, last + 1, dtype=np.int64))
        return self.lr * powers[n - first]


@dataclass(frozen=True, repr=False)
class Exponential(Schedule):
    """``lr * gamma ** (t - 1)`` (made by :func:`exponential`)."""

    lr: float
    gamma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "gamma", check_scalar("gamma", self.gamma, low=0.0, high=1.0))

    def _rate(self, t: int) -> float:
        return self.lr * _int_power(self.gamma, t - 1)

    def _rates(self, t: np.ndarray) -> np.ndarray:
        return self.lr * _int_powers(self.gamma, t - 1)


_FUNCTION_NAMES: dict[type, str] = {
    Constant: "constant",
    LinearWarmup: "linear_warmup",
    WarmupCosine: "warmup_cosine",
    StepDecay: "step_decay",
    Exponential: "exponential",
}


# -- the functions that make them ------------------------------------------------------------------------
def constant(lr: float) -> Constant:
    """The constant schedule: ``lr`` on every step.

    Equals ``LambdaLR(opt, lambda e: lr)`` on base lr 1.0, or no scheduler on
    base lr ``lr``. A float ``lr`` given to an optimizer means this schedule.

    Parameters
    ----------
    lr : float
        Finite, ``>= 0``.

    Returns
    -------
    Constant

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.constant(0.1)(1000)
    0.1
    """
    return Constant(lr)


def linear_warmup(lr: float, warmup_steps: int) -> LinearWarmup:
    r"""Linear warm-up to ``lr``, then ``lr``.

    .. math:: \eta_t = \mathrm{lr} \cdot \min\left(1, \frac{t}{\mathrm{warmup\_steps}}\right)

    computed as ``lr * (t / warmup_steps)`` (two roundings) for ``t <
    warmup_steps`` and exactly ``lr`` from ``t = warmup_steps`` on.

    Torch: equals ``LinearLR(opt, start_factor=1 / warmup_steps, end_factor=1.0,
    total_iters=warmup_steps - 1)`` on base lr ``lr`` (epoch ``e = t - 1`` has
    factor ``(e + 1) / warmup_steps``; for ``warmup_steps >= 2``), and exactly
    ``LambdaLR(opt, lambda e: f(e + 1))`` on base lr 1.0.

    Parameters
    ----------
    lr : float
        Finite, ``>= 0``: the rate after the warm-up.
    warmup_steps : int
        ``>= 1``; step ``warmup_steps`` is the first at the full rate.

    Returns
    -------
    LinearWarmup

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> f = schedules.linear_warmup(0.5, 4)
    >>> [f(t) for t in (1, 2, 4, 9)]
    [0.125, 0.25, 0.5, 0.5]
    """
    return LinearWarmup(lr, warmup_steps)


def warmup_cosine(lr: float, warmup_steps: int, total_steps: int, final_lr: float = 0.0) -> WarmupCosine:
    r"""Linear warm-up, then a half cosine from ``lr`` down to ``final_lr`` at ``total_steps``, then ``final_lr``.

    With :math:`W` = ``warmup_steps``, :math:`T` = ``total_steps``:

    .. math::

        \eta_t = \begin{cases}
            \mathrm{lr} \cdot t / W & t \le W \\
            \mathrm{final\_lr} + (\mathrm{lr} - \mathrm{final\_lr})
                \frac{1 + \cos(\pi (t - W) / (T - W))}{2} & W < t < T \\
            \mathrm{final\_lr} & t \ge T
        \end{cases}

    The cosine branch is evaluated as ``final_lr + (lr - final_lr) * s**2`` with
    ``s = sin(pi * (T - t) / (2 (T - W)))``, the same number (``(1 + cos x) / 2 =
    cos(x / 2)**2``) without the cancellation of ``1 + cos x`` near the end of the
    cosine, where ``x`` is close to ``pi``: ``T - t`` is an exact integer, so the
    rate is within a few ulp of the exact value on every step (the literal
    formula is off by up to 5e-15 relative there; ``make_torch_schedules.py``
    measures both).

    Torch: for ``t <= T`` equals ``SequentialLR(opt, [LinearLR(opt,
    start_factor=1 / W, end_factor=1.0, total_iters=W - 1),
    CosineAnnealingLR(opt, T_max=T - W, eta_min=final_lr)], milestones=[W -
    1])`` on base lr ``lr`` (``W >= 2``; the milestone is ``W - 1``, not ``W``,
    or torch repeats the peak rate on step ``W + 1``), and for ``W = 1``
    ``CosineAnnealingLR(opt, T_max=T - 1, eta_min=final_lr)``. After ``T``
    torch's cosine rises again (it is periodic), this schedule stays at
    ``final_lr``. For every ``t`` it is exactly ``LambdaLR(opt, lambda e: f(e +
    1))`` on base lr 1.0.

    Parameters
    ----------
    lr : float
        Finite, ``>= 0``: the peak rate, reached at ``t = W``.
    warmup_steps : int
        ``W >= 0`` (0: no warm-up, the cosine starts below ``lr`` on step 1).
    total_steps : int
        ``T > W``: the step at which ``final_lr`` is reached.
    final_lr : float
        Finite, ``>= 0``.

    Returns
    -------
    WarmupCosine

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> f = schedules.warmup_cosine(1.0, 2, 6, final_lr=0.5)
    >>> [f(t) for t in (1, 2, 4, 6, 100)]
    [0.5, 1.0, 0.75, 0.5, 0.5]
    """
    return WarmupCosine(lr, warmup_steps, total_steps, final_lr)


def step_decay(lr: float, step_size: int, gamma: float) -> StepDecay:
    r"""``lr``, multiplied by ``gamma`` every ``step_size`` steps.

    .. math:: \eta_t = \mathrm{lr} \cdot \gamma^{\lfloor (t - 1) / \mathrm{step\_size} \rfloor}

    Torch: equals ``StepLR(opt, step_size=step_size, gamma=gamma)`` on base lr
    ``lr`` (whose closed form is ``lr * gamma ** (e // step_size)`` at epoch ``e =
    t - 1``), and exactly ``LambdaLR(opt, lambda e: f(e + 1))`` on base lr 1.0.

    Parameters
    ----------
    lr : float
        Finite, ``>= 0``: the rate of steps ``1 .. step_size``.
    step_size : int
        ``>= 1``.
    gamma : float
        In ``[0, 1]`` (a decay: every value stays finite for every ``t``).

    Returns
    -------
    StepDecay

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> f = schedules.step_decay(1.0, 3, 0.5)
    >>> [f(t) for t in (1, 3, 4, 7, 2**62)]
    [1.0, 1.0, 0.5, 0.25, 0.0]
    """
    return StepDecay(lr, step_size, gamma)


def exponential(lr: float, gamma: float) -> Exponential:
    r"""``lr``, multiplied by ``gamma`` every step.

    .. math:: \eta_t = \mathrm{lr} \cdot \gamma^{t - 1}

    computed as ``lr * gamma ** (t - 1)`` with one correctly-ish rounded power
    (``math.pow``), not by repeated multiplication.

    Torch: equals ``ExponentialLR(opt, gamma=gamma)`` on base lr ``lr`` (closed
    form ``lr * gamma ** e`` at epoch ``e = t - 1``), and exactly ``LambdaLR(opt,
    lambda e: f(e + 1))`` on base lr 1.0.

    Parameters
    ----------
    lr : float
        Finite, ``>= 0``: the rate of step 1.
    gamma : float
        In ``[0, 1]``.

    Returns
    -------
    Exponential

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> f = schedules.exponential(2.0, 0.5)
    >>> [f(t) for t in (1, 2, 3, 2**62)]
    [2.0, 1.0, 0.5, 0.0]
    """
    return Exponential(lr, gamma)


# -- what the optimizers use ------------------------------------------------------------------------------
def resolve(lr: object, name: str = "lr") -> Callable[[int], float]:
    """A config's learning rate as a schedule: a float becomes :func:`constant`, a callable is kept.

    A number is checked like every hyper-parameter (finite, ``>= 0``; ``bool``
    refused). A callable is not called here: its values are checked at the
    steps that ask for them (:func:`lr_at`).

    Parameters
    ----------
    lr : float or callable
        The learning rate or schedule.
    name : str
        The field's name, for messages.

    Returns
    -------
    callable
        ``t -> float``.

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.resolve(0.1)
    sparse_opt.schedules.constant(lr=0.1)
    """
    if isinstance(lr, (numbers.Real, np.bool_)):
        return Constant(check_scalar(name, lr, low=0.0))
    if not callable(lr):
        raise TypeError(f"{name} must be a float >= 0 or a schedule (a callable t -> float), got {lr!r}")
    return lr  # type: ignore[return-value]


def lr_at(schedule: Callable[[int], float], t: object) -> float:
    """The learning rate of step ``t``: ``schedule(t)``, checked.

    Parameters
    ----------
    schedule : callable
        ``t -> float`` (see :func:`resolve`).
    t : int
        The step, ``>= 1``.

    Returns
    -------
    float
        A finite Python float ``>= 0`` (``-0.0`` becomes ``0.0``).

    Raises
    ------
    TypeError
        The value is not a real number (``bool`` included).
    ValueError
        The value is NaN, infinite or negative; the message names the step and the value.

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.lr_at(lambda t: 0.5 / t, 4)
    0.125
    """
    step = check_step(t)
    if type(schedule) in _FUNCTION_NAMES:  # a built-in: finite and >= 0 by construction
        return schedule._rate(step)  # type: ignore[attr-defined]
    return _checked(schedule(step), step)


def _checked(value: object, step: int) -> float:
    """:func:`lr_at`'s check of the value a schedule returned at ``step``: a finite Python float ``>= 0``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"learning-rate schedule returned {value!r} at step {step} (must be a real number)")
    rate = float(value)
    if not math.isfinite(rate) or rate < 0.0:
        raise ValueError(f"Invalid learning rate at step {step}: {rate!r} (must be finite and >= 0)")
    return rate + 0.0


def _called(schedule: Callable[[int], float], steps: list[int]) -> np.ndarray:
    """``[lr_at(schedule, t) for t in steps]`` (Python ints ``>= 1``) as float64, bit for bit, one call a step.

    When every value is a Python or numpy ``float`` (the common case) they are checked
    at once; otherwise, or where one is not finite or negative, each value is
    checked as :func:`lr_at` checks it, so the error names the first bad step.
    """
    raw = [schedule(t) for t in steps]
    if set(map(type, raw)) <= {float, np.float64}:
        rates = np.array(raw, dtype=np.float64)
        if np.all(rates >= 0.0) and np.isfinite(rates).all():  # (NaN fails the first)
            return rates + 0.0
    return np.array([_checked(value, t) for value, t in zip(raw, steps)], dtype=np.float64)


def values(schedule: Callable[[int], float], t_start: object, t_stop: object) -> np.ndarray:
    """The rates of steps ``t_start, ..., t_stop - 1`` as a float64 array.

    Bit for bit ``[lr_at(schedule, t) for t in range(t_start, t_stop)]``: the
    built-ins evaluate the range with numpy (the transcendental parts with the
    same ``math.sin``/``math.pow`` the scalar path uses, one power per decay
    period for :func:`step_decay`), any other callable is called once per step
    and its values checked as :func:`lr_at` checks one (at once when they are
    all Python floats).

    Parameters
    ----------
    schedule : callable
        ``t -> float``.
    t_start : int
        First step, ``>= 1``.
    t_stop : int
        One past the last step, ``>= t_start`` and ``<= 2**63 - 1`` (int64).

    Returns
    -------
    numpy.ndarray
        Shape ``(t_stop - t_start,)``, float64.

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.values(schedules.linear_warmup(1.0, 4), 1, 6).tolist()
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """
    start = check_step(t_start, "t_start")
    try:
        stop = operator.index(t_stop) if not isinstance(t_stop, (bool, np.bool_)) else None
    except TypeError:
        stop = None
    if stop is None:
        raise TypeError(f"t_stop must be an integer, got {t_stop!r}")
    if stop < start or stop > np.iinfo(np.int64).max:
        raise ValueError(f"Invalid t_stop: {stop} (must be in [t_start, 2**63 - 1] = [{start}, 2**63 - 1])")
    if stop == start:
        return np.zeros(0)
    if type(schedule) in _FUNCTION_NAMES:
        return schedule._rates(np.arange(start, stop, dtype=np.int64))  # type: ignore[attr-defined]
    return _called(schedule, list(range(start, stop)))


def values_at(schedule: Callable[[int], float], steps: np.ndarray) -> np.ndarray:
    """The rates of the steps in ``steps`` (an int64 array of any shape, each ``>= 1``), float64, same shape.

    Each distinct step is evaluated once: with numpy for the built-ins, by a
    checked call (:func:`lr_at`) for any other callable. Bit for bit the
    per-step values.

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt import schedules
    >>> schedules.values_at(schedules.step_decay(1.0, 2, 0.5), np.array([[5, 1], [2, 3]])).tolist()
    [[0.25, 1.0], [1.0, 0.5]]
    """
    steps = np.asarray(steps, dtype=np.int64)
    if steps.size == 0:
        return np.zeros(steps.shape)
    if int(steps.min()) < 1:
        check_step(int(steps.min()), "steps")
    unique, inverse = distinct(steps)  # np.unique's arrays (a catch-up's pieces repeat their starts per node)
    if type(schedule) in _FUNCTION_NAMES:
        rates = schedule._rates(unique)  # type: ignore[attr-defined]
    else:
        rates = _called(schedule, unique.tolist())
    return rates[inverse].reshape(steps.shape)


def peak(schedule: Callable[[int], float]) -> float | None:
    """The largest rate a built-in schedule takes on any step (``lr``, or ``final_lr`` if larger); None for any other callable.

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.peak(schedules.warmup_cosine(0.1, 10, 100, final_lr=0.2)), schedules.peak(lambda t: 1.0)
    (0.2, None)
    """
    if type(schedule) not in _FUNCTION_NAMES:
        return None
    return max(schedule.lr, getattr(schedule, "final_lr", 0.0))  # type: ignore[attr-defined]


def constant_from(schedule: Callable[[int], float]) -> tuple[int, float] | None:
    """``(t0, rate)``: a built-in schedule's rate is ``rate`` on every step ``t >= t0``; None for any other callable.

    :func:`linear_warmup` settles at the end of its warm-up, :func:`warmup_cosine`
    at ``total_steps``, :func:`step_decay` and :func:`exponential` where ``gamma``'s
    power rounds to 0 (at once for ``gamma = 1``: constant from step 1). A
    catch-up multiplies the decay factors of the steps from ``t0`` on as one
    power instead of step by step.

    Examples
    --------
    >>> from sparse_opt import schedules
    >>> schedules.constant_from(schedules.warmup_cosine(0.1, 10, 100, final_lr=0.01))
    (100, 0.01)
    >>> schedules.constant_from(schedules.exponential(1.0, 0.5)), schedules.constant_from(lambda t: 1.0)
    ((1101, 0.0), None)
    """
    if isinstance(schedule, Constant):
        return 1, schedule.lr
    if isinstance(schedule, LinearWarmup):
        return schedule.warmup_steps, schedule.lr
    if isinstance(schedule, WarmupCosine):
        return schedule.total_steps, schedule.final_lr
    if isinstance(schedule, (StepDecay, Exponential)):
        if schedule.gamma == 1.0:
            return 1, schedule.lr
        zero = int(_zero_from(schedule.gamma))  # the first power that rounds to 0
        return (zero * schedule.step_size + 1 if isinstance(schedule, StepDecay) else zero + 1), 0.0
    return None

"""The hyper-parameters a scenario hands to every candidate and reference.

One flat record serves the three optimizer families the conformance check
covers; each family reads only its own fields:

- ``adam``: ``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``, ``maximize``;
- ``adagrad``: ``lr``, ``lr_decay``, ``eps``, ``initial_accumulator_value``, ``weight_decay``, ``maximize``;
- ``sgd``: ``lr``, ``momentum``, ``weight_decay``, ``maximize``.

``weight_decay`` is a coefficient; whether it is decoupled (AdamW) or coupled
(L2 added to the gradient) is the semantics under test, not a hyper-parameter.

A learning-rate *schedule* is ``schedule``, the rate of every step of the
scenario, ``lr_1 .. lr_T`` (empty: every step's rate is ``lr``); ``lr`` is then
the schedule's peak (the ``lr`` of :mod:`sparse_opt.schedules`). Candidates
and references ask :meth:`Hyper.rate` for the rate of step ``t``: what each
semantics does with the rates of the steps a row slept through is what the
schedule scenarios test.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

#: The optimizer families, in report order.
FAMILIES = ("adam", "adagrad", "sgd")


@dataclass(frozen=True)
class Hyper:
    """Hyper-parameters of one scenario (plain Python scalars).

    Parameters
    ----------
    lr : float
        Learning rate.
    beta1, beta2 : float
        Adam's moment decay rates.
    eps : float
        Adam's and Adagrad's denominator guard.
    weight_decay : float
        Decay coefficient (Adam, SGD, and Adagrad in the kernel form); its placement is the semantics.
    momentum : float
        SGD's momentum factor (no dampening, no Nesterov).
    lr_decay : float
        Adagrad's rate decay: ``lr / (1 + (t - 1) * lr_decay)``.
    initial_accumulator_value : float
        Adagrad's starting accumulator.
    maximize : bool
        Ascend: the gradient is negated before anything else.
    schedule : tuple of float
        The learning rate of each step, ``schedule[t - 1]`` for step ``t``
        (finite, ``>= 0``; ``lr`` must be their largest); empty (the default)
        for the constant rate ``lr``. A scenario with a schedule has one rate
        per step.

    Examples
    --------
    >>> from sparse_opt.conformance import Hyper
    >>> Hyper(lr=0.0625, weight_decay=0.125).features("adam")
    frozenset({'weight_decay'})
    """

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    momentum: float = 0.0
    lr_decay: float = 0.0
    initial_accumulator_value: float = 0.0
    maximize: bool = False
    schedule: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        rates = tuple(float(x) for x in self.schedule)
        for t, rate in enumerate(rates, 1):
            if not (math.isfinite(rate) and rate >= 0.0):
                raise ValueError(f"schedule[{t - 1}] (the rate of step {t}) must be finite and >= 0, got {rate!r}")
        if rates and float(self.lr) != max(rates):
            raise ValueError(f"lr = {self.lr!r} must be the schedule's peak, {max(rates)!r}")
        object.__setattr__(self, "schedule", rates)

    def rate(self, t: int) -> float:
        """The learning rate of step ``t`` (1-based): ``schedule[t - 1]``, or ``lr`` without a schedule.

        With a schedule, ``t`` must be a step of the scenario (``1 <= t <= len(schedule)``).
        """
        if not self.schedule:
            return float(self.lr)
        if not 1 <= t <= len(self.schedule):
            raise ValueError(f"step {t} is outside the schedule's steps 1 .. {len(self.schedule)}")
        return self.schedule[t - 1]

    def features(self, family: str) -> frozenset[str]:
        """The optional features this record switches on for ``family``.

        A subset of ``{"weight_decay", "maximize", "lr_decay",
        "initial_accumulator_value", "schedule"}``: a reference or candidate
        that lacks one of them does not apply to the scenario.
        """
        used = {
            "adam": ("weight_decay", "maximize"),
            "adagrad": ("lr_decay", "initial_accumulator_value", "weight_decay", "maximize"),
            "sgd": ("weight_decay", "maximize"),
        }[family]
        return frozenset(name for name in used + ("schedule",) if getattr(self, name))

    def as_dict(self) -> dict[str, float | bool | list[float]]:
        """All fields, as plain Python values (the JSON form); ``schedule`` (a list) only when there is one.

        A constant-rate record is what it was before schedules existed, so the
        fingerprints of those scenarios (and recordings made for them) hold.
        """
        out: dict[str, float | bool | list[float]] = asdict(self)
        rates = out.pop("schedule")
        if rates:
            out["schedule"] = list(rates)
        return out

"""The hyper-parameters a scenario hands to every candidate and reference.

One flat record serves the three optimizer families the conformance check
covers; each family reads only its own fields:

- ``adam``: ``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``, ``maximize``;
- ``adagrad``: ``lr``, ``lr_decay``, ``eps``, ``initial_accumulator_value``, ``weight_decay``, ``maximize``;
- ``sgd``: ``lr``, ``momentum``, ``weight_decay``, ``maximize``.

``weight_decay`` is a coefficient; whether it is decoupled (AdamW) or coupled
(L2 added to the gradient) is the semantics under test, not a hyper-parameter.
"""

from __future__ import annotations

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

    def features(self, family: str) -> frozenset[str]:
        """The optional features this record switches on for ``family``.

        A subset of ``{"weight_decay", "maximize", "lr_decay",
        "initial_accumulator_value"}``: a reference or candidate that lacks one
        of them does not apply to the scenario.
        """
        used = {
            "adam": ("weight_decay", "maximize"),
            "adagrad": ("lr_decay", "initial_accumulator_value", "weight_decay", "maximize"),
            "sgd": ("weight_decay", "maximize"),
        }[family]
        return frozenset(name for name in used if getattr(self, name))

    def as_dict(self) -> dict[str, float | bool]:
        """All fields, as plain Python scalars (the JSON form)."""
        return asdict(self)

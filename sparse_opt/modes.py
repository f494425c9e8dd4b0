"""The lazy semantics: what happens to a coordinate's state on the steps it has no gradient.

A dense optimizer updates every coordinate on every step; a lazy one only the
coordinates in the gradient. On a *dormant* step (no gradient for a coordinate)
the dense optimizer still applies its zero-gradient step: Adam's moments decay
and its parameter keeps coasting by ``lr * m_hat / (sqrt(v_hat) + eps)``;
weight decay shrinks the parameter; SGD's momentum keeps pushing. The modes say
what a lazy optimizer does about those steps when the coordinate is touched
again:

``LAZY``
    Nothing: the state is updated as if the previous step had been the last one
    (TensorFlow's LazyAdam; ``torch.optim.SparseAdam`` up to its eps placement).
``DORMANCY_DECAY``
    The moments decay by ``beta ** gap`` at the touch, so they equal dense
    Adam's; the parameter does not coast (the seed's specification).
``DENSE_EQUIVALENT``
    Every dormant step is applied, exactly as the dense optimizer fed zero
    gradients would have applied it, when the coordinate is next needed (a touch,
    or ``catch_up``): the lazy trajectory *is* the dense one, at sparse cost.

The principle behind them: a lazy optimizer equals its dense one exactly when a
zero-gradient step changes nothing (plain SGD, Adagrad).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class LazyMode(enum.Enum):
    """How a lazy optimizer treats the steps a coordinate had no gradient (module docstring).

    Examples
    --------
    >>> import sparse_opt as so
    >>> so.LazyMode("dense_equivalent"), so.LazyMode.parse("Lazy"), so.LazyAdamMode is so.LazyMode
    (<LazyMode.DENSE_EQUIVALENT: 'dense_equivalent'>, <LazyMode.LAZY: 'lazy'>, True)
    """

    LAZY = "lazy"
    DORMANCY_DECAY = "dormancy_decay"
    DENSE_EQUIVALENT = "dense_equivalent"

    @classmethod
    def parse(cls, value: object, allowed: Iterable[LazyMode] | None = None, why: str = "") -> LazyMode:
        """``value`` (a member, or its string value in any case) as a member, or raise ``ValueError``.

        ``allowed`` restricts the members an optimizer supports; ``why`` says why
        the others are refused.
        """
        mode = value
        if not isinstance(mode, cls):
            try:
                mode = cls(value.lower() if isinstance(value, str) else value)
            except ValueError:
                choices = ", ".join(repr(m.value) for m in cls)
                raise ValueError(f"Invalid mode: {value!r} (expected a LazyMode or one of {choices})") from None
        if allowed is not None and mode not in tuple(allowed):
            raise ValueError(f"Invalid mode: {mode.name} is not supported here{why}")
        return mode


#: The seed's name for the same enum.
LazyAdamMode = LazyMode

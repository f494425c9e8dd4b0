"""One optimizer's learning rate: a float or a schedule, checked at the steps that use it.

Every optimizer takes ``lr`` as a float or as a schedule ``t -> float``
(:mod:`sparse_opt.schedules`); :class:`LearningRate` is what it keeps. It answers
three questions, each checked before the optimizer changes anything:

- :meth:`~LearningRate.at`: the rate of step ``t`` (a value that is not a finite
  float ``>= 0`` is refused naming the step and the value, and so is one whose
  decoupled decay factor ``1 - lr_t * weight_decay`` would be negative);
- :meth:`~LearningRate.over`: the rates of a range of steps (the dormant steps a
  catch-up applies);
- :meth:`~LearningRate.decay`: the decoupled decay of a range of steps,
  ``prod_{j=s+1}^{t} (1 - lr_j * weight_decay)``, as dense AdamW applies it:
  each factor rounded to float64 (torch computes ``1 - lr * weight_decay`` in
  Python) and multiplied in turn.

A float is the constant schedule, and keeps round 2's arithmetic (``c**k`` for a
gap of ``k`` steps). The state a learning rate keeps does not grow with the
steps taken: a schedule is a pure function of ``t``, asked again whenever a
rate is needed. In a state dict the rate is a config entry: the float itself,
the ``repr`` of a built-in schedule (so that a checkpoint loads only into an
optimizer built with the same schedule), or ``"callable"`` for any other
schedule, which the kit cannot compare: load it into an optimizer built with
the same function.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt import schedules
from sparse_opt._validation import check_decoupled_decay

#: Steps whose rates a decay product asks for at once (bounded temporaries over long gaps).
DECAY_BLOCK = 1 << 16


class LearningRate:
    """The learning rate of every step of one optimizer (module docstring).

    Parameters
    ----------
    lr : float or callable
        A rate ``>= 0`` or a schedule ``t -> float`` (1-based steps).
    weight_decay : float
        The optimizer's decoupled decay coefficient (0 for coupled or none):
        ``lr_t * weight_decay <= 1`` is required at every step.
    name : str
        The field's name in messages (``"lr"``, ``"learning_rate"``).
    """

    def __init__(self, lr: object, weight_decay: float = 0.0, name: str = "lr") -> None:
        self.name = name
        self.schedule: Callable[[int], float] = schedules.resolve(lr, name)
        self.weight_decay = weight_decay
        #: The rate of every step when it does not depend on the step, else None.
        self.constant: float | None = self.schedule.lr if isinstance(self.schedule, schedules.Constant) else None
        if self.constant is not None:
            check_decoupled_decay(self.constant, weight_decay)
        self._peak, self._peak_through = 0.0, 0

    def at(self, t: int) -> float:
        """The rate of step ``t``, checked (``ValueError`` naming the step and the value)."""
        if self.constant is not None:
            return self.constant
        rate = schedules.lr_at(self.schedule, t)
        if rate * self.weight_decay > 1.0:
            raise ValueError(
                f"Invalid learning rate at step {t}: {rate!r} with weight_decay = {self.weight_decay} "
                f"(lr * weight_decay = {rate * self.weight_decay} > 1 would make the decay factor negative)"
            )
        return rate

    def over(self, start: int, stop: int) -> np.ndarray:
        """The rates of steps ``start .. stop - 1`` (float64), checked like :meth:`at`."""
        if self.constant is not None:
            return np.full(max(stop - start, 0), self.constant)
        rates = schedules.values(self.schedule, start, stop)
        bad = np.flatnonzero(rates * self.weight_decay > 1.0)
        if bad.size:
            self.at(start + int(bad[0]))  # raises, naming that step
        return rates

    def at_steps(self, steps: np.ndarray) -> np.ndarray:
        """The rates of the steps in the int64 array ``steps`` (any shape), checked like :meth:`at`."""
        if self.constant is not None:
            return np.full(np.shape(steps), self.constant)
        rates = schedules.values_at(self.schedule, steps)
        bad = np.flatnonzero(rates * self.weight_decay > 1.0)
        if bad.size:
            self.at(int(np.asarray(steps).reshape(-1)[bad[0]]))  # raises, naming that step
        return rates

    def peak(self, through: int) -> float:
        """A bound on the rate of every step ``<= through``: the schedule's peak, or the largest rate so far.

        Any other callable's rates are evaluated once each, as ``through`` grows
        (amortised O(1) per step; one float kept, whatever the steps).
        """
        known = schedules.peak(self.schedule)
        if known is not None:
            return known
        if through > self._peak_through:
            for lo in range(self._peak_through + 1, through + 1, DECAY_BLOCK):
                rates = self.over(lo, min(through + 1, lo + DECAY_BLOCK))
                self._peak = max(self._peak, float(rates.max()))
            self._peak_through = through
        return self._peak

    def decay(self, last: np.ndarray, through: int, dtype: np.dtype = np.dtype(np.float64)) -> np.ndarray:
        """``prod_{j=last+1}^{through} c_j`` for each entry of ``last`` (float64), ``c_j = dtype(1 - lr_j * wd)``.

        The factors are rounded to the parameters' dtype as dense training's
        kernels apply them (torch multiplies a float32 parameter by a float32
        factor). A constant rate gives ``c**k``. A schedule's products are
        taken from ``through`` back, ``P_j = c_j P_{j+1}``, so each is a function
        of its own range alone, whatever other ranges are asked at once: one
        pass over the steps from the smallest ``last``, ``DECAY_BLOCK`` at a
        time, shared by every entry, and stopped once a product is 0. Where a
        built-in schedule has settled (:func:`~sparse_opt.schedules.constant_from`)
        the factors of the settled steps are one power. O(gap) rate evaluations
        per call for any other schedule; for the built-ins, O(the steps before
        they settle).
        """
        last = np.asarray(last)
        if not self.weight_decay:
            return np.ones(last.shape)
        if self.constant is not None:
            c = float(np.asarray(1.0 - self.constant * self.weight_decay, dtype=dtype))
            return c ** (through - last).astype(np.float64)
        starts, inverse = np.unique(last, return_inverse=True)
        out = np.ones(starts.shape)
        first = starts + 1  # the first step of each product
        top, carry = through, 1.0  # the products of the steps after `top` are done: P_{top + 1} = carry
        settled = schedules.constant_from(self.schedule)
        if settled is not None and settled[0] <= through:
            low = max(settled[0], int(first[0]))  # steps low .. through all have the settled rate
            c = float(np.asarray(1.0 - self.at(low) * self.weight_decay, dtype=dtype))
            tail = first >= low
            out[tail] = schedules._int_powers(c, through + 1 - first[tail])
            top, carry = low - 1, schedules._int_power(c, through + 1 - low)
        while top >= first[0]:
            lo = max(int(first[0]), top - DECAY_BLOCK + 1)
            inside = (first >= lo) & (first <= top)
            if carry == 0.0:  # every earlier product is 0 too
                out[first <= top] = 0.0
                break
            factors = (1.0 - self.over(lo, top + 1) * self.weight_decay).astype(dtype).astype(np.float64)
            chain = np.multiply.accumulate(np.concatenate(([carry], factors[::-1])))  # chain[n] = P_{top + 1 - n}
            out[inside] = chain[top + 1 - first[inside]]
            top, carry = lo - 1, float(chain[-1])
        return out[inverse].reshape(last.shape)

    def config_value(self) -> float | str:
        """What a state dict records for this rate (module docstring)."""
        if self.constant is not None and isinstance(self.schedule, schedules.Constant):
            return self.constant
        if isinstance(self.schedule, schedules.Schedule):
            return repr(self.schedule)
        return "callable"


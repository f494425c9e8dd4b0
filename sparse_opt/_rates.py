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
rate is needed. To spare the asking, a learning rate keeps its last pass of
decay products, for calls at the same step (``DECAY_MEMO`` steps), and a
built-in schedule's keeps the rates of the latest ``RATE_MEMO`` steps asked
for: 8 MiB each at most, never saved, and the same floats as asking again, so
that results do not depend on what was kept. Any other callable is asked again
at each step: the kit may keep its values (a schedule must be a pure function
of ``t``), but a callable that returns the rate the training loop holds *now*
(``lambda t: scheduler.get_last_lr()[0]``, a common torch idiom) then still
gets the production rule, every dormant step at the current rate, rather than
a mixture of old and new rates. In a state dict the rate is a config entry: the float itself,
the ``repr`` of a built-in schedule (so that a checkpoint loads only into an
optimizer built with the same schedule), or ``"callable"`` for any other
schedule, which the kit cannot compare: load it into an optimizer built with
the same function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from sparse_opt import _analytic_rates as analytic_rates
from sparse_opt import schedules
from sparse_opt._coalesce import distinct
from sparse_opt._powers import power
from sparse_opt._validation import check_decoupled_decay

#: Steps whose rates a decay product asks for at once (bounded temporaries over long gaps).
DECAY_BLOCK = 1 << 16
#: Most runs of one decay factor a schedule is kept as (:meth:`LearningRate.runs`); beyond, products go step by step.
MAX_RUNS = 1 << 12
#: Most steps of products from one ``through`` back that :meth:`LearningRate.decay` keeps for the next call (8 MiB).
DECAY_MEMO = 1 << 20
#: Most steps whose rates :meth:`LearningRate.over` keeps (8 MiB).
RATE_MEMO = 1 << 20


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
        #: Whether rates and products are kept (:meth:`over`, :meth:`decay`): for the built-in schedules only.
        self._keeps = analytic_rates.supports(self.schedule)
        self._kept = _KeptRates()
        #: The last step-by-step products: ``(through, dtype, top, chunks)``, each chunk ``(lo, chain)`` (:meth:`decay`).
        self._memo: tuple[int, str, int, list[tuple[int, np.ndarray]]] | None = None

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
        """The rates of steps ``start .. stop - 1`` (float64), checked like :meth:`at`.

        A built-in schedule's rates of the latest steps asked for, at most
        ``RATE_MEMO``, are kept (:class:`_KeptRates`): a step's rate is a function of the step
        alone, so a range among them is a copy, and a range beside or over
        them evaluates only its new steps. A training step's catch-up asks
        for the dormant steps of its rows, most of which the step before
        asked for too.
        """
        if self.constant is not None:
            return np.full(max(stop - start, 0), self.constant)
        if not self._keeps:
            return self._evaluate(start, stop)
        return self._kept.rates(start, stop, self._evaluate)

    def _evaluate(self, start: int, stop: int) -> np.ndarray:
        """:meth:`over` without the kept rates: the schedule's values, checked."""
        rates = schedules.values(self.schedule, start, stop)
        bad = np.flatnonzero(rates * self.weight_decay > 1.0)
        if bad.size:
            self.at(start + int(bad[0]))  # raises, naming that step
        return rates

    def at_steps(self, steps: np.ndarray) -> np.ndarray:
        """The rates of the steps in the int64 array ``steps`` (any shape), checked like :meth:`at`.

        From :meth:`over`'s kept rates where they hold every step, or where the
        steps fill at least half of their span (then kept too).
        """
        if self.constant is not None:
            return np.full(np.shape(steps), self.constant)
        steps = np.asarray(steps, dtype=np.int64)
        if steps.size:
            first, last = int(steps.min()), int(steps.max())
            dense = last - first < min(2 * steps.size, RATE_MEMO)
            if self._keeps and first >= 1 and (self._kept.holds(first, last + 1) or dense):
                return self.over(first, last + 1)[steps - first]
        rates = schedules.values_at(self.schedule, steps)
        bad = np.flatnonzero(rates * self.weight_decay > 1.0)
        if bad.size:
            self.at(int(np.asarray(steps).reshape(-1)[bad[0]]))  # raises, naming that step
        return rates

    def largest(self, first: int, last: int) -> float:
        """The largest rate of steps ``first .. last`` of a built-in schedule, from a few rates whatever the range.

        A step decay and an exponential never rise (``gamma <= 1``): the rate
        at ``first``; a linear warm-up never falls: at ``last``. A warm-up and
        cosine is monotone on each of its (at most three) segments
        (:mod:`sparse_opt._analytic_rates`): the largest of their ends.
        """
        if self.constant is not None:
            return self.constant
        if type(self.schedule) in (schedules.StepDecay, schedules.Exponential):
            return self.at(first)
        if type(self.schedule) is schedules.LinearWarmup:
            return self.at(last)
        _, lo, hi, _, _, _ = analytic_rates.segments(self.schedule, np.array([first]), np.array([last]))
        return float(self.at_steps(np.concatenate([lo, hi])).max())

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

    def run_of(self, steps: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The decay factor of the run of each step (:meth:`runs`, which must not be None)."""
        starts, factors = self.runs(dtype)  # type: ignore[misc]
        return factors[np.searchsorted(starts, steps, side="right") - 1]

    def runs(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
        """Every step of a built-in schedule as runs of one decay factor: ``(starts, factors)``, or None.

        Run ``r`` is the steps ``starts[r] .. starts[r + 1] - 1`` (the last one
        without end: the schedule has settled), on each of which the factor
        ``dtype(1 - lr_j * weight_decay)`` is ``factors[r]``. Between its breaks
        a built-in schedule is monotone (:mod:`sparse_opt._analytic_rates`), so
        its rounded factor is too, and takes every value between its ends at
        most once: a run starts at each break and at the first step of each
        value, found by bisection on the steps (each factor computed as the
        steps' own). There are few in float32 (``lr * weight_decay = 1e-5``
        spans 168 float32 values below 1) and far too many in float64: None
        when more than ``MAX_RUNS``, for any other callable, or without
        weight decay. Computed once per schedule, weight decay and dtype in a
        process (kept in a cache of 64; each at most ``MAX_RUNS`` steps and
        factors, whatever the steps taken).
        """
        if not self.weight_decay or not analytic_rates.supports(self.schedule):
            return None
        if schedules.peak(self.schedule) * self.weight_decay > 1.0:  # a negative factor somewhere: refused step by step
            return None
        return _find_runs(self.schedule, self.weight_decay, np.dtype(dtype))

    def decay(
        self, last: np.ndarray, through: int, dtype: np.dtype = np.dtype(np.float64), by_runs: bool = True
    ) -> np.ndarray:
        """``prod_{j=last+1}^{through} c_j`` for each entry of ``last`` (float64), ``c_j = dtype(1 - lr_j * wd)``.

        The factors are rounded to the parameters' dtype as dense training's
        kernels apply them (torch multiplies a float32 parameter by a float32
        factor). A constant rate gives ``c**k``. A schedule's products are
        taken from ``through`` back, ``P_j = c_j P_{j+1}``, so each is a function
        of its own range alone, whatever other ranges are asked at once: one
        pass over the steps from the smallest ``last``, ``DECAY_BLOCK`` at a
        time, shared by every entry, and stopped once a product is 0. Where a
        built-in schedule has settled (:func:`~sparse_opt.schedules.constant_from`)
        the factors of the settled steps are one power. Where the dtype's
        factors of a built-in schedule make few runs of one value
        (:meth:`runs`: float32 and a small ``lr * weight_decay``), every
        product is one power per run (:meth:`_decay_by_runs`): O(runs)
        whatever the gap. Otherwise O(gap) rate evaluations per call for any
        other schedule, and for the built-ins O(the steps before they settle).
        The last call's products from ``through`` back (their first
        ``DECAY_MEMO`` steps) are kept, and a call with the same ``through``
        and dtype reuses them, the same floats: a catch-up asks for its
        entries' decays, its windows' steps' and its shared tail's, each from
        its step (one pass of rates instead of three). ``by_runs=False`` takes
        the step-by-step products even where there are runs: for steps that
        fill most of their span (a late catch-up's window terms, hundreds of
        thousands of distinct steps), a pass over the span costs less than a
        power per step (float64 products within ``through - min(last)``
        roundings instead of one).
        """
        last = np.asarray(last)
        if not self.weight_decay:
            return np.ones(last.shape)
        if self.constant is not None:
            c = float(np.asarray(1.0 - self.constant * self.weight_decay, dtype=dtype))
            return power(c, through - last)
        runs = self.runs(dtype) if by_runs else None
        if runs is not None:
            return self._decay_by_runs(last, through, *runs)
        starts, inverse = distinct(last)
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
        key = (through, np.dtype(dtype).str, top)
        kept = self._memo[3] if self._memo is not None and self._memo[:3] == key else []
        chunks: list[tuple[int, np.ndarray]] = []
        while top >= first[0]:
            lo = max(int(first[0]), top - DECAY_BLOCK + 1)
            inside = (first >= lo) & (first <= top)
            if carry == 0.0:  # every earlier product is 0 too
                out[first <= top] = 0.0
                break
            n = len(chunks)
            if n < len(kept) and kept[n][0] <= lo:  # this chunk of the last call's pass from `through`, as long
                chain = kept[n][1]
            else:
                factors = (1.0 - self.over(lo, top + 1) * self.weight_decay).astype(dtype).astype(np.float64)
                chain = np.multiply.accumulate(np.concatenate(([carry], factors[::-1])))  # chain[n] = P_{top + 1 - n}
            if (n + 1) * DECAY_BLOCK <= DECAY_MEMO:
                chunks.append((top + 1 - (chain.size - 1), chain))
            out[inside] = chain[top + 1 - first[inside]]
            top, carry = lo - 1, float(chain[top + 1 - lo])
        if chunks and (not kept or chunks[-1][0] <= kept[-1][0]):  # a memo reaching as far back, or further
            self._memo = (*key, chunks)
        return out[inverse].reshape(last.shape)

    @staticmethod
    def _decay_by_runs(last: np.ndarray, through: int, starts: np.ndarray, factors: np.ndarray) -> np.ndarray:
        """:meth:`decay` from the runs of one factor (:meth:`runs`): one power per run, multiplied from ``through`` back.

        With ``R(t)`` the run of step ``t``, the product over ``j + 1 ..
        through`` is the power of ``R(j + 1)``'s factor for its steps up to its
        end, times the whole runs after it, times the power of ``R(through)``'s
        for its steps up to ``through``: each product a function of ``(j,
        through)`` alone, as the step-by-step one. ``O(runs)`` per call
        whatever the gaps; each power within an ulp, each product one rounding.
        """
        unique, inverse = distinct(last)
        out = np.ones(unique.shape)
        live = unique < through
        if live.any():
            first = unique[live] + 1
            r_first = np.searchsorted(starts, first, side="right") - 1
            r_end = int(np.searchsorted(starts, through, side="right")) - 1
            q = np.arange(int(r_first.min()), r_end + 1)
            length = np.where(q < r_end, starts[np.minimum(q + 1, starts.size - 1)] - starts[q], through + 1 - starts[q])
            tails = np.append(np.multiply.accumulate(schedules._int_powers(factors[q], length)[::-1])[::-1], 1.0)  # runs q[i] ..
            inner = r_first < r_end
            out_live = schedules._int_powers(factors[r_end], through - unique[live])
            if inner.any():
                rf = r_first[inner]
                out_live[inner] = schedules._int_powers(factors[rf], starts[rf + 1] - first[inner]) * tails[rf + 1 - q[0]]
            out[live] = out_live
        return out[inverse].reshape(np.shape(last))

    def config_value(self) -> float | str:
        """What a state dict records for this rate (module docstring)."""
        if self.constant is not None and isinstance(self.schedule, schedules.Constant):
            return self.constant
        if isinstance(self.schedule, schedules.Schedule):
            return repr(self.schedule)
        return "callable"


class _KeptRates:
    """The rates of one range of at most ``RATE_MEMO`` consecutive steps, in a ring: step ``t`` at ``t % RATE_MEMO``.

    A range asked for next to or over the kept one joins it (only its new
    steps evaluated), dropping the steps at the far end beyond ``RATE_MEMO``;
    a newer range apart from it replaces it; an older one apart is not kept.
    Nothing is copied but the steps asked for.
    """

    def __init__(self) -> None:
        self.lo, self.hi = 1, 1  # the steps kept: lo .. hi - 1
        self.ring = np.zeros(0)

    def holds(self, start: int, stop: int) -> bool:
        """Whether every step ``start .. stop - 1`` is kept."""
        return self.lo <= start and stop <= self.hi

    def rates(self, start: int, stop: int, evaluate: Callable[[int, int], np.ndarray]) -> np.ndarray:
        """The rates of ``start .. stop - 1``: kept ones copied, the others from ``evaluate(a, b)`` (and kept)."""
        if stop - start > RATE_MEMO or stop <= start:
            return evaluate(start, stop)
        if not self.holds(start, stop):
            if start > self.hi or stop < self.lo:  # apart from the kept steps
                if stop <= self.hi:
                    return evaluate(start, stop)
                self.lo = self.hi = start
            if start < self.lo:  # older steps: the newest beyond RATE_MEMO are dropped
                new = evaluate(start, self.lo)
                self.hi = min(self.hi, start + RATE_MEMO)
                self._write(start, new)
                self.lo = start
            if stop > self.hi:  # newer steps: the oldest beyond RATE_MEMO are dropped
                new = evaluate(self.hi, stop)
                self._write(self.hi, new)
                self.lo, self.hi = max(self.lo, stop - RATE_MEMO), stop
        return self._read(start, stop)

    def _write(self, start: int, values: np.ndarray) -> None:
        if not self.ring.size:
            self.ring = np.empty(RATE_MEMO)
        at = start % RATE_MEMO
        first = min(values.size, RATE_MEMO - at)
        self.ring[at : at + first] = values[:first]
        self.ring[: values.size - first] = values[first:]

    def _read(self, start: int, stop: int) -> np.ndarray:
        at = start % RATE_MEMO
        if at + (stop - start) <= RATE_MEMO:
            return self.ring[at : at + stop - start].copy()
        return np.concatenate([self.ring[at:], self.ring[: stop - start - (RATE_MEMO - at)]])


@functools.lru_cache(maxsize=64)
def _find_runs(schedule: object, weight_decay: float, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """:meth:`LearningRate.runs` of a built-in ``schedule`` (cached: a schedule is a frozen, hashable value)."""
    settled = schedules.constant_from(schedule)
    if settled is None:
        return None
    _, lo, hi, _, _, _ = analytic_rates.segments(schedule, np.array([1]), np.array([max(settled[0], 1)]))
    if lo.size > MAX_RUNS:
        return None
    key = np.dtype(f"i{dtype.itemsize}")  # the factors are >= 0: their bits order them as their values
    first, last = (_factors(schedule, weight_decay, ends, dtype).astype(dtype).view(key).astype(np.int64) for ends in (lo, hi))
    count = np.abs(last - first)  # the values each segment's factor moves through after its first
    if lo.size + int(count.sum()) > MAX_RUNS:
        return None
    seg = np.repeat(np.arange(lo.size), count)
    nth = np.arange(seg.size, dtype=np.int64) - (np.cumsum(count) - count)[seg] + 1
    way = np.sign(last - first)[seg]
    target = first[seg] + way * nth
    # the first step of each segment whose factor reaches its target: bisection, reached(right) always
    left, right = lo[seg], hi[seg]
    while (right - left > 1).any():
        mid = (left + right) // 2
        reached = way * (_factors(schedule, weight_decay, mid, dtype).astype(dtype).view(key).astype(np.int64) - target) >= 0
        right, left = np.where(reached, mid, right), np.where(reached, left, mid)
    starts = np.unique(np.concatenate([lo, right]))
    return starts, _factors(schedule, weight_decay, starts, dtype)


def _factors(schedule: object, weight_decay: float, steps: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``dtype(1 - lr_j * weight_decay)`` of the int64 ``steps`` (checked rates), as float64."""
    return (1.0 - schedules.values_at(schedule, steps) * weight_decay).astype(dtype).astype(np.float64)

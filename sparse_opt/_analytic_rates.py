r"""The built-in schedules' rates as analytic functions of a real step, segment by segment.

A catch-up sums a long window of dormant steps through Gauss rules on pieces
of steps (:mod:`sparse_opt._adam_coasting`, *Long windows*): it evaluates the
terms at real pseudo-steps ``j`` and bounds them on a Bernstein ellipse around
each piece. Under a schedule every term carries its step's rate ``lr_j``, so
the rules need the rate continued to real and complex ``j``. Each built-in
schedule (:mod:`sparse_opt.schedules`) is, between a few break steps, one of
four entire functions of ``j``:

=============  =========================================  ==============================================
kind           ``lr(j)`` on the segment                   where
=============  =========================================  ==============================================
constant       ``lr(lo)``                                 :func:`~sparse_opt.schedules.constant`; a
                                                          warm-up's end on; after a cosine; a period of
                                                          :func:`~sparse_opt.schedules.step_decay`; a
                                                          power of ``gamma`` that has rounded to 0
linear         ``lr * j / W``                             a warm-up, ``j < W`` (``j <= W`` before a cosine)
cosine         ``f + (lr - f) sin(omega (T - j))**2``     ``W < j < T``, ``omega = pi / (2 (T - W))``
exponential    ``lr(lo) * gamma**(j - lo)``               :func:`~sparse_opt.schedules.exponential`
=============  =========================================  ==============================================

:func:`segments` cuts windows of steps at the breaks, :func:`continued`
evaluates the rate at real steps of a piece that lies in one segment, and
:func:`growth` bounds, for a piece of ``n`` steps from ``lo`` and an ellipse of
centre ``C`` and semi-axes ``a`` (real) and ``Y <= a`` (imaginary)::

    sup_{z on the ellipse} |lr(z)| / min_{lo <= j <= J1} lr(j),    J1 = lo + n - 1:

- constant: 1;
- linear: ``(C + a) / lo`` (``|z| <= C + a`` on the ellipse);
- exponential: ``gamma**-(a + h)``, ``h = (n - 1) / 2``;
- cosine, with ``r(t)`` the real rate at a real ``t``: for ``lr >= f`` (falling), by
  ``|sin(x + iy)|**2 = sin(x)**2 + sinh(y)**2``::

      (r(max(C - a, W)) + (lr - f) sinh(omega Y)**2) / r(J1),

  and for ``lr < f`` (a cosine that rises), by ``|sin(x + iy)**2 - sin(x)**2|
  = |cos(2x) - cos(2x + 2iy)| / 2 <= (e**(2|y|) - 1) / 2``::

      (r(min(C + a, T)) + (f - lr) (e**(2 omega Y) - 1) / 2) / r(lo),

  each the largest real rate on the ellipse's span (``r`` is monotone between
  ``W`` and ``T``, and between its extremes beyond them) plus what the
  imaginary part adds, over the least rate on the piece. Near ``T`` the
  falling rate's double zero (``f = 0``) makes this grow unless the piece
  keeps its distance: a cosine segment carries ``T`` as its *zero*, and the
  catch-up keeps every piece there at least twice its length before it, so
  that ``r(C - a) / r(J1) <= ((T - C + a) / (T - J1))**2 <= 6`` or so.
  Distances from ``T`` are taken as exact integers before they become
  floats, and the ratio is raised by ``1e-9`` for the roundings of ``r``.

The continued values round as the steps' own do, to a few ulps: numpy's ``sin``
for the per-step ``math.sin``, and ``gamma**(j - lo)`` times the exact power at
``lo``, so the exponent stays below a piece's length.
"""

from __future__ import annotations

import math

import numpy as np

from sparse_opt import schedules

#: The kinds of a segment (module docstring).
CONSTANT, LINEAR, COSINE, EXPONENTIAL = 0, 1, 2, 3


def supports(schedule: object) -> bool:
    """Whether ``schedule`` is a built-in, whose rates this module continues."""
    return type(schedule) in (
        schedules.Constant,
        schedules.LinearWarmup,
        schedules.WarmupCosine,
        schedules.StepDecay,
        schedules.Exponential,
    )


def _breaks(schedule: object, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps inside windows ``first .. last`` where a new segment starts: ``(window, step)``, by window and step."""
    fixed: list[int] = []
    if isinstance(schedule, schedules.LinearWarmup):
        fixed = [schedule.warmup_steps]
    elif isinstance(schedule, schedules.WarmupCosine):
        fixed = [schedule.warmup_steps + 1, schedule.total_steps]
    elif isinstance(schedule, schedules.Exponential):
        settled = schedules.constant_from(schedule)
        fixed = [settled[0]] if settled is not None and settled[0] > 1 else []
    elif isinstance(schedule, schedules.StepDecay):
        # every period, up to the one whose power has rounded to 0 (constant from there on)
        size = schedule.step_size
        settled = schedules.constant_from(schedule)
        top = (settled[0] - 1) // size if settled is not None and settled[0] > 1 else 0
        low = np.clip((first - 1) // size + 1, 1, top + 1)  # the first period starting after `first`
        high = np.clip((last - 1) // size, 0, top)  # the last one starting at or before `last`
        count = np.maximum(high - low + 1, 0)
        window = np.repeat(np.arange(first.size), count)
        nth = np.arange(window.size, dtype=np.int64) - (np.cumsum(count) - count)[window]
        return window, (low[window] + nth) * size + 1
    points = np.array(sorted(set(fixed)), dtype=np.int64)
    inside = (points[None, :] > first[:, None]) & (points[None, :] <= last[:, None])
    window, col = np.nonzero(inside)
    return window, points[col]


def _kind(schedule: object, lo: np.ndarray) -> np.ndarray:
    """The kind of the segment starting at each step ``lo`` (module docstring)."""
    kind = np.full(lo.shape, CONSTANT, dtype=np.int64)
    if isinstance(schedule, schedules.LinearWarmup):
        kind[lo < schedule.warmup_steps] = LINEAR
    elif isinstance(schedule, schedules.WarmupCosine):
        kind[lo <= schedule.warmup_steps] = LINEAR
        kind[(lo > schedule.warmup_steps) & (lo < schedule.total_steps)] = COSINE
    elif isinstance(schedule, schedules.Exponential):
        settled = schedules.constant_from(schedule)
        kind[lo < (settled[0] if settled is not None else np.iinfo(np.int64).max)] = EXPONENTIAL
    return kind


def segments(
    schedule: object, first: np.ndarray, last: np.ndarray, extra: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """The windows of steps ``first .. last`` (int64, inclusive, ``first <= last``) cut where the rate's formula changes.

    Returns, per segment (window by window, in order): ``(window, lo, hi,
    kind, zero, rate)``: its window's index, its steps ``lo .. hi``
    (inclusive), its kind, the step its pieces keep their distance from
    (``T`` of a cosine, else 0) and ``|d log lr / dj|`` away from that zero
    (``|log gamma|`` for an exponential, else 0), which bounds the pieces'
    length as Adam's own rates do. ``extra`` (sorted steps) adds breaks of
    the caller's own: the starts of runs of one decay factor.
    """
    window, step = _breaks(schedule, first, last)
    if extra is not None and extra.size:
        lo_at = np.searchsorted(extra, first, side="right")  # the extra breaks inside (first, last]
        count = np.searchsorted(extra, last, side="right") - lo_at
        more = np.repeat(np.arange(first.size), count)
        at = lo_at[more] + np.arange(more.size, dtype=np.int64) - (np.cumsum(count) - count)[more]
        keys = np.unique(np.stack([np.concatenate([window, more]), np.concatenate([step, extra[at]])]), axis=1)
        window, step = keys[0], keys[1]
    cuts = np.bincount(window, minlength=first.size)
    owner = np.repeat(np.arange(first.size), cuts + 1)
    lo = np.empty(owner.size, dtype=np.int64)
    head = np.cumsum(cuts + 1) - (cuts + 1)  # each window's first segment
    lo[head] = first
    rest = np.ones(owner.size, dtype=bool)
    rest[head] = False
    lo[rest] = step  # the breaks come by window and step, as the segments
    hi = np.empty_like(lo)
    hi[:-1] = lo[1:] - 1
    tail = np.append(head[1:], owner.size) - 1  # each window's last segment
    hi[tail] = last
    kind = _kind(schedule, lo)
    zero = np.zeros(lo.size, dtype=np.int64)
    rate = np.zeros(lo.size)
    if isinstance(schedule, schedules.WarmupCosine):
        zero[kind == COSINE] = schedule.total_steps
    if isinstance(schedule, schedules.Exponential) and 0.0 < schedule.gamma < 1.0:
        rate[kind == EXPONENTIAL] = -math.log(schedule.gamma)
    return owner, lo, hi, kind, zero, rate


def continued(schedule: object, kind: np.ndarray, lo: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The rate at the real steps ``lo + offset`` (``offset`` in ``[0, n - 1]`` of a piece from ``lo`` within one segment of ``kind``)."""
    out = schedules.values_at(schedule, lo)
    linear, cosine, power = (kind == LINEAR), (kind == COSINE), (kind == EXPONENTIAL)
    if linear.any():
        out[linear] = schedule.lr * ((lo[linear] + offset[linear]) / float(schedule.warmup_steps))
    if cosine.any():
        total, final = schedule.total_steps, schedule.final_lr
        remaining = (total - lo[cosine]).astype(np.float64) - offset[cosine]
        half = np.sin(math.pi * remaining / float(2 * (total - schedule.warmup_steps)))
        out[cosine] = final + (schedule.lr - final) * (half * half)
    if power.any():
        out[power] *= np.power(schedule.gamma, offset[power])
    return out


def growth(
    schedule: object, kind: np.ndarray, lo: np.ndarray, n: np.ndarray, centre: np.ndarray, major: np.ndarray, minor: np.ndarray
) -> np.ndarray:
    """``sup |lr(z)|`` on each ellipse over ``min lr(j)`` on its piece's steps (module docstring); inf where unbounded.

    ``kind`` and ``lo`` are per piece (a column), ``n``, ``centre``, ``major``
    and ``minor`` broadcast against them (a row of ellipses per piece).
    """
    out = np.ones(np.broadcast_shapes(kind.shape, centre.shape, major.shape))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        linear = np.broadcast_to(kind == LINEAR, out.shape)
        if linear.any():
            out = np.where(linear, (centre + major) / lo, out)
        cosine = np.broadcast_to(kind == COSINE, out.shape)
        if cosine.any():
            total, warm, peak, final = schedule.total_steps, schedule.warmup_steps, schedule.lr, schedule.final_lr
            omega = math.pi / (2.0 * (total - warm))
            before = (total - lo).astype(np.float64)  # T - lo, exact; real steps as distances before T

            def real(distance: np.ndarray) -> np.ndarray:
                return final + (peak - final) * np.sin(omega * distance) ** 2

            if peak >= final:  # the largest real rate at the ellipse's left end (or at W), the least at J1
                top = real(np.minimum(before - (centre - lo) + major, total - warm))
                top = top + (peak - final) * np.sinh(omega * minor) ** 2
                least = real(before - (n - 1))
            else:  # rising: the largest at the right end (or at T), the least at lo
                top = real(np.maximum(before - (centre - lo) - major, 0.0))
                top = top + (final - peak) * np.expm1(2.0 * omega * minor) / 2
                least = real(before)
            ratio = top / least * (1.0 + 1e-9)
            out = np.where(cosine, np.nan_to_num(ratio, nan=np.inf), out)
        power = np.broadcast_to(kind == EXPONENTIAL, out.shape)
        if power.any():
            out = np.where(power, np.power(schedule.gamma, -(major + (n - 1) / 2)), out)
    return out

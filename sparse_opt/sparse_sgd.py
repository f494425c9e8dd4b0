"""Lazy sparse SGD with coupled weight decay and momentum, and its DENSE_EQUIVALENT catch-up.

On each step only the coordinates ``i`` with a stored gradient entry change
(``torch.optim.SGD`` with ``dampening=0``, ``nesterov=False``)::

    g_i = grad_i + weight_decay * p_i          (coupled decay)
    buf_i = momentum * buf_i + g_i             (momentum > 0; buffer starts at 0)
    p_i = p_i - lr * buf_i                     (or p_i - lr * g_i without momentum)

``maximize`` negates ``grad`` first (the decay term is not negated, as in torch).

``LazyMode.LAZY`` (the default): untouched coordinates, and their momentum
buffer, keep their values bit for bit. A zero-gradient step of dense SGD is *not*
a no-op when ``weight_decay`` or ``momentum`` is set -- the decay shrinks ``p``
and the buffer keeps pushing it -- so lazy SGD then differs from dense SGD for a
rarely touched row: it skips those steps.

``LazyMode.DENSE_EQUIVALENT`` applies them when the coordinate is next needed.
A dormant step is the fixed linear map (``g = weight_decay * p``)::

    [p  ]      [1 - lr*wd   -lr*mu] [p  ]
    [buf]  <-  [wd           mu   ] [buf]

so ``k`` dormant steps are its ``k``-th power ``M**k``, the same for every
coordinate with the same gap: computed once per distinct gap by repeated
squaring in double-double arithmetic (at most 63 squarings for an int64 gap, a
constant; exact to float64 rounding for any gap), then two multiply-adds per
coordinate. Without momentum ``M**k`` is ``(1 - lr*wd)**k``.
``DORMANCY_DECAY`` is refused for SGD: it is Adam's moment rule and has no SGD
analogue.

Under a learning-rate schedule (``lr`` a callable ``t -> lr_t``) each step
uses its own rate; a dormant step ``j`` is ``M_j`` with ``lr_j``, and a gap is
the ordered product ``M_t ... M_{s+1}``, formed for every distinct last step
in one pass from ``t`` back to the earliest (float64 products in pairs, then a
suffix scan over the last steps; a built-in schedule's stretches of one
constant rate are matrix powers): O(longest gap) rates per catch-up, O(its
non-constant steps) for a built-in schedule. The products are held near the
identity as ``a - 1`` (``1 - lr_j*wd`` is never rounded), so that a map of
``k`` steps carries ``O(log k)`` roundings rather than ``k``. Without weight
decay the product is ``[[1, -sum_i lr_{s+i} mu**i], [0, mu**k]]`` and only the
first few hundred steps of the sum count (``mu = 0.9``; about ``39 / (1 -
mu)``): O(1 / (1 - mu)) rates per distinct last step, whatever the gap.

**Low-precision parameters** (float16, bfloat16; :mod:`sparse_opt._rounding`).
With ``state_dtype="float32"`` (the default) the buffer is float32, each update
(a DENSE_EQUIVALENT catch-up's dormant steps included) is computed in float32
from the parameter's exact value, and the parameter is rounded once where it is
written: once per touch, once per ``catch_up`` -- where dense SGD in float16
rounds on every step, so an update below half an ulp that dense float16 loses on
every dormant step (stagnation) still moves a caught-up row. With
``state_dtype="param"`` the buffer is in the parameters' dtype and every
operation rounds as torch's kernels do (rounding points in
:func:`sparse_sgd_update`; bit for bit against torch 2.13). ``rounding`` is
``"nearest"`` or ``"stochastic"`` (seeded by ``seed``).

Source: ``torch.optim.SGD`` (``torch/optim/sgd.py``, ``_single_tensor_sgd``);
the catch-up is this kit's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_opt import _analytic_rates as analytic_rates
from sparse_opt import schedules
from sparse_opt._double_double import dd_add, dd_matpow2, row_sums, two_prod
from sparse_opt._gather import gather, scatter
from sparse_opt._rates import DECAY_BLOCK, LearningRate
from sparse_opt._rounding import Precision, check_rounding, check_seed, check_state_dtype
from sparse_opt._sparse_base import SparseOptimizer, Target, addressed
from sparse_opt._state import Entry, config_scalars, counter, float_array
from sparse_opt._step_record import as_column
from sparse_opt._validation import check_bool, check_lr, check_new_state, check_scalar
from sparse_opt.modes import LazyMode

#: Terms of the momentum sums added up in one numpy pass (:func:`_add_terms`).
TERM_BATCH = 1 << 18


@dataclass(frozen=True)
class SparseSgdConfig:
    """Hyper-parameters of :class:`SparseSgd` and :class:`SparseSgdTable`.

    Parameters
    ----------
    lr : float or callable
        Learning rate, ``>= 0``, or a schedule ``t -> lr_t`` of the 1-based
        global step (:mod:`sparse_opt.schedules`).
    weight_decay : float
        Coupled L2 coefficient added to the gradient, ``>= 0``.
    momentum : float
        Momentum factor, ``>= 0``; 0 disables the buffer.
    maximize : bool
        Ascend instead of descend.
    mode : LazyMode or {"lazy", "dense_equivalent"}
        ``LAZY`` (default) skips dormant steps; ``DENSE_EQUIVALENT`` catches them
        up exactly. ``DORMANCY_DECAY`` is refused.
    state_dtype : {"float32", "param"}
        Half-precision (float16, bfloat16) parameters only: a float32 momentum
        buffer (default; the update in float32, the parameter rounded once where
        written) or one in the parameters' dtype with its per-operation rounding,
        as ``torch.optim.SGD`` keeps it (:mod:`sparse_opt._rounding`).
    rounding : {"nearest", "stochastic"}
        How a half-precision parameter is rounded where it is written.
    seed : int
        Seed of the generator of stochastic rounding (its state is in ``state_dict()``).

    Examples
    --------
    >>> import sparse_opt as so
    >>> so.SparseSgdConfig(lr=0.1, momentum=0.9, mode="dense_equivalent").mode.name
    'DENSE_EQUIVALENT'
    """

    lr: float | Callable[[int], float]
    weight_decay: float = 0.0
    momentum: float = 0.0
    maximize: bool = False
    mode: LazyMode = LazyMode.LAZY
    state_dtype: str = "float32"
    rounding: str = "nearest"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_lr(self.lr))
        object.__setattr__(self, "weight_decay", check_scalar("weight_decay", self.weight_decay, low=0.0))
        object.__setattr__(self, "momentum", check_scalar("momentum", self.momentum, low=0.0))
        object.__setattr__(self, "maximize", check_bool("maximize", self.maximize))
        why = (
            ": DORMANCY_DECAY is Adam's rule for decaying moments at a touch and has no SGD analogue; "
            "use LAZY, or DENSE_EQUIVALENT to apply the dormant steps of dense SGD exactly"
        )
        mode = LazyMode.parse(self.mode, (LazyMode.LAZY, LazyMode.DENSE_EQUIVALENT), why)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "state_dtype", check_state_dtype(self.state_dtype))
        object.__setattr__(self, "rounding", check_rounding(self.rounding))
        object.__setattr__(self, "seed", check_seed(self.seed))

    def as_dict(self) -> dict[str, float | bool | str]:
        """The fields as plain Python scalars (``mode`` as its string value, a schedule as :mod:`sparse_opt._rates` says)."""
        return {**config_scalars(self), "lr": LearningRate(self.lr).config_value()}


def sgd_dormant_map(
    k: np.ndarray, *, lr: float | np.ndarray, weight_decay: float, momentum: float
) -> tuple[np.ndarray, ...]:
    """``M**k`` for each gap in ``k`` (int64 array): entries ``(a, b, c, d)`` of ``[[a, b], [c, d]]``, float64.

    ``lr`` is one rate for every gap, or one rate per gap (an array of ``k``'s
    shape: a schedule's stretches of one constant rate).

    ``M = [[1 - lr*wd, -lr*mu], [wd, mu]]`` maps ``(p, buf)`` over one dormant
    step (module docstring). Its entries are formed and powered in
    double-double arithmetic (:mod:`sparse_opt._double_double`): rounding ``1 -
    lr*wd`` first would multiply its rounding error by ``k``, as dense SGD, which
    computes ``p - lr * (wd * p)``, never does. Binary powering: at most 63
    squarings whatever the gap.
    """
    one = np.ones(())
    lr_wd = two_prod(np.asarray(lr), np.asarray(weight_decay))
    a = dd_add((one, np.zeros(())), (-lr_wd[0], -lr_wd[1]))
    lr_mu = two_prod(np.asarray(lr), np.asarray(momentum))
    m = (a, (-lr_mu[0], -lr_mu[1]), (np.asarray(weight_decay), np.zeros(())), (np.asarray(momentum), np.zeros(())))
    return dd_matpow2(m, k)


def sgd_scheduled_map(
    starts: np.ndarray, through: int, *, rates: LearningRate, weight_decay: float, momentum: float
) -> tuple[np.ndarray, ...]:
    """``M_through ... M_{s+1}`` for each ``s`` in ``starts`` under a schedule: ``(a, b, c, d)``, float64.

    ``M_j = [[1 - lr_j*wd, -lr_j*mu], [wd, mu]]``. The steps from the
    earliest start to ``through`` are cut at every start into *items*, each
    multiplied out once, and the items are chained from ``through`` back:
    ``P(s) = P(s') M_s' ... M_{s+1}`` for the next later start ``s'``, so a
    catch-up costs its longest gap, not the sum of its rows' gaps. A stretch
    where a built-in schedule's rate is one constant
    (:mod:`sparse_opt._analytic_rates`: after a warm-up or a cosine, a period
    of a step decay, an exponential rounded to 0) is one item, a power ``M**n``
    (:func:`sgd_dormant_map`, all of them in one call: O(log n)); the other
    steps come in items of at most ``DECAY_BLOCK``, multiplied in pairs, all
    items of a batch at once (:func:`_item_products`): O(their number), in
    float64. The items are chained by a suffix scan (``log2`` of their number
    passes). Every product is kept in the near-identity form of
    :func:`_compose` (``1 - lr*wd`` is never rounded), so that a map of ``k``
    steps carries ``O(log k)`` roundings, where a product of the rounded
    factors, step after step, carries ``k``. Without weight decay and with ``0 <=
    mu < 1`` the product is ``[[1, -sum_{i=1}^{k} lr_{s+i} mu**i], [0,
    mu**k]]``, and the sum stops after ``n`` steps once the rest, at most
    ``peak mu**(n+1) / (1 - mu)`` (every rate is at most the schedule's peak),
    is below ``2**-56`` of the partial sum: about ``56 log 2 / (1 - mu)`` steps
    (390 for ``mu = 0.9``), more while the rates are far below the peak, never
    the gap (:func:`_momentum_sums`).
    """
    if not weight_decay and 0.0 <= momentum < 1.0:
        return _momentum_sums(starts, through, rates, momentum)
    unique, inverse = np.unique(starts, return_inverse=True)
    out = np.zeros((4, unique.size))
    out[[0, 3]] = 1.0  # the identity, for the starts at through
    first = int(unique[0]) + 1
    if first > through:
        return tuple(out[:, inverse.reshape(-1)])
    lo, hi, constant = _items(rates, unique[unique < through] + 1, first, through)
    products = np.empty((4, lo.size))
    near = np.zeros(lo.size, dtype=bool)
    if constant.any():
        lr = rates.at_steps(lo[constant])
        k = hi[constant] - lo[constant] + 1
        power = np.array(sgd_dormant_map(k, lr=lr, weight_decay=weight_decay, momentum=momentum))
        near[constant] = np.abs(power[0] - 1.0) <= 0.5
        power[0] = np.where(near[constant], power[0] - 1.0, power[0])  # exact (Sterbenz) for a in [1/2, 3/2]
        products[:, constant] = power
    walked = np.flatnonzero(~constant)
    size = hi[walked] - lo[walked] + 1
    batch = np.unique(np.searchsorted(np.cumsum(size), np.arange(0, int(size.sum()), DECAY_BLOCK), side="right"))
    for begin, end in zip(batch.tolist(), [*batch[1:].tolist(), walked.size]):  # about DECAY_BLOCK steps a batch
        items, sizes = walked[begin:end], size[begin:end]
        steps = np.repeat(lo[items], sizes) + np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        begin_step, span = int(lo[items[0]]), int(hi[items[-1]] - lo[items[0]]) + 1
        # the rates of one stretch of steps where the batch's steps fill most of it (a long gap), else step by step
        if span <= 2 * steps.size:
            lr = rates.over(begin_step, begin_step + span)[steps - begin_step]
        else:
            lr = rates.at_steps(steps)
        *entries, near[items] = _item_products(lr, sizes, weight_decay, momentum)
        products[:, items] = entries
    # each item times every later one, P_i = I_last ... I_i, by a suffix scan; a start's map is P at its first item
    chain = (*products, near)
    shift = 1
    while shift < lo.size:
        later = _compose(tuple(x[shift:] for x in chain), tuple(x[:-shift] for x in chain))
        chain = tuple(np.concatenate([x, y[y.size - shift :]]) for x, y in zip(later, chain))
        shift *= 2
    live = np.flatnonzero(unique < through)
    record = np.searchsorted(lo, unique[live] + 1)  # the item that starts at s + 1
    x, b, c, d, near = (part[record] for part in chain)
    out[:, live] = np.where(near, 1.0 + x, x), b, c, d
    return tuple(out[:, inverse.reshape(-1)])


def _compose(later: tuple[np.ndarray, ...], earlier: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The products ``Q E`` of 2 x 2 matrices in near-identity form: each ``(x, b, c, d, near)``, arrays alike.

    A matrix ``[[a, b], [c, d]]`` is held with ``x = a - 1`` where ``near``
    (``|a - 1| <= 1/2``), else ``x = a``. A dormant step's ``a = 1 - lr*wd``
    is then ``x = -lr*wd``, one rounding relative to ``lr*wd`` where ``1 -
    lr*wd`` rounds at ``2**-53`` absolute: over ``k`` steps those roundings
    add up to ``k`` of them, here to none. Two near factors give ``x = x_q +
    x_e + x_q x_e + b_q c_e``, near while ``|x| <= 1/2``; once a product is
    that far from the identity it is held as ``a`` and multiplied as usual
    (each product a rounding relative to its entries, ``O(log k)`` over a
    tree of ``k`` steps). ``b`` and ``c`` take the near factor's ``1 + x``
    as ``b + x b``.
    """
    xq, bq, cq, dq, nq = later
    xe, be, ce, de, ne = earlier
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging recurrence is refused by the caller's check
        delta = xq + xe
        delta += xq * xe
        delta += bq * ce
        b, c = xq * be, cq * xe
        if nq.all() and ne.all():  # (a gap's first levels: every factor near the identity)
            near = np.abs(delta) <= 0.5
            x = delta if near.all() else np.where(near, delta, delta + 1.0)
            b += be
            c += cq
        else:
            both = nq & ne
            plain = np.where(nq, 1.0 + xq, xq) * np.where(ne, 1.0 + xe, xe) + bq * ce
            near = both & (np.abs(delta) <= 0.5)
            x = np.where(near, delta, np.where(both, 1.0 + delta, plain))
            b = np.where(nq, be + b, b)
            c = np.where(ne, cq + c, c)
        b += bq * de
        c += dq * ce
        d = cq * be
        d += dq * de
    return x, b, c, d, near


def _items(rates: LearningRate, cuts: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The items ``(lo, hi, constant)`` (inclusive, in order) tiling steps ``first .. last``, cut at ``cuts``.

    ``constant`` marks the stretches where a built-in schedule's rate is one
    constant (:func:`sparse_opt._analytic_rates.segments`); the other steps are
    also cut every ``DECAY_BLOCK`` steps.
    """
    flat_lo = flat_hi = np.zeros(0, dtype=np.int64)
    if analytic_rates.supports(rates.schedule):
        _, seg_lo, seg_hi, kind, _, _ = analytic_rates.segments(rates.schedule, np.array([first]), np.array([last]))
        flat = (kind == analytic_rates.CONSTANT) & (seg_hi > seg_lo)
        flat_lo, flat_hi = seg_lo[flat], seg_hi[flat]
    # the walked regions between the constant stretches, cut every DECAY_BLOCK steps
    gap_lo = np.concatenate([[first], flat_hi + 1])
    gap_hi = np.concatenate([flat_lo - 1, [last]])
    keep = gap_lo <= gap_hi
    gap_lo, gap_hi = gap_lo[keep], gap_hi[keep]
    blocks = (gap_hi - gap_lo) // DECAY_BLOCK
    owner = np.repeat(np.arange(gap_lo.size), blocks)
    inner = gap_lo[owner] + DECAY_BLOCK * (np.arange(owner.size) - (np.cumsum(blocks) - blocks)[owner] + 1)
    points = np.unique(np.concatenate([[first, last + 1], cuts, flat_lo, flat_hi + 1, inner]))
    points = points[(points >= first) & (points <= last + 1)]
    lo, hi = points[:-1], points[1:] - 1
    constant = np.zeros(lo.size, dtype=bool)
    if flat_lo.size:  # an item lies in the last stretch that starts at or before it, or in none
        inside = np.searchsorted(flat_lo, lo, side="right") - 1
        constant = (inside >= 0) & (lo <= flat_hi[np.maximum(inside, 0)])
    return lo, hi, constant


def _item_products(lr: np.ndarray, sizes: np.ndarray, weight_decay: float, momentum: float) -> tuple[np.ndarray, ...]:
    """``M_n ... M_1`` of each item in the near-identity form of :func:`_compose`: ``(x, b, c, d, near)``, one per item.

    ``lr`` holds the rates of the items' steps, item after item, ``sizes``
    each. Each item is padded to a power of two with identity matrices and
    the items are laid out largest first; a level multiplies neighbours in
    pairs (later times earlier) over the items still longer than one, so
    that all items take ``log2`` of the longest's length numpy passes.
    """
    padded = np.left_shift(1, np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64))
    order = np.argsort(-padded, kind="stable")
    at = np.cumsum(padded[order]) - padded[order]  # each item's place, largest first
    src = np.cumsum(sizes) - sizes
    count = sizes[order]
    within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    dst = np.repeat(at, count) + within
    rate = lr[np.repeat(src[order], count) + within]
    total = int(padded.sum())
    m = [np.zeros(total), np.zeros(total), np.zeros(total), np.ones(total), np.ones(total, dtype=bool)]
    lr_wd = rate * weight_decay
    near = lr_wd <= 0.5
    m[0][dst], m[4][dst] = np.where(near, -lr_wd, 1.0 - lr_wd), near
    m[1][dst], m[2][dst], m[3][dst] = -rate * momentum, weight_decay, momentum
    out = [np.empty(sizes.size), np.empty(sizes.size), np.empty(sizes.size), np.empty(sizes.size), np.empty(sizes.size, dtype=bool)]
    length = padded[order].copy()
    live = sizes.size
    while live:
        done = int(np.count_nonzero(length[:live] == 1))  # the smallest items, at the end
        if done:
            for e, x in zip(out, m):
                e[order[live - done : live]] = x[x.size - done :]
            live -= done
            m = [x[: x.size - done] for x in m]
        if not live:
            break
        m = list(_compose(tuple(x[1::2] for x in m), tuple(x[0::2] for x in m)))  # later times earlier
        length[:live] //= 2
    return tuple(out)


def _momentum_sums(starts: np.ndarray, through: int, rates: LearningRate, momentum: float) -> tuple[np.ndarray, ...]:
    """:func:`sgd_scheduled_map` without weight decay, ``0 <= mu < 1``: the sums over the first steps that matter.

    Each term ``lr_{s+i} mu**i`` is a correctly rounded power times the rate
    (one rounding). From the step where a built-in schedule settles at rate
    ``r`` (:func:`~sparse_opt.schedules.constant_from`) the terms are ``r
    mu**i``, summed in closed form, ``r mu**i0 (1 - mu**n) / (1 - mu)`` for
    ``n`` steps from ``i0`` (a few roundings); the steps before it are summed
    term by term, first ``min(first, walk)`` of them, doubling while the rest
    (``peak mu**(n+1) / (1 - mu)``) exceeds ``2**-56`` of the sum. The terms of
    all starts are summed at once, each row within one rounding
    (:func:`~sparse_opt._double_double.row_sums`), and the rows' sums over the
    doublings in double-double: within a rounding of the truncated sum, and
    at most ``TERM_BATCH`` terms at a time.
    """
    n = starts.size
    out = [np.ones(n), np.zeros(n), np.zeros(n), np.ones(n)]
    if momentum == 0.0:  # the buffer is forgotten at once: M_j = [[1, 0], [0, 0]]
        out[3][:] = np.where(starts < through, 0.0, 1.0)
        return tuple(out)
    k = through - starts
    walk, tail = k.copy(), np.zeros(n)  # the steps summed term by term; the settled steps' sum
    settled = schedules.constant_from(rates.schedule)
    if settled is not None:
        i0 = np.maximum(settled[0] - starts, 1)  # the first dormant step at the settled rate
        has = i0 <= k
        walk[has] = i0[has] - 1
        geometric = -np.expm1((k[has] - i0[has] + 1) * math.log(momentum)) / (1.0 - momentum)
        tail[has] = settled[1] * schedules._int_powers(momentum, i0[has]) * geometric
    first = max(1, math.ceil(math.log(2.0**-56 * (1.0 - momentum)) / math.log(momentum)))
    peak = rates.peak(through)
    hi, lo = np.zeros(n), np.zeros(n)  # each start's walked sum, a double-double
    done, count = np.zeros(n, dtype=np.int64), np.minimum(walk, first)
    active = np.flatnonzero(count > 0)
    while active.size:
        _add_terms(hi, lo, active, starts, done, count, rates, momentum)
        done[active] = count[active]
        rest = peak * schedules._int_powers(momentum, count[active] + 1) / (1.0 - momentum)
        active = active[(count[active] < walk[active]) & (rest > 2.0**-56 * hi[active])]
        count[active] = np.minimum(walk[active], 2 * count[active])
    total = dd_add((hi, lo), (np.where(done == walk, tail, 0.0), np.zeros(n)))  # a tail past a cut-off: in its rest
    out[1] = -(total[0] + total[1])
    out[3] = schedules._int_powers(momentum, k)
    return tuple(out)


def _add_terms(
    hi: np.ndarray, lo: np.ndarray, rows: np.ndarray, starts: np.ndarray, done: np.ndarray, count: np.ndarray,
    rates: LearningRate, momentum: float,
) -> None:
    """Add ``lr_{s+i} mu**i`` for ``i = done + 1 .. count`` of each start ``s`` of ``rows`` to its sum ``(hi, lo)``.

    The terms come as a ``(rows, i)`` array padded with zeros, at most
    ``TERM_BATCH`` at a time; the rates from :meth:`LearningRate.at_steps`,
    the powers once per distinct ``i``.
    """
    width = int((count[rows] - done[rows]).max())
    cols = min(width, TERM_BATCH)
    for c0 in range(0, width, cols):
        per = max(1, TERM_BATCH // cols)
        for r0 in range(0, rows.size, per):
            r = rows[r0 : r0 + per]
            i = done[r][:, None] + 1 + c0 + np.arange(min(cols, width - c0))[None, :]
            valid = i <= count[r][:, None]
            low = int(i[:, 0].min())
            powers = schedules._int_powers(momentum, np.arange(low, int(i.max()) + 1))
            terms = np.zeros(i.shape)
            terms[valid] = rates.at_steps((starts[r][:, None] + i)[valid]) * powers[i[valid] - low]
            hi[r], lo[r] = dd_add((hi[r], lo[r]), (row_sums(terms), np.zeros(r.size)))


def sgd_coast(
    p: np.ndarray,
    buf: np.ndarray | None,
    last: np.ndarray,
    through: int,
    *,
    lr: float | LearningRate,
    weight_decay: float,
    momentum: float,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(p, buf)`` after dense SGD's zero-gradient steps ``last + 1 .. through`` (new arrays).

    ``last`` broadcasts against ``p`` (``(k, 1)`` for table rows: the map is
    computed once per row). Without a buffer only the decay applies. ``lr`` is
    the rate of every dormant step, or the optimizer's
    :class:`~sparse_opt._rates.LearningRate` (a schedule: each step's own rate).
    """
    gap = through - last
    if not (gap > 0).any():
        return p, buf
    gaps, inverse = np.unique(gap, return_inverse=True)
    mu = momentum if buf is not None else 0.0
    if isinstance(lr, LearningRate) and lr.constant is None:
        power = sgd_scheduled_map(through - gaps, through, rates=lr, weight_decay=weight_decay, momentum=mu)
    else:
        rate = lr.constant if isinstance(lr, LearningRate) else lr
        power = sgd_dormant_map(gaps, lr=rate, weight_decay=weight_decay, momentum=mu)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging recurrence is refused by the caller's check
        a, b, c, d = (x[inverse].reshape(gap.shape).astype(p.dtype) for x in power)
        # a zero stays zero, however large M**k grows (dense SGD multiplies it by finite factors each step)
        ap = np.where(p == 0, p, a * p)
        if buf is None:
            return ap, None
        bb = np.where(buf == 0, buf, b * buf)
        return ap + bb, np.where(p == 0, p, c * p) + np.where(buf == 0, buf, d * buf)


def sparse_sgd_update(
    param: np.ndarray,
    momentum_buffer: np.ndarray | None,
    index: np.ndarray,
    grad: np.ndarray,
    *,
    lr: float,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    maximize: bool = False,
    last: np.ndarray | None = None,
    step: int = 0,
    rates: LearningRate | None = None,
    precision: Precision | None = None,
) -> None:
    """One lazy SGD step on the coordinates ``index``, in place (the functional core).

    ``param`` and ``momentum_buffer`` (None without momentum) are indexed along
    axis 0 by ``index`` (ascending, unique); ``grad`` is shaped like
    ``param[index]``. With ``last``, the previous steps of ``index``
    (DENSE_EQUIVALENT), the dormant steps ``last + 1 .. step - 1`` are applied
    first, with ``rates`` giving each dormant step's rate under a schedule
    (default ``lr`` for every step); the caller records ``step`` once this
    returns. If the new buffer
    would not be finite, or (half parameters) the new parameter would overflow,
    ``ValueError`` is raised before anything is written.
    Equations in the module docstring.

    ``precision`` (:class:`~sparse_opt._rounding.Precision`; default: the
    parameters' own dtype, no rounding) sets the arithmetic. Its rounding points,
    in torch's SGD's order (``q``: to the half state with per-operation rounding,
    else nothing; ``R``: the parameter's rounding where written; a catch-up's
    dormant steps are computed in the work dtype and rounded with the step)::

        g   = q(grad + q(qs(weight_decay) * p))
        buf = q(q(momentum * buf) + g)
        p   = R(p - q(qs(lr) * buf))             (buf -> g without momentum)

    (``qs``: the scalar rounded to the half state, as torch's ``add(...,
    alpha=...)`` rounds ``alpha``; :meth:`~sparse_opt._rounding.Precision.qs`.)

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt.sparse_sgd import sparse_sgd_update
    >>> p, buf = np.ones(3), np.zeros(3)
    >>> sparse_sgd_update(p, buf, np.array([0, 2]), np.array([1.0, -1.0]), lr=0.5, momentum=0.9)
    >>> p, buf
    (array([0.5, 1. , 1.5]), array([ 1.,  0., -1.]))
    """
    prec = Precision(param.dtype) if precision is None else precision
    q = prec.q
    g = prec.wide(-grad if maximize else grad)
    p = prec.wide(gather(param, index))
    buf = None if momentum_buffer is None else prec.wide(gather(momentum_buffer, index))
    where = "table row" if p.ndim == 2 else "coordinate"
    if last is not None:
        p, buf = sgd_coast(p, buf, as_column(last, p.ndim), step - 1, lr=lr if rates is None else rates, weight_decay=weight_decay, momentum=momentum)
        buf = None if buf is None else q(buf)
    with np.errstate(all="ignore"):  # results are checked before anything is written
        if weight_decay:
            g = q(g + q(prec.qs(weight_decay) * p))
        if buf is not None:
            buf = q(q(momentum * buf) + g)
            check_new_state("momentum_buffer", buf, index, where)
            g = buf
        p = p - q(prec.qs(lr) * g)
    p = prec.written(p, index, where)
    scatter(param, index, p)
    if buf is not None:
        scatter(momentum_buffer, index, prec.stored(buf))  # type: ignore[arg-type]


def sgd_catch_up(
    param: np.ndarray,
    momentum_buffer: np.ndarray | None,
    last: np.ndarray,
    index: np.ndarray,
    *,
    through: int,
    lr: float | LearningRate,
    weight_decay: float,
    momentum: float,
    precision: Precision | None = None,
) -> None:
    """Bring ``index`` current through step ``through`` with dense SGD's zero-gradient steps, in place.

    ``last`` holds the previous steps of ``index``; the caller records ``through`` afterwards.
    With half parameters the dormant steps are computed in the work dtype and the
    parameter (and a half buffer) rounded once, at the end of the catch-up.
    """
    prec = Precision(param.dtype) if precision is None else precision
    p = prec.wide(gather(param, index))
    buf = None if momentum_buffer is None else prec.wide(gather(momentum_buffer, index))
    p, buf = sgd_coast(p, buf, as_column(last, p.ndim), through, lr=lr, weight_decay=weight_decay, momentum=momentum)
    where = "table row" if p.ndim == 2 else "coordinate"
    if buf is not None:
        buf = prec.q(buf)
        check_new_state("momentum_buffer", buf, index, where)
    p = prec.written(p, index, where)
    if buf is not None:
        scatter(momentum_buffer, index, prec.stored(buf))  # type: ignore[arg-type]
    scatter(param, index, p)


class SparseSgd(SparseOptimizer):
    """Lazy SGD over a 1-D parameter vector, stepped with :class:`~sparse_opt.CooGradient`.

    Parameters
    ----------
    params : ndarray, 1-D, float32, float64, float16 or bfloat16
        Updated in place (the caller's array is the model).
    config : SparseSgdConfig

    Attributes
    ----------
    momentum_buffer : ndarray or None
        Per-coordinate momentum (``None`` when ``momentum == 0``).
    last_step : ndarray of int64 or None
        DENSE_EQUIVALENT only: the step through which each coordinate is current.
    step_count : int
        Number of ``step`` calls so far.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> p = np.ones(5)
    >>> opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.5))
    >>> opt.step(so.CooGradient([1, 3], [1.0, -2.0], 5))
    >>> p
    array([1. , 0.5, 1. , 2. , 1. ])
    """

    _ndim = 1
    _config_type = SparseSgdConfig

    def __init__(self, params: np.ndarray, config: SparseSgdConfig) -> None:
        super().__init__(params, config)
        self._lr = LearningRate(config.lr)
        self.momentum_buffer = np.zeros(self.params.shape, self._precision.state) if config.momentum != 0.0 else None

    def _keeps_steps(self) -> bool:
        return self.config.mode is LazyMode.DENSE_EQUIVALENT

    def _dense_equivalent(self) -> bool:
        return self.config.mode is LazyMode.DENSE_EQUIVALENT

    def _hyper(self) -> dict[str, float]:
        c = self.config
        return {"weight_decay": c.weight_decay, "momentum": c.momentum}

    def _apply(self, target: Target, step: int) -> None:
        by_rows = target.by_rows
        buf = None if self.momentum_buffer is None else addressed(self.momentum_buffer, by_rows)
        sparse_sgd_update(
            addressed(self.params, by_rows),
            buf,
            target.index,
            target.grad,
            lr=self._lr.at(step),  # checked before anything changes
            maximize=self.config.maximize,
            last=None if self._record is None else self._record.previous(target.index, by_rows),
            step=step,
            rates=self._lr,
            precision=self._precision,
            **self._hyper(),
        )
        if self._record is not None:
            self._record.stamp(target.index, step, by_rows)

    def _catch_up(self, index: np.ndarray, by_rows: bool) -> None:
        assert self._record is not None
        buf = None if self.momentum_buffer is None else addressed(self.momentum_buffer, by_rows)
        sgd_catch_up(
            addressed(self.params, by_rows),
            buf,
            self._record.previous(index, by_rows),
            index,
            through=self.step_count,
            lr=self._lr,
            precision=self._precision,
            **self._hyper(),
        )
        self._record.stamp(index, self.step_count, by_rows)

    def _config(self) -> dict[str, float | bool | str]:
        return self.config.as_dict()

    def _state_entries(self) -> list[Entry]:
        entries = [counter("step_count")]
        if self.momentum_buffer is not None:
            entries.append(float_array("momentum_buffer", self.momentum_buffer))
        return entries + self._step_entries()

    def _state_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {"step_count": self.step_count}
        if self.momentum_buffer is not None:
            values["momentum_buffer"] = self.momentum_buffer
        return {**values, **self._step_values()}

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        if self.momentum_buffer is not None:
            self.momentum_buffer = loaded["momentum_buffer"]
        if self._record is not None:
            self._record.load(loaded)
        self.step_count = loaded["step_count"]


class SparseSgdTable(SparseSgd):
    """Lazy SGD over a 2-D embedding table, stepped with :class:`~sparse_opt.CsrGradient`.

    Results are identical to :class:`SparseSgd` run on ``params.reshape(-1)`` with
    ``csr.to_coo()``; complete rows are updated row-wise, and ``catch_up`` takes
    row ids.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> table = np.ones((3, 2))
    >>> opt = so.SparseSgdTable(table, so.SparseSgdConfig(lr=0.1, weight_decay=0.5, mode="dense_equivalent"))
    >>> for _ in range(4):
    ...     opt.step(so.CsrGradient.from_rows([0], np.zeros((1, 2)), num_rows=3))
    >>> opt.catch_up([1])                      # row 1 decays as dense SGD would have: 0.95**4
    >>> table.round(6).tolist()
    [[0.814506, 0.814506], [0.814506, 0.814506], [1.0, 1.0]]
    """

    _ndim = 2

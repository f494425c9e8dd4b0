r"""SGD-with-momentum references, as plain loops (conventions as in :mod:`.adam`).

Momentum without dampening or Nesterov; ``weight_decay`` is coupled (added to
the gradient) as in ``torch.optim.SGD``. The buffer starts at zero, so the first
buffer is ``g`` (torch clones the first gradient: the same value). ``lr`` is the
rate of step ``t`` (``hyper.rate(t)``: constant, or the scenario's schedule).
On a float16 table (the half form) each reference computes in float32 and
rounds the parameters to float16 each time they are written
(:func:`._grad.working`): dense SGD every entry every step, the lazy ones the
touched entries, the current-rate catch-up once per touch and once per read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from sparse_opt.conformance.case import Step
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.semantics._grad import lookups, summed, working


def _scalars(table: np.ndarray, hyper: Hyper) -> tuple[np.generic, ...]:
    dt = table.dtype.type
    return dt(hyper.momentum), dt(hyper.weight_decay)


def _rate(table: np.ndarray, hyper: Hyper, t: int) -> np.generic:
    """The rate of step ``t`` in the table's dtype."""
    return table.dtype.type(hyper.rate(t))


def lazy(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt ``SparseSgd`` (``LazyMode.LAZY``): decay and momentum on the touched entries only.

    On the touched entries (repeated ids summed)::

        g = g + wd * p,   buf = momentum * buf + g,   p = p - lr * buf
    """
    p, store = working(table)
    mu, wd = _scalars(p, hyper)
    buf = np.zeros_like(p)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(p, hyper, t)
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        buf[hit] = mu * buf[hit] + (g[hit] + wd * p[hit])
        p[hit] = store(p[hit] - lr * buf[hit])
        out.append(p.copy())
    return np.stack(out)


def dense(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Dense SGD = sparse_opt ``LazyMode.DENSE_EQUIVALENT`` (``torch.optim.SGD``, ``dampening = 0``).

    Every entry, every step, with a zero gradient when dormant (so the decay
    shrinks and the buffer keeps pushing a dormant row)::

        g = g + wd * p,   buf = momentum * buf + g,   p = p - lr * buf
    """
    p, store = working(table)
    mu, wd = _scalars(p, hyper)
    buf = np.zeros_like(p)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(p, hyper, t)
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        buf = mu * buf + (g + wd * p)
        p = store(p - lr * buf)
        out.append(p.copy())
    return np.stack(out)


def sequential_duplicates(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """TF ``ResourceSparseApplyMomentum``: lazy, repeated ids applied one after another, lr outside the buffer.

    ``tensorflow/core/kernels/training_ops.cc`` ``SparseApplyMomentumOp``, a serial
    loop over the lookups (deterministic); for lookup ``i`` of row ``r``::

        accum[r] = accum[r] * momentum + g_i
        p[r] = p[r] - lr * accum[r]

    (``ResourceSparseApplyKerasMomentum`` keeps ``-lr`` inside the buffer,
    ``accum = accum * momentum - lr * g``, ``p = p + accum``: the same map up to
    rounding while ``lr`` is constant.)
    """
    p, store = working(table)
    mu, _ = _scalars(p, hyper)
    lr = p.dtype.type(hyper.lr)  # constant rates only (the reference does not apply to schedule scenarios)
    buf = np.zeros_like(p)
    out = []
    for step in steps:
        for r, g in lookups(step, p.dtype, hyper.maximize):
            buf[r] = buf[r] * mu + g
            p[r] = store(p[r] - lr * buf[r])
        out.append(p.copy())
    return np.stack(out)


def ignoring_decay(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """:func:`lazy` with ``weight_decay`` set but not applied.

    FBGEMM ``EXACT_SGD`` (``optimizers.py`` ``sgd``: ``p = p - lr * g`` on the
    touched rows, repeated ids summed) accepts ``weight_decay`` and a mode and
    drops them on CPU.
    """
    return lazy(table, steps, replace(hyper, weight_decay=0.0))


def _coast(state: tuple[np.ndarray, np.ndarray], since: np.ndarray, through: int, lr: np.generic,
           hyper: Hyper) -> tuple[np.ndarray, np.ndarray]:
    """Dense SGD's zero-gradient steps ``since + 1 .. through`` of each entry, every one at the rate ``lr``."""
    p, buf = (x.copy() for x in state)
    mu, wd = _scalars(p, hyper)
    for j in range(int(since.min(initial=through)) + 1, through + 1):
        on = since < j
        buf = np.where(on, mu * buf + wd * p, buf)
        p = np.where(on, p - lr * buf, p)
    return p, buf


def current_rate(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Dense SGD's catch-up with the *current* rate for the skipped steps (modelled, as :func:`..adam.current_rate`).

    The rule TorchRec, FBGEMM (``DECOUPLE_GLOBAL``) and HugeCTR (``LazyGlobal``)
    follow when they bring a row up to date, applied to the exact catch-up of
    sparse_opt ``SparseSgd`` ``LazyMode.DENSE_EQUIVALENT``: an entry last current
    at step ``s`` and touched at step ``t`` takes dense SGD's zero-gradient steps
    ``j = s + 1 .. t - 1`` each with the rate of step ``t``, then step ``t``::

        buf = momentum * buf + wd * p,   p = p - lr_t * buf      (j = s + 1 .. t - 1)
        then step t as in :func:`dense`, with lr_t

    The table read after step ``u`` shows each dormant entry caught up to ``u``
    at the rate of step ``u + 1`` (after the last step, at the last step's rate),
    without changing what the next touch catches up from. With a constant rate
    this is :func:`dense`, bit for bit: the reference applies to the scenarios
    with a schedule only.
    """
    p, store = working(table)
    mu, wd = _scalars(p, hyper)
    buf = np.zeros_like(p)
    last = np.zeros(table.shape, dtype=np.int64)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(p, hyper, t)
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        cp, cbuf = _coast((p, buf), np.where(hit, last, t - 1), t - 1, lr, hyper)
        buf[hit] = mu * cbuf[hit] + (g[hit] + wd * cp[hit])
        p[hit] = store(cp[hit] - lr * buf[hit])
        last[hit] = t
        out.append(store(_coast((p, buf), last, t, _rate(p, hyper, min(t + 1, len(steps))), hyper)[0]))
    return np.stack(out)

r"""SGD-with-momentum references, as plain loops (conventions as in :mod:`.adam`).

Momentum without dampening or Nesterov; ``weight_decay`` is coupled (added to
the gradient) as in ``torch.optim.SGD``. The buffer starts at zero, so the first
buffer is ``g`` (torch clones the first gradient: the same value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from sparse_opt.conformance.case import Step
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.semantics._grad import lookups, summed


def _scalars(table: np.ndarray, hyper: Hyper) -> tuple[np.generic, ...]:
    dt = table.dtype.type
    return dt(hyper.lr), dt(hyper.momentum), dt(hyper.weight_decay)


def lazy(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt ``SparseSgd`` (``LazyMode.LAZY``): decay and momentum on the touched entries only.

    On the touched entries (repeated ids summed)::

        g = g + wd * p,   buf = momentum * buf + g,   p = p - lr * buf
    """
    lr, mu, wd = _scalars(table, hyper)
    p, buf = table.copy(), np.zeros_like(table)
    out = []
    for step in steps:
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        buf[hit] = mu * buf[hit] + (g[hit] + wd * p[hit])
        p[hit] = p[hit] - lr * buf[hit]
        out.append(p.copy())
    return np.stack(out)


def dense(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Dense SGD = sparse_opt ``LazyMode.DENSE_EQUIVALENT`` (``torch.optim.SGD``, ``dampening = 0``).

    Every entry, every step, with a zero gradient when dormant (so the decay
    shrinks and the buffer keeps pushing a dormant row)::

        g = g + wd * p,   buf = momentum * buf + g,   p = p - lr * buf
    """
    lr, mu, wd = _scalars(table, hyper)
    p, buf = table.copy(), np.zeros_like(table)
    out = []
    for step in steps:
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        buf = mu * buf + (g + wd * p)
        p = p - lr * buf
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
    lr, mu, _ = _scalars(table, hyper)
    p, buf = table.copy(), np.zeros_like(table)
    out = []
    for step in steps:
        for r, g in lookups(step, p.dtype, hyper.maximize):
            buf[r] = buf[r] * mu + g
            p[r] = p[r] - lr * buf[r]
        out.append(p.copy())
    return np.stack(out)


def ignoring_decay(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """:func:`lazy` with ``weight_decay`` set but not applied.

    FBGEMM ``EXACT_SGD`` (``optimizers.py`` ``sgd``: ``p = p - lr * g`` on the
    touched rows, repeated ids summed) accepts ``weight_decay`` and a mode and
    drops them on CPU.
    """
    return lazy(table, steps, replace(hyper, weight_decay=0.0))

r"""Adagrad references, as plain loops (conventions as in :mod:`.adam`).

A zero-gradient step changes neither Adagrad's accumulator nor its parameter, so
lazy Adagrad *is* dense Adagrad: what tells implementations apart is how they
treat repeated ids, the step the learning-rate decay counts, and the shape of
the accumulator.

Each reference computes in the table's dtype; on a float16 table (the half
form) in float32, with the parameters rounded to float16 each time they are
written (:func:`._grad.working`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparse_opt.conformance.case import Step
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.semantics._grad import lookups, summed, touched_rows, working


def adagrad(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """``torch.optim.Adagrad`` with sparse gradients = sparse_opt ``SparseAdagrad``: repeated ids summed.

    ``torch/optim/adagrad.py`` ``_single_tensor_adagrad`` (sparse path), on the
    touched entries, ``t`` the global step::

        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g**2
        p = p - clr * g / (sqrt(sum) + eps)
    """
    p, store = working(table)
    dt = p.dtype.type
    lr, lr_decay, eps, one = dt(hyper.lr), dt(hyper.lr_decay), dt(hyper.eps), dt(1)
    acc = np.full_like(p, hyper.initial_accumulator_value)
    out = []
    for t, step in enumerate(steps, 1):
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        clr = lr / (one + dt(t - 1) * lr_decay)
        acc[hit] = acc[hit] + g[hit] ** 2
        p[hit] = store(p[hit] - clr * g[hit] / (np.sqrt(acc[hit]) + eps))
        out.append(p.copy())
    return np.stack(out)


def sequential_duplicates(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """TF ``ResourceSparseApplyAdagradV2``: repeated ids applied one after another, no coalescing.

    ``tensorflow/core/kernels/training_ops.cc`` ``SparseApplyAdagradV2Op``: for
    each lookup ``i`` of row ``r``, in order::

        accum[r] = accum[r] + g_i**2
        p[r] = p[r] - lr * g_i / (sqrt(accum[r]) + eps)

    (The kernel shards lookups across threads without locking rows: with many
    repeats of a row it races. The scenarios repeat a row at most twice.)
    """
    p, store = working(table)
    dt = p.dtype.type
    lr, eps = dt(hyper.lr), dt(hyper.eps)
    acc = np.full_like(p, hyper.initial_accumulator_value)
    out = []
    for step in steps:
        for r, g in lookups(step, p.dtype, hyper.maximize):
            acc[r] = acc[r] + g * g
            p[r] = store(p[r] - lr * g / (np.sqrt(acc[r]) + eps))
        out.append(p.copy())
    return np.stack(out)


def _rowwise(table: np.ndarray, steps: Sequence[Step], hyper: Hyper, decay: str) -> np.ndarray:
    """Row-wise Adagrad with FBGEMM's weight-decay modes: ``"none"``, ``"l2"`` or ``"decoupled"`` (see the callers)."""
    p, store = working(table)
    dt = p.dtype.type
    lr, lr_decay, eps, wd, one = dt(hyper.lr), dt(hyper.lr_decay), dt(hyper.eps), dt(hyper.weight_decay), dt(1)
    acc = np.full(p.shape[0], hyper.initial_accumulator_value, dtype=p.dtype)
    out = []
    for t, step in enumerate(steps, 1):
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        rows = touched_rows(step, p.shape[0])
        if decay == "l2":
            g[rows] = g[rows] + wd * p[rows]
        clr = lr / (one + dt(t - 1) * lr_decay)
        acc[rows] = acc[rows] + np.sum(g[rows] ** 2, axis=1) / dt(p.shape[1])
        kept = p[rows] * (one - clr * wd) if decay == "decoupled" else p[rows]
        p[rows] = store(kept - (clr / (np.sqrt(acc[rows]) + eps))[:, None] * g[rows])
        out.append(p.copy())
    return np.stack(out)


def rowwise(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt row-wise Adagrad = FBGEMM ``EXACT_ROWWISE_ADAGRAD``: one accumulator per row.

    ``fbgemm_gpu/codegen/genscript/optimizers.py`` ``rowwise_adagrad``
    (``lr_decay`` as torch's, a sparse_opt extension), for each touched row
    ``r`` of width ``cols``, a missing entry counting as a zero gradient::

        sum[r] = sum[r] + mean(g[r]**2)
        p[r] = p[r] - clr / (sqrt(sum[r]) + eps) * g[r]

    Written from source first; FBGEMM 1.8.0's CPU kernel (the live adapter in
    :mod:`sparse_opt.conformance.adapters.fbgemm`) follows it on every kernel-form
    scenario it runs.
    """
    return _rowwise(table, steps, hyper, "none")


def rowwise_ignoring_decay(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """:func:`rowwise` with ``weight_decay`` set but not applied (a row-wise kernel that drops the decay)."""
    return _rowwise(table, steps, hyper, "none")


def rowwise_l2(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """FBGEMM ``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = L2``, on the touched rows.

    ``optimizers.py`` ``rowwise_adagrad`` ``split_weight_update_cpu``::

        g' = g[r] + wd * p[r]                       (for the accumulator)
        sum[r] = sum[r] + mean(g'**2)
        m = lr / (sqrt(sum[r]) + eps)
        p[r] = (1 - m * wd) * p[r] - m * g[r]       (= p[r] - m * g')
    """
    return _rowwise(table, steps, hyper, "l2")


def rowwise_decoupled(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """FBGEMM ``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = DECOUPLE``, on the touched rows.

    ``optimizers.py`` ``rowwise_adagrad`` ``split_weight_update_cpu``::

        sum[r] = sum[r] + mean(g[r]**2)
        p[r] = (1 - lr * wd) * p[r] - lr / (sqrt(sum[r]) + eps) * g[r]
    """
    return _rowwise(table, steps, hyper, "decoupled")


def rowwise_counter(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """FBGEMM ``EXACT_ROWWISE_ADAGRAD``, ``weight_decay_mode = COUNTER``, counter mode ``DECOUPLE``, defaults otherwise.

    ``COUNTER`` switches the TBE to ``rowwise_adagrad_with_counter``
    (``optimizers.py``, ``split_weight_update_cpu``). With the
    ``CounterBasedRegularizationDefinition`` defaults (``counter_halflife = -1``:
    raw counts; ``learning_rate_mode = EQUAL``: no rate adjustment), at each
    step that looks row ``r`` up::

        count[r] = count[r] + 1
        freq = counter_halflife / count[r] = -1 / count[r]
        sum[r] = sum[r] + mean(g[r]**2),   m = lr / (sqrt(sum[r]) + eps)
        p[r] = (1 - freq * wd * lr) * p[r] - m * g[r]

    so the default halflife turns the decay into a growth by ``lr * wd /
    count[r]`` (confirmed on the live CPU kernel).
    """
    p, store = working(table)
    dt = p.dtype.type
    lr, eps, wd, one = dt(hyper.lr), dt(hyper.eps), dt(hyper.weight_decay), dt(1)
    acc = np.full(p.shape[0], hyper.initial_accumulator_value, dtype=p.dtype)
    count = np.zeros(p.shape[0], dtype=p.dtype)
    out = []
    for step in steps:
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        rows = touched_rows(step, p.shape[0])
        count[rows] = count[rows] + one
        freq = -one / count[rows]
        acc[rows] = acc[rows] + np.sum(g[rows] ** 2, axis=1) / dt(p.shape[1])
        m = lr / (np.sqrt(acc[rows]) + eps)
        p[rows] = store((one - freq * wd * lr)[:, None] * p[rows] - m[:, None] * g[rows])
        out.append(p.copy())
    return np.stack(out)


def lazy_l2(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Adagrad with coupled L2 decay on the touched entries: ``g = g + wd * p``, then :func:`adagrad`'s update.

    What ``weight_decay`` means to a lazy element-wise Adagrad (torch's dense
    ``Adagrad(weight_decay)`` adds it on every row instead; with a sparse
    gradient torch refuses it)::

        g = g + wd * p,   sum = sum + g**2,   p = p - lr * g / (sqrt(sum) + eps)
    """
    p, store = working(table)
    dt = p.dtype.type
    lr, eps, wd = dt(hyper.lr), dt(hyper.eps), dt(hyper.weight_decay)
    acc = np.full_like(p, hyper.initial_accumulator_value)
    out = []
    for step in steps:
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        g[hit] = g[hit] + wd * p[hit]
        acc[hit] = acc[hit] + g[hit] ** 2
        p[hit] = store(p[hit] - lr * g[hit] / (np.sqrt(acc[hit]) + eps))
        out.append(p.copy())
    return np.stack(out)


def ignoring_decay(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """:func:`adagrad` with ``weight_decay`` set but not applied.

    FBGEMM's ``adagrad`` template (``EXACT_ADAGRAD``) has no weight-decay
    argument: the TBE accepts ``weight_decay`` and a mode and drops them.
    """
    return adagrad(table, steps, hyper)

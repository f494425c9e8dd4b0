r"""Adagrad references, as plain loops (conventions as in :mod:`.adam`).

A zero-gradient step changes neither Adagrad's accumulator nor its parameter, so
lazy Adagrad *is* dense Adagrad: what tells implementations apart is how they
treat repeated ids, the step the learning-rate decay counts, and the shape of
the accumulator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparse_opt.conformance.case import Step
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.semantics._grad import lookups, summed, touched_rows


def adagrad(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """``torch.optim.Adagrad`` with sparse gradients = sparse_opt ``SparseAdagrad``: repeated ids summed.

    ``torch/optim/adagrad.py`` ``_single_tensor_adagrad`` (sparse path), on the
    touched entries, ``t`` the global step::

        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g**2
        p = p - clr * g / (sqrt(sum) + eps)
    """
    dt = table.dtype.type
    lr, lr_decay, eps, one = dt(hyper.lr), dt(hyper.lr_decay), dt(hyper.eps), dt(1)
    p = table.copy()
    acc = np.full_like(table, hyper.initial_accumulator_value)
    out = []
    for t, step in enumerate(steps, 1):
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        clr = lr / (one + dt(t - 1) * lr_decay)
        acc[hit] = acc[hit] + g[hit] ** 2
        p[hit] = p[hit] - clr * g[hit] / (np.sqrt(acc[hit]) + eps)
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
    dt = table.dtype.type
    lr, eps = dt(hyper.lr), dt(hyper.eps)
    p = table.copy()
    acc = np.full_like(table, hyper.initial_accumulator_value)
    out = []
    for step in steps:
        for r, g in lookups(step, p.dtype, hyper.maximize):
            acc[r] = acc[r] + g * g
            p[r] = p[r] - lr * g / (np.sqrt(acc[r]) + eps)
        out.append(p.copy())
    return np.stack(out)


def rowwise(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt row-wise Adagrad = FBGEMM ``EXACT_ROWWISE_ADAGRAD`` (modelled from source): one accumulator per row.

    ``fbgemm_gpu/codegen/genscript/optimizers.py`` ``rowwise_adagrad`` (no weight
    decay; ``lr_decay`` as torch's, a sparse_opt extension), for each touched row
    ``r`` of width ``cols``, a missing entry counting as a zero gradient::

        sum[r] = sum[r] + mean(g[r]**2)
        p[r] = p[r] - clr / (sqrt(sum[r]) + eps) * g[r]
    """
    dt = table.dtype.type
    lr, lr_decay, eps, one = dt(hyper.lr), dt(hyper.lr_decay), dt(hyper.eps), dt(1)
    p = table.copy()
    acc = np.full(table.shape[0], hyper.initial_accumulator_value, dtype=table.dtype)
    out = []
    for t, step in enumerate(steps, 1):
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        rows = touched_rows(step, p.shape[0])
        clr = lr / (one + dt(t - 1) * lr_decay)
        acc[rows] = acc[rows] + np.sum(g[rows] ** 2, axis=1) / dt(p.shape[1])
        p[rows] = p[rows] - (clr / (np.sqrt(acc[rows]) + eps))[:, None] * g[rows]
        out.append(p.copy())
    return np.stack(out)

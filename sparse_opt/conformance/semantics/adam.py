r"""Adam references: the kit's three lazy modes and the production variants, as plain loops.

Every function maps ``(table, steps, hyper)`` to the trajectory: the table after
each step, shape ``(T, rows, cols)``, computed in ``table``'s dtype with the
hyper-parameters rounded to it. ``t`` is the global step (empty steps count),
``g`` a row's gradient (negated first with ``maximize``; summed over repeated
ids unless said otherwise), ``lr`` the rate of step ``t`` (``hyper.rate(t)``:
constant, or the scenario's schedule), ``c = 1 - lr * weight_decay``,
``bc1 = 1 - beta1**t``, ``bc2 = 1 - beta2**t``. "Touched" is per entry for the
semantics that take incomplete rows and per row otherwise.

None of these calls the kit's optimizers: they are independent loops over the
equations, so checking the kit against them is a real test. FBGEMM and HugeCTR
could not be run on this machine (FBGEMM's CPU wheels do not load beside torch
2.13; HugeCTR needs CUDA); their references are modelled from published source
and say so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparse_opt.conformance.case import Step
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.semantics._grad import summed, summed_squares, touched_rows


def _scalars(table: np.ndarray, hyper: Hyper) -> tuple[np.generic, ...]:
    dt = table.dtype.type
    return dt(hyper.beta1), dt(hyper.beta2), dt(hyper.eps), dt(hyper.weight_decay), dt(1)


def _rate(table: np.ndarray, hyper: Hyper, t: int) -> np.generic:
    """The rate of step ``t`` in the table's dtype."""
    return table.dtype.type(hyper.rate(t))


def lazy(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt ``LazyMode.LAZY``; FBGEMM ``adam`` with the global ``iter`` (modelled from source).

    On the touched entries only, once per touch however long they slept::

        p = c * p
        m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g**2
        p = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)

    FBGEMM writes the decay as ``p - lr * wd * p`` inside its update (touched
    rows only, ``optimizers.py`` ``adam``): the same map.
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        c = one - lr * wd
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        m[hit] = b1 * m[hit] + (one - b1) * g[hit]
        v[hit] = b2 * v[hit] + (one - b2) * g[hit] ** 2
        p[hit] = c * p[hit] - lr / (one - b1**t) * m[hit] / (np.sqrt(v[hit]) / np.sqrt(one - b2**t) + eps)
        out.append(p.copy())
    return np.stack(out)


def dormancy_decay(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """sparse_opt ``LazyMode.DORMANCY_DECAY``: moments and decay caught up at the touch, no coasting.

    With ``gap = t - s`` (``s`` the entry's previous touch, 0 if none)::

        p = c**gap * p
        m = beta1**gap * m + (1 - beta1) * g,   v = beta2**gap * v + (1 - beta2) * g**2
        p = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)

    Under a schedule ``c**gap`` is ``prod_{j=s+1}^{t} (1 - lr_j * weight_decay)``
    (multiplied step by step) and the update uses ``lr_t``.
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    last = np.zeros(table.shape, dtype=np.int64)
    since = np.ones_like(table)  # under a schedule: each entry's decay product since its previous touch
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        c = one - lr * wd
        since *= c
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        gap = (t - last[hit]).astype(p.dtype)
        decay = since[hit] if hyper.schedule else c**gap
        m[hit] = b1**gap * m[hit] + (one - b1) * g[hit]
        v[hit] = b2**gap * v[hit] + (one - b2) * g[hit] ** 2
        p[hit] = decay * p[hit] - lr / (one - b1**t) * m[hit] / (np.sqrt(v[hit]) / np.sqrt(one - b2**t) + eps)
        since[hit] = one
        last[hit] = t
        out.append(p.copy())
    return np.stack(out)


def dense_adamw(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Dense AdamW = sparse_opt ``LazyMode.DENSE_EQUIVALENT``: every entry, every step, zero gradient when dormant.

    ``torch.optim.AdamW`` (``torch.optim.Adam`` when ``weight_decay = 0``)::

        p = c * p
        m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g**2
        p = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        c = one - lr * wd
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        m = b1 * m + (one - b1) * g
        v = b2 * v + (one - b2) * g**2
        p = c * p - lr / (one - b1**t) * m / (np.sqrt(v) / np.sqrt(one - b2**t) + eps)
        out.append(p.copy())
    return np.stack(out)


def dense_l2(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """``torch.optim.Adam(weight_decay=wd)``: dense, coupled L2 (``g = g + wd * p`` on every entry, every step).

    ``torch/optim/adam.py`` ``_single_tensor_adam``: ``grad.add(param, alpha=wd)``
    after the maximize negation, then dense Adam without decoupled decay. With
    ``weight_decay = 0`` it is :func:`dense_adamw`.
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        g = g + wd * p
        m = b1 * m + (one - b1) * g
        v = b2 * v + (one - b2) * g**2
        p = p - lr / (one - b1**t) * m / (np.sqrt(v) / np.sqrt(one - b2**t) + eps)
        out.append(p.copy())
    return np.stack(out)


def lazy_l2(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Lazy Adam with coupled L2 on the touched entries only (``g = g + wd * p`` where touched).

    What an L2 term on the looked-up rows' loss gives a lazy Adam (e.g. TF-Addons
    LazyAdam with a regularization loss on the gathered rows). With
    ``weight_decay = 0`` it is :func:`lazy`.
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        g = g + wd * p
        m[hit] = b1 * m[hit] + (one - b1) * g[hit]
        v[hit] = b2 * v[hit] + (one - b2) * g[hit] ** 2
        p[hit] = p[hit] - lr / (one - b1**t) * m[hit] / (np.sqrt(v[hit]) / np.sqrt(one - b2**t) + eps)
        out.append(p.copy())
    return np.stack(out)


def sparse_adam(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """``torch.optim.SparseAdam``, TF-Addons ``LazyAdam``, HugeCTR Adam ``Local``: lazy, eps on ``sqrt(v)``.

    On the touched entries only (``torch/optim/_functional.py`` ``sparse_adam``;
    ``tensorflow_addons/optimizers/lazy_adam.py``; HugeCTR ``opt_adam_kernel``)::

        m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g**2
        p = p - lr * sqrt(bc2) / bc1 * m / (sqrt(v) + eps)

    eps is added to ``sqrt(v)``, not to ``sqrt(v_hat)``: the two differ where
    ``sqrt(v)`` is comparable to eps. No weight decay.
    """
    b1, b2, eps, _, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        m[hit] = b1 * m[hit] + (one - b1) * g[hit]
        v[hit] = b2 * v[hit] + (one - b2) * g[hit] ** 2
        p[hit] = p[hit] - lr * np.sqrt(one - b2**t) / (one - b1**t) * m[hit] / (np.sqrt(v[hit]) + eps)
        out.append(p.copy())
    return np.stack(out)


def rowwise_bias_correction(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """FBGEMM ``adam`` with ``use_rowwise_bias_correction`` (modelled from source): bias by per-row visit count.

    ``fbgemm_gpu/codegen/genscript/optimizers.py`` ``adam``: a touched row's
    ``row_counter`` ``k`` is incremented and replaces ``t``; eps on ``sqrt(v_hat)``;
    decoupled decay on touched rows (the pre-step ``p``)::

        k = k + 1
        m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g**2
        p = p - lr * ((m / (1 - beta1**k)) / (sqrt(v / (1 - beta2**k)) + eps) + wd * p)
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    visits = np.zeros(table.shape[0], dtype=np.int64)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        rows = touched_rows(step, p.shape[0])
        visits[rows] += 1
        k = visits[rows, None].astype(p.dtype)
        m[rows] = b1 * m[rows] + (one - b1) * g[rows]
        v[rows] = b2 * v[rows] + (one - b2) * g[rows] ** 2
        m_hat, v_hat = m[rows] / (one - b1**k), v[rows] / (one - b2**k)
        p[rows] = p[rows] - lr * (m_hat / (np.sqrt(v_hat) + eps) + wd * p[rows])
        out.append(p.copy())
    return np.stack(out)


def hugectr_lazy_global(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """HugeCTR Adam ``LazyGlobal`` (modelled from source): approximate catch-up, the current update deferred.

    ``HugeCTR/src/optimizers/sparse_optimizer.cu`` ``opt_adam_kernel_lazy``: each
    entry keeps ``prev`` (initialised to 1). At a touch at step ``t``, with
    ``k = t - prev``::

        p = p - lr / (1 - beta1) * sqrt(1 - beta2**prev) / (1 - beta1**prev) * (1 - beta1**k) * m / (sqrt(v) + eps)
        m = beta1**k * m + (1 - beta1) * g,   v = beta2**k * v + (1 - beta2) * g**2
        prev = t

    The parameter first receives the ``k`` updates dense Adam would have made
    since ``prev`` with the old moments (``v`` frozen, bias of step ``prev``),
    then the moments catch up exactly; this step's own update waits for the next
    touch, so a row touched once never moves. ``lr`` is the kernel's argument at
    the touching step: under a schedule the ``k`` deferred updates all get the
    rate of step ``t``.
    """
    b1, b2, eps, _, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    prev = np.ones(table.shape, dtype=np.int64)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        hit = np.broadcast_to(touched_rows(step, p.shape[0])[:, None], p.shape)
        s, k = prev[hit].astype(p.dtype), (t - prev[hit]).astype(p.dtype)
        alpha = lr / (one - b1) * np.sqrt(one - b2**s) / (one - b1**s) * (one - b1**k)
        p[hit] = p[hit] - alpha * m[hit] / (np.sqrt(v[hit]) + eps)
        m[hit] = b1**k * m[hit] + (one - b1) * g[hit]
        v[hit] = b2**k * v[hit] + (one - b2) * g[hit] ** 2
        prev[hit] = t
        out.append(p.copy())
    return np.stack(out)


def _coast(
    state: tuple[np.ndarray, np.ndarray, np.ndarray], since: np.ndarray, through: int, lr: np.generic, hyper: Hyper
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense AdamW's zero-gradient steps ``since + 1 .. through`` of each entry, every one at the rate ``lr``."""
    p, m, v = (x.copy() for x in state)
    b1, b2, eps, wd, one = _scalars(p, hyper)
    c = one - lr * wd
    for j in range(int(since.min(initial=through)) + 1, through + 1):
        on = since < j
        m = np.where(on, b1 * m, m)
        v = np.where(on, b2 * v, v)
        p = np.where(on, c * p - lr / (one - b1**j) * m / (np.sqrt(v) / np.sqrt(one - b2**j) + eps), p)
    return p, m, v


def current_rate(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Dense AdamW's catch-up with the *current* rate for the skipped steps (modelled from source).

    What TorchRec, FBGEMM (``weight_decay_mode = DECOUPLE_GLOBAL``: the decay of
    the skipped iterations is ``(1 - lr * wd)**(iter - prev_iter - 1)`` with the
    learning rate of the current iteration) and HugeCTR (``LazyGlobal``: the
    deferred updates of :func:`hugectr_lazy_global` use the kernel's current
    ``lr``) do when they bring a row up to date, applied to the exact catch-up of
    sparse_opt ``LazyMode.DENSE_EQUIVALENT``. An entry last current at step
    ``s`` and touched at step ``t`` takes dense AdamW's zero-gradient steps
    ``j = s + 1 .. t - 1``, each with the rate of step ``t``, then step ``t``::

        m = beta1 * m,   v = beta2 * v,   p = c_t * p - lr_t / bc1_j * m / (sqrt(v) / sqrt(bc2_j) + eps)
        (j = s + 1 .. t - 1), then step t as in :func:`dense_adamw`, with lr_t

    Every catch-up is at the rate of the step that looks the row up: the table
    read after step ``u`` (what step ``u + 1``'s lookup sees) shows each dormant
    entry caught up to ``u`` at the rate of step ``u + 1`` (after the last step,
    at the last step's rate), and a read does not change what the next touch
    catches up from. With a constant rate this is :func:`dense_adamw`, bit for
    bit: the reference applies to the scenarios with a schedule only. Not run
    here: the libraries' Adam kernels need a GPU.
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    last = np.zeros(table.shape, dtype=np.int64)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        c = one - lr * wd
        g, hit = summed(step, p.shape, p.dtype, hyper.maximize)
        cp, cm, cv = _coast((p, m, v), np.where(hit, last, t - 1), t - 1, lr, hyper)
        m[hit] = b1 * cm[hit] + (one - b1) * g[hit]
        v[hit] = b2 * cv[hit] + (one - b2) * g[hit] ** 2
        p[hit] = c * cp[hit] - lr / (one - b1**t) * m[hit] / (np.sqrt(v[hit]) / np.sqrt(one - b2**t) + eps)
        last[hit] = t
        out.append(_coast((p, m, v), last, t, _rate(table, hyper, min(t + 1, len(steps))), hyper)[0])
    return np.stack(out)


def dense_eps_on_sqrt_v(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """HugeCTR Adam ``Global`` (modelled from source): dense, eps on ``sqrt(v)``.

    ``opt_adam_kernel_global`` + ``adam_update_kernel_global``: every entry,
    every step::

        m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g**2
        p = p - lr * sqrt(bc2) / bc1 * m / (sqrt(v) + eps)
    """
    b1, b2, eps, _, one = _scalars(table, hyper)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        lr = _rate(table, hyper, t)
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        m = b1 * m + (one - b1) * g
        v = b2 * v + (one - b2) * g**2
        p = p - lr * np.sqrt(one - b2**t) / (one - b1**t) * m / (np.sqrt(v) + eps)
        out.append(p.copy())
    return np.stack(out)


def keras3_adam(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """Keras 3 ``Adam`` fed ``tf.IndexedSlices`` (TF 2.21): dense moments, ``v`` gets the sum of squares.

    ``keras/src/optimizers/adam.py`` ``update_step``: ``m += (g - m) * (1 - beta1)``
    densifies the slices (repeated ids summed) but ``ops.square`` squares each
    slice first, so ``v`` receives ``sum_i g_i**2``; decoupled decay on every row
    before the update (``base_optimizer._apply_weight_decay``)::

        p = p - p * wd * lr
        m = m + (g - m) * (1 - beta1),   v = v + (sum_i g_i**2 - v) * (1 - beta2)
        p = p - m * (lr * sqrt(bc2) / bc1) / (sqrt(v) + eps)

    The bias correction's ``beta1**t`` and ``beta2**t`` raise
    ``ops.cast(beta, dtype)``, and ``tf.cast`` of a Python float goes through a
    float32 tensor: the powers use float32-rounded betas even for a float64
    table (the moment updates use ``1 - beta`` in double).
    """
    b1, b2, eps, wd, one = _scalars(table, hyper)
    dt = table.dtype.type
    lr = dt(hyper.lr)  # constant rates only (the reference does not apply to schedule scenarios)
    b1_cast, b2_cast = dt(np.float32(hyper.beta1)), dt(np.float32(hyper.beta2))
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for t, step in enumerate(steps, 1):
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        g2 = summed_squares(step, p.shape, p.dtype, hyper.maximize)
        p = p - p * wd * lr
        alpha = lr * np.sqrt(one - b2_cast**t) / (one - b1_cast**t)
        m = m + (g - m) * (one - b1)
        v = v + (g2 - v) * (one - b2)
        p = p - m * alpha / (np.sqrt(v) + eps)
        out.append(p.copy())
    return np.stack(out)


def tf1_adam(table: np.ndarray, steps: Sequence[Step], hyper: Hyper) -> np.ndarray:
    """``tf.compat.v1.train.AdamOptimizer`` fed ``IndexedSlices``: dense, eps on ``sqrt(v)``, float32 beta powers.

    ``tensorflow/python/training/adam.py``: the hyper-parameters are float32
    tensors cast to the variable's dtype; ``beta1_power`` and ``beta2_power`` are
    float32 variables that start at ``beta1``, ``beta2`` and are multiplied by
    them after every step (so the bias correction is a float32 running product,
    whatever the table's dtype); repeated ids are summed first::

        lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
        m = m * beta1, then m[rows] += g * (1 - beta1);   v likewise with g * g
        p = p - lr_t * m / (sqrt(v) + eps)
    """
    dt, f32 = table.dtype.type, np.float32
    lr, b1, b2, eps = (dt(f32(x)) for x in (hyper.lr, hyper.beta1, hyper.beta2, hyper.eps))
    one = dt(1)
    b1_power, b2_power = f32(hyper.beta1), f32(hyper.beta2)
    p, m, v = table.copy(), np.zeros_like(table), np.zeros_like(table)
    out = []
    for step in steps:
        g, _ = summed(step, p.shape, p.dtype, hyper.maximize)
        lr_t = lr * np.sqrt(one - dt(b2_power)) / (one - dt(b1_power))
        m = m * b1 + g * (one - b1)
        v = v * b2 + g * g * (one - b2)
        p = p - lr_t * m / (np.sqrt(v) + eps)
        b1_power, b2_power = b1_power * f32(hyper.beta1), b2_power * f32(hyper.beta2)
        out.append(p.copy())
    return np.stack(out)

"""DENSE_EQUIVALENT against the real torch optimizers under random schedules, hyper-parameters and gaps (live).

The golden files (:mod:`test_torch_golden_schedules`) fix a few runs; this
draws many: each seed picks a schedule (each built-in, at random arguments, and
a plain callable), Adam, AdamW or SGD (momentum, coupled weight decay), betas
from 0 to 0.9999, ``eps`` from 0 to 1, gradient scales from 1e-12 to 10 and a
touch rate from one row in a thousand steps to every other row, so that gaps
cross the schedules' breaks. The kit trains a float64 table as an embedding
loop does (sparse gradients of the touched rows); torch trains the same table
densely, with base lr 1.0 and ``LambdaLR(opt, lambda e: f(e + 1))`` (the
SPEC's equivalence), fed exact zeros on the untouched rows. After a final
``catch_up()`` every entry must be within the SPEC's 1e-12 relative of
torch's, and NaN exactly where torch's is. Runs in ``make test-live`` (torch
2.13); skipped without torch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import sparse_opt as so

torch = pytest.importorskip("torch")

SEEDS = range(48)


def _schedule(rng: np.random.Generator, total: int) -> tuple[Callable[[int], float], str]:
    """A random schedule over ``total`` steps and its description."""
    kind = int(rng.integers(0, 6))
    lr = float(10 ** rng.uniform(-4, -1))
    if kind == 0:
        return so.schedules.constant(lr), f"constant({lr:.3g})"
    if kind == 1:
        warm = int(rng.integers(1, total))
        return so.schedules.linear_warmup(lr, warm), f"linear_warmup({lr:.3g}, {warm})"
    if kind == 2:
        warm = int(rng.integers(0, total // 2))
        end = int(rng.integers(warm + 1, 2 * total))
        final = float(rng.choice([0.0, lr * 0.01]))
        return so.schedules.warmup_cosine(lr, warm, end, final), f"warmup_cosine({lr:.3g}, {warm}, {end}, {final:.3g})"
    if kind == 3:
        size, gamma = int(rng.integers(1, total)), float(rng.uniform(0.1, 0.99))
        return so.schedules.step_decay(lr, size, gamma), f"step_decay({lr:.3g}, {size}, {gamma:.3g})"
    if kind == 4:
        gamma = float(rng.uniform(0.9, 0.99999))
        return so.schedules.exponential(lr, gamma), f"exponential({lr:.3g}, {gamma:.6g})"
    return (lambda t: lr / (1.0 + 0.01 * t)), f"lambda t: {lr:.3g} / (1 + 0.01 t)"


def _pair(rng: np.random.Generator, schedule: Callable[[int], float], table: np.ndarray, weights: object) -> tuple:
    """The kit's DENSE_EQUIVALENT optimizer over ``table`` and torch's over ``weights``, at random hyper-parameters."""
    kind = str(rng.choice(["adam", "adamw", "sgd"]))
    if kind == "sgd":
        momentum = float(rng.choice([0.0, 0.5, 0.9, 0.99]))
        decay = float(rng.choice([0.0, 0.01, 0.1, 1.0]))
        kit = so.SparseSgdTable(table, so.SparseSgdConfig(lr=schedule, weight_decay=decay, momentum=momentum, mode="dense_equivalent"))
        ref = torch.optim.SGD([weights], lr=1.0, momentum=momentum, weight_decay=decay)
        return kit, ref, f"SGD(momentum={momentum}, weight_decay={decay})"
    beta1 = float(rng.choice([0.0, 0.5, 0.9, 0.99, 0.999, rng.uniform(0.0, 1.0)]))
    beta2 = float(rng.choice([0.0, 0.5, 0.9, 0.999, 0.9999, rng.uniform(0.0, 1.0)]))
    eps = float(rng.choice([0.0, 1e-12, 1e-8, 1e-3, 1.0]))
    decay = float(rng.choice([0.01, 0.1, 1.0])) if kind == "adamw" else 0.0
    config = so.SparseAdamConfig(lr=schedule, beta1=beta1, beta2=beta2, eps=eps, weight_decay=decay, mode="dense_equivalent")
    kit = so.SparseAdamTable(table, config)
    if kind == "adamw":
        ref = torch.optim.AdamW([weights], lr=1.0, betas=(beta1, beta2), eps=eps, weight_decay=decay)
    else:
        ref = torch.optim.Adam([weights], lr=1.0, betas=(beta1, beta2), eps=eps)
    return kit, ref, f"{kind}(beta1={beta1:.6g}, beta2={beta2:.6g}, eps={eps:g}, weight_decay={decay})"


@pytest.mark.parametrize("seed", SEEDS)
def test_dense_equivalent_is_torch_under_random_schedules(seed: int) -> None:
    rng = np.random.default_rng([seed, 17])
    rows, cols, total = int(rng.integers(3, 12)), int(rng.integers(1, 5)), int(rng.integers(5, 600))
    schedule, name = _schedule(rng, total)
    start = rng.standard_normal((rows, cols))
    table = start.copy()
    weights = torch.tensor(start.copy(), dtype=torch.float64)
    kit, ref, optimizer = _pair(rng, schedule, table, weights)
    scheduler = torch.optim.lr_scheduler.LambdaLR(ref, lambda e: schedule(e + 1))
    scale = float(10 ** rng.uniform(-12, 1))
    touch = float(10 ** rng.uniform(-3, -0.3))
    for _ in range(total):
        ids = np.flatnonzero(rng.random(rows) < touch)
        grads = rng.standard_normal((ids.size, cols)) * scale
        dense = np.zeros((rows, cols))
        dense[ids] = grads
        weights.grad = torch.tensor(dense, dtype=torch.float64)
        ref.step()
        scheduler.step()
        kit.step(so.CsrGradient.from_rows(ids, grads, rows))
    kit.catch_up()
    expected = weights.numpy()
    where = f"seed {seed}: {optimizer} under {name}, {total} steps, scale {scale:.2g}, touch rate {touch:.3g}"
    np.testing.assert_array_equal(np.isnan(table), np.isnan(expected), err_msg=where)
    both = ~np.isnan(expected)
    np.testing.assert_allclose(table[both], expected[both], rtol=1e-12, atol=0.0, err_msg=where)

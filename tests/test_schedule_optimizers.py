"""Learning-rate schedules in the optimizers: each mode's semantics, refusals, and checkpoints mid-schedule.

The torch goldens (``test_torch_golden_schedules.py``) pin DENSE_EQUIVALENT,
Adagrad and ``DenseAdam`` against real torch. Here the SPEC's per-mode rules
are checked against plain float64 loops written from the SPEC:

- LAZY: the update of step ``t`` uses ``lr_t`` (decay ``1 - lr_t * wd``);
- DORMANCY_DECAY: the parameter decays by ``prod_{j=s+1}^{t} (1 - lr_j * wd)``,
  then the update with ``lr_t``;
- a rate that is not finite or negative, or whose decay factor would be
  negative, is refused at the step that asks for it, naming the step and the
  value, with nothing changed;
- ``state_dict`` mid-schedule, loaded into an optimizer built with the same
  schedule, continues bit for bit, and its size does not grow with the steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt import schedules

DIM = 7
SCHEDULES = {
    "warmup_cosine": schedules.warmup_cosine(0.05, 10, 60, final_lr=0.005),
    "step_decay": schedules.step_decay(0.05, 7, 0.5),
    "callable": lambda t: 0.03 * (1 + math.sin(t)),
}


def sparse_grads(steps: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per step: ascending coordinates (sometimes none) and their gradients."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        idx = np.flatnonzero(rng.random(DIM) < 0.3)
        out.append((idx, rng.standard_normal(idx.size)))
    return out


def adam_reference(grads, lr, mode, beta1=0.9, beta2=0.99, eps=1e-8, wd=0.1):
    """LAZY or DORMANCY_DECAY Adam(W) written from the SPEC, float64."""
    p = np.linspace(-1.0, 1.0, DIM)
    m, v, last = np.zeros(DIM), np.zeros(DIM), np.zeros(DIM, dtype=np.int64)
    for t, (idx, g) in enumerate(grads, 1):
        if not idx.size:
            continue
        lr_t = lr(t)
        for i, gi in zip(idx, g):
            if mode == "lazy":
                p[i] *= 1 - lr_t * wd
                m[i] = beta1 * m[i] + (1 - beta1) * gi
                v[i] = beta2 * v[i] + (1 - beta2) * gi * gi
            else:
                gap = t - last[i]
                p[i] *= math.prod(1 - lr(j) * wd for j in range(last[i] + 1, t + 1))
                m[i] = beta1**gap * m[i] + (1 - beta1) * gi
                v[i] = beta2**gap * v[i] + (1 - beta2) * gi * gi
            p[i] -= lr_t / (1 - beta1**t) * m[i] / (math.sqrt(v[i]) / math.sqrt(1 - beta2**t) + eps)
            last[i] = t
    return p, m, v


@pytest.mark.parametrize("mode", ["lazy", "dormancy_decay"])
@pytest.mark.parametrize("name", SCHEDULES)
def test_lazy_modes_use_each_steps_rate(name, mode):
    """SparseAdam in LAZY / DORMANCY_DECAY under a schedule is the SPEC's loop (to 1e-13)."""
    lr = SCHEDULES[name]
    grads = sparse_grads(80)
    p = np.linspace(-1.0, 1.0, DIM)
    opt = so.SparseAdam(p, so.SparseAdamConfig(lr=lr, beta2=0.99, mode=mode, weight_decay=0.1))
    for idx, g in grads:
        opt.step(so.CooGradient(idx, g, DIM))
    ref_p, ref_m, ref_v = adam_reference(grads, lr, mode)
    np.testing.assert_allclose(p, ref_p, rtol=1e-13)
    np.testing.assert_allclose(opt.m, ref_m, rtol=1e-13)
    np.testing.assert_allclose(opt.v, ref_v, rtol=1e-13)
    constant = np.linspace(-1.0, 1.0, DIM)  # the schedule matters: a constant rate ends elsewhere
    other = so.SparseAdam(constant, so.SparseAdamConfig(lr=lr(1), beta2=0.99, mode=mode, weight_decay=0.1))
    for idx, g in grads:
        other.step(so.CooGradient(idx, g, DIM))
    assert np.abs(constant - ref_p).max() > 1e-3


@pytest.mark.parametrize("name", SCHEDULES)
def test_lazy_sgd_uses_each_steps_rate(name):
    """Lazy SGD with momentum and coupled decay: ``p -= lr_t * buf`` on the touched coordinates."""
    lr = SCHEDULES[name]
    grads = sparse_grads(50, seed=1)
    p = np.linspace(-1.0, 1.0, DIM)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=lr, momentum=0.9, weight_decay=0.01))
    ref, buf = np.linspace(-1.0, 1.0, DIM), np.zeros(DIM)
    for t, (idx, g) in enumerate(grads, 1):
        opt.step(so.CooGradient(idx, g, DIM))
        d = g + 0.01 * ref[idx]
        buf[idx] = 0.9 * buf[idx] + d
        ref[idx] -= lr(t) * buf[idx]
    np.testing.assert_allclose(p, ref, rtol=1e-14)


def _optimizers(lr):
    """One optimizer of each kind with learning rate ``lr``, and a gradient maker for it."""
    table = np.ones((4, 3))
    rows = so.CsrGradient.from_rows([1, 2], np.full((2, 3), 0.5), num_rows=4)
    return {
        "adam-lazy": (so.SparseAdamTable(table.copy(), so.SparseAdamConfig(lr=lr, weight_decay=0.5)), rows),
        "adam-dense-eq": (
            so.SparseAdamTable(table.copy(), so.SparseAdamConfig(lr=lr, mode="dense_equivalent", weight_decay=0.5)),
            rows,
        ),
        "sgd": (so.SparseSgdTable(table.copy(), so.SparseSgdConfig(lr=lr, momentum=0.9)), rows),
        "adagrad": (so.SparseAdagradTable(table.copy(), so.SparseAdagradConfig(lr=lr)), rows),
        "dense-adam": (so.DenseAdam(table.copy(), lr=lr, weight_decay=0.5), rows.to_dense()),
    }


def _frozen(opt):
    state = opt.state_dict()
    return (opt.params.tobytes(), {k: np.asarray(v).tobytes() for k, v in state.items()})


@pytest.mark.parametrize("kind", list(_optimizers(0.1)))
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), r"learning rate at step 3: nan"),
        (-0.5, r"learning rate at step 3: -0.5"),
        (float("inf"), r"learning rate at step 3: inf"),
        (3.0, r"at step 3: 3.0 with weight_decay = 0.5"),
    ],
)
def test_a_bad_rate_is_refused_at_its_step_and_changes_nothing(kind, value, message):
    """Steps 1-2 train; step 3's rate is refused naming the step and the value; the optimizer is bit-identical."""
    if value == 3.0 and kind in ("sgd", "adagrad"):
        pytest.skip("no decoupled decay: a rate of 3 is valid")

    def lr(t):
        return 0.1 if t < 3 else value

    opt, grad = _optimizers(lr)[kind]
    opt.step(grad)
    opt.step(grad)
    before = _frozen(opt)
    with pytest.raises(ValueError, match=message):
        opt.step(grad)
    assert _frozen(opt) == before
    assert opt.step_count == 2


def test_a_bad_rate_of_a_dormant_step_is_refused_by_the_catch_up():
    """DENSE_EQUIVALENT asks for the rates of dormant steps at the catch-up: refused there, nothing changed."""

    def lr(t):
        return float("nan") if t == 4 else 0.1

    table = np.ones((4, 3))
    opt = so.SparseAdamTable(table, so.SparseAdamConfig(lr=lr, mode="dense_equivalent"))
    opt.step(so.CsrGradient.from_rows([1], np.ones((1, 3)), num_rows=4))
    for ids in ([0], [0], [], [2]):  # steps 2-5 leave row 1 dormant; step 4 (no gradient) has no rate
        opt.step(so.CsrGradient.from_rows(ids, np.ones((len(ids), 3)), num_rows=4))
    before = _frozen(opt)
    with pytest.raises(ValueError, match="learning rate at step 4: nan"):
        opt.catch_up([1])
    assert _frozen(opt) == before


def test_a_config_refuses_what_is_neither_a_rate_nor_a_schedule():
    for bad in ("0.1", None, [0.1]):
        with pytest.raises(TypeError, match="lr must be a float >= 0 or a schedule"):
            so.SparseAdamConfig(lr=bad)


@pytest.mark.parametrize("name", SCHEDULES)
@pytest.mark.parametrize("mode", ["lazy", "dormancy_decay", "dense_equivalent"])
def test_checkpoint_mid_schedule_resumes_bit_for_bit(name, mode):
    """Save at step 30 (inside the cosine), load into an optimizer built with the same schedule, continue to 80."""
    lr = SCHEDULES[name]
    grads = sparse_grads(80, seed=2)
    cfg = so.SparseAdamConfig(lr=lr, beta2=0.99, mode=mode, weight_decay=0.1)
    ref_p = np.linspace(-1.0, 1.0, DIM)
    ref = so.SparseAdam(ref_p, cfg)
    for idx, g in grads[:30]:
        ref.step(so.CooGradient(idx, g, DIM))
    saved, saved_p = ref.state_dict(), ref_p.copy()
    assert saved["lr"] == (repr(lr) if name != "callable" else "callable")
    p = saved_p.copy()
    resumed = so.SparseAdam(p, so.SparseAdamConfig(lr=lr, beta2=0.99, mode=mode, weight_decay=0.1))
    resumed.load_state_dict(saved)
    for idx, g in grads[30:]:
        ref.step(so.CooGradient(idx, g, DIM))
        resumed.step(so.CooGradient(idx, g, DIM))
    if mode == "dense_equivalent":
        ref.catch_up()
        resumed.catch_up()
    assert p.tobytes() == ref_p.tobytes() and _frozen(resumed) == _frozen(ref)
    assert {k: np.shape(v) for k, v in ref.state_dict().items()} == {k: np.shape(v) for k, v in saved.items()}


def test_a_checkpoint_loads_only_into_the_same_built_in_schedule():
    """The schedule is part of the config: another built-in schedule (or a float) refuses the state dict."""
    sched = schedules.linear_warmup(0.1, 10)
    opt = so.SparseAdam(np.zeros(3), so.SparseAdamConfig(lr=sched))
    opt.step(so.CooGradient([1], [1.0], 3))
    saved = opt.state_dict()
    for other in (schedules.linear_warmup(0.1, 11), 0.1):
        fresh = so.SparseAdam(np.zeros(3), so.SparseAdamConfig(lr=other))
        with pytest.raises(ValueError, match=r"state_dict\['lr'\] = .* does not match"):
            fresh.load_state_dict(saved)
    same = so.SparseAdam(np.zeros(3), so.SparseAdamConfig(lr=schedules.linear_warmup(0.1, 10)))
    same.load_state_dict(saved)


def _chained_constant_runs(make, grads, lr, key):
    """Step ``t`` by an optimizer built with the constant ``lr(t)`` and loaded from the previous step's state.

    Every optimizer's constant-rate path is pinned by its own golden vectors
    (torch's Adafactor, lingvo's EGDD), so this is the schedule's oracle: step
    ``t`` of a schedule is a step of the constant optimizer at ``lr(t)``.
    """
    params = [np.linspace(-1.0, 1.0, 6).reshape(2, 3), np.linspace(0.5, 2.0, 4)]
    state = None
    for t, g in enumerate(grads, 1):
        opt = make(params, lr(t))
        if state is not None:
            opt.load_state_dict({**state, key: lr(t)})
        opt.step(g)
        state = opt.state_dict()
    return params, state


@pytest.mark.parametrize("kind", ["adafactor", "egdd"])
def test_adafactor_and_egdd_step_t_uses_the_rate_of_step_t(kind):
    """A schedule equals chaining constant-rate optimizers, one per step, bit for bit; a skipped parameter still counts."""
    rng = np.random.default_rng(5)
    grads = [[rng.standard_normal((2, 3)), None if t % 4 == 1 else rng.standard_normal(4)] for t in range(12)]
    lr = schedules.warmup_cosine(0.05, 3, 10, final_lr=0.01)
    if kind == "adafactor":
        def make(params, rate):
            return so.Adafactor(params, lr=rate, weight_decay=0.1)
        key = "lr"
    else:
        def make(params, rate):
            return so.EGDD(params, learning_rate=rate, momentum=0.9)
        key = "learning_rate"
    expected, state = _chained_constant_runs(make, grads, lr, key)
    params = [np.linspace(-1.0, 1.0, 6).reshape(2, 3), np.linspace(0.5, 2.0, 4)]
    opt = make(params, lr)
    for g in grads:
        opt.step(g)
    assert opt.step_count == len(grads)
    for got, want in zip(params, expected):
        assert got.tobytes() == want.tobytes()
    assert opt.state_dict()[key] == repr(lr)
    assert {k: np.asarray(v).tobytes() for k, v in opt.state_dict().items() if k != key} == {
        k: np.asarray(v).tobytes() for k, v in state.items() if k != key
    }

"""Lazy SparseSgd / SparseAdam / SparseAdagrad (+ tables) and DenseAdam: hand-derived values and properties."""

import io
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparse_opt as so

LAZY, DORMANCY, DENSE = so.LazyMode.LAZY, so.LazyMode.DORMANCY_DECAY, so.LazyMode.DENSE_EQUIVALENT
DTYPES = [np.float32, np.float64]


def coo(indices, values, dim):
    return so.CooGradient(np.array(indices, dtype=np.int64), np.array(values, dtype=np.float64), dim)


# ---------------------------------------------------------------- SGD, by hand


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_weight_decay_and_momentum_by_hand(dtype):
    p = np.array([1.0, 2.0, 3.0], dtype=dtype)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, weight_decay=0.5, momentum=0.9))
    opt.step(coo([0], [1.0], 3))  # g = 1 + 0.5*1 = 1.5; buf = 1.5; p0 = 1 - 0.15
    opt.step(coo([2], [1.0], 3))  # coordinate 0 dormant: neither decay nor momentum
    assert p[0] == dtype(0.85) and p[1] == 2.0
    opt.step(coo([0], [-1.0], 3))  # g = -1 + 0.5*0.85 = -0.575; buf = 0.9*1.5 - 0.575 = 0.775
    np.testing.assert_allclose(p, [0.85 - 0.1 * 0.775, 2.0, 3.0 - 0.1 * (1 + 1.5)], rtol=1e-6 if dtype == np.float32 else 1e-15)
    np.testing.assert_allclose(opt.momentum_buffer, [0.775, 0.0, 2.5], rtol=1e-6 if dtype == np.float32 else 1e-15)
    assert opt.step_count == 3 and p.dtype == dtype


def test_sgd_maximize_and_no_momentum():
    p = np.array([1.0, 1.0])
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.5, weight_decay=0.1, maximize=True))
    opt.step(coo([1], [2.0], 2))  # g = -2 + 0.1*1 = -1.9; p = 1 + 0.95
    assert opt.momentum_buffer is None
    np.testing.assert_array_equal(p, [1.0, 1.95])


# ---------------------------------------------------------------- Adam, by hand


def adam_param_step(p, m, v, t, lr, b1, b2, eps):
    """The seed's equations in scalar Python: bias correction with the global step t."""
    m_hat = m / (1 - b1**t)
    v_hat = v / (1 - b2**t)
    return p - lr * m_hat / (math.sqrt(v_hat) + eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", [LAZY, DORMANCY])
def test_adam_first_touch_at_late_step_uses_global_step(dtype, mode):
    p = np.array([0.5, -0.25], dtype=dtype)
    cfg = so.SparseAdamConfig(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, mode=mode)
    opt = so.SparseAdam(p, cfg)
    for _ in range(4):
        opt.step(coo([1], [0.3], 2))
    opt.step(coo([0], [2.0], 2))  # first touch of coordinate 0 at t = 5
    m, v = 0.1 * 2.0, 0.001 * 4.0
    expected = adam_param_step(0.5, m, v, 5, 0.1, 0.9, 0.999, 1e-8)
    rtol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(p[0], expected, rtol=rtol)
    np.testing.assert_allclose([opt.m[0], opt.v[0]], [m, v], rtol=rtol)
    assert opt.last_step.tolist() == [5, 4] and opt.step_count == 5
    # a per-coordinate count (t = 1) would have given a visibly different step
    per_coordinate = adam_param_step(0.5, m, v, 1, 0.1, 0.9, 0.999, 1e-8)
    assert abs(per_coordinate - expected) > 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_gap_decay_by_hand(dtype):
    g1, g2 = 0.5, -1.5
    results = {}
    for mode in (LAZY, DORMANCY):
        p = np.zeros(3, dtype=dtype)
        opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.01, beta1=0.8, beta2=0.9, eps=1e-6, mode=mode))
        opt.step(coo([1], [g1], 3))  # t = 1
        opt.step(coo([0], [1.0], 3))  # t = 2
        opt.step(coo([], [], 3))  # t = 3: an empty gradient still counts
        opt.step(coo([1], [g2], 3))  # t = 4, gap = 3
        results[mode] = (opt.m[1], opt.v[1], p[1])
        assert opt.step_count == 4 and opt.last_step.tolist() == [2, 4, 0]
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    m1, v1 = 0.2 * g1, 0.1 * g1**2
    lazy_m, lazy_v = 0.8 * m1 + 0.2 * g2, 0.9 * v1 + 0.1 * g2**2
    dd_m, dd_v = 0.8**3 * m1 + 0.2 * g2, 0.9**3 * v1 + 0.1 * g2**2
    np.testing.assert_allclose(results[LAZY][:2], [lazy_m, lazy_v], rtol=rtol)
    np.testing.assert_allclose(results[DORMANCY][:2], [dd_m, dd_v], rtol=rtol)
    p_after_1 = adam_param_step(0.0, m1, v1, 1, 0.01, 0.8, 0.9, 1e-6)
    np.testing.assert_allclose(results[LAZY][2], adam_param_step(p_after_1, lazy_m, lazy_v, 4, 0.01, 0.8, 0.9, 1e-6), rtol=rtol)
    np.testing.assert_allclose(results[DORMANCY][2], adam_param_step(p_after_1, dd_m, dd_v, 4, 0.01, 0.8, 0.9, 1e-6), rtol=rtol)


def test_adam_maximize_negates_gradient():
    p, q = np.ones(2), np.ones(2)
    so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, maximize=True)).step(coo([0], [1.0], 2))
    so.SparseAdam(q, so.SparseAdamConfig(lr=0.1)).step(coo([0], [-1.0], 2))
    np.testing.assert_array_equal(p, q)
    assert p[0] > 1.0


def test_dormancy_decay_of_a_long_gap_is_one_power():
    """A gap of 5001 steps decays the moments by beta**5001, evaluated once (not 5001 roundings)."""
    p = np.zeros(2)
    opt = so.SparseAdam(p, so.SparseAdamConfig(beta1=0.999, beta2=0.9999, mode=DORMANCY))
    opt.step(coo([0], [1.0], 2))
    for _ in range(5000):
        opt.step(coo([1], [1.0], 2))
    opt.step(coo([0], [1.0], 2))
    assert opt.m[0] == 0.999**5001 * (1 - 0.999) + (1 - 0.999)
    assert opt.v[0] == 0.9999**5001 * (1 - 0.9999) + (1 - 0.9999)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_weight_decay_by_hand_in_each_mode(dtype):
    """LAZY decays once per touch, DORMANCY_DECAY (1 - lr*wd)**gap at the touch, DENSE_EQUIVALENT every step."""
    lr, wd, gap = 0.1, 0.5, 4
    c = 1 - lr * wd
    out = {}
    for mode in (LAZY, DORMANCY, DENSE):
        p = np.array([1.0, 1.0], dtype=dtype)
        opt = so.SparseAdam(p, so.SparseAdamConfig(lr=lr, eps=0.0, mode=mode, weight_decay=wd))
        opt.step(coo([0, 1], [0.0, 1.0], 2))  # coordinate 0: gradient 0, so its moments stay 0 (0/0 avoided below)
        for _ in range(gap - 1):
            opt.step(coo([1], [1.0], 2))
        opt.catch_up([0]) if mode is DENSE else None
        out[mode] = float(p[0])
    # coordinate 0 has m = v = 0: eps = 0 makes its update 0 / 0 only if it coasts; it is touched once (t = 1)
    # with g = 0, so m = v = 0 and the Adam term is 0 / 0 = NaN in every mode
    assert all(math.isnan(x) for x in out.values())
    results = {}
    for mode in (LAZY, DORMANCY, DENSE):
        p = np.array([2.0, 1.0], dtype=dtype)
        opt = so.SparseAdam(p, so.SparseAdamConfig(lr=lr, mode=mode, weight_decay=wd))
        opt.step(coo([1], [1.0], 2))  # coordinate 0 never touched: only decay can move it
        for _ in range(gap - 2):
            opt.step(coo([1], [1.0], 2))
        opt.step(coo([0, 1], [1.0, 1.0], 2))  # first touch of coordinate 0 at t = gap, m = 0.1, v = 0.001
        results[mode] = float(p[0])
    adam = lr / (1 - 0.9**gap) * 0.1 / (math.sqrt(0.001 / (1 - 0.999**gap)) + 1e-8)
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(results[LAZY], 2.0 * c - adam, rtol=rtol)
    np.testing.assert_allclose(results[DORMANCY], 2.0 * c**gap - adam, rtol=rtol)
    np.testing.assert_allclose(results[DENSE], 2.0 * c**gap - adam, rtol=rtol)


# ---------------------------------------------------------------- DenseAdam


def test_dense_adam_by_hand():
    p = np.array([1.0, -1.0])
    opt = so.DenseAdam(p, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8)
    opt.step(np.array([0.5, 0.0]))
    opt.step(np.array([-0.5, 2.0]))
    # step 1: m = 0.1*0.5, v = 0.01*0.25; step 2: m = 0.9*m - 0.1*0.5, v = 0.99*v + 0.01*0.25
    m0 = 0.9 * 0.05 - 0.05
    v0 = 0.99 * 0.0025 + 0.0025
    p0 = adam_param_step(adam_param_step(1.0, 0.05, 0.0025, 1, 0.1, 0.9, 0.99, 1e-8), m0, v0, 2, 0.1, 0.9, 0.99, 1e-8)
    np.testing.assert_allclose([opt.m[0], opt.v[0], p[0]], [m0, v0, p0], rtol=1e-13)
    assert opt.step_count == 2


def test_dense_adam_weight_decay_is_decoupled_and_first():
    """DenseAdam(weight_decay) is torch's AdamW: p *= 1 - lr*wd before the Adam update."""
    p = np.array([2.0])
    so.DenseAdam(p, lr=0.1, weight_decay=0.5).step(np.array([1.0]))
    np.testing.assert_allclose(p, [2.0 * 0.95 - 0.1 / (1 + 1e-8)], rtol=1e-15)


# ---------------------------------------------------------------- properties


@st.composite
def touch_schedules(draw, dim=6, max_steps=12):
    steps = draw(st.integers(1, max_steps))
    schedule = []
    for _ in range(steps):
        mask = draw(st.lists(st.booleans(), min_size=dim, max_size=dim))
        vals = draw(st.lists(st.floats(-4, 4, allow_nan=False).filter(lambda x: x != 0), min_size=dim, max_size=dim))
        idx = [i for i in range(dim) if mask[i]]
        schedule.append((idx, [vals[i] for i in idx]))
    return schedule


@given(touch_schedules(), st.sampled_from(DTYPES))
def test_dormancy_moments_equal_dense_adam_fed_zeros(schedule, dtype):
    dim = 6
    p_sparse = np.linspace(-1, 1, dim).astype(dtype)
    p_dense = p_sparse.copy()
    sparse = so.SparseAdam(p_sparse, so.SparseAdamConfig(lr=0.01, beta1=0.7, beta2=0.8, mode=DORMANCY))
    dense = so.DenseAdam(p_dense, lr=0.01, beta1=0.7, beta2=0.8)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    # Both sides round a few times per step, each time by at most eps/2 of a term
    # no larger than the largest |g| so far (m is a weighted sum of gradients with
    # weights summing to < 1; v the same for g**2). A moment that cancels down to
    # near zero keeps that absolute error, so rtol alone cannot hold for it:
    # e.g. float32 m = 0.7**3 * 1.5615 + 0.3 * -1.78125 = 0.00122, off by 6e-8.
    eps, scale = float(np.finfo(dtype).eps), 0.0
    for t, (idx, vals) in enumerate(schedule, start=1):
        g = coo(idx, vals, dim)
        sparse.step(g)
        dense.step(g.to_dense())
        touched = g.indices
        scale = max([scale, *np.abs(vals)])
        atol = 4 * t * eps * scale
        np.testing.assert_allclose(sparse.m[touched], dense.m[touched], rtol=rtol, atol=atol)
        np.testing.assert_allclose(sparse.v[touched], dense.v[touched], rtol=rtol, atol=atol * scale)


@given(st.integers(1, 15), st.sampled_from(DTYPES), st.sampled_from([LAZY, DORMANCY, DENSE]), st.sampled_from([0.0, 0.3]))
def test_touched_every_step_is_plain_adam_bit_for_bit(steps, dtype, mode, weight_decay):
    """Gap 1 everywhere: every mode is exactly dense Adam(W), bit for bit."""
    rng = np.random.default_rng(steps)
    p_sparse = rng.standard_normal(5).astype(dtype)
    p_dense = p_sparse.copy()
    sparse = so.SparseAdam(p_sparse, so.SparseAdamConfig(lr=0.05, mode=mode, weight_decay=weight_decay))
    dense = so.DenseAdam(p_dense, lr=0.05, weight_decay=weight_decay)
    for _ in range(steps):
        g = rng.standard_normal(5).astype(dtype)
        sparse.step(so.CooGradient(np.arange(5), g, 5))
        dense.step(g)
    np.testing.assert_array_equal(p_sparse, p_dense)
    np.testing.assert_array_equal(sparse.m, dense.m)
    np.testing.assert_array_equal(sparse.v, dense.v)


def make_optimizer(kind, params):
    table = params.ndim == 2
    if kind.startswith("sgd"):
        mode = "dense_equivalent" if kind == "sgd_dense_equivalent" else "lazy"
        cfg = so.SparseSgdConfig(lr=0.1, weight_decay=0.01, momentum=0.9, mode=mode)
        return (so.SparseSgdTable if table else so.SparseSgd)(params, cfg)
    if kind == "adagrad":
        cfg = so.SparseAdagradConfig(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)
        return (so.SparseAdagradTable if table else so.SparseAdagrad)(params, cfg)
    cfg = so.SparseAdamConfig(lr=0.05, beta1=0.8, beta2=0.95, mode=kind, weight_decay=0.1)
    return (so.SparseAdamTable if table else so.SparseAdam)(params, cfg)


KINDS = ["sgd", "sgd_dense_equivalent", "adagrad", "lazy", "dormancy_decay", "dense_equivalent"]


def state_arrays(opt):
    """The optimizer's per-coordinate state, each with the parameters' shape (last_step as the read-only view)."""
    names = ("m", "v", "sum", "momentum_buffer", "last_step")
    return {n: np.asarray(getattr(opt, n)) for n in names if getattr(opt, n, None) is not None}


@st.composite
def table_schedules(draw):
    rows, cols = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):  # an embedding lookup: complete rows
            n = draw(st.integers(0, 6))
            ids = draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n))
            grads = draw(st.lists(st.floats(-2, 2), min_size=n * cols, max_size=n * cols))
            steps.append(so.CsrGradient.from_rows(np.array(ids, dtype=np.int64), np.array(grads).reshape(n, cols), rows))
        else:  # arbitrary entries
            mask = draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
            lin = np.flatnonzero(mask)
            vals = draw(st.lists(st.floats(-2, 2), min_size=lin.size, max_size=lin.size))
            steps.append(so.CsrGradient.from_coo(so.CooGradient(lin, vals, rows * cols), (rows, cols)))
    return rows, cols, steps


@given(table_schedules(), st.sampled_from(KINDS), st.sampled_from(DTYPES))
def test_table_equals_flat_and_untouched_stay_bit_identical(schedule, kind, dtype):
    rows, cols, steps = schedule
    rng = np.random.default_rng(rows * 10 + cols)
    table = rng.standard_normal((rows, cols)).astype(dtype)
    flat = table.reshape(-1).copy()
    t_opt, f_opt = make_optimizer(kind, table), make_optimizer(kind, flat)
    for g in steps:
        before = table.copy()
        state_before = {k: v.copy() for k, v in state_arrays(t_opt).items()}
        t_opt.step(g)
        f_opt.step(g.to_coo())
        np.testing.assert_array_equal(table.reshape(-1), flat)
        untouched = np.ones(rows * cols, dtype=bool)
        untouched[g.to_coo().indices] = False
        assert np.array_equal(table.reshape(-1)[untouched], before.reshape(-1)[untouched])
        for name, old in state_before.items():
            new = state_arrays(t_opt)[name]
            assert new.shape == (rows, cols)
            assert np.array_equal(new.reshape(-1)[untouched], old.reshape(-1)[untouched])
    flat_state = state_arrays(f_opt)
    for name, value in state_arrays(t_opt).items():
        np.testing.assert_array_equal(value.reshape(-1), flat_state[name])


@pytest.mark.parametrize("table", [False, True])
def test_last_step_is_read_only(table):
    params = np.zeros((3, 2)) if table else np.zeros(6)
    opt = (so.SparseAdamTable if table else so.SparseAdam)(params)
    with pytest.raises(ValueError, match="read-only"):
        opt.last_step[0] = 1
    with pytest.raises(AttributeError):
        opt.last_step = np.zeros(params.shape, dtype=np.int64)


def test_table_keeps_one_last_step_per_row_and_splits_only_incomplete_rows():
    """Whole-row steps: one int64 per row (a broadcast view); an incomplete row is split until a step covers it again."""
    table = np.zeros((4, 3))
    opt = so.SparseAdamTable(table, so.SparseAdamConfig(mode=DORMANCY))
    opt.step(so.CsrGradient.from_rows(np.array([2, 0, 2]), np.ones((3, 3)), 4))
    assert opt.last_step.shape == (4, 3) and opt.last_step.dtype == np.int64
    assert opt.last_step.strides[1] == 0  # the row's value, seen in every column
    assert opt.last_step.tolist() == [[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]]
    partial = so.CsrGradient(np.array([0, 1, 1, 1, 1]), np.array([2]), np.array([0.5]), (4, 3))
    assert opt.state_dict()["last_step"].shape == (4,)  # the checkpoint: 8 bytes per row
    opt.step(partial)  # only entry (0, 2): row 0 is split, its entries keep their own steps
    assert opt.last_step.tolist() == [[1, 1, 2], [0, 0, 0], [1, 1, 1], [0, 0, 0]]
    state = opt.state_dict()  # the checkpoint: per row, plus the split row's own entries
    assert state["last_step"].tolist() == [2, 0, 1, 0] and state["last_step_split"].tolist() == [[1, 1, 2]]
    opt.step(so.CsrGradient.from_rows(np.array([0]), np.ones((1, 3)), 4))  # the whole row again: one step per row
    assert opt.last_step.tolist() == [[3, 3, 3], [0, 0, 0], [1, 1, 1], [0, 0, 0]]
    assert opt.last_step.strides[1] == 0 and opt.state_dict()["last_step"].shape == (4,)
    # a full (rows, cols) state whose rows each hold one step is stored per row again
    fresh = so.SparseAdamTable(np.zeros((4, 3)), so.SparseAdamConfig(mode=DORMANCY))
    state = {k: v for k, v in opt.state_dict().items() if not k.startswith("last_step_split")}
    fresh.load_state_dict({**state, "last_step": np.array(opt.last_step)})
    assert fresh.last_step.strides[1] == 0 and fresh.state_dict()["last_step"].shape == (4,)
    np.testing.assert_array_equal(fresh.last_step, opt.last_step)


def test_table_loaded_with_mixed_rows_decays_each_entry_by_its_own_gap():
    """After loading a state whose row mixes last steps, a whole-row step decays each entry from its own step."""
    cfg = so.SparseAdamConfig(lr=0.1, beta1=0.5, beta2=0.5, mode=DORMANCY)
    source = so.SparseAdamTable(np.zeros((1, 2)), cfg)
    source.step(so.CsrGradient.from_rows(np.array([0]), np.array([[1.0, 1.0]]), 1))  # t = 1: both entries
    source.step(so.CsrGradient(np.array([0, 1]), np.array([1]), np.array([1.0]), (1, 2)))  # t = 2: entry 1 only
    source.step(so.CsrGradient(np.array([0, 0]), np.array([], dtype=np.int64), np.array([]), (1, 2)))  # t = 3: empty
    loaded = so.SparseAdamTable(np.zeros((1, 2)), cfg)
    loaded.load_state_dict(source.state_dict())
    assert loaded.last_step.tolist() == [[1, 2]]
    m_before = loaded.m.copy()
    loaded.step(so.CsrGradient.from_rows(np.array([0]), np.array([[0.0, 0.0]]), 1))  # t = 4, gaps 3 and 2
    np.testing.assert_array_equal(loaded.m, m_before * np.array([[0.5**3, 0.5**2]]))
    assert loaded.last_step.tolist() == [[4, 4]]


@given(table_schedules(), st.sampled_from(KINDS), st.integers(0, 8))
def test_save_load_mid_run_is_bit_identical(schedule, kind, split):
    rows, cols, steps = schedule
    split = min(split, len(steps))
    reference = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) / 7
    resumed = reference.copy()
    ref_opt = make_optimizer(kind, reference)
    first = make_optimizer(kind, resumed)
    for g in steps[:split]:
        ref_opt.step(g)
        first.step(g)
    buffer = io.BytesIO()
    np.savez(buffer, **first.state_dict())
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        params = resumed.copy()
        second = make_optimizer(kind, params)
        second.load_state_dict(dict(loaded))
    for g in steps[split:]:
        ref_opt.step(g)
        second.step(g)
    np.testing.assert_array_equal(params, reference)
    assert second.step_count == ref_opt.step_count
    for name, value in ref_opt.state_dict().items():
        np.testing.assert_array_equal(second.state_dict()[name], value)


def test_dense_adam_save_load_continue():
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 4))
    a, b = np.ones(4), np.ones(4)
    opt_a = so.DenseAdam(a, lr=0.1)
    opt_b = so.DenseAdam(b, lr=0.1)
    for g in grads[:3]:
        opt_a.step(g)
        opt_b.step(g)
    c = b.copy()
    opt_c = so.DenseAdam(c, lr=0.1)
    opt_c.load_state_dict(opt_b.state_dict())
    for g in grads[3:]:
        opt_a.step(g)
        opt_c.step(g)
    np.testing.assert_array_equal(a, c)
    with pytest.raises(ValueError, match="does not match this optimizer's lr"):
        so.DenseAdam(np.ones(4), lr=0.2).load_state_dict(opt_a.state_dict())

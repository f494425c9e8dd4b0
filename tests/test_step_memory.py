"""What a step allocates is bounded by its gradient, never by the table (tracemalloc, no clocks).

The big tables are allocated (and their state written once) before tracing
starts, and the gradient is built before the traced step, so the traced peak is
exactly what ``step`` itself allocates. The optimizers update a gradient in
pieces of ``CHUNK_ENTRIES`` entries (the temporaries of one piece are reused for
the next); the piece size must never change a result, which the last test
checks bit for bit.
"""

import numpy as np
import pytest

import sparse_opt as so
import sparse_opt._sparse_base as sparse_base
from sparse_opt.demos.data import zipf_ids
from sparse_opt.demos.performance import measure_peak

ROWS, COLS = 2_000_000, 8
LAZY, DORMANCY = so.LazyAdamMode.LAZY, so.LazyAdamMode.DORMANCY_DECAY

#: A step may allocate at most this many times the bytes of its gradient's values ...
PEAK_PER_GRAD_BYTE = 8
#: ... plus this much for numpy/Python bookkeeping (index views, small objects).
PEAK_SLACK = 16 * 1024


def table_optimizer(kind, table):
    if kind == "sgd":
        opt = so.SparseSgdTable(table, so.SparseSgdConfig(lr=0.1, weight_decay=0.01, momentum=0.9))
        state = [opt.momentum_buffer]
    else:
        opt = so.SparseAdamTable(table, so.SparseAdamConfig(mode=kind))
        state = [opt.m, opt.v]  # last_step: one int64 per row, read-only
    for a in state:
        a.fill(0)  # map every page now: lazily zeroed memory is not the step's doing
    return opt


def lookup_gradient(num_rows, batch, seed):
    rng = np.random.default_rng(seed)
    ids = zipf_ids(num_rows, batch, 1.0, rng)
    return so.CsrGradient.from_rows(ids, rng.standard_normal((batch, COLS)).astype(np.float32), num_rows)


@pytest.fixture(scope="module")
def big_table():
    return np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)


@pytest.mark.parametrize("kind", [LAZY, DORMANCY, "sgd"], ids=["adam-lazy", "adam-dormancy", "sgd-momentum"])
def test_table_step_allocates_in_proportion_to_nnz_not_table(big_table, kind):
    opt = table_optimizer(kind, big_table)
    warm = lookup_gradient(ROWS, 512, seed=1)
    opt.step(warm)
    opt.step(warm)  # dormancy: rows touched twice in a row, and rows dormant since step 0
    peaks = {}
    for batch in (64, 512, 4096):
        grad = lookup_gradient(ROWS, batch, seed=batch)
        assert grad.full_rows and grad.values.dtype == np.float32
        grad_bytes = grad.nnz * grad.values.itemsize
        peak = measure_peak(lambda: opt.step(grad))
        assert peak <= PEAK_PER_GRAD_BYTE * grad_bytes + PEAK_SLACK, (batch, peak, grad_bytes)
        assert peak < big_table.nbytes / 100
        peaks[batch] = peak
    assert peaks[64] < peaks[512] < peaks[4096]


@pytest.mark.parametrize("kind", [LAZY, DORMANCY, "sgd"], ids=["adam-lazy", "adam-dormancy", "sgd-momentum"])
def test_same_gradient_same_allocations_on_a_100x_bigger_table(big_table, kind):
    """The peak is a function of the gradient: a table 100 times larger changes nothing."""
    small_rows = ROWS // 100
    grad_small = lookup_gradient(small_rows, 1024, seed=5)
    # the same ids and values, addressed in the big table
    grad_big = so.CsrGradient.from_rows(grad_small.touched_rows, grad_small.values.reshape(-1, COLS), ROWS)
    peaks = []
    for table, grad in ((big_table[:small_rows].copy(), grad_small), (big_table, grad_big)):
        opt = table_optimizer(kind, table)
        opt.step(grad)
        peaks.append(measure_peak(lambda: opt.step(grad)))
    assert abs(peaks[1] - peaks[0]) <= 1024, peaks


@pytest.mark.parametrize("mode", [LAZY, DORMANCY])
def test_flat_adam_step_allocates_in_proportion_to_nnz(mode):
    params = np.random.default_rng(1).standard_normal(ROWS * COLS).astype(np.float32)
    opt = so.SparseAdam(params, so.SparseAdamConfig(mode=mode))
    for a in (opt.m, opt.v):
        a.fill(0)
    rng = np.random.default_rng(2)
    for nnz in (100, 2_000, 20_000):
        grad = so.CooGradient.from_unsorted(rng.integers(0, params.size, nnz), rng.standard_normal(nnz), params.size)
        grad = so.CooGradient(grad.indices, grad.values.astype(np.float32), params.size)
        opt.step(grad)
        peak = measure_peak(lambda: opt.step(grad))
        grad_bytes = grad.nnz * 4
        # 1-D: numpy's take copies each piece's (read-only) int64 indices, and
        # DORMANCY_DECAY holds int64 last steps and gaps: 8 bytes each per entry
        assert peak <= 1.5 * PEAK_PER_GRAD_BYTE * grad_bytes + PEAK_SLACK, (nnz, peak, grad_bytes)
        assert peak < params.nbytes / 50


def test_partial_rows_step_allocates_in_proportion_to_nnz(big_table):
    """A CSR gradient with incomplete rows is addressed by linear index (int64 per entry)."""
    opt = table_optimizer(DORMANCY, big_table)
    rng = np.random.default_rng(3)
    rows = np.unique(rng.integers(0, ROWS, 3000))
    cols = rng.integers(0, COLS, rows.size)
    grad = so.CsrGradient.from_coo(
        so.CooGradient(rows * COLS + cols, rng.standard_normal(rows.size).astype(np.float32), ROWS * COLS), (ROWS, COLS)
    )
    assert not grad.full_rows
    opt.step(grad)
    peak = measure_peak(lambda: opt.step(grad))
    assert peak <= 2 * PEAK_PER_GRAD_BYTE * grad.nnz * 4 + PEAK_SLACK, peak


@pytest.mark.parametrize("chunk", [1, 3, 8, 50])
@pytest.mark.parametrize(
    "make",
    [
        lambda t: so.SparseAdamTable(t, so.SparseAdamConfig(lr=0.05, mode=LAZY)),
        lambda t: so.SparseAdamTable(t, so.SparseAdamConfig(lr=0.05, beta1=0.5, mode=DORMANCY, maximize=True)),
        lambda t: so.SparseSgdTable(t, so.SparseSgdConfig(lr=0.1, weight_decay=0.1, momentum=0.9, maximize=True)),
        lambda t: so.SparseSgdTable(t, so.SparseSgdConfig(lr=0.1)),
        lambda t: so.SparseAdam(t.reshape(-1), so.SparseAdamConfig(lr=0.05, mode=DORMANCY)),
        lambda t: so.SparseSgd(t.reshape(-1), so.SparseSgdConfig(lr=0.1, momentum=0.5)),
    ],
    ids=["adam-table-lazy", "adam-table-dormancy", "sgd-table-all", "sgd-table-plain", "adam-flat", "sgd-flat"],
)
def test_step_in_pieces_is_bit_identical_to_one_piece(monkeypatch, make, chunk):
    rows, cols = 40, 6
    rng = np.random.default_rng(4)
    table0 = rng.standard_normal((rows, cols)).astype(np.float32)
    grads = []
    for t in range(30):
        if t % 3 == 2:  # incomplete rows: the rows' entries end up with different last_step
            mask = rng.random((rows, cols)) < 0.2
            grads.append(so.CsrGradient.from_dense(np.where(mask, rng.standard_normal((rows, cols)), 0.0).astype(np.float32)))
        else:
            ids = zipf_ids(rows, 50, 1.0, rng)
            grads.append(so.CsrGradient.from_rows(ids, rng.standard_normal((50, cols)).astype(np.float32), rows))

    def run():
        table = table0.copy()
        opt = make(table)
        flat = opt.params.ndim == 1
        for g in grads:
            opt.step(g.to_coo() if flat else g)
        state = [getattr(opt, n) for n in ("m", "v", "last_step", "momentum_buffer") if getattr(opt, n, None) is not None]
        return [table.copy(), *[a.copy() for a in state]]

    whole = run()
    monkeypatch.setattr(sparse_base, "CHUNK_ENTRIES", chunk)
    pieces = run()
    for a, b in zip(whole, pieces):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()

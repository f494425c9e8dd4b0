"""What a step allocates is bounded by its gradient, never by the table (tracemalloc, no clocks).

The big tables (2e6 x 8 float32, 64 MB) are allocated, and their state written
once, before tracing starts, and each gradient is built before its traced
step, so the traced peak is exactly what ``step`` (or ``catch_up``) allocates.

Two kinds of check:

- *Scale independence*: the same gradient on a table 100 times larger gives the
  same peak (to ``2 * BOOKKEEPING_BYTES`` of numpy/Python bookkeeping). A
  step with any O(table) temporary fails this by megabytes. This is the precise O(table) detector.
- *A small multiple of the work*: the peak is at most :data:`WORDS_PER_UNIT`
  eight-byte temporaries per unit of work, a unit being one gradient entry or
  one entry of a touched row (``nnz + touched_rows * cols``), plus
  :data:`PEAK_SLACK`. DENSE_EQUIVALENT Adam's catch-up also keeps weight
  tables that depend on ``beta1``, ``beta2`` and the dtype only (never on the
  table): :data:`COASTING_SLACK`.

The first step with an incomplete row on a table (a row whose entries then hold
different ``last_step`` values) used to expand the per-row record to a
per-entry array of the table's shape: 128 MB for this table.
"""

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt.demos.data import zipf_ids

from memory_util import BOOKKEEPING_BYTES, measure_peak  # tests/memory_util.py: notebook 07's instrument

ROWS, COLS = 2_000_000, 8
SMALL_ROWS = ROWS // 100
LAZY, DORMANCY, DENSE = so.LazyMode.LAZY, so.LazyMode.DORMANCY_DECAY, so.LazyMode.DENSE_EQUIVALENT

#: Eight-byte temporaries a step may hold per unit of work (gradient entry, or entry of a touched row).
WORDS_PER_UNIT = 32
#: numpy/Python bookkeeping (index views, small objects) on top.
PEAK_SLACK = 64 * 1024
#: DENSE_EQUIVALENT Adam: the catch-up's weight tables, a constant of beta1, beta2 and the dtype.
COASTING_SLACK = 1024 * 1024
#: Two measurements of the same step (tables of different sizes) may each be off by BOOKKEEPING_BYTES.
SAME_PEAK = 2 * BOOKKEEPING_BYTES

KINDS = {
    "adam-lazy": lambda t: so.SparseAdamTable(t, so.SparseAdamConfig(mode=LAZY)),
    "adam-dormancy": lambda t: so.SparseAdamTable(t, so.SparseAdamConfig(mode=DORMANCY)),
    "adam-dense-equivalent": lambda t: so.SparseAdamTable(t, so.SparseAdamConfig(mode=DENSE, weight_decay=0.1)),
    "sgd-momentum": lambda t: so.SparseSgdTable(t, so.SparseSgdConfig(lr=0.1, weight_decay=0.01, momentum=0.9)),
    "sgd-dense-equivalent": lambda t: so.SparseSgdTable(
        t, so.SparseSgdConfig(lr=0.1, weight_decay=0.01, momentum=0.9, mode=DENSE)
    ),
    "adagrad": lambda t: so.SparseAdagradTable(t, so.SparseAdagradConfig()),
    "adagrad-rowwise": lambda t: so.SparseAdagradTable(t, so.SparseAdagradConfig(rowwise=True)),
}
CATCH_UP_KINDS = ["adam-dense-equivalent", "sgd-dense-equivalent"]


def table_optimizer(kind, table):
    opt = KINDS[kind](table)
    for name in ("m", "v", "momentum_buffer", "sum"):
        a = getattr(opt, name, None)
        if a is not None:
            a.fill(
                a.reshape(-1)[0]
            )  # map every page now (state is uniform): lazily zeroed memory is not the step's doing
    return opt


def slack(kind):
    return PEAK_SLACK + (COASTING_SLACK if kind == "adam-dense-equivalent" else 0)


def bound(kind, grad):
    units = grad.nnz + grad.touched_rows.size * COLS
    return 8 * WORDS_PER_UNIT * units + slack(kind)


def lookup_gradient(num_rows, batch, seed):
    rng = np.random.default_rng(seed)
    ids = zipf_ids(num_rows, batch, 1.0, rng)
    return so.CsrGradient.from_rows(ids, rng.standard_normal((batch, COLS)).astype(np.float32), num_rows)


def incomplete_rows_gradient(rows, num_rows, per_row, seed):
    """``per_row`` of the ``COLS`` entries of each of ``rows`` (ascending, unique): every touched row incomplete."""
    rng = np.random.default_rng(seed)
    cols = np.sort(np.argsort(rng.random((rows.size, COLS)), axis=1)[:, :per_row], axis=1)
    lin = (rows[:, None] * COLS + cols).reshape(-1)
    coo = so.CooGradient(lin, rng.standard_normal(lin.size).astype(np.float32), num_rows * COLS)
    return so.CsrGradient.from_coo(coo, (num_rows, COLS))


@pytest.fixture(scope="module")
def big_table():
    return np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)


@pytest.fixture(scope="module")
def small_table(big_table):
    return big_table[:SMALL_ROWS].copy()


def scenario(kind, table):
    """Peaks of a training sequence on ``table``, by label; rows in ``[0, SMALL_ROWS)`` so any table takes it.

    Embedding lookups of 64, 512 and 4096 ids; then the first step with
    incomplete rows (rows become split); another one (split rows among them);
    whole rows that reunite split rows; DENSE_EQUIVALENT: ``catch_up`` of 2000
    ids (repeats, any order, split rows among them).
    """
    opt = table_optimizer(kind, table)
    num_rows = table.shape[0]
    warm = lookup_gradient(SMALL_ROWS, 512, seed=1)
    warm = so.CsrGradient.from_rows(warm.touched_rows, warm.values.reshape(-1, COLS), num_rows)
    opt.step(warm)
    opt.step(warm)  # rows touched twice in a row, and rows dormant since step 0
    rows = np.unique(np.random.default_rng(3).integers(0, SMALL_ROWS, 3000))
    grads = {}
    for batch in (64, 512, 4096):
        g = lookup_gradient(SMALL_ROWS, batch, seed=batch)
        grads[f"lookup-{batch}"] = so.CsrGradient.from_rows(g.touched_rows, g.values.reshape(-1, COLS), num_rows)
    grads["first-incomplete"] = incomplete_rows_gradient(rows, num_rows, 3, seed=4)
    grads["incomplete-again"] = incomplete_rows_gradient(rows[::2], num_rows, 5, seed=5)
    grads["whole-rows-reunite"] = so.CsrGradient.from_rows(
        rows[1::3], np.ones((rows[1::3].size, COLS), np.float32), num_rows
    )
    peaks, units = {}, {}
    for label, grad in grads.items():
        assert grad.full_rows == (label.startswith("lookup") or label.startswith("whole"))
        peaks[label] = measure_peak(lambda: opt.step(grad))
        units[label] = grad.nnz + grad.touched_rows.size * COLS
    if kind in CATCH_UP_KINDS:
        opt.step(incomplete_rows_gradient(rows[1::2], num_rows, 2, seed=6))
        ids = np.random.default_rng(7).integers(0, SMALL_ROWS, 2000)
        peaks["catch-up"] = measure_peak(lambda: opt.catch_up(ids))
        units["catch-up"] = np.unique(ids).size * COLS
    return peaks, units


@pytest.mark.parametrize("kind", list(KINDS))
def test_step_allocates_o_nnz_never_o_table(big_table, small_table, kind):
    """Every step of :func:`scenario` on a 64 MB table peaks at a small multiple of its work, as on a table 100x smaller.

    In particular the first step with incomplete rows: before the fix it
    expanded ``last_step`` to a (rows, cols) int64 array, 128 MB here. Lookup
    peaks grow with the batch.
    """
    small, _ = scenario(kind, small_table.copy())
    big, units = scenario(kind, big_table)
    for label, peak in big.items():
        assert peak <= 8 * WORDS_PER_UNIT * units[label] + slack(kind), (label, peak, units[label])
        assert peak < big_table.nbytes / 10, (label, peak)  # the defect allocated twice the table
        assert abs(peak - small[label]) <= SAME_PEAK, (label, peak, small[label])
    assert big["lookup-64"] < big["lookup-512"] < big["lookup-4096"]


@pytest.mark.parametrize("mode", [LAZY, DORMANCY, DENSE])
def test_flat_adam_step_allocates_in_proportion_to_nnz(mode):
    """1-D SparseAdam over 16e6 coordinates: each step's peak is a small multiple of its nnz."""
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
        limit = 8 * WORDS_PER_UNIT * grad.nnz + (COASTING_SLACK if mode is DENSE else 0) + PEAK_SLACK
        assert peak <= limit, (nnz, peak, limit)
        assert peak < params.nbytes / 10


def test_state_dict_of_whole_row_table_is_8_bytes_per_row(big_table):
    """While steps update whole rows, a checkpoint's ``last_step`` is (rows,) int64: 16 MB here, not 128 MB."""
    opt = table_optimizer("adam-lazy", big_table)
    opt.step(lookup_gradient(ROWS, 512, seed=9))
    steps = opt.state_dict()["last_step"]
    assert steps.shape == (ROWS,) and steps.nbytes == 8 * ROWS

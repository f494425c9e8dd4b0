"""sparse_opt.demos.workload: the seeded table and batches every contender steps on."""

import numpy as np
import pytest

from sparse_opt.demos.workload import Workload, batch_workloads, nnz_of, rows_workloads

SMALL = Workload(rows=500, cols=4, batch=64, seed=3)


def test_workload_is_seeded_and_shaped():
    a, b = SMALL.batches(3), SMALL.batches(3)
    assert len(a) == 3
    for (ids, grads), (ids2, grads2) in zip(a, b):
        assert ids.dtype == np.int64 and ids.shape == (64,) and ids.min() >= 0 and ids.max() < 500
        assert grads.dtype == np.float32 and grads.shape == (64, 4)
        np.testing.assert_array_equal(ids, ids2)
        np.testing.assert_array_equal(grads, grads2)
    t = SMALL.table()
    assert t.shape == (500, 4) and t.dtype == np.float32 and t.flags.c_contiguous
    np.testing.assert_array_equal(t, SMALL.table())
    assert SMALL.table_bytes == 500 * 4 * 4 and SMALL.itemsize == 4
    assert Workload(10, dtype="float64").table().dtype == np.float64
    # repeats, as an embedding lookup has them (Zipf: row 0 is the most popular)
    assert np.unique(a[0][0]).size < 64


def test_other_seeds_give_other_data_and_batches_do_not_depend_on_count():
    other = Workload(rows=500, cols=4, batch=64, seed=4)
    assert not np.array_equal(SMALL.batches(1)[0][0], other.batches(1)[0][0])
    assert not np.array_equal(SMALL.table(), other.table())
    first, second = SMALL.batches(1)[0], SMALL.batches(2)[1]
    assert not np.array_equal(first[0], second[0])  # the second batch is not the first again


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rows": 0}, "rows must be positive"), ({"rows": 5, "dtype": "float16"}, "dtype"), ({"rows": 5, "batch": -1}, "batch")],
)
def test_workload_refuses_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Workload(**kwargs)


def test_nnz_of_counts_distinct_rows_times_cols():
    ids = np.array([3, 1, 3, 3])
    assert nnz_of(SMALL, [(ids, None), (np.array([0, 1, 2, 3]), None)]) == (2 * 4 + 4 * 4) / 2
    assert nnz_of(SMALL, []) == 0.0


def test_sweep_workloads_change_one_size_only():
    by_rows = rows_workloads(SMALL, [100, 1000])
    assert [w.rows for w in by_rows] == [100, 1000]
    assert {(w.cols, w.batch, w.skew, w.seed) for w in by_rows} == {(4, 64, 1.0, 3)}
    by_batch = batch_workloads(SMALL, [8, 32])
    assert [w.batch for w in by_batch] == [8, 32] and {w.rows for w in by_batch} == {500}

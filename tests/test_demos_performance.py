"""sparse_opt.demos.performance: workloads, contenders, memory numbers and result shapes (no clocks asserted)."""

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos import performance as perf
from sparse_opt.demos.performance import StepMemory, StepTiming, Workload

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


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rows": 0}, "rows must be positive"), ({"rows": 5, "dtype": "float16"}, "dtype"), ({"rows": 5, "batch": -1}, "batch")],
)
def test_workload_refuses_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Workload(**kwargs)


def test_nnz_of_counts_distinct_rows_times_cols():
    ids = np.array([3, 1, 3, 3])
    assert perf.nnz_of(SMALL, [(ids, None), (np.array([0, 1, 2, 3]), None)]) == (2 * 4 + 4 * 4) / 2


def test_sparse_opt_contenders_update_only_touched_rows():
    contenders = perf.sparse_opt_contenders()
    assert [c.name for c in contenders] == [
        "SparseAdamTable LAZY",
        "SparseAdamTable DORMANCY_DECAY",
        "SparseSgdTable momentum",
        "DenseAdam",
    ]
    assert [c.dense for c in contenders] == [False, False, False, True]
    ids, grads = SMALL.batches(1)[0]
    for c in contenders:
        table = SMALL.table()
        before = table.copy()
        stepper = c.make(table)
        stepper.step(ids, grads)
        moved = np.flatnonzero((table != before).any(axis=1))
        np.testing.assert_array_equal(moved, np.unique(ids))  # every touched row moves, no other
    assert [c.name for c in perf.sparse_opt_contenders(dense=False)][-1] == "SparseSgdTable momentum"


def test_sparse_opt_contender_matches_the_optimizer_used_directly():
    batches = SMALL.batches(4)
    table = SMALL.table()
    stepper = perf.sparse_opt_contenders()[1].make(table)
    reference = SMALL.table()
    opt = so.SparseAdamTable(reference, so.SparseAdamConfig(mode="dormancy_decay"))
    for ids, grads in batches:
        stepper.step(ids, grads)
        opt.step(so.CsrGradient.from_rows(ids, grads, SMALL.rows))
    assert table.tobytes() == reference.tobytes()


def test_torch_contenders_are_empty_without_torch(monkeypatch):
    monkeypatch.setattr(perf.importlib.util, "find_spec", lambda name: None)
    assert perf.load_torch() is None
    assert perf.torch_contenders() == []


@pytest.mark.parametrize(
    ("index", "dtype", "expected"),
    [(0, "float32", 8.125), (1, "float32", 8.125), (2, "float32", 4.0), (3, "float32", 8.0), (0, "float64", 16.125), (2, "float64", 8.0)],
)
def test_state_bytes_per_param(index, dtype, expected):
    """Adam: m and v in the parameters' dtype plus one int64 last_step per row of 64; SGD: one buffer; DenseAdam: m, v."""
    assert perf.state_bytes_per_param(perf.sparse_opt_contenders()[index], dtype=dtype) == expected
    assert perf.state_bytes_per_param(perf.sparse_opt_contenders()[index], cols=4, dtype=dtype) == expected + (
        8 / 4 - 8 / 64 if index < 2 else 0.0
    )


def test_held_bytes_counts_broadcast_data_once():
    rows = np.arange(5, dtype=np.int64)
    assert perf.held_bytes(np.zeros((5, 3))) == 5 * 3 * 8
    assert perf.held_bytes(np.broadcast_to(rows[:, None], (5, 64))) == 5 * 8
    assert perf.held_bytes(np.broadcast_to(rows, (7, 5))) == 5 * 8
    assert perf.held_bytes(np.zeros((0, 4))) == 0


def test_time_steps_returns_one_timing_per_run_in_order():
    contenders = perf.sparse_opt_contenders(dense=False)[:2]
    runs = [(c, w) for c in contenders for w in perf.rows_workloads(SMALL, [200, 400])]
    timings = perf.time_steps(runs, repeats=4, warmup=1, num_batches=3)
    assert [(t.contender, t.workload.rows) for t in timings] == [(c.name, w.rows) for c, w in runs]
    for t in timings:
        assert len(t.seconds) == 4 and all(s > 0 for s in t.seconds)
        assert 0 < t.nnz <= SMALL.batch * SMALL.cols
        q1, q3 = t.quartiles_ms
        assert q1 <= t.median_ms <= q3
    with pytest.raises(ValueError, match="num_batches"):
        perf.time_steps(runs, num_batches=0)


def test_sweeps_cover_every_contender_and_size():
    contenders = perf.sparse_opt_contenders(dense=False)
    by_rows = perf.rows_sweep(contenders, SMALL, [100, 1000], repeats=2, warmup=0)
    assert sorted((t.contender, t.workload.rows) for t in by_rows) == sorted(
        (c.name, r) for c in contenders for r in (100, 1000)
    )
    by_batch = perf.batch_sweep(contenders[:1], SMALL, [8, 32], repeats=2, warmup=0)
    assert [t.workload.batch for t in by_batch] == [8, 32]
    assert all(t.workload.rows == SMALL.rows for t in by_batch)


def test_measure_peak_with_repeats_keeps_the_smallest_peak():
    sizes = iter([300_000, 100_000, 200_000])
    peak = perf.measure_peak(lambda: np.ones(next(sizes)), repeats=3)
    assert 800_000 <= peak < 1_600_000  # 100,000 float64, not 300,000
    with pytest.raises(StopIteration):
        next(sizes)


def test_measure_peak_counts_what_the_function_allocates_and_restores_tracing():
    assert perf.measure_peak(lambda: np.ones(100_000)) >= 800_000
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        assert 80_000 <= perf.measure_peak(lambda: np.ones(10_000)) < 800_000
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_step_memory_is_deterministic_and_proportional_to_nnz():
    base = Workload(rows=200_000, cols=8, batch=256, seed=1)
    contender = perf.sparse_opt_contenders()[1]
    first, second = perf.step_memory(contender, base), perf.step_memory(contender, base)
    assert replace(first, step_peak=0, total_peak=0) == replace(second, step_peak=0, total_peak=0)
    assert abs(first.step_peak - second.step_peak) <= BOOKKEEPING_BYTES
    assert abs(first.total_peak - second.total_peak) <= BOOKKEEPING_BYTES
    assert first.nnz == first.grad_bytes // 4 and first.nnz % 8 == 0
    assert 0 < first.step_ratio < 8 and first.step_peak < base.table_bytes / 100
    assert first.total_peak >= first.step_peak  # building the gradient too
    assert first.state_bytes_per_param == 4 + 4 + 8 / 8  # m, v and one int64 last_step per row of 8
    bigger = perf.step_memory(contender, Workload(rows=200_000, cols=8, batch=1024, seed=1))
    assert bigger.nnz > first.nnz and bigger.step_peak > first.step_peak
    with pytest.raises(ValueError, match="tracemalloc"):
        perf.step_memory(perf.Contender("x", "torch", False, lambda t: None), base)


#: Bytes two measurements of the same step may differ by: numpy's cache of small
#: dimension/stride blocks and Python's free lists keep freed blocks that
#: tracemalloc still counts (see measure_peak). Array buffers add up exactly.
BOOKKEEPING_BYTES = 1024


def test_same_gradient_same_peak_on_any_table_but_dense_grows():
    workload = Workload(rows=1_000, cols=8, batch=128, seed=2)
    for contender in perf.sparse_opt_contenders(dense=False):
        small, large = perf.step_peaks_on_tables(contender, workload, [1_000, 100_000])
        assert small > 0 and abs(small - large) <= BOOKKEEPING_BYTES
    small, large = perf.step_peaks_on_tables(perf.sparse_opt_contenders()[3], workload, [1_000, 100_000])
    assert large > 50 * small  # DenseAdam: table-sized temporaries
    with pytest.raises(ValueError, match="would not fit"):
        perf.step_peaks_on_tables(perf.sparse_opt_contenders()[0], workload, [10])


def test_machine_info_and_formatting():
    info = perf.machine_info()
    for key in ("cpu", "logical cpus", "numpy", "torch", "OPENBLAS_CORETYPE", "load average (1, 5, 15 min)"):
        assert key in info
    assert info["numpy"] == np.__version__
    text = perf.format_machine_info(info)
    assert text.count("\n") == len(info) - 1
    t = StepTiming("torch SparseAdam", SMALL, 100.0, (0.002, 0.004, 0.006))
    u = StepTiming("mine", SMALL, 100.0, (0.001, 0.002, 0.003))
    table = perf.format_timings([u, t])
    assert "speed-up vs torch SparseAdam" in table and "2.00x" in table and "1.00x" in table
    assert "speed-up" not in perf.format_timings([u], reference=None)
    m = StepMemory("mine", SMALL, 1000, 8000, 12000, 3200)
    line = perf.format_memory([m]).splitlines()[-1]
    assert "8,000" in line and "2.00" in line and "3.00" in line and "1.60" in line


def test_plots_return_figures_with_one_line_per_contender():
    timings = [
        StepTiming(name, replace(SMALL, rows=r, batch=b), nnz, (0.001 * k,))
        for k, (name, r, b, nnz) in enumerate(
            [("a", 100, 8, 32.0), ("a", 1000, 8, 32.0), ("b", 100, 8, 32.0), ("b", 1000, 8, 32.0)], start=1
        )
    ]
    fig = perf.plot_rows_sweep(timings)
    assert isinstance(fig, Figure) and len(fig.axes) == 1 and len(fig.axes[0].lines) == 2
    fig = perf.plot_batch_sweep(timings)
    assert len(fig.axes[0].lines) == 3  # two contenders and the slope-1 guide
    points = [StepMemory("a", SMALL, n, 4 * n, 4 * n, 0) for n in (10, 100)]
    fig = perf.plot_memory(points)
    assert len(fig.axes[0].lines) == 2  # the contender and the table's size

"""sparse_opt.demos.memory: byte counts of steps and of optimizer state (tracemalloc, no clocks)."""

import math
import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
from memory_util import same_peak

from sparse_opt.demos import memory as mem
from sparse_opt.demos.contenders import (
    DENSE_ADAM,
    DENSE_EQUIVALENT_ADAM,
    DORMANCY_ADAM,
    LAZY_ADAM,
    MOMENTUM_SGD,
    Contender,
    select,
    sparse_opt_contenders,
)
from sparse_opt.demos.memory import StepMemory
from sparse_opt.demos.workload import Workload

SMALL = Workload(rows=500, cols=4, batch=64, seed=3)


def contender(name):
    return select(sparse_opt_contenders(), name)[0]


def test_measure_peak_with_repeats_keeps_the_smallest_peak():
    sizes = iter([300_000, 100_000, 200_000])
    peak = mem.measure_peak(lambda: np.ones(next(sizes)), repeats=3)
    assert 800_000 <= peak < 1_600_000  # 100,000 float64, not 300,000
    with pytest.raises(StopIteration):
        next(sizes)


def test_measure_peak_counts_what_the_function_allocates_and_restores_tracing():
    assert mem.measure_peak(lambda: np.ones(100_000)) >= 800_000
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        assert 80_000 <= mem.measure_peak(lambda: np.ones(10_000)) < 800_000
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_held_bytes_counts_broadcast_data_once():
    rows = np.arange(5, dtype=np.int64)
    assert mem.held_bytes(np.zeros((5, 3))) == 5 * 3 * 8
    assert mem.held_bytes(np.broadcast_to(rows[:, None], (5, 64))) == 5 * 8
    assert mem.held_bytes(np.broadcast_to(rows, (7, 5))) == 5 * 8
    assert mem.held_bytes(np.zeros((0, 4))) == 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cols", [64, 4])
def test_state_bytes_per_param(dtype, cols):
    """Adam, every mode: m and v in the parameters' dtype plus one int64 last_step per row; SGD: one buffer; DenseAdam: m, v."""
    size = np.dtype(dtype).itemsize
    expected = {
        LAZY_ADAM: 2 * size + 8 / cols,
        DORMANCY_ADAM: 2 * size + 8 / cols,
        DENSE_EQUIVALENT_ADAM: 2 * size + 8 / cols,
        MOMENTUM_SGD: size,
        DENSE_ADAM: 2 * size,
    }
    got = {c.name: mem.state_bytes_per_param(c, cols=cols, dtype=dtype) for c in sparse_opt_contenders()}
    assert got == expected


def test_step_memory_is_deterministic_and_proportional_to_nnz():
    base = Workload(rows=200_000, cols=8, batch=256, seed=1)
    dormancy = contender(DORMANCY_ADAM)
    first, second = mem.step_memory(dormancy, base), mem.step_memory(dormancy, base)
    assert replace(first, step_peak=0, total_peak=0) == replace(second, step_peak=0, total_peak=0)
    assert same_peak(first.step_peak, second.step_peak) and same_peak(first.total_peak, second.total_peak)
    ids = base.batches(4)[3][0]
    assert first.nnz == np.unique(ids).size * 8 and first.grad_bytes == 4 * first.nnz
    assert first.step_ratio == first.step_peak / first.grad_bytes
    assert first.step_peak < base.table_bytes / 100  # nowhere near the table
    assert first.total_peak >= first.step_peak  # building the gradient too
    assert first.state_bytes_per_param == 4 + 4 + 8 / 8  # m, v and one int64 last_step per row of 8
    bigger = mem.step_memory(dormancy, replace(base, batch=1024))
    assert bigger.nnz > first.nnz and bigger.step_peak > first.step_peak
    assert not first.dense and mem.step_memory(contender(DENSE_ADAM), replace(base, rows=1000)).dense
    with pytest.raises(ValueError, match="tracemalloc"):
        mem.step_memory(Contender("x", "torch", False, lambda t: None), base)


def test_same_gradient_same_peak_on_any_table_but_dense_grows():
    workload = Workload(rows=1_000, cols=8, batch=128, seed=2)
    for c in sparse_opt_contenders(dense=False):
        small, large = mem.step_peaks_on_tables(c, workload, [1_000, 100_000])
        assert small > 0 and same_peak(small, large), c.name
    small, large = mem.step_peaks_on_tables(contender(DENSE_ADAM), workload, [1_000, 100_000])
    assert same_peak(small, large)  # DenseAdam computes in the work arrays it keeps (see the kept bytes below)
    with pytest.raises(ValueError, match="would not fit"):
        mem.step_peaks_on_tables(contender(LAZY_ADAM), workload, [10])


def test_kept_bytes_is_the_state_and_dense_equivalent_adds_a_constant():
    small, large = Workload(rows=2_000, cols=8, batch=64), Workload(rows=40_000, cols=8, batch=64)
    for name in (LAZY_ADAM, MOMENTUM_SGD, DENSE_ADAM):
        c = contender(name)
        for w in (small, large):
            state = mem.state_bytes_per_param(c, cols=w.cols) * w.rows * w.cols
            if name == DENSE_ADAM:
                state += 2 * w.table_bytes  # DenseAdam's two work arrays
            assert 0 <= mem.kept_bytes(c, w) - state <= 16 * 1024, (name, w.rows)  # the state, and a few KiB of objects
    de, dd = contender(DENSE_EQUIVALENT_ADAM), contender(DORMANCY_ADAM)
    extra_small = mem.kept_bytes(de, small) - mem.kept_bytes(dd, small)
    extra_large = mem.kept_bytes(de, large) - mem.kept_bytes(dd, large)
    assert extra_small > 64 * 1024  # the catch-up's weights by global step ...
    assert abs(extra_large - extra_small) < 0.02 * extra_small  # ... whatever the table
    with pytest.raises(ValueError, match="tracemalloc"):
        mem.kept_bytes(Contender("x", "torch", False, lambda t: None), small)


def test_format_memory_prints_bytes_and_ratios():
    m = StepMemory("mine", SMALL, 1000, 8000, 12000, 3200)
    assert m.step_ratio == 2.0 and m.total_ratio == 3.0 and m.state_bytes_per_param == 1.6
    line = mem.format_memory([m]).splitlines()[-1]
    assert line.split() == ["mine", "500", "64", "1,000", "4,000", "8,000", "2.00", "12,000", "3.00", "8,000", "1.600"]
    assert StepMemory("empty", SMALL, 0, 10, 10, 0).step_ratio == 0.0


def test_in_fresh_process_returns_what_the_function_returns_there():
    workload = Workload(rows=2_000, cols=8, batch=64, seed=1)
    lazy = contender(LAZY_ADAM)
    here = mem.step_memory(lazy, workload)
    (there,) = mem.in_fresh_process(mem.step_memories, [lazy], [workload])
    assert replace(there, step_peak=0, total_peak=0) == replace(here, step_peak=0, total_peak=0)
    assert same_peak(there.step_peak, here.step_peak)
    again = mem.in_fresh_process(mem.peaks_by_table, [lazy], workload, [2_000])
    assert again == mem.in_fresh_process(mem.peaks_by_table, [lazy], workload, [2_000])  # exactly: nothing else runs there
    with pytest.raises(RuntimeError, match="factorial failed in a fresh process(.|\n)*ValueError"):
        mem.in_fresh_process(math.factorial, -1)


def test_the_contenders_pickle_and_step_alike_after():
    import pickle

    ids, grads = SMALL.batches(1)[0]
    for c in sparse_opt_contenders():
        copy = pickle.loads(pickle.dumps(c))
        a, b = SMALL.table(), SMALL.table()
        c.make(a).step(ids, grads)
        copy.make(b).step(ids, grads)
        assert copy.name == c.name and a.tobytes() == b.tobytes()

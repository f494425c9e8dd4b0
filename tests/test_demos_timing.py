"""sparse_opt.demos.timing: which steps are timed, in which order, on which data (no clock is asserted)."""

import numpy as np
import pytest

from sparse_opt.demos import timing as tm
from sparse_opt.demos.contenders import DORMANCY_ADAM, LAZY_ADAM, Contender, Stepper, select, sparse_opt_contenders
from sparse_opt.demos.timing import StepTiming
from sparse_opt.demos.workload import Workload, nnz_of, rows_workloads

SMALL = Workload(rows=500, cols=4, batch=64, seed=3)


def logging_contender(name, log, dense=False):
    """A contender whose steps only record (its name, the first id of the batch, whether the step is timed)."""

    def make(table):
        return Stepper(lambda ids, g: (name, int(ids[0])), log.append, lambda: [])

    return Contender(name, "sparse_opt", dense, make)


def test_runs_take_turns_each_round_starting_one_further():
    log = []
    runs = [(logging_contender(n, log), SMALL) for n in "abc"]
    timings = tm.time_steps(runs, repeats=4, warmup=2, num_batches=3)
    warm, timed = log[:6], log[6:]
    assert [n for n, _ in warm] == ["a", "a", "b", "b", "c", "c"]
    assert [n for n, _ in timed] == list("abc" "bca" "cab" "abc")
    assert [t.contender for t in timings] == ["a", "b", "c"]
    assert all(len(t.seconds) == 4 for t in timings)
    first_ids = [int(ids[0]) for ids, _ in SMALL.batches(3)]
    # after 2 warm-up steps, batches 2, 0, 1, 2 of the 3
    assert [i for n, i in timed if n == "a"] == [first_ids[b] for b in (2, 0, 1, 2)]


def test_dense_runs_step_on_rounds_spread_over_the_run():
    log = []
    runs = [(logging_contender("lazy", log), SMALL), (logging_contender("dense", log, dense=True), SMALL)]
    timings = tm.time_steps(runs, repeats=6, warmup=3, num_batches=4, dense_repeats=2, dense_warmup=1)
    names = [n for n, _ in log]
    assert names[:4] == ["lazy"] * 3 + ["dense"]  # the warm-up steps
    # dense steps on rounds 1 and 4 of 0..5 (spread_rounds(2, 6)); on odd rounds the second run goes first
    assert names[4:] == ["lazy", "dense", "lazy", "lazy", "lazy", "lazy", "dense", "lazy"]
    assert tm.spread_rounds(2, 6) == [1, 4]
    assert [len(t.seconds) for t in timings] == [6, 2]
    assert [t.dense for t in timings] == [False, True]
    first_ids = [int(ids[0]) for ids, _ in SMALL.batches(4)]
    assert [i for n, i in log[4:] if n == "dense"] == [first_ids[1], first_ids[2]]  # its own batches, after its warm-up


def test_spread_rounds_are_even_and_checked():
    assert tm.spread_rounds(5, 300) == [30, 90, 150, 210, 270]
    assert tm.spread_rounds(1, 1) == [0]
    with pytest.raises(ValueError, match="count"):
        tm.spread_rounds(4, 3)
    with pytest.raises(ValueError, match="count"):
        tm.time_steps([], repeats=2, dense_repeats=3)


def test_time_steps_reports_the_nnz_of_the_batches_it_timed():
    contenders = sparse_opt_contenders(dense=False)[:2]
    runs = [(c, w) for c in contenders for w in rows_workloads(SMALL, [200, 400])]
    timings = tm.time_steps(runs, repeats=4, warmup=1, num_batches=3)
    assert [(t.contender, t.workload.rows) for t in timings] == [(c.name, w.rows) for c, w in runs]
    for t in timings:
        batches = t.workload.batches(3)
        assert len(t.seconds) == 4
        assert t.nnz == nnz_of(t.workload, [batches[b] for b in (1, 2, 0, 1)])
    with pytest.raises(ValueError, match="num_batches"):
        tm.time_steps(runs, num_batches=0)


def test_sweeps_cover_every_contender_and_size():
    contenders = sparse_opt_contenders(dense=False)
    by_rows = tm.rows_sweep(contenders, SMALL, [100, 1000], repeats=2, warmup=0)
    assert sorted((t.contender, t.workload.rows) for t in by_rows) == sorted(
        (c.name, r) for c in contenders for r in (100, 1000)
    )
    by_batch = tm.batch_sweep(contenders[:1], SMALL, [8, 32], repeats=2, warmup=0)
    assert [t.workload.batch for t in by_batch] == [8, 32]
    assert all(t.workload.rows == SMALL.rows for t in by_batch)


def test_median_and_quartiles_in_milliseconds():
    t = StepTiming("a", SMALL, 1.0, (0.004, 0.001, 0.003, 0.002, 0.005))
    assert t.median_ms == pytest.approx(3.0)
    assert t.quartiles_ms == pytest.approx((2.0, 4.0))


def test_speedup_reads_one_workload_and_refuses_ambiguity():
    other = Workload(rows=900, cols=4, batch=64)
    timings = [
        StepTiming("mine", SMALL, 1.0, (0.001,)),
        StepTiming("ref", SMALL, 1.0, (0.004,)),
        StepTiming("mine", other, 1.0, (0.002,)),
    ]
    assert tm.speedup(timings, "mine", "ref") == pytest.approx(4.0)
    assert tm.speedup(timings, "ref", "mine") == pytest.approx(0.25)
    timings.append(StepTiming("ref", other, 1.0, (0.001,)))
    with pytest.raises(ValueError, match="share 2 workloads"):
        tm.speedup(timings, "mine", "ref")
    assert tm.speedup(timings, "mine", "ref", workload=other) == pytest.approx(0.5)
    with pytest.raises(KeyError, match="nobody"):
        tm.speedup(timings, "nobody", "ref", workload=other)


def test_format_timings_has_a_ratio_column_only_with_a_reference():
    t = StepTiming("torch SparseAdam", SMALL, 100.0, (0.002, 0.004, 0.006))
    u = StepTiming("mine", SMALL, 100.0, (0.001, 0.002, 0.003))
    table = tm.format_timings([u, t], reference="torch SparseAdam")
    assert "speed-up vs torch SparseAdam" in table and "2.00x" in table and "1.00x" in table
    assert "speed-up" not in tm.format_timings([u, t])
    assert "speed-up" not in tm.format_timings([u], reference="torch SparseAdam")
    line = table.splitlines()[2]
    assert line.split()[:5] == ["mine", "500", "64", "100", "2.000"]


def test_time_catch_up_brings_blocks_current_after_exactly_their_gap(monkeypatch):
    seen = []
    original = tm.SparseAdamTable.catch_up

    def spy(self, index=None):
        seen.append((self.step_count, int(self.last_step[index[0], 0]), len(index)))
        original(self, index)
        assert (self.last_step[index] == self.step_count).all()

    monkeypatch.setattr(tm.SparseAdamTable, "catch_up", spy)
    timings = tm.time_catch_up([1, 7], rows=16, cols=2, repeats=3, warmup=1)
    assert [(t.gap, t.rows, t.cols, len(t.seconds)) for t in timings] == [(1, 16, 2, 3), (7, 16, 2, 3)]
    assert len(seen) == 2 * (1 + 3)
    assert {(count - last, size) for count, last, size in seen} == {(1, 16), (7, 16)}
    t = timings[0]
    assert t.ns_per_entry == pytest.approx(1e9 * np.median(t.seconds) / 32)
    with pytest.raises(ValueError, match="gap"):
        tm.time_catch_up([0])


def test_time_full_catch_up_brings_the_whole_dormant_table_current_each_time(monkeypatch):
    seen = []
    original = tm.SparseAdamTable.catch_up

    def spy(self, index=None):
        assert index is None  # the whole table, as before an export
        seen.append((self.step_count, int(self.last_step.min()), int(self.last_step.max()), float(self.params[0, 0])))
        original(self, index)
        assert (self.last_step == self.step_count).all()

    monkeypatch.setattr(tm.SparseAdamTable, "catch_up", spy)
    timings = tm.time_full_catch_up([3, 50], rows=10, cols=4, repeats=2)
    assert [(t.gap, t.rows, t.cols, len(t.seconds)) for t in timings] == [(3, 10, 4, 2), (50, 10, 4, 2)]
    # per gap: one untimed catch-up, then the two timed ones, each from the same dormant table (last step 1)
    assert len(seen) == 2 * (1 + 2)
    for gap in (3, 50):
        calls = [c for c in seen if c[0] == 1 + gap]
        assert len(calls) == 3 and {c[1:3] for c in calls} == {(1, 1)} and len({c[3] for c in calls}) == 1
    t = timings[1]
    assert t.ns_per_entry == pytest.approx(1e9 * np.median(t.seconds) / 40)
    with pytest.raises(ValueError, match="gap"):
        tm.time_full_catch_up([0], rows=4, cols=2)
    with pytest.raises(ValueError, match="positive"):
        tm.time_full_catch_up([1], rows=4, cols=2, repeats=0)


def test_us_per_1000_entries():
    t = StepTiming("a", Workload(rows=10), 2000.0, (0.001, 0.003, 0.002))
    assert t.us_per_1000_entries == pytest.approx(1000.0)  # a median of 2 ms over 2000 entries: 1 ms per 1000


def test_time_steps_of_real_contenders_leaves_nothing_behind():
    """The optimizers and tables of a run are freed when it returns (sweeps rely on it for memory)."""
    import gc
    import weakref

    refs = []
    lazy, dormancy = select(sparse_opt_contenders(), LAZY_ADAM, DORMANCY_ADAM)

    def tracked(c):
        def make(table):
            stepper = c.make(table)
            refs.append(weakref.ref(stepper.optimizer))
            return stepper

        return Contender(c.name, c.library, c.dense, make)

    tm.time_steps([(tracked(lazy), SMALL), (tracked(dormancy), SMALL)], repeats=2, warmup=1)
    gc.collect()
    assert len(refs) == 2 and all(r() is None for r in refs)

"""sparse_opt.demos.low_precision: the functions behind notebook 10, on small problems."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

import sparse_opt as so
from sparse_opt.demos import divergence as dv
from sparse_opt.demos import low_precision as lp

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.fixture(scope="module")
def problem() -> dv.Problem:
    return dv.make_problem(seeds=(0, 1), num_rows=60, dim=4, num_steps=120, batch_size=16, num_valid=256, num_test=256)


def test_gap_above_is_the_spacing_away_from_zero():
    values = np.array([1.0, 0.1, 1000.0, -3.0, 2.0**-24, 0.0])
    assert np.array_equal(lp.gap_above(values, np.float16), np.spacing(np.abs(values).astype(np.float16)).astype(np.float64))
    assert lp.gap_above(np.array([1.0, 3.0]), ml_dtypes.bfloat16).tolist() == [2.0**-7, 2.0**-6]


def test_precisions_with_and_without_bf16():
    assert [p.name for p in lp.precisions(False)] == ["float32", "fp16 nearest", "fp16 stochastic"]
    both = lp.precisions(True)
    assert [p.dtype for p in both] == ["float32", "float16", "float16", "bfloat16", "bfloat16"]
    assert both[-1].numpy_dtype() == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("fraction", [0.3, 0.49])
def test_round_to_nearest_loses_every_update_below_half_a_gap(fraction):
    gap = 2.0**-10
    values = lp.repeated_updates(1.0, fraction * gap, 50, lp.FP16_NEAREST)
    assert values.shape == (51, 1) and np.all(values == 1.0)


def test_round_to_nearest_keeps_an_update_above_half_a_gap():
    gap = 2.0**-10
    values = lp.repeated_updates(1.0, 0.51 * gap, 5, lp.FP16_NEAREST)
    assert np.array_equal(values[:, 0], 1.0 + gap * np.arange(6))


def test_stochastic_rounding_is_right_on_average_and_one_gap_per_step_at_most():
    gap, steps, copies = 2.0**-10, 100, 4000
    values = lp.repeated_updates(1.0, 0.25 * gap, steps, lp.FP16_STOCHASTIC, copies=copies, seed=3)
    moves = np.diff(values, axis=0) / gap
    assert set(np.unique(moves).tolist()) == {0.0, 1.0}
    total = (values[-1] - 1.0) / gap
    sd = np.sqrt(steps * 0.25 * 0.75)
    assert abs(total.mean() - 25.0) < 5 * sd / np.sqrt(copies)
    assert 0.9 < total.std() / sd < 1.1
    again = lp.repeated_updates(1.0, 0.25 * gap, steps, lp.FP16_STOCHASTIC, copies=copies, seed=3)
    assert np.array_equal(values, again)  # seeded


def test_coasting_without_a_gap_rounds_the_same_writes():
    c = lp.coasting(0.5, [0.1, -0.05, 0.2], gap=0, copies=10)
    assert c.dense_nearest == c.dense_equivalent  # every step is a touch: one rounding per step in both
    assert c.stalled_at == 0


def test_coasting_dense_stalls_and_the_catch_up_rounds_once():
    c = lp.coasting(0.5, [0.1] * 5, gap=200, copies=500, seed=1)
    gap = lp.gap_above(np.array([c.exact]), np.float16)[0]
    reference = np.full((1, 1), np.float32(np.float16(0.5)))
    opt = so.DenseAdam(reference, lr=0.01, beta1=0.9, beta2=0.99)
    for k in range(205):
        opt.step(np.full((1, 1), 0.1 if k < 5 else 0.0, dtype=np.float32))
    assert c.exact == float(reference[0, 0])
    assert 0 < c.stalled_at < 200
    # six writes (five touches, one catch-up), at most half a gap each, all in the binade of 0.25 to 0.5
    assert abs(c.dense_equivalent - c.exact) <= 3 * gap
    assert abs(c.dense_nearest - c.exact) > 3 * abs(c.dense_equivalent - c.exact)
    assert abs(c.dense_stochastic.mean() - c.exact) < 5 * c.dense_stochastic.std() / np.sqrt(500)
    assert np.all(c.dense_stochastic == c.dense_stochastic.astype(np.float16))
    short = lp.coasting(0.5, [0.1] * 5, gap=3)
    assert short.stalled_at == 3  # every dormant write of a short gap still moves the weight


def test_half_grad_is_the_float64_gradient_at_the_stored_values(problem):
    table = problem.init.astype(np.float16)
    pairs, labels = problem.pairs[0], problem.labels[0]
    got = lp.half_grad(table, pairs, labels, problem.batch_size)
    want = dv.logistic_grad(table.astype(np.float64), pairs, labels, problem.batch_size)
    assert got.values.dtype == np.float64
    assert np.array_equal(got.touched_rows, want.touched_rows) and np.array_equal(got.to_dense(), want.to_dense())


def test_train_counts_writes_and_stagnation(problem):
    touches = dv.touch_counts(problem)
    tiny = {p.name: lp.train(problem, p, 1e-6) for p in (lp.FLOAT32, lp.FP16_NEAREST)}
    for run in tiny.values():
        assert np.array_equal(run.written, touches * problem.dim)
    # 1e-6 is far above half of float32's gap at these weights: only a step much smaller than lr is lost
    assert tiny["float32"].stagnated.sum() < 0.01 * tiny["float32"].written.sum()
    half = tiny["fp16 nearest"]
    big = np.min(np.abs(problem.init), axis=1) >= 0.01  # half of fp16's gap there is at least 3.8e-6: every write lost
    assert big.sum() > 10
    assert np.array_equal(half.stagnated[big], half.written[big])
    assert np.array_equal(half.table[big], problem.init[big].astype(np.float16))
    assert half.stagnated.sum() > 0.9 * half.written.sum()
    run = lp.train(problem, lp.BF16_STOCHASTIC, 0.01)
    assert run.table.dtype == np.dtype(ml_dtypes.bfloat16)
    want = [dv.logistic_loss(run.table.astype(np.float64), problem.test_pairs[j], problem.test_labels[j]) for j in range(2)]
    assert run.test_loss.tolist() == want
    assert 0 < run.stagnated.sum() < run.written.sum()


def test_train_float32_is_a_lazy_adam_table_loop(problem):
    run = lp.train(problem, lp.FLOAT32, 0.01)
    table = problem.init.astype(np.float32)
    opt = so.SparseAdamTable(table, so.SparseAdamConfig(lr=0.01, beta1=0.9, beta2=0.99))
    for k in range(problem.num_steps):
        opt.step(dv.logistic_grad(table.astype(np.float64), problem.pairs[k], problem.labels[k], problem.batch_size))
    assert np.array_equal(run.table, table)


def _fake_run(valid, test, written=None, stagnated=None) -> lp.Run:
    n = 4
    return lp.Run(
        lp.FLOAT32, 0.0, np.array(valid, float), np.array(test, float),
        np.zeros(n, np.int64) if written is None else np.array(written), np.zeros(n, np.int64) if stagnated is None
        else np.array(stagnated), np.zeros((n, 1)), 0.0,
    )  # fmt: skip


def test_tuned_results_choose_on_validation_and_pair_with_float32():
    runs = {
        "float32": {0.1: _fake_run([3, 3], [9, 9]), 0.2: _fake_run([1, 1], [5, 6]), 0.4: _fake_run([2, 2], [0, 0])},
        "fp16 nearest": {0.1: _fake_run([1, 1], [7, 7]), 0.2: _fake_run([1, 1], [0, 0]), 0.4: _fake_run([4, 4], [0, 0])},
    }
    tuned = lp.tuned_results(runs)
    assert tuned["float32"].lr == 0.2 and tuned["float32"].interior
    assert tuned["fp16 nearest"].lr == 0.1 and not tuned["fp16 nearest"].interior  # a tie goes to the smaller rate
    assert tuned["fp16 nearest"].test_minus_float32.tolist() == [2.0, 1.0]


def test_stagnation_and_distance_by_gap(problem):
    gaps = dv.mean_gaps(problem)
    edges = (1, 10, np.inf)
    rows = problem.init.shape[0]
    written = np.full(rows, 10, dtype=np.int64)
    stagnated = np.where(gaps < 10, 5, 1).astype(np.int64)
    run = lp.Run(lp.FP16_NEAREST, 0.1, np.zeros(2), np.zeros(2), written, stagnated, problem.init, 0.0)
    frac = lp.stagnation_by_gap(run, problem, edges)
    assert frac.shape == (2, 2) and np.allclose(frac[:, 0], 0.5) and np.allclose(frac[:, 1], 0.1)
    assert np.isnan(lp.stagnation_by_gap(run, problem, (1e6, 2e6))).all()  # no row that rare
    reference = problem.init + 1.0
    assert np.all(lp.distance_by_gap(reference, reference, problem, edges) == 0)
    assert np.allclose(lp.distance_by_gap(problem.init, reference, problem, edges), 1.0)


def test_train_dense_and_dense_equivalent_agree_in_float32(problem):
    dense = lp.train_dense(problem, "float32", "nearest", 0.01, dense=True)
    lazy = lp.train_dense(problem, "float32", "nearest", 0.01, dense=False)
    assert dense.dtype == lazy.dtype == np.float32
    assert np.max(np.abs(dense - lazy)) < 1e-5
    half = lp.train_dense(problem, "float16", "nearest", 0.01, dense=True)
    assert half.dtype == np.float16 and np.max(np.abs(half - dense)) > 0


def test_kept_bytes_are_the_arrays():
    f32, f16, sr = (lp.kept_bytes(p, 100, 8) for p in (lp.FLOAT32, lp.FP16_NEAREST, lp.FP16_STOCHASTIC))
    assert f32 == {"params": 3200, "state": 100 * 8 * 8 + 100 * 8}
    assert f16 == {"params": 1600, "state": f32["state"]}
    assert sr["state"] == f16["state"] + 48


def test_figures(problem):
    values = lp.repeated_updates(1.0, 2.0**-12, 20, lp.FP16_NEAREST)
    sr = lp.repeated_updates(1.0, 2.0**-12, 20, lp.FP16_STOCHASTIC, copies=50)
    fig = lp.plot_repeated(values, sr, 1.0, 2.0**-12, 2.0**-10)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    runs = lp.sweep(problem, (lp.FLOAT32, lp.FP16_NEAREST), (0.01, 0.03))
    fig = lp.plot_experiment(runs, problem, (1, 10, np.inf), ("1-10", ">= 10"))
    assert len(fig.axes) == 3 and fig.axes[1].get_xticklabels()[1].get_text() == "fp16\nnearest"

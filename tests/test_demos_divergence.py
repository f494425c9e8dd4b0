"""sparse_opt.demos.divergence: the factorisation model, the lockstep training of the four methods, the summaries."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from sparse_opt import CsrGradient, DenseAdam, SparseAdamTable
from sparse_opt.demos import divergence as dv
from sparse_opt.demos.figures import DPI

SMALL = {"num_rows": 150, "dim": 3, "skew": 1.2, "num_steps": 80, "batch_size": 8, "num_valid": 64, "num_test": 96}


@pytest.fixture(scope="module")
def small_problem() -> dv.Problem:
    return dv.make_problem(seeds=(4, 7), **SMALL)


@pytest.fixture(scope="module")
def small_run(small_problem: dv.Problem) -> dv.Run:
    return dv.train(small_problem, lr=0.03, eval_every=20)


@pytest.fixture(scope="module")
def small_runs(small_problem: dv.Problem, small_run: dv.Run) -> dict[float, dv.Run]:
    runs = dv.sweep(small_problem, [0.003, 0.3], eval_every=40)
    runs[0.03] = small_run
    return runs


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + np.exp(-z))


# -- the problem ------------------------------------------------------------------------


def test_make_problem_shapes_blocks_and_determinism(small_problem: dv.Problem) -> None:
    p = small_problem
    assert (p.num_seeds, p.num_steps, p.dim, p.num_rows, p.batch_size) == (2, 80, 3, 150, 8)
    assert p.init.shape == p.teacher.shape == (300, 3)
    assert p.pairs.shape == (80, 16, 2) and p.pairs.dtype == np.int64
    assert p.labels.shape == (80, 16) and set(np.unique(p.labels)) <= {0.0, 1.0}
    assert p.valid_pairs.shape == (2, 64, 2) and p.valid_labels.shape == (2, 64)
    assert p.test_pairs.shape == (2, 96, 2) and p.test_labels.shape == (2, 96)
    # seed j's ids stay in its block, in the batches and in both held-out sets
    for j in range(2):
        rows = p.block(j)
        assert p.pairs[:, 8 * j : 8 * (j + 1)].min() >= rows.start and p.pairs[:, 8 * j : 8 * (j + 1)].max() < rows.stop
        for held_out in (p.valid_pairs[j], p.test_pairs[j]):
            assert held_out.min() >= rows.start and held_out.max() < rows.stop
    again = dv.make_problem(seeds=(4, 7), **SMALL)
    for field in ("teacher", "init", "pairs", "labels", "valid_pairs", "valid_labels", "test_pairs", "test_labels"):
        np.testing.assert_array_equal(getattr(p, field), getattr(again, field))
    # Zipf: the first row of each block is the most frequent id
    counts = np.bincount(p.pairs.reshape(-1), minlength=300)
    assert counts[:150].argmax() == 0 and counts[150:].argmax() == 0


def test_a_seed_draws_the_same_problem_whichever_seeds_it_is_stacked_with(small_problem: dv.Problem) -> None:
    alone = dv.make_problem(seeds=(7,), **SMALL)
    p = small_problem
    np.testing.assert_array_equal(p.teacher[p.block(1)], alone.teacher)
    np.testing.assert_array_equal(p.init[p.block(1)], alone.init)
    np.testing.assert_array_equal(p.pairs[:, 8:] - 150, alone.pairs)
    np.testing.assert_array_equal(p.labels[:, 8:], alone.labels)
    np.testing.assert_array_equal(p.test_pairs[1] - 150, alone.test_pairs[0])


def test_make_problem_refuses_repeated_or_missing_seeds() -> None:
    with pytest.raises(ValueError, match="distinct"):
        dv.make_problem(seeds=(1, 1), **SMALL)
    with pytest.raises(ValueError, match="at least one"):
        dv.make_problem(seeds=(), **SMALL)


def test_labels_follow_the_teacher() -> None:
    sizes = {"num_rows": 20, "dim": 4, "skew": 0.0, "num_steps": 1, "batch_size": 20_000, "num_valid": 1, "num_test": 1}
    p = dv.make_problem(seeds=(5,), **sizes)
    pairs, labels = p.pairs[0], p.labels[0]
    prob = _sigmoid(np.sum(p.teacher[pairs[:, 0]] * p.teacher[pairs[:, 1]], axis=1))
    # mean label agrees with the mean teacher probability within sampling noise
    assert abs(labels.mean() - prob.mean()) < 4 * np.sqrt(0.25 / labels.size)
    assert abs(labels[prob > 0.8].mean() - prob[prob > 0.8].mean()) < 0.03


# -- loss and gradient ------------------------------------------------------------------


def test_logistic_loss_by_hand() -> None:
    table = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 0.0]])
    pairs = np.array([[0, 1], [2, 0]])
    labels = np.array([1.0, 0.0])
    z0 = 1.0 * 0.5 + 2.0 * -1.0  # -1.5
    expected = (np.log1p(np.exp(z0)) - z0 + np.log(2.0)) / 2
    assert dv.logistic_loss(table, pairs, labels) == pytest.approx(expected, rel=1e-14)


def test_logistic_grad_by_hand_including_a_row_paired_with_itself() -> None:
    table = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 3.0], [0.25, 0.5]])
    pairs = np.array([[0, 1], [3, 3]])
    labels = np.array([1.0, 0.0])
    grad = dv.logistic_grad(table, pairs, labels)
    assert isinstance(grad, CsrGradient) and grad.shape == (4, 2)
    np.testing.assert_array_equal(grad.touched_rows, [0, 1, 3])
    d0 = (_sigmoid(-1.5) - 1.0) / 2
    d1 = (_sigmoid(0.25**2 + 0.5**2) - 0.0) / 2
    expected = np.zeros((4, 2))
    expected[0] = d0 * table[1]
    expected[1] = d0 * table[0]
    expected[3] = 2 * d1 * table[3]  # d(E3 . E3) / dE3 = 2 E3
    np.testing.assert_allclose(grad.to_dense(), expected, rtol=1e-14, atol=0)
    # batch_size: the loss is a mean over that many examples instead of len(labels)
    halved_batch = dv.logistic_grad(table, pairs, labels, batch_size=1).to_dense()
    np.testing.assert_allclose(halved_batch, 2 * expected, rtol=1e-14)


def test_logistic_grad_matches_finite_differences(small_problem: dv.Problem) -> None:
    rng = np.random.default_rng(0)
    table = rng.standard_normal(small_problem.init.shape)
    pairs, labels = small_problem.pairs[0].copy(), small_problem.labels[0]
    pairs[1] = (5, 5)
    grad = dv.logistic_grad(table, pairs, labels).to_dense()
    h = 1e-6
    numeric = np.zeros_like(table)
    for r in np.unique(pairs):
        for c in range(table.shape[1]):
            plus, minus = table.copy(), table.copy()
            plus[r, c] += h
            minus[r, c] -= h
            numeric[r, c] = (dv.logistic_loss(plus, pairs, labels) - dv.logistic_loss(minus, pairs, labels)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=0, atol=1e-8 * np.abs(grad).max())
    untouched = np.setdiff1d(np.arange(table.shape[0]), pairs)
    assert not grad[untouched].any()


# -- how rarely rows are touched --------------------------------------------------------


def _hand_problem() -> dv.Problem:
    # one seed, 4 rows, 5 steps of one pair: row 0 every step, row 1 at steps 0 and 4, row 2 at 2, row 3 never
    pairs = np.array([[[0, 1]], [[0, 0]], [[2, 0]], [[0, 0]], [[1, 0]]])
    held_out = np.array([[[0, 1], [2, 3], [3, 0]]])
    return dv.Problem(
        seeds=(0,), teacher=np.zeros((4, 2)), init=np.zeros((4, 2)), pairs=pairs, labels=np.ones((5, 1)),
        valid_pairs=held_out, valid_labels=np.ones((1, 3)),
        test_pairs=held_out, test_labels=np.array([[1.0, 0.0, 1.0]]),
        num_rows=4, batch_size=1, skew=1.0,
    )  # fmt: skip


def test_touch_counts_gaps_and_dormant_spells_by_hand() -> None:
    p = _hand_problem()
    np.testing.assert_array_equal(dv.touch_counts(p), [5, 2, 1, 0])
    np.testing.assert_array_equal(dv.mean_gaps(p), [1.0, 2.5, 5.0, np.inf])
    # row 0: four spells of 1 step; row 1: one of 4 steps (touched at 0 and 4); rows 2, 3: none
    rows, lengths = dv.dormant_spells(p)
    np.testing.assert_array_equal(rows, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(lengths, [1, 1, 1, 1, 4])


def test_dormant_spells_of_a_generated_problem_match_a_loop(small_problem: dv.Problem) -> None:
    expected_rows, expected_lengths = [], []
    for row in range(small_problem.init.shape[0]):
        steps = [k for k in range(small_problem.num_steps) if row in small_problem.pairs[k]]
        expected_rows += [row] * (len(steps) - 1)
        expected_lengths += list(np.diff(steps))
    rows, lengths = dv.dormant_spells(small_problem)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(lengths, expected_lengths)
    assert dv.touch_counts(small_problem).sum() == sum(np.unique(b).size for b in small_problem.pairs)
    expected_counts = [sum(row in batch for batch in small_problem.pairs) for row in range(small_problem.init.shape[0])]
    np.testing.assert_array_equal(dv.touch_counts(small_problem), expected_counts)


# -- training ---------------------------------------------------------------------------


def test_make_optimizer_kinds_and_refusal() -> None:
    table = np.zeros((3, 2))
    assert isinstance(dv.make_optimizer("dense", table, 0.1), DenseAdam)
    for mode in dv.LAZY_MODES:
        opt = dv.make_optimizer(mode, table, 0.1, beta1=0.5, beta2=0.9, eps=1e-6)
        assert isinstance(opt, SparseAdamTable) and opt.config.mode.value == mode
        assert (opt.config.beta1, opt.config.beta2, opt.config.eps) == (0.5, 0.9, 1e-6)
    with pytest.raises(ValueError, match="method must be one of"):
        dv.make_optimizer("adagrad", table, 0.1)


def test_training_step_looks_up_rows_caught_up_to_dense_adam(small_problem: dv.Problem) -> None:
    p = small_problem
    tables = {name: p.init.copy() for name in ("dense_equivalent", "dense", "lazy")}
    opts = {name: dv.make_optimizer(name, table, 0.05) for name, table in tables.items()}
    for k in range(6):
        grads = {name: dv.training_step(name, opts[name], tables[name], p.pairs[k], p.labels[k], 8) for name in opts}
    # step 5's gradient was computed at dense Adam's rows: catch_up ran before the lookup
    dense_rows = dv.logistic_grad(tables["dense"], p.pairs[5], p.labels[5], 8).to_dense()
    at_dense = grads["dense"].to_dense()
    np.testing.assert_allclose(grads["dense_equivalent"].to_dense(), at_dense, rtol=0, atol=1e-14)
    assert np.abs(grads["lazy"].to_dense() - at_dense).max() > 1e-6  # a stale lookup reads other rows
    assert np.abs(dense_rows - at_dense).max() > 0  # (dense Adam has stepped since)
    assert opts["dense_equivalent"].step_count == 6


def test_lazy_modes_step_without_catching_up(small_problem: dv.Problem) -> None:
    p = small_problem
    for mode in ("lazy", "dormancy_decay"):
        table = p.init.copy()
        opt = dv.make_optimizer(mode, table, 0.05)
        grad = dv.training_step(mode, opt, table, p.pairs[0], p.labels[0], p.batch_size)
        np.testing.assert_array_equal(grad.to_dense(), dv.logistic_grad(p.init, p.pairs[0], p.labels[0], 8).to_dense())
        untouched = np.setdiff1d(np.arange(300), p.pairs[0])
        np.testing.assert_array_equal(table[untouched], p.init[untouched])


def test_run_basic_invariants(small_problem: dv.Problem, small_run: dv.Run) -> None:
    r, p = small_run, small_problem
    np.testing.assert_array_equal(r.eval_steps, [0, 20, 40, 60, 80])
    assert (r.lr, r.beta1, r.beta2, r.eps) == (0.03, 0.9, 0.999, 1e-8)
    for name in dv.METHODS:
        assert r.valid_loss[name].shape == (2, 5) and r.test_loss[name].shape == (2,)
        # same start: the same initial validation loss per seed, that of the initial table
        for j in range(2):
            assert r.valid_loss[name][j, 0] == dv.logistic_loss(p.init, p.valid_pairs[j], p.valid_labels[j])
            assert r.test_loss[name][j] == dv.logistic_loss(r.tables[name], p.test_pairs[j], p.test_labels[j])
        never = dv.touch_counts(p) == 0
        assert never.any()
        np.testing.assert_array_equal(r.tables[name][never], p.init[never])
    for name in dv.LAZY_MODES:
        assert not r.divergence[name][:, 0].any() and not r.max_difference[name][:, 0].any()
    assert (r.divergence["lazy"][:, -1] > 1e-3).all() and (r.divergence["dormancy_decay"][:, -1] > 1e-3).all()
    # the run must not touch the problem's arrays
    assert not np.shares_memory(r.tables["dense"], p.init)


def test_dense_equivalent_follows_dense_adam_to_rounding(small_run: dv.Run) -> None:
    assert small_run.max_difference["dense_equivalent"].max() < 1e-12
    assert small_run.divergence["dense_equivalent"].max() < 1e-12
    np.testing.assert_allclose(small_run.test_loss["dense_equivalent"], small_run.test_loss["dense"], rtol=1e-12)


def test_divergence_and_max_difference_definitions(small_problem: dv.Problem, small_run: dv.Run) -> None:
    r, p = small_run, small_problem
    for j in range(2):
        rows = p.block(j)
        dense = r.tables["dense"][rows]
        for name in dv.LAZY_MODES:
            diff = r.tables[name][rows] - dense
            expected = np.sqrt(np.sum(diff**2) / np.sum((dense - p.init[rows]) ** 2))
            assert r.divergence[name][j, -1] == pytest.approx(expected, rel=1e-12, abs=1e-300)
            assert r.max_difference[name][j, -1] == pytest.approx(np.abs(diff).max() / np.abs(dense).max(), rel=1e-12)


def test_stacked_seeds_train_as_separate_runs(small_problem: dv.Problem, small_run: dv.Run) -> None:
    for j, seed in enumerate(small_problem.seeds):
        alone_problem = dv.make_problem(seeds=(seed,), **SMALL)
        alone = dv.train(alone_problem, lr=0.03, eval_every=20)
        rows = small_problem.block(j)
        for name in ("lazy", "dormancy_decay", "dense"):  # coordinate-wise arithmetic: bit for bit
            np.testing.assert_array_equal(small_run.tables[name][rows], alone.tables[name])
            np.testing.assert_array_equal(small_run.valid_loss[name][j], alone.valid_loss[name][0])
        # the catch-up picks its series length from the whole batch: equal to rounding
        stacked, separate = small_run.tables["dense_equivalent"][rows], alone.tables["dense_equivalent"]
        np.testing.assert_allclose(stacked, separate, rtol=0, atol=1e-13)


def _assert_runs_identical(stacked: dv.Run, alone: dv.Run) -> None:
    assert (stacked.lr, stacked.beta1, stacked.beta2, stacked.eps) == (alone.lr, alone.beta1, alone.beta2, alone.eps)
    np.testing.assert_array_equal(stacked.eval_steps, alone.eval_steps)
    for name in dv.METHODS:
        np.testing.assert_array_equal(stacked.tables[name], alone.tables[name])
        np.testing.assert_array_equal(stacked.valid_loss[name], alone.valid_loss[name])
        np.testing.assert_array_equal(stacked.test_loss[name], alone.test_loss[name])
        s, a = stacked.work[name], alone.work[name]
        assert (s.entries_stepped, s.entries_caught_up, s.dormant_steps_caught_up, s.rows_caught_up) == (
            a.entries_stepped, a.entries_caught_up, a.dormant_steps_caught_up, a.rows_caught_up,
        )  # fmt: skip
        assert s.seconds > 0
    for name in dv.LAZY_MODES:
        np.testing.assert_array_equal(stacked.divergence[name], alone.divergence[name])
        np.testing.assert_array_equal(stacked.max_difference[name], alone.max_difference[name])


def test_stacked_sweep_is_one_training_run_per_rate_bit_for_bit(small_problem: dv.Problem) -> None:
    # every method, rate and seed in one vectorised run: the same bits as train() at each rate, for all four
    # methods (DENSE_EQUIVALENT included: each rate's catch-ups get exactly the rows train() gives them)
    lrs = [0.3, 0.003, 0.03]  # not sorted: the result follows the order given
    lines: list[str] = []
    runs = dv.sweep(small_problem, lrs, eval_every=15, report=lines.append)
    assert list(runs) == lrs
    for lr in lrs:
        _assert_runs_identical(runs[lr], dv.train(small_problem, lr=lr, eval_every=15))
    # the report: four evaluations a quarter apart (of steps 0, 15, .., 75, 80: 15, 45, 60 and 80), each
    # method's validation loss at the middle rate given (0.003), mean over seeds
    assert [line.split(":")[0] for line in lines] == [f"step {k:6d} of 80" for k in (15, 45, 60, 80)]
    for line, i in zip(lines, (1, 3, 4, 6)):
        assert "at lr 0.003," in line
        for name in dv.METHODS:
            assert f"{dv.LABELS[name]} {runs[0.003].valid_loss[name][:, i].mean():.3f}" in line


def test_sweep_with_other_betas_matches_train(small_problem: dv.Problem) -> None:
    runs = dv.sweep(small_problem, [0.02], beta1=0.5, beta2=0.9, eps=1e-6, eval_every=1000)
    _assert_runs_identical(runs[0.02], dv.train(small_problem, lr=0.02, beta1=0.5, beta2=0.9, eps=1e-6, eval_every=1000))


def test_sweep_with_weight_decay_matches_train_and_decays(small_problem: dv.Problem) -> None:
    # AdamW's decoupled decay reaches every method of the stacked run as it reaches train()'s optimizers
    runs = dv.sweep(small_problem, [0.05, 0.02], weight_decay=2.0, eval_every=1000)
    for lr in (0.05, 0.02):
        assert runs[lr].weight_decay == 2.0
        _assert_runs_identical(runs[lr], dv.train(small_problem, lr=lr, weight_decay=2.0, eval_every=1000))
    plain = dv.train(small_problem, lr=0.05, eval_every=1000)
    untouched = dv.touch_counts(small_problem) == 0
    assert untouched.any()
    # a row never touched: LAZY and DORMANCY_DECAY leave it where it started; dense Adam(W) and DENSE_EQUIVALENT
    # decay it by (1 - lr * wd) ** num_steps, with no gradient and no momentum to move it otherwise
    shrink = (1.0 - 0.05 * 2.0) ** small_problem.num_steps
    start = small_problem.init[untouched]
    for name in ("lazy", "dormancy_decay"):
        np.testing.assert_array_equal(runs[0.05].tables[name][untouched], start)
    for name in ("dense", "dense_equivalent"):
        np.testing.assert_allclose(runs[0.05].tables[name][untouched], start * shrink, rtol=1e-12)
        assert not np.array_equal(runs[0.05].tables[name], plain.tables[name])


def test_sweep_grid_is_one_training_run_per_setting_bit_for_bit(small_problem: dv.Problem) -> None:
    # rates and AdamW decays side by side in one stacked run: train()'s bits at each (lr, wd), in the order given
    settings = [(0.05, 2.0), (0.02, 0.0), (0.05, 0.0)]
    lines: list[str] = []
    runs = dv.sweep_grid(small_problem, settings, eval_every=40, report=lines.append)
    assert list(runs) == settings
    for lr, wd in settings:
        assert (runs[lr, wd].lr, runs[lr, wd].weight_decay) == (lr, wd)
        _assert_runs_identical(runs[lr, wd], dv.train(small_problem, lr=lr, weight_decay=wd, eval_every=40))
    # the decays differ, so the report names the middle setting's decay too
    assert lines and all("at lr 0.02, weight decay 0," in line for line in lines)
    with pytest.raises(ValueError, match="settings must be distinct"):
        dv.sweep_grid(small_problem, [(0.01, 0.0), (0.01, 0.0)])
    with pytest.raises(ValueError, match="at least one"):
        dv.sweep_grid(small_problem, [])


def _grid_runs(valid: dict[str, dict[tuple[float, float], list[float]]]) -> dict[tuple[float, float], dv.Run]:
    # valid[method][(lr, wd)] = per-seed final validation losses; test loss = validation loss + 0.1
    runs = {}
    for key in valid["dense"]:
        losses = {name: np.array(valid[name][key])[:, None].repeat(2, axis=1) for name in dv.METHODS}
        runs[key] = dv.Run(
            lr=key[0], beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=key[1], eval_steps=np.array([0, 10]),
            valid_loss=losses, test_loss={name: losses[name][:, -1] + 0.1 for name in dv.METHODS},
            divergence={}, max_difference={}, tables={}, work={},
        )  # fmt: skip
    return runs


def test_choose_settings_and_weight_decay_study_by_hand() -> None:
    keys = [(lr, wd) for lr in (0.01, 0.1, 1.0) for wd in (0.0, 0.5, 2.0)]
    grid = {key: [1.0, 1.0] for key in keys}
    dense = {**grid, (0.1, 0.5): [0.2, 0.4], (0.1, 0.0): [0.5, 0.5], (1.0, 0.0): [0.6, 0.6]}
    lazy = {**grid, (1.0, 0.5): [0.5, 0.7], (0.1, 0.0): [0.55, 0.75], (0.01, 2.0): [0.62, 0.62]}
    dd = {**grid, (0.01, 0.0): [0.9, 0.9]}  # no decay is its best, at the smallest rate
    runs = _grid_runs({"lazy": lazy, "dormancy_decay": dd, "dense_equivalent": dense, "dense": dense})
    assert dv.choose_settings(runs) == {
        "lazy": (1.0, 0.5), "dormancy_decay": (0.01, 0.0), "dense_equivalent": (0.1, 0.5), "dense": (0.1, 0.5),
    }  # fmt: skip
    assert dv.choose_settings(runs, 0.0)["lazy"] == (0.1, 0.0)
    assert dv.choose_settings(runs, 0.0)["dense"] == (0.1, 0.0)
    with pytest.raises(ValueError, match="no setting with weight decay 3.0"):
        dv.choose_settings(runs, 3.0)
    study = dv.weight_decay_study(runs)
    lazy_r, dd_r, dense_r = study["lazy"], study["dormancy_decay"], study["dense"]
    # lazy's lr 1.0 is the grid's largest rate: not interior; dense's (0.1, 0.5) is
    assert (lazy_r.interior, dd_r.interior, dense_r.interior) == (False, False, True)
    assert (lazy_r.setting, lazy_r.without) == ((1.0, 0.5), (0.1, 0.0))
    np.testing.assert_allclose(lazy_r.test_minus_dense, [0.3, 0.3])  # 0.6, 0.8 against dense's 0.3, 0.5
    np.testing.assert_allclose(lazy_r.without_minus_dense, [0.05, 0.25])  # 0.65, 0.85 against 0.6, 0.6
    np.testing.assert_allclose(lazy_r.decay_gain, [0.05, 0.05])
    np.testing.assert_allclose(dense_r.decay_gain, [0.3, 0.1])
    np.testing.assert_array_equal(dd_r.decay_gain, [0.0, 0.0])
    table = dv.format_weight_decay_study(study)
    assert "LAZY      1, 0.5   | +0.3000 [+0.3000, +0.3000]" in table
    assert "+0.1500 [+0.0500, +0.2500]" in table and "+0.2000 [+0.1000, +0.3000]" in table
    assert "-0.0000" not in table
    with pytest.raises(ValueError, match="full grid"):
        dv.weight_decay_study({k: v for k, v in runs.items() if k != (1.0, 2.0)})
    with pytest.raises(ValueError, match="0 among the decays"):
        dv.weight_decay_study({k: v for k, v in runs.items() if k[1] != 0.0})


def test_row_rms_by_gap_by_hand() -> None:
    # mean gaps 1, 2.5, 5, never: buckets 1-3 (rows 0, 1), 3-10 (row 2); row 3 (never touched) is left out
    p = _hand_problem()
    table = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0], [9.0, 9.0]])
    out = dv.row_rms_by_gap({"a": table}, p, edges=(1.0, 3.0, 10.0, np.inf))
    assert out["labels"] == ["1-3", "3-10", ">= 10"]
    np.testing.assert_array_equal(out["rows"], [[2, 1, 0]])
    np.testing.assert_allclose(out["rms"]["a"], [[np.sqrt(25 / 4), 1.0, np.nan]])


def test_format_rows_by_gap_by_hand() -> None:
    p = _hand_problem()
    edges = (1.0, 3.0, 10.0, np.inf)
    dense = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    lazy = dense * 2.0
    rms = dv.row_rms_by_gap({"start": p.init, "lazy": lazy, "dense": dense}, p, edges)
    loss = dv.held_out_loss_by_gap({"lazy": lazy, "dense": dense}, p, edges)
    lines = dv.format_rows_by_gap(rms, loss, ["lazy"]).splitlines()
    assert "root mean square of the entries" in lines[0] and "loss minus dense Adam's" in lines[0]
    assert lines[1].split() == ["mean", "gap", "rows", "|", "start", "LAZY", "dense", "Adam", "pairs", "LAZY"]
    # bucket 1-3: rows 0 and 1, entries (1, 0), (2, 0) -> rms sqrt(5 / 4); one test pair, (0, 1) with label 1
    behind = np.logaddexp(0, 8.0) - 8.0 - (np.logaddexp(0, 2.0) - 2.0)
    assert lines[2].split() == ["1-3", "2", "|", "0.00", f"{2 * np.sqrt(5 / 4):.2f}", f"{np.sqrt(5 / 4):.2f}", "1",
                                f"{behind:+.4f}"]  # fmt: skip
    assert lines[4].split()[:4] == [">=", "10", "0", "|"] and lines[4].split()[4:7] == ["nan"] * 3


def test_sweep_refuses_bad_arguments_before_training(small_problem: dv.Problem) -> None:
    with pytest.raises(ValueError, match="lrs must be distinct"):
        dv.sweep(small_problem, [0.01, 0.01])
    with pytest.raises(ValueError, match="lrs must be distinct and at least one"):
        dv.sweep(small_problem, [])
    with pytest.raises(ValueError, match="lr"):
        dv.sweep(small_problem, [0.01, -1.0])
    with pytest.raises(ValueError, match="eval_every must be at least 1, got 0"):
        dv.sweep(small_problem, [0.01], eval_every=0)


def test_without_momentum_dormancy_decay_follows_dense_adam(small_problem: dv.Problem) -> None:
    r = dv.train(small_problem, lr=0.03, beta1=0.0, eval_every=40)
    assert r.max_difference["dormancy_decay"].max() < 1e-12
    assert r.max_difference["lazy"].max() > 1e-3


def test_every_row_touched_every_step_makes_all_four_identical() -> None:
    p = dv.make_problem(seeds=(2,), num_rows=3, dim=2, skew=0.0, num_steps=25, batch_size=64, num_valid=8, num_test=8)
    assert all(np.unique(batch).size == 3 for batch in p.pairs)
    r = dv.train(p, lr=0.05, eval_every=10)
    for name in dv.LAZY_MODES:
        np.testing.assert_array_equal(r.tables[name], r.tables["dense"])
    assert r.work["dense_equivalent"].entries_caught_up == 0


def test_work_accounting_by_hand(small_problem: dv.Problem) -> None:
    p = small_problem
    r = dv.train(p, lr=0.03, eval_every=1000)  # evaluations (and full catch-ups) at steps 0 and 80 only
    nnz = sum(2 * p.dim * np.unique(p.pairs[k]).size // 2 for k in range(p.num_steps))
    for name in ("lazy", "dormancy_decay", "dense_equivalent"):
        assert r.work[name].entries_stepped == nnz
    assert r.work["dense"].entries_stepped == p.num_steps * p.init.size
    last = np.zeros(p.init.shape[0], dtype=np.int64)  # 1-based step of each row's last touch, 0 = never
    rows = dormant = 0
    for k in range(p.num_steps):
        ids = np.unique(p.pairs[k])
        stale = ids[last[ids] < k]
        rows += stale.size
        dormant += int((k - last[stale]).sum())
        last[ids] = k + 1
    de = r.work["dense_equivalent"]
    assert (de.rows_caught_up, de.entries_caught_up, de.dormant_steps_caught_up) == (rows, rows * p.dim, dormant)
    for name in ("lazy", "dormancy_decay", "dense"):
        w = r.work[name]
        assert (w.entries_caught_up, w.dormant_steps_caught_up, w.rows_caught_up) == (0, 0, 0)
        assert w.seconds > 0


# -- summaries --------------------------------------------------------------------------


def _hand_run(problem: dv.Problem) -> dv.Run:
    init = problem.init
    dense = init + 1.0
    lazy = init + 0.5
    dormancy = init.copy()
    dormancy[0] = dense[0]
    for table in (lazy, dense, dormancy):
        table[3] = init[3]  # never touched
    e = np.array([0, 5])
    return dv.Run(
        lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, eval_steps=e,
        valid_loss={name: np.zeros((1, 2)) for name in dv.METHODS},
        test_loss={name: np.zeros(1) for name in dv.METHODS},
        divergence={name: np.zeros((1, 2)) for name in dv.LAZY_MODES},
        max_difference={name: np.zeros((1, 2)) for name in dv.LAZY_MODES},
        tables={"lazy": lazy, "dormancy_decay": dormancy, "dense_equivalent": dense.copy(), "dense": dense},
        work={},
    )  # fmt: skip


def test_divergence_by_gap_by_hand() -> None:
    # mean gaps 1, 2.5, 5, never: buckets 1-3 (rows 0, 1), 3-10 (row 2); row 3 is left out
    p = _hand_problem()
    out = dv.divergence_by_gap(_hand_run(p), p, edges=(1.0, 3.0, 10.0, np.inf))
    assert out["labels"] == ["1-3", "3-10", ">= 10"]
    np.testing.assert_array_equal(out["rows"], [[2, 1, 0]])
    # lazy rows sit halfway to dense Adam's everywhere
    np.testing.assert_allclose(out["divergence"]["lazy"], [[0.5, 0.5, np.nan]])
    # dormancy: row 0 equals dense Adam's, rows 1 and 2 never moved
    np.testing.assert_allclose(out["divergence"]["dormancy_decay"], [[np.sqrt(0.5), 1.0, np.nan]])
    np.testing.assert_array_equal(out["divergence"]["dense_equivalent"], [[0.0, 0.0, np.nan]])


def test_held_out_loss_by_gap_by_hand() -> None:
    # test pairs (0, 1), (2, 3), (3, 0): rarer rows have gaps 2.5, inf, inf
    p = _hand_problem()
    table = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    out = dv.held_out_loss_by_gap({"a": table}, p, edges=(1.0, 3.0, 10.0, np.inf))
    np.testing.assert_array_equal(out["pairs"], [[1, 0, 2]])
    logit_1 = 2.0  # E0 . E1, label 1
    logit_2, logit_3 = 3.0, 0.0  # E2 . E3 with label 0; E3 . E0 with label 1
    expected_last = (np.logaddexp(0, logit_2) + np.logaddexp(0, logit_3) - logit_3) / 2
    np.testing.assert_allclose(out["loss"]["a"], [[np.logaddexp(0, logit_1) - logit_1, np.nan, expected_last]])


def test_gap_labels_and_memory_edges() -> None:
    assert dv.gap_labels(dv.memory_edges(0.9, 0.999)) == ["1-10", "10-1000", ">= 1000"]
    assert dv.memory_edges(0.9, 0.99) == (1.0, 10.0, 100.0, np.inf)
    assert dv.memory_edges(0.99, 0.9) == (1.0, 10.0, 100.0, np.inf)  # sorted, whichever moment remembers longer
    assert dv.memory_edges(0.0, 0.0) == (1.0, np.inf)  # no memory: one bucket
    assert dv.memory_edges(0.5, 0.5) == (1.0, 2.0, np.inf)


def test_divergence_by_gap_defaults_to_the_runs_memories(small_problem: dv.Problem, small_run: dv.Run) -> None:
    assert dv.divergence_by_gap(small_run, small_problem)["labels"] == ["1-10", "10-1000", ">= 1000"]


def _runs_with_final_losses(final: dict[str, list[list[float]]], lrs: list[float]) -> dict[float, dv.Run]:
    # final[method][lr index] = per-seed final validation losses; test loss = validation loss + 0.1
    runs = {}
    for i, lr in enumerate(lrs):
        valid = {name: np.array(final[name][i])[:, None].repeat(2, axis=1) for name in dv.METHODS}
        runs[lr] = dv.Run(
            lr=lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, eval_steps=np.array([0, 10]), valid_loss=valid,
            test_loss={name: valid[name][:, -1] + 0.1 for name in dv.METHODS},
            divergence={}, max_difference={}, tables={}, work={},
        )  # fmt: skip
    return runs


def test_choose_lrs_and_tuned_results_by_hand() -> None:
    lrs = [0.001, 0.01, 0.1]
    final = {
        "lazy": [[0.5, 0.7], [0.4, 0.6], [0.45, 0.9]],  # means 0.6, 0.5, 0.675 -> 0.01
        "dormancy_decay": [[0.5, 0.5], [0.6, 0.6], [0.4, 0.5]],  # 0.5, 0.6, 0.45 -> 0.1 (edge)
        "dense_equivalent": [[0.3, 0.5], [0.4, 0.4], [0.6, 0.6]],  # 0.4, 0.4, 0.6 -> tie: 0.001
        "dense": [[0.3, 0.5], [0.4, 0.4], [0.6, 0.6]],
    }
    runs = _runs_with_final_losses(final, lrs)
    np.testing.assert_array_equal(dv.final_valid_loss(runs, "lazy"), final["lazy"])
    chosen = dv.choose_lrs(runs)
    assert chosen == {"lazy": 0.01, "dormancy_decay": 0.1, "dense_equivalent": 0.001, "dense": 0.001}
    tuned = dv.tuned_results(runs)
    assert [tuned[name].interior for name in dv.METHODS] == [True, False, False, False]
    assert tuned["lazy"].valid_mean == pytest.approx(0.5)
    np.testing.assert_allclose(tuned["lazy"].test, [0.5, 0.7])
    np.testing.assert_allclose(tuned["lazy"].test_minus_dense, [0.1, 0.1])  # dense at 0.001: 0.4, 0.6
    np.testing.assert_allclose(tuned["dormancy_decay"].test_minus_dense, [0.1, 0.0], atol=1e-15)
    np.testing.assert_array_equal(tuned["dense"].test_minus_dense, [0.0, 0.0])
    # an explicit choice is respected
    assert dv.tuned_results(runs, {**chosen, "lazy": 0.1})["lazy"].valid_mean == pytest.approx(0.675)


def test_spread_ignores_nan() -> None:
    mid, lo, hi = dv.spread(np.array([[1.0, 5.0, 2.0, np.nan], [np.nan, 3.0, 3.0, 3.0]]))
    np.testing.assert_array_equal(mid, [2.0, 3.0])
    np.testing.assert_array_equal(lo, [1.0, 3.0])
    np.testing.assert_array_equal(hi, [5.0, 3.0])


def test_state_bytes() -> None:
    assert dv.state_bytes("dense", 100, 8) == 2 * 100 * 8 * 8  # m and v
    for mode in dv.LAZY_MODES:
        assert dv.state_bytes(mode, 100, 8) == 2 * 100 * 8 * 8 + 100 * 8  # m, v and one int64 step per row
    assert dv.state_bytes("lazy", 100, 8, np.float32) == 2 * 100 * 8 * 4 + 100 * 8


# -- figures ----------------------------------------------------------------------------


def test_plot_divergence(small_problem: dv.Problem, small_run: dv.Run) -> None:
    fig = dv.plot_divergence(small_run, small_problem)
    assert isinstance(fig, Figure) and fig.dpi == DPI
    over_steps, by_gap = fig.axes
    assert over_steps.get_title() == "distance from dense Adam's table"
    assert by_gap.get_title() == "final distance, by how rarely a row is touched"
    assert over_steps.get_yscale() == "linear" and by_gap.get_yscale() == "linear"
    # DENSE_EQUIVALENT's rounding-sized line would sit on zero: the left panel has the other two only
    assert [line.get_label() for line in over_steps.lines] == ["LAZY", "DORMANCY_DECAY"]
    median = np.median(small_run.divergence["lazy"][:, 1:], axis=0)
    np.testing.assert_array_equal(over_steps.lines[0].get_xdata(), small_run.eval_steps[1:])
    np.testing.assert_array_equal(over_steps.lines[0].get_ydata(), median)
    assert over_steps.get_ylim()[0] == 0.0
    buckets = dv.divergence_by_gap(small_run, small_problem)
    ticks = [t.get_text().split("\n")[0] for t in by_gap.get_xticklabels()]
    assert ticks == buckets["labels"]
    handles, labels = by_gap.get_legend_handles_labels()
    assert labels == [dv.LABELS[n] for n in dv.LAZY_MODES]
    lazy_points = by_gap.containers[0].lines[0].get_ydata()
    np.testing.assert_allclose(lazy_points, dv.spread(buckets["divergence"]["lazy"], axis=0)[0])
    worst = np.nanmax(buckets["divergence"]["dense_equivalent"])
    assert [t.get_text() for t in by_gap.texts] == [f"DENSE_EQUIVALENT: at most {worst:.0e}"]
    worst_over_steps = np.nanmax(small_run.divergence["dense_equivalent"])
    assert [t.get_text() for t in over_steps.texts] == [f"DENSE_EQUIVALENT: at most {worst_over_steps:.0e}"]
    # one legend for the figure, outside the panels
    assert over_steps.get_legend() is None and by_gap.get_legend() is None
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [dv.LABELS[n] for n in dv.LAZY_MODES]
    assert "lr 0.03" in fig._suptitle.get_text() and "2 seeds" in fig._suptitle.get_text()


def test_plot_tuned(small_runs: dict[float, dv.Run]) -> None:
    chosen = dv.choose_lrs(small_runs)
    fig = dv.plot_tuned(small_runs)
    assert isinstance(fig, Figure) and fig.dpi == DPI
    sweep_ax, curve_ax, test_ax = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [
        "sweep (mean, min-max over seeds)",
        "each at its own learning rate",
        "test loss, each at its own learning rate",
    ]
    assert sweep_ax.get_xscale() == "log"
    means = sweep_ax.containers[0].lines[0].get_ydata()
    dense_best = small_runs[chosen["dense"]].valid_loss["dense"][:, -1]
    np.testing.assert_allclose(means, (dv.final_valid_loss(small_runs, "lazy") - dense_best).mean(axis=1))
    assert [line.get_label() for line in curve_ax.lines] == [f"{dv.LABELS[n]} (lr {chosen[n]:g})" for n in dv.METHODS]
    dd_curve = small_runs[chosen["dormancy_decay"]].valid_loss["dormancy_decay"].mean(axis=0)
    np.testing.assert_allclose(curve_ax.lines[1].get_ydata(), dd_curve)
    # dense Adam thick and dashed under DENSE_EQUIVALENT's markers, so the two stay visible where they coincide
    de_line, dense_line = curve_ax.lines[2], curve_ax.lines[3]
    assert de_line.get_marker() == "^" and dense_line.get_linestyle() == "--"
    assert dense_line.get_linewidth() > de_line.get_linewidth()
    # the legend, with each method's rate, sits below the panels and covers no curve
    assert curve_ax.get_legend() is None
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [line.get_label() for line in curve_ax.lines]
    # a sweep mean above the panel's top is marked by a triangle on the top edge
    top = sweep_ax.get_ylim()[1]
    clipped = [line for line in sweep_ax.lines if line.get_label() == "_off the top"]
    dense_best = small_runs[chosen["dense"]].valid_loss["dense"][:, -1]
    off_top = sum(int(((dv.final_valid_loss(small_runs, n) - dense_best).mean(axis=1) > top).sum()) for n in dv.METHODS)
    assert off_top > 0 and sum(len(line.get_xdata()) for line in clipped) == off_top
    assert all(np.all(line.get_ydata() == top) for line in clipped)
    tuned = dv.tuned_results(small_runs)
    for container, name in zip(test_ax.containers, dv.METHODS):
        np.testing.assert_allclose(container.lines[0].get_ydata(), [np.median(tuned[name].test_minus_dense)])


def test_choose_lrs_at_an_earlier_step_and_loss_change() -> None:
    runs = {}
    for lr, (mid, end) in {0.01: (0.5, 0.3), 0.1: (0.4, 0.35)}.items():
        valid = {name: np.array([[0.7, mid, end], [0.7, mid, end + 0.02]]) for name in dv.METHODS}
        runs[lr] = dv.Run(
            lr=lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, eval_steps=np.array([0, 5, 10]), valid_loss=valid,
            test_loss={name: valid[name][:, -1] for name in dv.METHODS}, divergence={}, max_difference={}, tables={},
            work={},
        )  # fmt: skip
    assert set(dv.choose_lrs(runs).values()) == {0.01}
    assert set(dv.choose_lrs(runs, at_step=5).values()) == {0.1}
    np.testing.assert_array_equal(dv.final_valid_loss(runs, "lazy", at_step=5), [[0.5, 0.5], [0.4, 0.4]])
    np.testing.assert_allclose(dv.loss_change(runs[0.01], "dense", from_step=5), [-0.2, -0.18])


def test_work_per_step(small_problem: dv.Problem, small_run: dv.Run) -> None:
    work = dv.work_per_step(small_run, small_problem)
    per = small_problem.num_steps * small_problem.num_seeds
    assert work["dense"]["stepped"] == small_problem.init.size / small_problem.num_seeds
    assert work["dense"]["caught_up"] == 0.0 and work["dense"]["gap"] == 0.0
    de = small_run.work["dense_equivalent"]
    assert work["dense_equivalent"]["caught_up"] == de.entries_caught_up / per
    assert work["dense_equivalent"]["gap"] == de.dormant_steps_caught_up / de.rows_caught_up
    lazy_stepped = small_run.work["lazy"].entries_stepped / per
    assert work["lazy"]["stepped"] == work["dense_equivalent"]["stepped"] == lazy_stepped
    assert work["lazy"]["seconds"] == small_run.work["lazy"].seconds / small_problem.num_steps

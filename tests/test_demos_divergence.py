"""sparse_opt.demos.divergence: the factorisation model and the side-by-side training (notebook 04)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sparse_opt import CsrGradient  # noqa: E402
from sparse_opt.demos import divergence as dv  # noqa: E402


@pytest.fixture(scope="module")
def small_problem() -> dv.Problem:
    return dv.make_problem(num_rows=200, dim=4, skew=1.1, num_steps=40, batch_size=16, num_eval=64, seed=1)


@pytest.fixture(scope="module")
def small_result(small_problem: dv.Problem) -> dv.SideBySide:
    return dv.train_side_by_side(small_problem, lr=0.02, eval_every=10)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + np.exp(-z))


def test_make_problem_shapes_and_determinism(small_problem: dv.Problem) -> None:
    p = small_problem
    assert p.init.shape == p.teacher.shape == (200, 4)
    assert p.pairs.shape == (40, 16, 2) and p.pairs.dtype == np.int64
    assert p.labels.shape == (40, 16) and set(np.unique(p.labels)) <= {0.0, 1.0}
    assert p.eval_pairs.shape == (64, 2) and p.eval_labels.shape == (64,)
    assert p.pairs.min() >= 0 and p.pairs.max() < 200
    again = dv.make_problem(num_rows=200, dim=4, skew=1.1, num_steps=40, batch_size=16, num_eval=64, seed=1)
    for field in ("teacher", "init", "pairs", "labels", "eval_pairs", "eval_labels"):
        np.testing.assert_array_equal(getattr(p, field), getattr(again, field))
    # Zipf: row 0 is the most frequent id
    assert np.bincount(p.pairs.reshape(-1), minlength=200).argmax() == 0


def test_labels_follow_the_teacher() -> None:
    p = dv.make_problem(num_rows=20, dim=4, skew=0.0, num_steps=1, batch_size=20_000, num_eval=1, seed=5)
    pairs, labels = p.pairs[0], p.labels[0]
    prob = 0.5 * (1 + np.tanh(0.5 * np.sum(p.teacher[pairs[:, 0]] * p.teacher[pairs[:, 1]], axis=1)))
    # mean label agrees with the mean teacher probability within sampling noise
    assert abs(labels.mean() - prob.mean()) < 4 * np.sqrt(0.25 / labels.size)
    assert abs(labels[prob > 0.8].mean() - prob[prob > 0.8].mean()) < 0.03


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


def test_logistic_grad_matches_finite_differences(small_problem: dv.Problem) -> None:
    rng = np.random.default_rng(0)
    table = rng.standard_normal(small_problem.init.shape)
    pairs, labels = small_problem.pairs[0].copy(), small_problem.labels[0]
    pairs[1] = (5, 5)
    grad = dv.logistic_grad(table, pairs, labels).to_dense()
    h = 1e-6
    numeric = np.zeros_like(table)
    for r in range(table.shape[0]):
        for c in range(table.shape[1]):
            plus, minus = table.copy(), table.copy()
            plus[r, c] += h
            minus[r, c] -= h
            numeric[r, c] = (dv.logistic_loss(plus, pairs, labels) - dv.logistic_loss(minus, pairs, labels)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=0, atol=1e-8 * np.abs(grad).max())
    untouched = np.setdiff1d(np.arange(table.shape[0]), pairs)
    assert not grad[untouched].any()


def test_side_by_side_basic_invariants(small_problem: dv.Problem, small_result: dv.SideBySide) -> None:
    r = small_result
    assert r.num_steps == 40
    np.testing.assert_array_equal(r.eval_steps, [0, 10, 20, 30, 40])
    # same start: same initial held-out loss; identical tables after step 1
    assert len({r.eval_loss[name][0] for name in dv.OPTIMIZERS}) == 1
    for name in dv.LAZY_MODES:
        assert r.divergence[name][0] == 0.0
        assert r.divergence[name].shape == (40,)
        assert r.divergence[name][-1] > 0.0
    expected_counts = np.zeros(200, dtype=np.int64)
    for batch in small_problem.pairs:
        expected_counts[np.unique(batch)] += 1
    np.testing.assert_array_equal(r.touch_counts, expected_counts)
    never = r.touch_counts == 0
    assert never.any()
    for name in dv.OPTIMIZERS:
        np.testing.assert_array_equal(r.tables[name][never], small_problem.init[never])
    assert r.teacher_loss == pytest.approx(
        dv.logistic_loss(small_problem.teacher, small_problem.eval_pairs, small_problem.eval_labels)
    )
    # the run must not touch the problem's arrays
    assert r.init is small_problem.init and not np.shares_memory(r.tables["dense"], small_problem.init)


def test_divergence_is_relative_frobenius_distance(small_result: dv.SideBySide) -> None:
    r = small_result
    dense = r.tables["dense"]
    for name in dv.LAZY_MODES:
        expected = np.sqrt(np.sum((r.tables[name] - dense) ** 2) / np.sum((dense - r.init) ** 2))
        assert r.divergence[name][-1] == pytest.approx(expected, rel=1e-12)


def test_without_momentum_dormancy_decay_follows_dense_adam(small_problem: dv.Problem) -> None:
    r = dv.train_side_by_side(small_problem, lr=0.02, beta1=0.0)
    assert r.divergence["dormancy_decay"].max() < 1e-12
    assert r.divergence["lazy"].max() > 1e-3


def test_every_row_touched_every_step_makes_all_three_identical() -> None:
    p = dv.make_problem(num_rows=3, dim=2, skew=0.0, num_steps=25, batch_size=64, num_eval=8, seed=2)
    assert all(np.unique(batch).size == 3 for batch in p.pairs)
    r = dv.train_side_by_side(p, lr=0.05)
    np.testing.assert_array_equal(r.tables["lazy"], r.tables["dense"])
    np.testing.assert_array_equal(r.tables["dormancy_decay"], r.tables["dense"])
    assert not r.divergence["lazy"].any() and not r.divergence["dormancy_decay"].any()


def _hand_result() -> dv.SideBySide:
    init = np.zeros((5, 2))
    dense = np.ones((5, 2))
    lazy = np.full((5, 2), 0.5)
    dormancy = np.zeros((5, 2))
    dormancy[0] = 1.0
    lazy[4] = dense[4] = dormancy[4] = 0.0  # never touched
    return dv.SideBySide(
        divergence={name: np.zeros(100) for name in dv.LAZY_MODES},
        eval_steps=np.array([0, 100]),
        eval_loss={name: np.array([0.7, 0.6]) for name in dv.OPTIMIZERS},
        teacher_loss=0.5,
        tables={"lazy": lazy, "dormancy_decay": dormancy, "dense": dense},
        init=init,
        touch_counts=np.array([100, 40, 5, 1, 0]),
        num_steps=100,
        skew=1.0,
        lr=0.01,
        beta1=0.9,
        beta2=0.999,
    )


def test_divergence_by_frequency_by_hand() -> None:
    # gaps: 1, 2.5, 20, 100, never -> buckets 1-3 (rows 0, 1), 10-30 (row 2), >= 100 (row 3)
    out = dv.divergence_by_frequency(_hand_result())
    np.testing.assert_array_equal(out["labels"], ["1-3", "3-10", "10-30", "30-100", ">= 100"])
    np.testing.assert_array_equal(out["rows"], [2, 0, 1, 0, 1])
    np.testing.assert_allclose(out["touches"], [70.0, np.nan, 5.0, np.nan, 1.0])
    # lazy rows sit halfway: divergence 0.5 and travel 0.5 in every bucket
    np.testing.assert_allclose(out["divergence"]["lazy"], [0.5, np.nan, 0.5, np.nan, 0.5])
    np.testing.assert_allclose(out["travel"]["lazy"], [0.5, np.nan, 0.5, np.nan, 0.5])
    # dormancy: row 0 matches dense, row 1 never moved -> bucket 1-3 has sqrt(2 / 4)
    np.testing.assert_allclose(out["divergence"]["dormancy_decay"], [np.sqrt(0.5), np.nan, 1.0, np.nan, 1.0])
    np.testing.assert_allclose(out["travel"]["dormancy_decay"], [np.sqrt(0.5), np.nan, 0.0, np.nan, 0.0])


def test_plot_side_by_side_has_the_four_panels(small_result: dv.SideBySide) -> None:
    fig = dv.plot_side_by_side(small_result)
    try:
        assert isinstance(fig, Figure)
        divergence, loss, by_gap, travel = fig.axes
        assert [ax.get_title() for ax in fig.axes] == [
            "divergence from dense Adam's table",
            "held-out loss",
            "final divergence, by touch frequency",
            "distance travelled vs dense Adam",
        ]
        assert [line.get_label() for line in divergence.lines] == [dv.LABELS[n] for n in dv.LAZY_MODES]
        np.testing.assert_array_equal(divergence.lines[0].get_ydata(), small_result.divergence["lazy"])
        assert [line.get_label() for line in loss.lines] == [dv.LABELS[n] for n in dv.OPTIMIZERS] + [
            "teacher (best to expect)"
        ]
        np.testing.assert_array_equal(loss.lines[2].get_ydata(), small_result.eval_loss["dense"])
        buckets = dv.divergence_by_frequency(small_result)
        for ax, key in ((by_gap, "divergence"), (travel, "travel")):
            assert len(ax.patches) == 2 * buckets["labels"].size
            heights = np.array([patch.get_height() for patch in ax.patches])
            expected = np.concatenate([np.nan_to_num(buckets[key][name]) for name in dv.LAZY_MODES])
            np.testing.assert_allclose(heights, expected)
            ticks = [t.get_text().split("\n")[0] for t in ax.get_xticklabels()]
            assert ticks == list(buckets["labels"])
        assert "skew 1.1, lr 0.02, beta1 0.9, beta2 0.999" in fig._suptitle.get_text()
    finally:
        plt.close(fig)

"""sparse_opt.demos.schedules: the coasting of skipped steps under a schedule, exact and at the current rate."""

import dataclasses

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt.demos import divergence as dv
from sparse_opt.demos import schedules as ds

SCHEDULE = so.schedules.warmup_cosine(0.05, 20, 120)
SMALL = {"num_rows": 120, "dim": 3, "skew": 1.2, "num_steps": 90, "batch_size": 8, "num_valid": 64, "num_test": 96}


def _dense_history(schedule, g: float, last: int, touch: int, beta2: float = 0.999) -> tuple[list[float], so.DenseAdam]:
    """A one-coordinate dense Adam fed g on steps 1..last and 0 after; the parameter after each step."""
    p = np.zeros(1)
    opt = so.DenseAdam(p, lr=schedule, beta2=beta2)
    history = [0.0]
    for j in range(1, touch):
        opt.step(np.array([g if j <= last else 0.0]))
        history.append(float(p[0]))
    return history, opt


def test_coasting_terms_are_dense_adams_zero_gradient_steps() -> None:
    # at a constant rate 1, dense Adam's zero-gradient step j moves the parameter by exactly -c_j
    history, opt = _dense_history(1.0, g=0.3, last=7, touch=30)
    p_7 = so.DenseAdam(np.zeros(1), lr=1.0)
    for _ in range(7):
        p_7.step(np.array([0.3]))
    terms = ds.coasting_terms(float(p_7.m[0]), float(p_7.v[0]), last=7, gap=22)
    np.testing.assert_allclose(-np.diff(history[7:]), terms, rtol=1e-12)
    assert terms.shape == (22,) and np.all(np.diff(terms) < 0)  # a decaying m (beta1 = 0.9 > sqrt(beta2)... of v)


def test_skipped_steps_exact_is_dense_adam_and_dense_equivalent_under_a_schedule() -> None:
    last, touch = 12, 30  # the gap crosses the end of warm-up (step 20)
    history, _ = _dense_history(SCHEDULE, g=-0.2, last=last, touch=touch)
    state = so.DenseAdam(np.zeros(1), lr=SCHEDULE)
    for _ in range(last):
        state.step(np.array([-0.2]))
    out = ds.skipped_steps(SCHEDULE, float(state.m[0]), float(state.v[0]), last, touch)
    assert out.exact == pytest.approx(history[touch - 1] - history[last], rel=1e-12)
    # the kit's DENSE_EQUIVALENT, caught up through touch - 1, agrees
    p = np.zeros(1)
    de = so.SparseAdam(p, so.SparseAdamConfig(lr=SCHEDULE, mode="DENSE_EQUIVALENT"))
    for _ in range(last):
        de.step(so.CooGradient(np.array([0]), np.array([-0.2]), 1))
    for _ in range(touch - 1 - last):
        de.step(so.CooGradient(np.array([], dtype=np.int64), np.array([]), 1))
    de.catch_up()
    assert float(p[0]) == pytest.approx(history[touch - 1], rel=1e-12)
    # the current-rate catch-up applies schedule(touch), near the peak, to the first skipped steps, which ran at
    # warm-up rates and carry most of the coasting (m decays by beta1 per step)
    rates = np.array([SCHEDULE(j) for j in range(last + 1, touch)])
    assert SCHEDULE(touch) > 1.2 * rates[:3].max()
    assert out.ratio > 1.05


def test_the_lesson_09_checker_reference_is_this_formula() -> None:
    # the exercise's vectorised reference and coasting_terms (checked against DenseAdam above) agree
    from sparse_opt.exercises import lesson09

    rng = np.random.default_rng(5)
    for _ in range(20):
        last = int(rng.integers(1, 50))
        touch = last + int(rng.integers(1, 40))
        m, v = float(rng.normal(0, 0.3)), float(rng.uniform(0.001, 0.2))
        rates = rng.uniform(0.001, 0.05, touch - last)
        expected = -float(np.dot(rates[:-1], ds.coasting_terms(m, v, last, touch - last - 1)))
        assert lesson09._reference(m, v, last, touch, rates) == pytest.approx(expected, rel=1e-13, abs=1e-300)


def test_a_constant_rate_makes_both_catch_ups_equal() -> None:
    out = ds.skipped_steps(so.schedules.constant(0.01), 0.2, 0.04, last=5, touch=80)
    assert out.current_rate == pytest.approx(out.exact, rel=1e-14) and out.ratio == pytest.approx(1.0, rel=1e-14)


def test_a_step_decay_inside_the_gap_makes_the_current_rate_too_small() -> None:
    schedule = so.schedules.step_decay(0.1, step_size=50, gamma=0.1)
    out = ds.skipped_steps(schedule, 0.2, 0.04, last=40, touch=60)
    # steps 41..50 ran at 0.1, 51..59 at 0.01; the current rate is 0.01 for all of them
    terms = ds.coasting_terms(0.2, 0.04, 40, 19)
    assert out.exact == pytest.approx(-(0.1 * terms[:10].sum() + 0.01 * terms[10:].sum()), rel=1e-14)
    assert out.current_rate == pytest.approx(-0.01 * terms.sum(), rel=1e-14)
    assert 0 < out.ratio < 0.2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="last=0"):
        ds.coasting_terms(0.1, 0.1, last=0, gap=3)
    with pytest.raises(ValueError, match="v=-1"):
        ds.coasting_terms(0.1, -1.0, last=2, gap=3)
    with pytest.raises(ValueError, match="touch must come after last"):
        ds.skipped_steps(SCHEDULE, 0.1, 0.1, last=5, touch=5)


@pytest.fixture(scope="module")
def small_problem() -> dv.Problem:
    return dv.make_problem(seeds=(3, 8), **SMALL)


def test_train_dense_equivalent_is_dense_adam_and_the_current_rate_is_not(small_problem: dv.Problem) -> None:
    run = ds.train(small_problem, SCHEDULE, beta2=0.99)
    assert set(run.tables) == set(ds.METHODS)
    dense = run.tables["dense"]
    scale = np.abs(dense).max()
    assert np.abs(run.tables["dense_equivalent"] - dense).max() < 1e-12 * scale
    np.testing.assert_allclose(run.test_loss["dense_equivalent"], run.test_loss["dense"], rtol=1e-12)
    assert np.abs(run.tables["current_rate"] - dense).max() > 1e-4 * scale  # the warm-up ends inside gaps
    assert run.caught_up > 0
    for losses in (run.valid_loss, run.test_loss):
        assert all(v.shape == (2,) and np.all(np.isfinite(v)) for v in losses.values())


def test_train_at_a_constant_rate_makes_the_current_rate_catch_up_dense_equivalent(small_problem: dv.Problem) -> None:
    # a float rate: both catch-ups are the kit's constant-rate catch-up, bit for bit
    short = dataclasses.replace(small_problem, pairs=small_problem.pairs[:40], labels=small_problem.labels[:40])
    run = ds.train(short, 0.02, methods=("dense_equivalent", "current_rate"))
    np.testing.assert_array_equal(run.tables["current_rate"], run.tables["dense_equivalent"])
    # a constant schedule object: DENSE_EQUIVALENT takes the scheduled path, the same numbers to rounding
    run = ds.train(short, so.schedules.constant(0.02), methods=("dense_equivalent", "current_rate"))
    scale = np.abs(run.tables["dense_equivalent"]).max()
    assert np.abs(run.tables["current_rate"] - run.tables["dense_equivalent"]).max() < 1e-14 * scale


def test_train_methods_subset_and_refusal(small_problem: dv.Problem) -> None:
    short = dataclasses.replace(small_problem, pairs=small_problem.pairs[:10], labels=small_problem.labels[:10])
    full = ds.train(short, SCHEDULE)
    part = ds.train(short, SCHEDULE, methods=("lazy", "current_rate"))
    assert set(part.tables) == {"lazy", "current_rate"}
    for name in part.tables:
        np.testing.assert_array_equal(part.tables[name], full.tables[name])
    with pytest.raises(ValueError, match="methods must be distinct names"):
        ds.train(short, SCHEDULE, methods=("dense", "dense"))
    with pytest.raises(ValueError, match="methods must be distinct names"):
        ds.train(short, SCHEDULE, methods=("adam",))


def test_current_rate_ratios_and_their_plot() -> None:
    lasts = np.array([5, 25, 60])
    ratios = ds.current_rate_ratios(SCHEDULE, lasts, 10, beta2=0.99)
    for s, r in zip(lasts, ratios):
        assert r == ds.skipped_steps(SCHEDULE, 0.1, 0.01, int(s), int(s) + 11, beta2=0.99).ratio
    assert ratios[0] > 1.0 > ratios[2]  # inside the warm-up too far, during the cosine short
    flat = ds.current_rate_ratios(so.schedules.constant(0.01), lasts, 10)
    np.testing.assert_allclose(flat, 1.0, rtol=1e-14)
    fig = ds.plot_ratios(lasts, {"warm-up + cosine, gap 10": ratios, "step decay, gap 10": flat})
    (ax,) = fig.axes
    assert ax.get_yscale() == "log" and [line.get_label() for line in ax.lines[:2]] == [
        "warm-up + cosine, gap 10", "step decay, gap 10"]
    assert ax.lines[0].get_linestyle() == "--" and ax.lines[1].get_linestyle() == "-"
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), ratios)

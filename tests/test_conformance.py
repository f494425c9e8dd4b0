"""sparse_opt.conformance: scenarios, references (against worked examples), tolerance, runs, recordings, report."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from sparse_opt.conformance import (
    FAMILIES,
    REFERENCES,
    SCENARIOS,
    Candidate,
    Hyper,
    Recording,
    Scenario,
    Step,
    check,
    expected,
    record,
    reference,
    references,
    run,
    scenario,
    scenarios,
)
from sparse_opt.conformance.adapters.kit import KitAdamLazy, KitSgdLazy
from sparse_opt.conformance.tolerance import SAFETY, ULPS, Expected


def _traj(name: str, s: Scenario) -> np.ndarray:
    return reference(name).trajectory(s.table.astype(np.float64), s.steps, s.hyper)


# --------------------------------------------------------------------------- scenarios


def test_catalogue_names_families_and_order():
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names)) == 34
    assert [s.name for s in SCENARIOS if s.hyper.schedule] == [
        "adam_schedule_warmup", "adam_schedule_step_decay", "adam_schedule_cosine", "adam_schedule_weight_decay",
        "sgd_schedule_warmup", "sgd_schedule_step_decay", "sgd_schedule_weight_decay"]
    assert scenarios(schedules=False) == tuple(s for s in SCENARIOS if not s.hyper.schedule)
    assert [s.family for s in SCENARIOS] == sorted((s.family for s in SCENARIOS), key=FAMILIES.index)
    assert all(s.name.startswith(s.family + "_") for s in SCENARIOS)
    assert scenario("adam_gap_10") is scenarios("adam")[3]
    with pytest.raises(KeyError, match="no scenario named"):
        scenario("adam_nope")
    with pytest.raises(ValueError, match="family"):
        scenarios("lamb")


def test_catalogue_covers_the_issue_points():
    adam = {s.name for s in scenarios("adam")}
    assert {"adam_late_first_touch", "adam_gap_1", "adam_gap_2", "adam_gap_10", "adam_gap_long", "adam_repeated_ids",
            "adam_empty_steps", "adam_incomplete_rows", "adam_maximize", "adam_near_eps", "adam_weight_decay",
            "adam_float32"} <= adam
    long = scenario("adam_gap_long")
    touches = [t for t, s in enumerate(long.steps, 1) if 1 in s.row_ids]
    assert touches == [2, 203] and touches[1] - touches[0] - 1 > 1 / (1 - long.hyper.beta2)
    for k in (1, 2, 10):
        s = scenario(f"adam_gap_{k}")
        assert [t for t, st in enumerate(s.steps, 1) if 1 in st.row_ids] == [2, k + 3]
    assert any(np.unique(st.row_ids).size < st.row_ids.size for st in scenario("adam_repeated_ids").steps)
    assert any(st.row_ids.size == 0 for st in scenario("adam_empty_steps").steps)
    assert "entries" in scenario("adam_incomplete_rows").features
    assert {s.dtype.name for s in SCENARIOS} == {"float32", "float64"}


def test_scenario_values_are_exact_in_float32_and_push_away_from_zero():
    for s in SCENARIOS:
        assert np.array_equal(s.table.astype(np.float32).astype(np.float64), s.table.astype(np.float64))
        assert (np.abs(s.table) >= 0.5).all()
        for st in s.steps:
            assert np.array_equal(st.row_grads.astype(np.float32).astype(np.float64), st.row_grads)
            direction = np.sign(s.table[st.row_ids]) * (1 if s.hyper.maximize else -1)
            assert (st.row_grads * direction >= 0).all(), s.name


def test_scenarios_are_deterministic_and_read_only():
    from sparse_opt.conformance.catalogue import _adam

    again = {s.name: s for s in _adam()}
    for s in scenarios("adam"):
        assert again[s.name].fingerprint == s.fingerprint
    s = SCENARIOS[0]
    with pytest.raises(ValueError):
        s.table[0, 0] = 0.0
    with pytest.raises(ValueError):
        s.steps[0].row_grads[0, 0] = 0.0


def test_scenario_and_step_validation():
    with pytest.raises(ValueError, match="row_grads"):
        Step([0, 1], np.zeros((1, 2)))
    with pytest.raises(ValueError, match="mask"):
        Step([0], np.zeros((1, 2)), np.ones((1, 3), bool))
    with pytest.raises(ValueError, match=r"x: step 1 row_ids\[0\] = 2 is out of range \[0, rows = 2\)"):
        Scenario("x", "adam", "p", Hyper(), np.zeros((2, 2)), (Step([2], np.zeros((1, 2))),))
    with pytest.raises(ValueError, match="x: step 1 has rows of 3 entries, the table 2"):
        Scenario("x", "adam", "p", Hyper(), np.zeros((2, 2)), (Step([1], np.zeros((1, 3))),))
    with pytest.raises(TypeError, match="row_ids must be an integer array, got dtype float64"):
        Step([1.9], np.zeros((1, 2)))  # refused, not truncated to row 1
    with pytest.raises(TypeError, match="row_ids must be an integer array"):
        Step([True], np.zeros((1, 2)))
    step = Step(np.array([1], np.uint8), np.zeros((1, 2)))
    assert step.row_ids.dtype == np.int64
    with pytest.raises(ValueError, match="WRITEABLE"):
        step.row_ids.setflags(write=True)  # the catalogue's arrays are shared: they cannot be made writeable
    with pytest.raises(ValueError, match="family"):
        Scenario("x", "lamb", "p", Hyper(), np.zeros((2, 2)), ())
    with pytest.raises(ValueError, match="one of \\('float16', 'float32', 'float64'\\), got int64"):
        Scenario("x", "adam", "p", Hyper(), np.zeros((2, 2), np.int64), ())
    step = Step([2, 0], [[1.0, 2.0], [3.0, 4.0]], [[True, False], [True, True]])
    rows, cols, values = step.entries()
    assert rows.tolist() == [2, 0, 0] and cols.tolist() == [0, 0, 1] and values.tolist() == [1.0, 3.0, 4.0]


def test_hyper_features():
    assert Hyper().features("adam") == frozenset()
    assert Hyper(weight_decay=0.1, lr_decay=0.1).features("adam") == {"weight_decay"}
    assert Hyper(lr_decay=0.1, maximize=True).features("adagrad") == {"lr_decay", "maximize"}
    assert set(Hyper().as_dict()) == {"lr", "beta1", "beta2", "eps", "weight_decay", "momentum", "lr_decay",
                                      "initial_accumulator_value", "maximize"}
    assert Hyper(lr=0.5, schedule=[0.25, 0.5]).features("sgd") == {"schedule"}


def test_a_schedule_is_one_rate_per_step_peaking_at_lr():
    h = Hyper(lr=0.5, schedule=[0.25, 0.5, 0])
    assert h.schedule == (0.25, 0.5, 0.0) and [h.rate(t) for t in (1, 2, 3)] == [0.25, 0.5, 0.0]
    assert h.as_dict()["schedule"] == [0.25, 0.5, 0.0] and Hyper(lr=0.5).rate(10**9) == 0.5
    with pytest.raises(ValueError, match=r"step 4 is outside the schedule's steps 1 \.\. 3"):
        h.rate(4)
    with pytest.raises(ValueError, match=r"schedule\[1\] \(the rate of step 2\) must be finite and >= 0, got -0.25"):
        Hyper(lr=0.5, schedule=[0.5, -0.25])
    with pytest.raises(ValueError, match="must be finite and >= 0, got nan"):
        Hyper(lr=0.5, schedule=[0.5, float("nan")])
    with pytest.raises(ValueError, match="lr = 0.001 must be the schedule's peak, 0.5"):
        Hyper(schedule=[0.5])
    with pytest.raises(ValueError, match="x: the schedule has 2 rates for 1 steps"):
        Scenario("x", "sgd", "p", Hyper(lr=0.5, schedule=[0.5, 0.5]), np.zeros((2, 2)), (Step([1], np.zeros((1, 2))),))


def test_schedule_scenarios_change_the_rate_inside_a_dormant_gap():
    for s in SCENARIOS:
        if not s.hyper.schedule:
            continue
        touches = {r: [t for t, st in enumerate(s.steps, 1) if r in st.row_ids] for r in range(s.table.shape[0])}
        rates = np.array(s.hyper.schedule)
        changed = [any(len(set(rates[a:b - 1])) > 1 for a, b in zip(t, t[1:])) for t in touches.values()]
        assert any(changed), s.name  # a re-touched row slept through a change of rate
        assert all(float(np.float32(x)) == x for x in rates) and s.hyper.lr == rates.max()
    assert [s.name for s in SCENARIOS if s.hyper.schedule and s.hyper.weight_decay] == [
        "adam_schedule_weight_decay", "sgd_schedule_weight_decay"]


# --------------------------------------------------------------------------- references


def _dormant_row(lr: float = 0.1) -> Scenario:
    """The research notes' worked example: a row touched at step 1 (g=1) and step 5 (g=-0.5), w0=1."""
    grads = [1.0, 0.0, 0.0, 0.0, -0.5]
    steps = [Step([0, 1] if t in (0, 4) else [0], [[0.25], [g]] if t in (0, 4) else [[0.25]]) for t, g in
             enumerate(grads)]
    return Scenario("dormant_row", "adam", "worked example", Hyper(lr=lr), np.ones((2, 1)), tuple(steps))


def test_a_never_touched_row_decays_by_each_rate_or_by_the_current_one_by_hand():
    """adam_schedule_weight_decay: row 3 is never looked up, so its moments stay 0 and only AdamW's decay moves it.
    Dense training multiplies the factors 1 - lr_j * wd of steps 1 .. u; the current-rate rule, read after step u,
    takes u factors of the rate of step u + 1 (of step u after the last step); lazy and DORMANCY_DECAY leave it."""
    s = scenario("adam_schedule_weight_decay")
    p0, wd, rates, n = s.table[3], s.hyper.weight_decay, s.hyper.schedule, len(s.steps)
    dense, current = _traj("dense_adamw", s)[:, 3], _traj("current_rate", s)[:, 3]
    for u in range(1, n + 1):
        np.testing.assert_allclose(dense[u - 1], p0 * np.prod([1 - r * wd for r in rates[:u]]), rtol=1e-15)
        np.testing.assert_allclose(current[u - 1], p0 * (1 - rates[min(u, n - 1)] * wd) ** u, rtol=1e-15)
    for frozen in ("lazy", "dormancy_decay"):
        assert (_traj(frozen, s)[:, 3] == p0).all()
    assert not np.allclose(dense, current, rtol=1e-6, atol=0)  # the rate halves at steps 5 and 9


def test_sgd_current_rate_catches_a_row_up_at_the_touching_steps_rate_by_hand():
    """One row, momentum 0.5, no decay: touched at step 1 (g = 1), dormant at steps 2 and 3 (rates 1/2, 1/4),
    touched at step 4 (rate 1/8, g = 0). Dense SGD pushes it by 1/2 * 0.5 and 1/4 * 0.25 while it sleeps; the
    current-rate rule replays those two pushes at 1/8 when step 4 brings the row back."""
    steps = (Step([0], [[1.0]]), Step([], np.zeros((0, 1))), Step([], np.zeros((0, 1))), Step([0], [[0.0]]))
    hyper = Hyper(lr=1.0, momentum=0.5, schedule=(1.0, 0.5, 0.25, 0.125))
    s = Scenario("sgd_by_hand", "sgd", "by hand", hyper, np.zeros((1, 1)), steps)
    assert _traj("sgd_dense", s)[:, 0, 0].tolist() == [-1.0, -1.25, -1.3125, -1.328125]
    # after step 1: buf = 1, p = -1; read after steps 2, 3 at the next step's rate (1/4, 1/8); step 4 at 1/8
    assert _traj("sgd_current_rate", s)[:, 0, 0].tolist() == [-1.0, -1.125, -1.09375, -1.109375]
    assert _traj("sgd_lazy", s)[:, 0, 0].tolist() == [-1.0, -1.0, -1.0, -1.0 - 0.125 * 0.5]


def test_adam_references_reproduce_the_worked_dormant_row_example():
    s = _dormant_row()
    row = {name: _traj(name, s)[:, 1, 0] for name in ("dense_adamw", "lazy", "rowwise_bias", "hugectr_lazy")}
    np.testing.assert_allclose(row["dense_adamw"], [0.9, 0.8330, 0.7812, 0.7388, 0.7311], atol=5e-5)
    np.testing.assert_allclose(row["lazy"], [0.9, 0.9, 0.9, 0.9, 0.880476], atol=5e-7)
    assert row["rowwise_bias"][-1] == pytest.approx(0.873366, abs=5e-7)
    np.testing.assert_allclose(row["hugectr_lazy"], [1, 1, 1, 1, 0.6561], atol=5e-5)
    # DORMANCY_DECAY's moments are dense Adam's; its parameter does not coast
    assert _traj("dormancy_decay", s)[:4, 1, 0].tolist() == [row["lazy"][0]] * 4


def test_eps_placement_example():
    s = Scenario("eps", "adam", "eps example", Hyper(lr=1.0, eps=1e-3), np.zeros((1, 1)), (Step([0], [[1e-4]]),))
    assert -_traj("dense_adamw", s)[0, 0, 0] == pytest.approx(0.0909091, abs=5e-8)
    for name in ("sparse_adam", "hugectr_dense", "keras3_adam", "tf1_adam"):
        assert -_traj(name, s)[0, 0, 0] == pytest.approx(0.0031523, abs=5e-8), name


def test_sequential_duplicate_references_by_hand():
    dup = (Step([1, 1], [[1.0], [2.0]]),)
    mom = Scenario("m", "sgd", "dup", Hyper(lr=0.1, momentum=0.9), np.full((2, 1), 2.0), dup)
    assert _traj("tf_momentum", mom)[0, 1, 0] == pytest.approx(2 - 0.1 * 1 - 0.1 * (0.9 * 1 + 2))
    assert _traj("sgd_lazy", mom)[0, 1, 0] == pytest.approx(2 - 0.1 * 3)
    h = Hyper(lr=0.1, eps=0.5, initial_accumulator_value=0.5)
    ada = Scenario("a", "adagrad", "dup", h, np.full((2, 1), 2.0), dup)
    v1 = 2 - 0.1 * 1 / (math.sqrt(1.5) + 0.5)
    assert _traj("tf_adagrad", ada)[0, 1, 0] == pytest.approx(v1 - 0.1 * 2 / (math.sqrt(5.5) + 0.5))
    assert _traj("adagrad", ada)[0, 1, 0] == pytest.approx(2 - 0.1 * 3 / (math.sqrt(9.5) + 0.5))


def test_keras_second_moment_gets_the_sum_of_squares():
    h = Hyper(lr=0.1, eps=1e-8)
    s = Scenario("k", "adam", "dup", h, np.ones((1, 1)), (Step([0, 0], [[1.0], [-1.0]]), Step([0], [[1.0]])))
    keras, summed = _traj("keras3_adam", s)[:, 0, 0], _traj("hugectr_dense", s)[:, 0, 0]
    assert keras[0] == summed[0] == 1.0  # m = 1 - 1 = 0: no move
    m2, v2 = 0.1, 0.999 * 2 * 0.001 + 0.001  # v got 1**2 + (-1)**2 at step 1
    alpha = 0.1 * math.sqrt(1 - float(np.float32(0.999)) ** 2) / (1 - float(np.float32(0.9)) ** 2)
    assert keras[1] == pytest.approx(1 - m2 * alpha / (math.sqrt(v2) + 1e-8), rel=1e-12)
    assert keras[1] != pytest.approx(summed[1], rel=1e-3)


def test_rowwise_adagrad_reference_matches_the_kit_docstring():
    s = Scenario("r", "adagrad", "rowwise", Hyper(lr=1.0, eps=0.0), np.ones((4, 2)), (Step([1], [[3.0, 4.0]]),))
    assert _traj("rowwise_adagrad", s)[0, 1].round(4).tolist() == [0.1515, -0.1314]


def test_references_registry():
    assert [r.name for r in references("sgd")] == ["sgd_lazy", "sgd_dense", "sgd_current_rate", "sgd_no_decay",
                                                    "tf_momentum"]
    assert len({r.name for r in REFERENCES}) == len(REFERENCES)
    assert all(r.source.strip() and r.title for r in REFERENCES)
    modelled = {r.name for r in REFERENCES if r.modelled}
    # rowwise_adagrad: FBGEMM runs live; the current-rate catch-ups' libraries need a GPU
    assert modelled == {"rowwise_bias", "hugectr_lazy", "hugectr_dense", "current_rate", "sgd_current_rate"}
    assert all("modelled from source" in r.title for r in REFERENCES if r.modelled)
    with pytest.raises(KeyError):
        reference("adamax")
    assert not reference("sparse_adam").applies_to(scenario("adam_weight_decay"))
    assert not reference("keras3_adam").applies_to(scenario("adam_incomplete_rows"))
    with pytest.raises(ValueError, match="does not apply"):
        expected(scenario("adam_weight_decay"), reference("sparse_adam"))


def test_references_are_plain_loops_independent_of_the_kit():
    import pathlib

    import sparse_opt.conformance.semantics as pkg

    for path in pathlib.Path(pkg.__file__).parent.glob("*.py"):
        for line in path.read_text().splitlines():
            if line.startswith(("import ", "from ")) and "sparse_opt" in line:
                assert "sparse_opt.conformance" in line, f"{path.name}: {line}"


def test_every_pair_of_references_is_told_apart_by_some_scenario():
    """Pairs that apply together somewhere (catalogue or kernel form) are told apart there; pairs that never meet
    (a reference that requires weight_decay and one that lacks it) are not a pair."""
    pairs = 0
    for family in FAMILIES:
        refs = references(family)
        for a in refs:
            for b in refs:
                if a.name >= b.name:
                    continue
                common = [s for s in scenarios(family) + scenarios(family, "kernel")
                          if a.applies_to(s) and b.applies_to(s)]
                if not common:
                    assert a.requires != b.requires, (a.name, b.name)
                    continue
                pairs += 1
                apart = [s.name for s in common if not expected(s, b).deviation(expected(s, a).trajectory).matched]
                assert apart, f"no scenario separates {a.name} and {b.name}"
    assert pairs >= 70


def test_expected_is_float64_read_only_and_cached():
    s, r = scenario("adam_float32"), reference("lazy")
    e = expected(s, r)
    assert e is expected(s, r)
    assert e.trajectory.dtype == np.float64 and not e.trajectory.flags.writeable
    assert e.trajectory.shape == (len(s.steps),) + s.table.shape
    assert e.dtype == "float32" and e.atol > 0 and e.floor == pytest.approx(np.abs(s.table).max() / 64)


# --------------------------------------------------------------------------- tolerance


def test_tolerance_rule_and_measures():
    traj = np.array([[[1.0, -2.0]], [[1.0, 0.0]]])
    e = Expected("r", traj, "float32", floor=0.25, atol=1e-9)
    ulp1, ulp2, ulp_floor = 2.0**-23, 2.0**-22, 2.0**-25
    np.testing.assert_array_equal(e.tolerance(), [[[ULPS * ulp1, ULPS * ulp2]], [[ULPS * ulp1, ULPS * ulp_floor]]])
    got = traj.copy()
    got[1, 0, 1] = 3 * ulp_floor
    d = e.deviation(got)
    assert d.max_abs == 3 * ulp_floor and d.max_rel == 3 * ulp_floor / 0.25 and d.max_ulps == 3.0
    assert d.score == 3 / ULPS and d.matched
    assert e.first_violation(got) is None
    got[1, 0, 0] += 100 * ulp1
    got[0, 0, 1] += 100 * ulp2
    assert e.first_violation(got) == (1, 0, 1)
    wide = Expected("r", traj, "float32", floor=0.25, atol=1.0)
    assert wide.deviation(got).matched and wide.tolerance().min() == 1.0
    got[0, 0, 0] = np.nan
    assert e.deviation(got).score == math.inf and e.first_violation(got) == (1, 0, 0)
    with pytest.raises(ValueError, match="shape"):
        e.deviation(got[:1])


def test_a_nan_where_the_semantics_has_one_matches():
    """eps = 0 and a zero gradient on a fresh row: 0 / 0, NaN in torch and in the references alike."""
    s = Scenario("eps0", "adam", "0 / 0", Hyper(lr=0.1, eps=0.0), np.ones((2, 1)),
                 (Step([0], [[0.0]]), Step([0, 1], [[1.0], [1.0]])))
    with np.errstate(invalid="ignore"):
        assert np.isnan(_traj("lazy", s)[:, 0]).all()
    report = check(KitAdamLazy, scenarios=[s])
    assert report.results[0].deviations["lazy"].score == 0 and report.divergence is None
    e = expected(s, reference("lazy"))
    finite = np.nan_to_num(e.trajectory)
    assert e.deviation(finite).score == math.inf and e.first_violation(finite) == (1, 0, 0)


def test_float64_tolerance_is_tight_and_float32_follows_the_noise():
    e64 = expected(scenario("adam_gap_long"), reference("dense_adamw"))
    assert e64.tolerance().max() < 1e-12 * np.abs(e64.trajectory).max()
    e32 = expected(scenario("adam_float32"), reference("dense_adamw"))
    assert e32.atol >= SAFETY["float32"] * 1e-8 and e32.tolerance().max() < 1e-4


# --------------------------------------------------------------------------- candidates, runs, recordings


class _Skips:
    family = "adam"

    def __init__(self, table, hyper):
        raise NotImplementedError("nothing supported")


class _Crashes(KitAdamLazy):
    name = "crashes on empty steps"

    def step(self, row_ids, row_grads):
        if row_ids.size == 0:
            raise RuntimeError("empty batch")
        super().step(row_ids, row_grads)


class _WrongShape(KitSgdLazy):
    def table(self):
        return super().table()[:1]


def test_kit_adapters_follow_the_protocol():
    assert isinstance(KitAdamLazy(np.zeros((2, 2)), Hyper()), Candidate)


def test_run_records_skips_errors_and_shapes():
    s = scenario("adam_empty_steps")
    assert run(_Skips, s).skipped == "nothing supported"
    crashed = run(_Crashes, s)
    assert crashed.trajectory is None and crashed.error == "step 3: RuntimeError: empty batch"
    bad = run(_WrongShape, scenario("sgd_gap"))
    assert bad.error.startswith("step 1: ValueError: table() has shape (1, 3)")
    ok = run(KitAdamLazy, s)
    assert ok.trajectory.shape == (8, 4, 3) and ok.trajectory.dtype == np.float64 and not ok.trajectory.flags.writeable
    assert run(KitAdamLazy, scenario("adam_float32")).trajectory.dtype == np.float32

    class NoEntries:
        family = "adam"

        def __init__(self, table, hyper):
            self.p = table

        def step(self, row_ids, row_grads):
            pass

        def table(self):
            return self.p

    assert run(NoEntries, scenario("adam_incomplete_rows")).skipped == "takes complete rows only (no step_entries)"
    assert run(NoEntries, scenario("adam_schedule_cosine")).skipped == (
        "takes a constant learning rate only (no 'schedules = True')")

    class Schedules(NoEntries):
        schedules = "yes"

    with pytest.raises(ValueError, match="Schedules.schedules must be True or False, got 'yes'"):
        run(Schedules, scenario("adam_schedule_cosine"))


def test_a_candidate_without_schedules_is_checked_as_before_without_the_schedule_scenarios(tmp_path):
    """Its default scenarios leave the schedule ones out, its report names no current-rate reference, and its
    recording says so: the reports of every constant-rate candidate are what they were."""
    class ConstantOnly(KitAdamLazy):
        schedules = False

    report = check(ConstantOnly)
    assert [r.scenario for r in report.results] == [s.name for s in scenarios("adam", schedules=False)]
    assert report.ok and "current_rate" not in report.titles and report.tally["lazy"] == (13, 13)
    recording = record(ConstantOnly)
    assert not recording.schedules and record(KitAdamLazy).schedules
    recording.save(tmp_path / "c.npz")
    assert str(check(Recording.load(tmp_path / "c.npz"))) == str(report)
    record(KitAdamLazy).save(tmp_path / "s.npz")
    assert Recording.load(tmp_path / "s.npz").schedules and check(Recording.load(tmp_path / "s.npz")).ok
    with pytest.raises(ValueError, match="claims = 'adamax' is not a adam reference"):
        check(ConstantOnly, claims="adamax")
    assert check(ConstantOnly, claims="current_rate").tally["current_rate"] == (0, 0)  # a claim is always reported


def test_a_crash_is_reported_not_raised():
    report = check(_Crashes)
    assert not report.ok and set(report.errors) == {"adam_empty_steps"}
    assert "errors: adam_empty_steps" in str(report)
    assert report.semantics == "lazy"  # every scenario that ran matches


def test_recording_round_trip_and_staleness(tmp_path):
    recording = record(KitSgdLazy, versions={"numpy": np.__version__})
    path = tmp_path / "kit.npz"
    recording.save(path)
    loaded = Recording.load(path)
    assert (loaded.candidate, loaded.family, loaded.claims, loaded.versions) == (
        "sparse_opt SparseSgdTable(LAZY)", "sgd", "sgd_lazy", {"numpy": np.__version__})
    for name, r in recording.runs.items():
        assert np.array_equal(loaded.runs[name].trajectory, r.trajectory)
    assert str(check(loaded)) == str(check(recording)) == str(check(KitSgdLazy))
    stale = dict(loaded.runs)
    stale["sgd_gap"] = replace(stale["sgd_gap"], fingerprint="0" * 64)
    report = check(replace(loaded, runs=stale))
    assert "stale" in report.errors["sgd_gap"] and not report.ok
    partial = check(replace(loaded, runs={"sgd_gap": loaded.runs["sgd_gap"]}))
    assert [r.scenario for r in partial.results if r.skipped] == [s.name for s in scenarios("sgd")][1:]


def test_claims_must_name_a_reference_of_the_family():
    with pytest.raises(ValueError, match="not a adam reference"):
        check(KitAdamLazy, claims="sgd_lazy")
    assert check(KitAdamLazy, claims="sparse_adam").divergence.reference == "sparse_adam"


# --------------------------------------------------------------------------- the report


def test_report_text_is_stable_and_complete():
    report = check(KitAdamLazy)
    text = str(report)
    assert text == str(check(KitAdamLazy))
    lines = text.splitlines()
    assert lines[0] == "candidate: sparse_opt SparseAdamTable(LAZY) (family adam)"
    assert lines[2].startswith("verdict: lazy (17/17 scenarios) -- sparse_opt LAZY")
    assert "first divergence from lazy: none" in lines
    for s in scenarios("adam"):
        assert sum(line.startswith(s.name + " ") for line in lines) == 2
    for i, r in enumerate(references("adam"), 1):
        assert any(line.startswith(f"[{i}]") and f" {r.name} " in line for line in lines)
    matrix = [line for line in lines if line.startswith("adam_") and ("*" in line or " - " in line)]
    assert len({len(line.rstrip()) for line in matrix}) <= 2


def test_report_prints_rounding_as_its_bound_and_real_deviations_as_numbers():
    """A deviation within ROUNDING_ULPS prints as the bound (its digits change with numpy's SIMD kernels); a larger
    one as max abs / max rel / ulps, in the text and in the HTML."""
    import re

    from sparse_opt.conformance.report import ROUNDING_ULPS

    report = check(KitAdamLazy)
    text, page = str(report), report._repr_html_()
    rounding = [r for r in report.results if r.ran and r.deviations["lazy"].max_ulps <= ROUNDING_ULPS]
    assert rounding, "the kit's LAZY matches lazy to rounding in some scenario"
    for r in rounding:
        line = next(line for line in text.splitlines() if line.startswith(r.scenario + " "))
        assert "<= 4 ulps (rounding)" in line and not re.search(r"e-1\d", line), line
    assert not re.search(r"\d\.\de-1[3-9]", text)  # no rounding-level digits anywhere in the text
    assert "within 4 ulps: rounding" in page
    far = next(r for r in report.results if r.ran and r.deviations["sparse_adam"].max_ulps > 1e6)
    row = next(line for line in text.splitlines() if line.startswith(far.scenario + " ") and "*" in line)
    assert re.search(r"\de\+\d\d", row)  # sparse_adam's column prints the real ulps


def test_report_fields():
    report = check(KitAdamLazy)
    assert report.ok and report.semantics == "lazy" and report.verdict == ("lazy",)
    assert report.tally["lazy"] == (17, 17) and report.tally["sparse_adam"][1] == 15
    gap = next(r for r in report.results if r.scenario == "adam_gap_2")
    assert gap.best == "lazy" and gap.matches == ("lazy", "lazy_l2") and gap.ran


def test_report_html_is_escaped():
    class Odd(KitSgdLazy):
        name = "<odd & co>"

    page = check(Odd)._repr_html_()
    assert "&lt;odd &amp; co&gt;" in page and "<odd" not in page
    assert page.count("<table>") == 2 and all(r.name in page for r in references("sgd"))


def test_the_package_docstring_example_behaves_as_it_says():
    import sparse_opt.conformance as conformance

    doc = conformance.__doc__
    code = doc[doc.index("    import numpy as np"):doc.index("    print(check(MySparseSgd))")]
    namespace: dict = {}
    exec(compile("\n".join(line[4:] for line in code.splitlines()), "docstring", "exec"), namespace)
    report = check(namespace["MySparseSgd"])
    assert report.divergence.scenario == "sgd_maximize" and report.tally["sgd_lazy"] == (5, 6)

"""sparse_opt.demos.conformance_demo: verdict table, semantics table, gap runs and plot, live re-check (notebook 08)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from sparse_opt.conformance import Hyper, Recording, Run, check, expected, reference, references, scenario, scenarios
from sparse_opt.conformance.adapters.kit import KitAdamDenseEquivalent, KitAdamDormancyDecay, KitAdamLazy
from sparse_opt.demos import conformance_demo as cd

# What notebook 08 states (and tests/test_conformance_libraries.py asserts by adapter).
RECORDED_VERDICTS = {
    "torch.optim.SparseAdam": "sparse_adam",
    "torch.optim.Adam": "dense_l2",
    "torch.optim.AdamW": "dense_adamw",
    "keras.optimizers.Adam (Keras 3, IndexedSlices)": "keras3_adam",
    "tf.compat.v1.train.AdamOptimizer (IndexedSlices)": "tf1_adam",
    "torch.optim.Adagrad (sparse)": "adagrad",
    "tf.raw_ops.ResourceSparseApplyAdagradV2": "tf_adagrad",
    "torch.optim.SGD": "sgd_dense",
    "torch.optim.SGD (sparse gradients)": "sgd_dense",
    "tf.raw_ops.ResourceSparseApplyMomentum": "tf_momentum",
}


@pytest.fixture(scope="module")
def recordings() -> dict[str, Recording]:
    return cd.load_recordings()


@pytest.fixture(scope="module")
def rows(recordings):
    return cd.verdict_rows(recordings)


# --------------------------------------------------------------------------- recordings and verdicts


def test_recordings_are_found_next_to_the_package_in_the_stated_order(recordings) -> None:
    assert cd.recordings_dir().name == "conformance" and cd.recordings_dir().parent.name == "tests"
    assert list(recordings) == list(cd.RECORDED)
    assert sorted(p.stem for p in cd.recordings_dir().glob("*.npz")) == sorted(cd.RECORDED)
    assert {cd.library_of(n) for n in cd.RECORDED} == {"torch", "tensorflow"}
    with pytest.raises(KeyError, match="no recorded adapter"):
        cd.library_of("FbgemmAdam")


def test_library_version_names_the_recorded_library(recordings) -> None:
    assert cd.library_version(recordings["TorchSparseAdam"]) == "torch 2.13.0+cpu"
    assert cd.library_version(recordings["KerasAdam"]) == "TF 2.21.0"
    with pytest.raises(ValueError, match="names no library"):
        cd.library_version(Recording("x", "adam", None, {}, {"numpy": "2"}))


def test_production_recordings_are_every_file_of_the_sub_folders_in_the_stated_order() -> None:
    production = cd.load_production_recordings()
    assert list(production) == [name.split("/")[1] for name in cd.PRODUCTION]
    on_disk = sorted(f"{p.parent.name}/{p.stem}" for p in cd.recordings_dir().glob("*/*.npz"))
    assert on_disk == sorted(cd.PRODUCTION)
    assert cd.library_version(production["FbgemmExactSgd"]) == "FBGEMM 1.8.0"
    assert cd.library_version(production["TorchrecSgd"]) == "TorchRec 1.8.0"  # the most specific library
    assert {r.candidate.split()[0] for r in production.values()} == {"FBGEMM", "TorchRec"}


def test_recorded_verdicts_are_the_stated_ones(rows) -> None:
    recorded = [r for r in rows if r.recorded]
    assert {r.optimizer: r.semantics for r in recorded} == RECORDED_VERDICTS
    assert [r.evidence.split()[0] for r in recorded] == ["torch"] * 3 + ["TF"] * 2 + ["torch", "TF", "torch",
                                                                                       "torch", "TF"]
    by_name = {r.optimizer: r for r in recorded}
    assert by_name["torch.optim.SparseAdam"].skipped == ("adam_weight_decay", "adam_schedule_weight_decay")
    assert by_name["torch.optim.AdamW"].skipped == ()


def test_each_recording_parts_from_its_nearest_semantics_where_the_table_says(recordings, rows) -> None:
    by_name = {r.optimizer: r for r in rows if r.recorded}
    for recording in recordings.values():
        report = check(recording)
        row = by_name[recording.candidate]
        assert report.verdict == (row.semantics,) and report.divergence is None and not report.errors
        told = next(res for res in report.results if res.scenario == row.parting.scenario)
        assert row.semantics in told.matches and row.parting.second not in told.matches


def test_modelled_rows_are_the_references_written_from_source(rows) -> None:
    modelled = [r for r in rows if not r.recorded]
    assert [(r.optimizer, r.semantics, r.evidence) for r in modelled] == [
        (m.optimizer, m.semantics, m.evidence) for m in cd.MODELLED
    ]
    assert {r.evidence for r in modelled} == {"modelled", "read from source"}
    for r in modelled:
        if r.evidence == "modelled" and r.semantics not in ("lazy", "sparse_adam"):
            assert reference(r.semantics).modelled, r  # the FBGEMM / HugeCTR-only references say so
        assert r.parting == cd.nearest(r.semantics) and r.skipped == ()
    names = " ".join(r.optimizer for r in modelled)
    assert "FBGEMM" in names and "HugeCTR" in names and "TF Addons" in names


def test_format_verdicts_prints_one_fixed_width_line_per_row(rows) -> None:
    text = cd.format_verdicts(rows)
    lines = text.splitlines()
    assert len(lines) == len(rows) + 2 and lines[1] == "-" * len(lines[0])
    assert lines[0].split()[:3] == ["optimizer", "run", "as"]
    assert "torch.optim.SparseAdam" in lines[2] and "sparse_adam" in lines[2] and "adam_near_eps" in lines[2]
    assert lines[2].endswith("2.23e-01")
    assert len({len(line) for line in lines[2:]}) == 1  # aligned


def test_format_verdicts_writes_none_for_a_recording_that_matches_nothing() -> None:
    row = cd.VerdictRow("mystery", "torch 0", "adam", None, (), None, recorded=True)
    assert cd.format_verdicts([row]).splitlines()[2].split()[3:] == ["none", "-", "-", "-"]


# --------------------------------------------------------------------------- parting and nearest


@pytest.mark.parametrize(("name", "nearest", "scenario_name"), [
    ("sparse_adam", "lazy", "adam_near_eps"),
    ("dense_l2", "dense_adamw", "adam_weight_decay"),
    ("dense_adamw", "dense_l2", "adam_weight_decay"),
    ("keras3_adam", "tf1_adam", "adam_repeated_ids"),
    ("rowwise_bias", "lazy", "adam_late_first_touch"),
    ("hugectr_lazy", "sparse_adam", "adam_late_first_touch"),
    ("dormancy_decay", "lazy", "adam_gap_long"),
    ("adagrad", "tf_adagrad", "adagrad_repeated_ids"),
    ("sgd_dense", "sgd_lazy", "sgd_gap"),
    ("tf_momentum", "sgd_lazy", "sgd_repeated_ids"),
])
def test_nearest_semantics_and_the_scenario_that_tells_them_apart(name, nearest, scenario_name) -> None:
    p = cd.nearest(name)
    assert (p.first, p.second, p.scenario) == (name, nearest, scenario_name)
    assert p.rel > cd.CLEAR and p.agree < p.shared


def test_tf1_and_hugectr_global_differ_only_by_rounding() -> None:
    p = cd.nearest("tf1_adam")
    assert p.second == "hugectr_dense" and p.rel < 1e-5  # no scenario separates them by 1%: the largest is shown
    a, b = reference("tf1_adam"), reference("hugectr_dense")
    rels = {s.name: expected(s, b).deviation(expected(s, a).trajectory).max_rel
            for s in scenarios("adam") if a.applies_to(s) and b.applies_to(s)}
    assert max(rels.values()) < cd.CLEAR and p.rel == max(rels.values()) and p.scenario == max(rels, key=rels.get)


def test_parting_picks_the_first_clear_scenario_in_catalogue_order() -> None:
    p = cd.parting("sparse_adam", "lazy")
    a, b = reference("sparse_adam"), reference("lazy")
    shared = [s for s in scenarios("adam") if a.applies_to(s) and b.applies_to(s)]
    rels = [expected(s, b).deviation(expected(s, a).trajectory).max_rel for s in shared]
    first_clear = next(s.name for s, r in zip(shared, rels) if r > cd.CLEAR)
    assert p.scenario == first_clear and p.shared == len(shared) == 15 and p.agree == 1
    assert p.median_rel == pytest.approx(float(np.median(rels)))


def test_parting_rejects_references_of_two_families() -> None:
    with pytest.raises(ValueError, match="not of one family"):
        cd.parting("lazy", "adagrad")


# --------------------------------------------------------------------------- what each semantics does


def test_semantics_table_covers_every_reference() -> None:
    assert list(cd.SEMANTICS) == [r.name for r in references()]
    text = cd.format_semantics()
    assert len(text.splitlines()) == len(references()) + 2
    assert "sqrt(v_hat)" in cd.format_semantics(["lazy"]) and "visits" in cd.format_semantics(["rowwise_bias"])


def _first_update(p_before, g, t, hyper, eps_place, bias):
    """The update of an entry at its first touch (zero moments) at global step t, per eps placement and counter."""
    b1, b2, lr, eps = hyper.beta1, hyper.beta2, hyper.lr, hyper.eps
    k = 1 if bias == "visits" else t
    m, v = (1 - b1) * g, (1 - b2) * g * g
    if eps_place == "sqrt(v_hat)":
        return lr * (m / (1 - b1**k)) / (np.sqrt(v / (1 - b2**k)) + eps)
    return lr * np.sqrt(1 - b2**k) / (1 - b1**k) * m / (np.sqrt(v) + eps)


def _adam_refs_on(scenario_name: str) -> list[str]:
    # the references that apply there (current_rate only applies to the scenarios with a schedule)
    return [r.name for r in references("adam") if r.applies_to(scenario(scenario_name))]


@pytest.mark.parametrize("name", _adam_refs_on("adam_near_eps"))
def test_eps_column_matches_the_first_update_in_adam_near_eps(name) -> None:
    s = scenario("adam_near_eps")
    traj = expected(s, reference(name)).trajectory
    eps_place = cd.SEMANTICS[name].eps
    g1 = s.steps[0].row_grads[0, 0]  # row 0, looked up once at step 1
    if name == "hugectr_lazy":  # the first touch's update is deferred to the second touch (step 2), k = 1
        moved = traj[0, 0, 0] - traj[1, 0, 0]
    else:
        moved = s.table[0, 0] - traj[0, 0, 0]
    assert moved == pytest.approx(_first_update(s.table[0, 0], g1, 1, s.hyper, eps_place, "global"), rel=1e-5)
    other = "sqrt(v)" if eps_place == "sqrt(v_hat)" else "sqrt(v_hat)"
    assert moved != pytest.approx(_first_update(s.table[0, 0], g1, 1, s.hyper, other, "global"), rel=1e-2)


@pytest.mark.parametrize("name", _adam_refs_on("adam_gap_10"))
def test_dormant_column_matches_row_1_of_adam_gap_10(name) -> None:
    traj = expected(scenario("adam_gap_10"), reference(name)).trajectory
    dormant = traj[2:12, 1]  # row 1 sleeps through steps 3 .. 12 (after its touch at step 2)
    moves = bool((np.diff(dormant, axis=0) != 0).any())
    assert moves == cd.SEMANTICS[name].dormant.startswith("decay and move"), name


@pytest.mark.parametrize("name", _adam_refs_on("adam_late_first_touch"))
def test_bias_column_matches_a_first_touch_at_global_step_8(name) -> None:
    s = scenario("adam_late_first_touch")
    traj = expected(s, reference(name)).trajectory
    assert (traj[:7, 1] == s.table[1]).all()  # untouched through step 7: no semantics moves a row with m = 0
    step8 = s.steps[7]
    g = step8.row_grads[list(step8.row_ids).index(1), 0]
    moved = traj[6, 1, 0] - traj[7, 1, 0]
    bias = cd.SEMANTICS[name].bias
    if bias == "step of last touch":
        assert moved == 0.0  # HugeCTR LazyGlobal: deferred
        return
    counter = "visits" if bias == "visits of the row" else "global"
    want = _first_update(s.table[1, 0], g, 8, s.hyper, cd.SEMANTICS[name].eps, counter)
    assert moved == pytest.approx(want, rel=1e-5), name
    other = "global" if counter == "visits" else "visits"
    assert moved != pytest.approx(_first_update(s.table[1, 0], g, 8, s.hyper, cd.SEMANTICS[name].eps, other),
                                  rel=1e-2)


# --------------------------------------------------------------------------- separation


def test_separation_is_wide() -> None:
    agree, differ = cd.separation()
    assert agree.score <= 1.0 < differ.score
    assert differ.score > 2000 * agree.score
    assert (agree.first, agree.second, agree.scenario) == ("dense_adamw", "tf1_adam", "adam_float32")
    assert round(agree.score, 2) == 0.05 and round(differ.score) == 132  # float32 safety factor 128 (tolerance.py)
    assert cd.separation("float32") == (agree, differ)  # both closest calls are in the float32 scenarios
    agree64, differ64 = cd.separation("float64")
    assert agree64.score == 0.0 and differ64.score > 1e6


# --------------------------------------------------------------------------- the gap scenario and its runs


def test_gap_scenario_is_the_catalogue_construction_for_any_k() -> None:
    for k in (1, 2, 10):
        mine, theirs = cd.gap_scenario(k), scenario(f"adam_gap_{k}")
        assert [st.row_ids.tolist() for st in mine.steps] == [st.row_ids.tolist() for st in theirs.steps]
        assert mine.hyper == theirs.hyper == cd.GAP_HYPER
    s = cd.gap_scenario(25)
    assert len(s.steps) == 30 and [t for t, st in enumerate(s.steps, 1) if 1 in st.row_ids] == [2, 28]
    assert s.table.shape == (4, 3) and s.dtype == np.float64
    assert np.array_equal(cd.gap_scenario(25).table, s.table)  # seeded
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="positive integer"):
            cd.gap_scenario(bad)


def test_gap_runs_of_the_kit_lazy_candidate() -> None:
    runs = cd.gap_runs(10, KitAdamLazy)
    assert runs.candidate == "kit LAZY" and runs.touches == (2, 13) and runs.entry == (1, 0)
    assert runs.steps.tolist() == list(range(16)) and runs.candidate_values.shape == (16,)
    assert set(runs.values) == set(cd.GAP_REFERENCES) and all(v.shape == (16,) for v in runs.values.values())
    assert all(s.shape == (15,) for s in runs.scores.values())
    assert runs.matches() == ("lazy",)
    assert {n: runs.first_parting(n) for n in runs.scores} == {
        "dense_adamw": 3, "lazy": None, "dormancy_decay": 13, "sparse_adam": 2, "hugectr_lazy": 2}
    s = cd.gap_scenario(10)
    assert runs.candidate_values[0] == runs.values["lazy"][0] == s.table[1, 0]
    # LAZY, DORMANCY_DECAY and SparseAdam hold the dormant entry; dense Adam coasts; HugeCTR defers
    for name in ("lazy", "dormancy_decay", "sparse_adam"):
        assert (runs.values[name][2:13] == runs.values[name][2]).all()
    assert (np.diff(runs.values["dense_adamw"][2:13]) != 0).all()
    assert (runs.values["hugectr_lazy"][:13] == s.table[1, 0]).all()


@pytest.mark.parametrize(("candidate", "semantics"), [
    (KitAdamDormancyDecay, "dormancy_decay"), (KitAdamDenseEquivalent, "dense_adamw")])
def test_gap_runs_of_the_other_kit_modes_match_their_reference(candidate, semantics) -> None:
    for k in (1, 7, 60):
        assert cd.gap_runs(k, candidate).matches() == (semantics,)


def test_gap_runs_refuse_a_candidate_that_does_not_run() -> None:
    class Refuses:
        family = "adam"

        def __init__(self, table, hyper):
            raise NotImplementedError("not today")

    with pytest.raises(ValueError, match="not today"):
        cd.gap_runs(3, Refuses)


def test_candidate_label() -> None:
    assert [cd.candidate_label(c) for c in cd.GAP_CANDIDATES.values()] == list(cd.GAP_CANDIDATES)

    class Mine:
        family = "adam"

    assert cd.candidate_label(Mine) == "Mine"
    Mine.name = "my adam"
    assert cd.candidate_label(Mine) == "my adam"


def test_plot_gap_draws_two_slide_ready_panels() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from sparse_opt.demos import figures

    fig = cd.plot_gap(10, KitAdamDenseEquivalent)
    assert isinstance(fig, Figure) and fig.dpi == figures.DPI and len(fig.axes) == 2
    top, bottom = fig.axes
    assert len(top.get_lines()) == len(cd.GAP_REFERENCES) + 1 + 2  # references, candidate dots, touch lines
    assert "dormant for 10 steps" in top.get_title() and top.title.get_fontsize() == figures.TITLE
    assert bottom.get_yscale() == "log"
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == len(cd.GAP_REFERENCES) + 1
    assert "kit DENSE_EQUIVALENT" in fig.legends[0].get_texts()[-1].get_text()
    dots = top.get_lines()[-1]
    np.testing.assert_array_equal(dots.get_ydata(), cd.gap_runs(10, KitAdamDenseEquivalent).candidate_values)
    # exact matches are drawn at the floor, not lost off a log axis
    dense = bottom.get_lines()[2]
    assert dense.get_label() == cd.GAP_REFERENCES["dense_adamw"]
    assert (dense.get_ydata() >= cd.SCORE_FLOOR).all() and (dense.get_ydata() <= 1.0).all()


def test_the_module_imports_without_matplotlib_and_plots_without_pyplot() -> None:
    code = (
        "import sys; import sparse_opt.demos.conformance_demo as cd; "
        "assert 'matplotlib' not in sys.modules, 'imported matplotlib'; "
        "import importlib.util; "
        "ok = importlib.util.find_spec('matplotlib') is None or (cd.plot_gap(3) is not None); "
        "assert 'matplotlib.pyplot' not in sys.modules, 'imported pyplot'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- live re-check


def test_live_recheck_skips_every_library_that_is_not_importable(recordings) -> None:
    results = cd.live_recheck(recordings, available={})
    assert [r.name for r in results] == list(cd.RECORDED)
    assert {r.status for r in results} == {"skipped"}
    assert results[0].message == "skipped: torch is not importable here (recorded with torch 2.13.0+cpu)"
    text = cd.format_live(results)
    assert text.splitlines()[-1] == "0 re-run with the recorded verdict, 0 differing, 10 skipped."


def test_live_recheck_checks_importability_itself(recordings) -> None:
    subset = {name: recordings[name] for name in ("TorchSgd",)}
    expected_status = "skipped" if importlib.util.find_spec("torch") is None else "same"
    assert [r.status for r in cd.live_recheck(subset)] == [expected_status]


@pytest.mark.parametrize("library", ["torch", "tensorflow"])
def test_live_recheck_where_the_library_imports(recordings, library) -> None:
    pytest.importorskip(library)
    subset = {n: r for n, r in recordings.items() if cd.library_of(n) == library}
    results = cd.live_recheck(subset, available={library: True})
    assert [r.status for r in results] == ["same"] * len(subset), cd.format_live(results)
    assert all("as recorded" in r.message for r in results)


def test_live_recheck_reports_a_difference_and_a_match(recordings, monkeypatch) -> None:
    """Without the library: the live run is faked from the recording, perturbed or not."""
    recorded = recordings["TorchSgd"]
    moved = dict(recorded.runs)
    run = moved["sgd_gap"]
    moved["sgd_gap"] = Run(run.scenario, run.fingerprint, trajectory=run.trajectory * (1 + 1e-6))
    perturbed = Recording(recorded.candidate, recorded.family, recorded.claims, moved, recorded.versions)
    monkeypatch.setattr(cd, "_installed_version", lambda library: "9.9")
    for live, status in ((recorded, "same"), (perturbed, "differs")):
        monkeypatch.setattr(cd, "record", lambda candidate, live=live: live)
        (result,) = cd.live_recheck({"TorchSgd": recorded}, available={"torch": True})
        assert result.status == status, result.message
    # a relative change of 1e-6 is far outside float64 tolerance: the run no longer matches sgd_dense
    assert result.message == "torch 9.9: verdict none (recorded sgd_dense); sgd_gap trajectory moved"
    assert cd.format_live([result]).splitlines()[-1] == "0 re-run with the recorded verdict, 1 differing, 0 skipped."


# --------------------------------------------------------------------------- describe


class KeepLast:
    """A lazy Adam whose gradient builder keeps the last duplicate (the notebook's planted bug)."""

    family, claims = "adam", "lazy"

    def __init__(self, table, hyper):
        if hyper.maximize or hyper.weight_decay:
            raise NotImplementedError("no maximize or weight_decay")
        self.p, self.h, self.t = table.astype(np.float64), hyper, 0
        self.m, self.v = np.zeros_like(self.p), np.zeros_like(self.p)
        self.dtype = table.dtype

    def step(self, row_ids, row_grads):
        h = self.h
        self.t += 1
        g = np.zeros_like(self.p)
        for r, row in zip(row_ids, row_grads):
            g[r] = row
        rows = np.unique(row_ids)
        self.m[rows] = h.beta1 * self.m[rows] + (1 - h.beta1) * g[rows]
        self.v[rows] = h.beta2 * self.v[rows] + (1 - h.beta2) * g[rows] ** 2
        bc1, bc2 = 1 - h.beta1**self.t, 1 - h.beta2**self.t
        self.p[rows] -= h.lr / bc1 * self.m[rows] / (np.sqrt(self.v[rows]) / np.sqrt(bc2) + h.eps)

    def table(self):
        return self.p.astype(self.dtype)


def test_describe_a_match_a_divergence_a_skip_and_an_error() -> None:
    assert cd.describe(check(KitAdamLazy)) == "sparse_opt SparseAdamTable(LAZY) implements lazy (17 of 17 scenarios)."
    text = cd.describe(check(KeepLast))
    assert text.startswith("KeepLast matches no reference everywhere; closest lazy (")
    assert "first divergence from lazy: adam_repeated_ids step 1 row 1 col 0" in text
    assert "skipped (adam_incomplete_rows, adam_maximize, adam_weight_decay)" in text

    class Never:
        family, name = "sgd", "Never"

        def __init__(self, table, hyper):
            raise NotImplementedError("nothing yet")

    assert cd.describe(check(Never)) == "Never: no scenario ran (6 skipped; the first because: nothing yet)."

    class Crashes:
        family, name = "sgd", "Crashes"

        def __init__(self, table, hyper):
            self.p = np.array(table)

        def step(self, row_ids, row_grads):
            raise RuntimeError("boom")

        def table(self):
            return self.p

    assert cd.describe(check(Crashes)) == (
        "Crashes: no scenario ran (6 stopped with an error; the first, sgd_gap: step 1: RuntimeError: boom).")

    class Claims(KeepLast):
        claims, name = "sparse_adam", "Claims"

    text = cd.describe(check(Claims))
    assert "; it claims sparse_adam; first divergence from sparse_adam:" in text


def test_describe_mentions_errors_next_to_runs() -> None:
    class SometimesCrashes:
        family, claims, name = "sgd", "sgd_lazy", "SometimesCrashes"

        def __init__(self, table, hyper):
            self.p, self.h, self.crash = np.array(table), hyper, hyper.maximize
            self.buf = np.zeros_like(self.p)

        def step(self, row_ids, row_grads):
            if self.crash:
                raise RuntimeError("boom")
            g = np.zeros_like(self.p)
            np.add.at(g, row_ids, row_grads)
            rows = np.unique(row_ids)
            g[rows] += self.h.weight_decay * self.p[rows]
            self.buf[rows] = self.h.momentum * self.buf[rows] + g[rows]
            self.p[rows] -= self.h.lr * self.buf[rows]

        def table(self):
            return self.p.copy()

    assert cd.describe(check(SometimesCrashes)) == (
        "SometimesCrashes implements sgd_lazy (5 of 5 scenarios); errors in sgd_maximize.")


def test_hyper_of_the_gap_scenario_is_the_catalogue_adam() -> None:
    assert cd.GAP_HYPER == Hyper(lr=0.0625, beta1=0.9, beta2=0.999, eps=1e-8)

"""The candidate protocol as the harness enforces it: fresh inputs, recorded crashes, clear refusals,
the ``read(rows)`` training loop, and ``ok`` only when every scenario that tells the verdict apart ran."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sparse_opt.conformance import Hyper, Recording, check, record, run, scenario, scenarios
from sparse_opt.conformance.__main__ import main
from sparse_opt.conformance.adapters.kit import KitAdamLazy, KitSgdLazy


# --------------------------------------------------------------------------- inputs are the candidate's own copies


class _MutatesHyper(KitAdamLazy):
    """Writes into the hyper-parameters it is given (through the frozen dataclass) and into its table."""

    name = "mutates its inputs"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        object.__setattr__(hyper, "lr", 1.0)
        object.__setattr__(hyper, "beta1", 0.0)
        table[:] = 0.0
        super().__init__(table, hyper)


def test_a_candidate_that_mutates_its_hyper_parameters_changes_no_later_check():
    """Failed before: every scenario shared its Hyper with the candidate, so later checks ran with lr = 1."""
    before = {s.name: (s.hyper, s.fingerprint) for s in scenarios("adam")}
    check(_MutatesHyper)
    assert all(s.hyper.lr == 0.0625 and s.hyper.beta1 == 0.9 for s in scenarios("adam")), "the catalogue changed"
    assert {s.name: (s.hyper, s.fingerprint) for s in scenarios("adam")} == before
    assert check(KitAdamLazy).ok


class _InitCrashes(KitSgdLazy):
    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        if hyper.weight_decay:
            raise ValueError("weight decay too large")
        super().__init__(table, hyper)


def test_an_exception_in_init_is_recorded_for_that_scenario():
    """Failed before: a ValueError in __init__ escaped check() (only NotImplementedError was caught)."""
    r = run(_InitCrashes, scenario("sgd_weight_decay"))
    assert r.trajectory is None and r.error == "__init__: ValueError: weight decay too large" and not r.skipped
    report = check(_InitCrashes)
    assert report.errors == dict.fromkeys(("sgd_weight_decay", "sgd_schedule_weight_decay"),
                                          "__init__: ValueError: weight decay too large") and not report.ok
    assert report.semantics == "sgd_lazy"  # the other scenarios were judged


class _NoFamily:
    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        self.p = table

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        pass

    def table(self) -> np.ndarray:
        return self.p


class _BadFamily(_NoFamily):
    family = "lamb"


def test_what_is_not_a_candidate_class_is_told_what_the_protocol_needs():
    """Failed before: AttributeError ('family') or "'KitAdamLazy' object is not callable" from deep inside."""
    needs = re.escape("a candidate is a class with a 'family' attribute (one of adam, adagrad, sgd) and methods")
    with pytest.raises(TypeError, match=rf"{needs}.*_NoFamily has no 'family' attribute"):
        check(_NoFamily)
    with pytest.raises(TypeError, match=rf"{needs}.*_BadFamily has family = 'lamb'"):
        check(_BadFamily)
    instance = KitAdamLazy(np.zeros((2, 2)), Hyper())
    with pytest.raises(TypeError, match="pass the class KitAdamLazy itself, not an instance"):
        check(instance)
    with pytest.raises(TypeError, match="pass the class KitAdamLazy itself"):
        record(instance)
    with pytest.raises(TypeError, match="pass the class KitAdamLazy itself"):
        run(instance, scenario("adam_gap_1"))
    with pytest.raises(TypeError, match=needs):
        check("sparse_opt.conformance.adapters.kit:KitAdamLazy")


def test_the_command_line_refuses_a_non_candidate_with_the_same_message(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["check-vectors", str(tmp_path), "--candidate", "sparse_opt.conformance.adapters.kit:CANDIDATES"])
    assert "a candidate is a class with a 'family' attribute" in capsys.readouterr().err


# --------------------------------------------------------------------------- read(rows): the training loop


class CatchUpOnRead:
    """Dense Adam kept lazily: a row's zero-gradient steps are replayed when it is looked up, read or printed.

    Each replayed step is dense Adam's own update with ``g = 0``, entry for entry
    the equations of the ``dense_adamw`` reference, so the rows it reads are
    dense Adam's exactly -- but only once it has caught them up.
    """

    family, claims = "adam", "dense_adamw"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        if hyper.weight_decay or hyper.maximize:
            raise NotImplementedError("no weight_decay, no maximize")
        dt = table.dtype.type
        self.lr, self.b1, self.b2, self.eps, self.one = dt(hyper.lr), dt(hyper.beta1), dt(hyper.beta2), \
            dt(hyper.eps), dt(1)
        self.p, self.m, self.v = table.copy(), np.zeros_like(table), np.zeros_like(table)
        self.done, self.t = np.zeros(table.shape[0], np.int64), 0

    def _apply(self, r: int, t: int, g: np.ndarray) -> None:
        b1, b2, one = self.b1, self.b2, self.one
        self.m[r] = b1 * self.m[r] + (one - b1) * g
        self.v[r] = b2 * self.v[r] + (one - b2) * g**2
        self.p[r] = self.p[r] - self.lr / (one - b1**t) * self.m[r] / (
            np.sqrt(self.v[r]) / np.sqrt(one - b2**t) + self.eps)
        self.done[r] = t

    def _catch_up(self, rows: np.ndarray, upto: int) -> None:
        for r in rows:
            for t in range(self.done[r] + 1, upto + 1):
                self._apply(r, t, np.zeros_like(self.p[r]))

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self.t += 1
        g = np.zeros_like(self.p)
        np.add.at(g, row_ids, row_grads)
        rows = np.unique(row_ids)
        self._catch_up(rows, self.t - 1)
        for r in rows:
            self._apply(r, self.t, g[r])

    def read(self, rows: np.ndarray) -> np.ndarray:
        self._catch_up(rows, self.t)
        return self.p[rows].copy()

    def table(self) -> np.ndarray:
        self._catch_up(np.arange(self.p.shape[0]), self.t)
        return self.p.copy()


class StaleRead(CatchUpOnRead):
    """Forgets to catch up on read: the rows the model reads are stale (table() still catches everything up)."""

    claims = "dense_adamw"

    def read(self, rows: np.ndarray) -> np.ndarray:
        return self.p[rows].copy()


def test_a_candidate_that_catches_up_on_read_passes_the_dense_reference():
    report = check(CatchUpOnRead)
    assert report.semantics == "dense_adamw" and report.divergence is None and not report.errors, str(report)
    skipped = {r.scenario for r in report.results if r.skipped}
    assert skipped == {"adam_incomplete_rows", "adam_maximize", "adam_weight_decay"}
    assert not report.ok and report.unrun == ("adam_incomplete_rows", "adam_maximize", "adam_weight_decay")


def test_a_stale_read_is_caught_at_the_first_row_read_after_a_gap():
    """Failed before: read() was never called; table() caught every row up after each step, so it passed."""
    report = check(StaleRead)
    assert "dense_adamw" not in report.verdict and not report.ok
    d = report.divergence
    # adam_late_first_touch has no dormant step between touches with non-zero moments (row 1 at steps 8, 9, 10);
    # adam_gap_1 touches row 1 at steps 2 and 4: read before step 4, it misses step 3's dense update
    assert (d.scenario, d.step, d.row) == ("adam_gap_1", 3, 1), str(report)
    s = scenario("adam_gap_1")
    assert [t for t, st in enumerate(s.steps, 1) if 1 in st.row_ids] == [2, 4]


def test_a_training_loop_run_observes_the_rows_looked_up_and_the_whole_table_at_the_end():
    s = scenario("adam_gap_10")
    r = run(CatchUpOnRead, s)
    assert r.observed is not None and r.observed.shape == (len(s.steps), s.table.shape[0])
    for t in range(1, len(s.steps)):
        assert set(np.flatnonzero(r.observed[t - 1])) == set(s.steps[t].row_ids.tolist())
    assert r.observed[-1].all()
    assert run(KitAdamLazy, s).observed is None  # no read(): the whole table after every step


class _ReadsGarbageFirst(CatchUpOnRead):
    def read(self, rows: np.ndarray) -> np.ndarray:
        return super().read(rows) + (1.0 if self.t == 0 else 0.0)


class _ReadsWrongShape(CatchUpOnRead):
    def read(self, rows: np.ndarray) -> np.ndarray:
        return self.p.copy()


def test_read_results_are_checked():
    s = scenario("adam_gap_1")
    assert run(_ReadsGarbageFirst, s).error == (
        "step 1: ValueError: read(rows) before the first step is not the initial table")
    assert run(_ReadsWrongShape, s).error.startswith("step 1: ValueError: read(rows) before step 1 has shape (4, 3)")


def test_a_training_loop_recording_round_trips(tmp_path):
    recording = record(StaleRead, scenarios("adam")[:3])
    recording.save(tmp_path / "stale.npz")
    loaded = Recording.load(tmp_path / "stale.npz")
    for name, r in recording.runs.items():
        assert np.array_equal(loaded.runs[name].observed, r.observed)
    chosen = scenarios("adam")[:3]
    assert str(check(loaded, scenarios=chosen)) == str(check(recording, scenarios=chosen))


# --------------------------------------------------------------------------- ok only when the distinguishing ran


class _NoWeightDecay(KitAdamLazy):
    name = "lazy Adam without weight decay"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        if hyper.weight_decay:
            raise NotImplementedError("no weight_decay")
        super().__init__(table, hyper)


def test_a_candidate_that_skips_a_distinguishing_scenario_is_not_ok_and_the_first_line_says_which():
    """Failed before: ok, although adam_weight_decay alone tells lazy from lazy_l2 (both matched)."""
    report = check(_NoWeightDecay)
    assert report.verdict[:2] == ("lazy", "lazy_l2") and not report.errors
    assert report.unrun == ("adam_weight_decay", "adam_schedule_weight_decay") and not report.ok
    assert str(report).splitlines()[0] == (
        "candidate: lazy Adam without weight decay (family adam) -- not conclusive: skipped adam_weight_decay, "
        "adam_schedule_weight_decay, which tell lazy apart from other references")
    assert "not conclusive: skipped adam_weight_decay" in report._repr_html_()


def test_a_skip_that_does_not_concern_the_verdict_leaves_it_ok():
    """sparse_adam has no weight decay: a SparseAdam that skips adam_weight_decay is judged on all that applies."""

    class NoDecaySparseAdam(_NoWeightDecay):
        name, claims = "sparse", "sparse_adam"

    report = check(NoDecaySparseAdam)  # the kit's LAZY is not sparse_adam (eps placement): a divergence ...
    assert report.unrun == () and report.divergence.scenario == "adam_late_first_touch"  # ... but nothing unrun
    assert check(_NoWeightDecay, scenarios=scenarios("adam")[:3]).unrun == ()

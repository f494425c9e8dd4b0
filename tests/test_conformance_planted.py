"""Planted variants: the classifier names each one, and finds its first divergent step exactly.

Each planted candidate is a plain numpy Adam (or Adagrad) with one deliberate
deviation. Those that implement a production semantics must get that
reference as their verdict; the near misses (no reference implements them)
must match nothing, and the first divergence from the semantics they claim
must be the very first (scenario, step, row, column) where the deviation acts,
worked out below from the scenario definitions in ``catalogue.py``. The current-rate catch-up
(the production rule for the rates of skipped steps) is planted in the kit's own exact catch-up, fed the
scheduler's current rate instead of a schedule: it must be named ``current_rate``, never dense training.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

from sparse_opt import LazyMode, SparseAdamTable, SparseSgdTable
from sparse_opt.conformance import Hyper, check, expected, reference, run, scenario, scenarios
from sparse_opt.conformance.adapters.kit import (
    KitAdamDenseEquivalent,
    KitAdamDenseEquivalentOnRead,
    KitSgdDenseEquivalent,
    KitSgdDenseEquivalentOnRead,
    KitSgdLazy,
    _adam_config,
    _sgd_config,
)
from sparse_opt.conformance.semantics import adam, sgd


class PlantedAdam:
    """A per-row lazy Adam (decoupled decay at touches) with switches for the deviations below."""

    family = "adam"
    claims = "lazy"
    #: Bias correction by per-row visit count instead of the global step.
    bias_by_visits = False
    #: eps added to sqrt(v) (SparseAdam's alpha_t form) instead of sqrt(v_hat).
    eps_on_v = False
    #: Coalescing bug: a repeated id keeps its last gradient instead of the sum.
    keep_last_duplicate = False
    #: Empty steps do not advance the global step.
    count_empty_steps = True
    #: DORMANCY_DECAY: moments (and decay) caught up by beta**gap at the touch ...
    decay_moments = False
    #: ... forgetting this many of the dormant steps (the off-by-one).
    forgotten = 0
    #: Dense Adam (moments and coasting on every row), the weight decay still on the touched rows only.
    dense = False

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        self.p = table.astype(np.float64)
        self.m, self.v = np.zeros_like(self.p), np.zeros_like(self.p)
        self.last = np.zeros(table.shape[0], np.int64)
        self.visits = np.zeros(table.shape[0], np.int64)
        self.h, self.t, self.dtype = hyper, 0, table.dtype

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        h = self.h
        if row_ids.size or self.count_empty_steps:
            self.t += 1
        g = np.zeros_like(self.p)
        row_grads = -row_grads if h.maximize else row_grads
        if self.keep_last_duplicate:
            for r, row in zip(row_ids, row_grads):
                g[r] = row
        else:
            np.add.at(g, row_ids, row_grads)
        hit = np.zeros(self.p.shape[0], bool)
        hit[row_ids] = True
        self.visits[hit] += 1
        gap = (self.t - self.last)[:, None].astype(np.float64)
        exponent = np.maximum(gap - self.forgotten, 1.0) if self.decay_moments else 1.0
        moved = np.ones_like(hit) if self.dense else hit
        c = 1.0 - h.lr * h.weight_decay
        self.p[hit] *= (c**exponent * np.ones_like(self.p))[hit]
        m = h.beta1**exponent * self.m + (1 - h.beta1) * g
        v = h.beta2**exponent * self.v + (1 - h.beta2) * g * g
        self.m[moved], self.v[moved] = m[moved], v[moved]
        k = np.maximum(self.visits[:, None], 1).astype(np.float64) if self.bias_by_visits else float(self.t)
        bc1, bc2 = 1 - h.beta1**k, 1 - h.beta2**k
        if self.eps_on_v:
            update = h.lr * np.sqrt(bc2) / bc1 * self.m / (np.sqrt(self.v) + h.eps)
        else:
            update = h.lr / bc1 * self.m / (np.sqrt(self.v) / np.sqrt(bc2) + h.eps)
        self.p[moved] -= np.broadcast_to(update, self.p.shape)[moved]
        self.last[hit] = self.t

    def table(self) -> np.ndarray:
        return self.p.astype(self.dtype)


class VisitCountBias(PlantedAdam):
    bias_by_visits = True


class EpsOnSqrtV(PlantedAdam):
    eps_on_v = True


class KeepLastDuplicate(PlantedAdam):
    keep_last_duplicate = True


class EmptyStepsDoNotCount(PlantedAdam):
    count_empty_steps = False


class GapOffByOne(PlantedAdam):
    claims = "dormancy_decay"
    decay_moments, forgotten = True, 1


class DecayTouchedOnly(PlantedAdam):
    claims = "dense_adamw"
    dense = True


class SequentialAdagrad:
    """Adagrad applying repeated ids one after another (TF's kernel), claiming torch's semantics."""

    family, claims = "adagrad", "adagrad"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        if hyper.maximize:
            raise NotImplementedError("no maximize")
        self.p, self.h, self.t = table.astype(np.float64), hyper, 0
        self.acc = np.full_like(self.p, hyper.initial_accumulator_value)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self.t += 1
        clr = self.h.lr / (1 + (self.t - 1) * self.h.lr_decay)
        for r, g in zip(row_ids, row_grads):
            self.acc[r] += g * g
            self.p[r] -= clr * g / (np.sqrt(self.acc[r]) + self.h.eps)

    def table(self) -> np.ndarray:
        return self.p


# (candidate, claims, expected verdict, expected first divergence from the claim)
# The divergences, from catalogue.py: row 1 is first touched at step 8 of adam_late_first_touch (visit 1,
# global step 8); eps placement shows from the first update (row 0, step 1); adam_gap_1 re-touches row 1
# at step 4 after one dormant step (the first re-touch after a gap of 2); adam_repeated_ids looks up
# [1, 0, 1] at step 1; adam_empty_steps has empty steps 3 and 4, so step 5 is the first whose step count
# differs; adam_weight_decay leaves rows 2 and 3 dormant at step 1, where AdamW decays them; in
# adagrad_repeated_ids step 1 repeats row 1; in sgd_gap row 2 is touched at step 1 only, and dense
# momentum moves it at step 2.
PLANTED = [
    (VisitCountBias, "lazy", "rowwise_bias", ("adam_late_first_touch", 8, 1, 0)),
    (EpsOnSqrtV, "lazy", "sparse_adam", ("adam_late_first_touch", 1, 0, 0)),
    (GapOffByOne, "dormancy_decay", None, ("adam_gap_1", 4, 1, 0)),
    (KeepLastDuplicate, "lazy", None, ("adam_repeated_ids", 1, 1, 0)),
    (EmptyStepsDoNotCount, "lazy", None, ("adam_empty_steps", 5, 0, 0)),
    (DecayTouchedOnly, "dense_adamw", None, ("adam_weight_decay", 1, 2, 0)),
    (SequentialAdagrad, "adagrad", "tf_adagrad", ("adagrad_repeated_ids", 1, 1, 0)),
    (KitSgdLazy, "sgd_dense", "sgd_lazy", ("sgd_gap", 2, 2, 0)),
]


@pytest.mark.parametrize(("candidate", "claims", "verdict", "first"), PLANTED, ids=[p[0].__name__ for p in PLANTED])
def test_planted_variant_is_named_and_its_first_divergence_found(candidate, claims, verdict, first):
    report = check(candidate, claims=claims)
    assert report.semantics == verdict, str(report)
    if verdict is None:
        assert report.verdict == () and not report.ok
    d = report.divergence
    assert d is not None and d.reference == claims
    assert (d.scenario, d.step, d.row, d.col) == first, str(report)
    # the reported values are the reference's and the candidate's own, at that entry, and they differ
    s = scenario(d.scenario)
    assert d.expected == expected(s, reference(claims)).trajectory[d.step - 1, d.row, d.col]
    assert d.got == run(candidate, s).trajectory[d.step - 1, d.row, d.col]
    assert abs(d.got - d.expected) > d.tolerance


def test_a_variant_matching_its_claim_is_not_divergent():
    report = check(VisitCountBias, claims="rowwise_bias")
    assert report.ok and report.divergence is None and report.semantics == "rowwise_bias"


def test_the_unmodified_planted_adam_is_lazy_but_not_ok_while_it_skips_incomplete_rows():
    """It has no step_entries: adam_incomplete_rows, which tells lazy apart from dormancy_decay, is not run."""
    report = check(PlantedAdam)
    assert report.semantics == "lazy" and report.divergence is None and not report.errors
    assert report.unrun == ("adam_incomplete_rows",) and not report.ok
    assert str(report).splitlines()[0] == (
        "candidate: PlantedAdam (family adam) -- not conclusive: skipped adam_incomplete_rows, "
        "which tells lazy apart from other references")


def test_near_misses_keep_their_closest_reference():
    assert check(KeepLastDuplicate).closest == "lazy"
    assert check(DecayTouchedOnly).closest == "dense_adamw"


# --------------------------------------------------------------------------- the current rate for skipped steps


class _SchedulerLr:
    """The kit's exact DENSE_EQUIVALENT catch-up fed the rate the training loop holds *now* (what a
    ``lambda t: scheduler.get_last_lr()[0]`` gives after ``opt.step(); sched.step()``: the rate of the step being
    taken, or of the next one between steps) instead of a schedule of ``t``: every dormant step it replays gets the
    current rate, the production rule (``current_rate``)."""

    claims = "dense_adamw"

    def _now(self, hyper: Hyper):
        self.taken, last = 0, len(hyper.schedule) or 1
        return lambda t: hyper.rate(min(self.taken + 1, last))

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        super().step(row_ids, row_grads)
        self.taken += 1


class AdamSchedulerLr(_SchedulerLr, KitAdamDenseEquivalentOnRead):
    name = "DENSE_EQUIVALENT with the scheduler's current lr, caught up on read"

    def _build(self, params, hyper):
        return SparseAdamTable(params, replace(_adam_config(hyper, LazyMode.DENSE_EQUIVALENT), lr=self._now(hyper)))


class SgdSchedulerLr(_SchedulerLr, KitSgdDenseEquivalentOnRead):
    claims, name = "sgd_dense", "SGD DENSE_EQUIVALENT with the scheduler's current lr, caught up on read"

    def _build(self, params, hyper):
        return SparseSgdTable(params, replace(_sgd_config(hyper, LazyMode.DENSE_EQUIVALENT), lr=self._now(hyper)))


class AdamSchedulerLrView(_SchedulerLr, KitAdamDenseEquivalent):
    """Whole-table reads that store nothing (a catch-up applied by the reader, as FBGEMM's global weight decay is
    applied in the lookup): the table is a caught-up copy, the optimizer keeps its dormant rows."""

    name, catches_up = "DENSE_EQUIVALENT with the scheduler's current lr, read without catching up", False

    def _build(self, params, hyper):
        return AdamSchedulerLr._build(self, params, hyper)

    def table(self) -> np.ndarray:
        view = copy.deepcopy(self)  # the table and the optimizer together: view._opt updates view._params
        view._opt.catch_up()
        return view._params.copy()


class AdamSchedulerLrStored(AdamSchedulerLrView):
    """Whole-table reads that store the catch-up: after each step every row is caught up one step, at the rate
    of the next step: neither dense (each dormant step j gets lr_{j+1}) nor the current-rate rule."""

    name, catches_up = "DENSE_EQUIVALENT with the scheduler's current lr, caught up before every read", True
    table = KitAdamDenseEquivalent.table


# (candidate, verdict, first divergence from the claim). adam_schedule_warmup: row 1 touched at step 2, back at
# step 12 after the warm-up ended at step 8: the read before step 12 (the table after step 11) shows it caught up
# at step 12's rate; sgd_schedule_warmup: row 1 back at step 11. The view reads every step: at step 3 row 1 has
# slept one step, caught up at step 4's rate 4/8 * lr where dense training used step 3's, 3/8 * lr.
CURRENT_RATE = [
    (AdamSchedulerLr, "current_rate", ("adam_schedule_warmup", 11, 1, 0)),
    (SgdSchedulerLr, "sgd_current_rate", ("sgd_schedule_warmup", 10, 1, 0)),
    (AdamSchedulerLrView, "current_rate", ("adam_schedule_warmup", 3, 1, 0)),
]


@pytest.mark.parametrize(("candidate", "verdict", "first"), CURRENT_RATE, ids=[c[0].__name__ for c in CURRENT_RATE])
def test_a_catch_up_at_the_current_rate_is_named_and_told_from_dense(candidate, verdict, first):
    report = check(candidate)
    assert report.verdict == (verdict,) and not report.ok, str(report)  # it claims dense training, and is not
    d = report.divergence
    assert (d.reference, d.scenario, d.step, d.row, d.col) == ((candidate.claims,) + first), str(report)
    told = [r for r in report.results if r.deviations.get(verdict)]
    assert {r.scenario for r in told} == {s.name for s in scenarios(candidate.family) if s.hyper.schedule}
    for r in told:  # matched within a fraction of a tolerance, dense training missed by trillions of them
        assert r.deviations[verdict].score <= 0.1 and r.deviations[candidate.claims].score > 1e12, r.scenario


def test_a_catch_up_stored_at_every_read_is_neither_dense_nor_the_current_rate_rule():
    report = check(AdamSchedulerLrStored)
    assert report.verdict == () and report.divergence.scenario == "adam_schedule_warmup"
    assert report.tally["current_rate"][0] == 0 and report.tally["dense_adamw"] == (13, 17)


def test_the_kit_dense_equivalent_is_dense_under_every_schedule_and_never_the_current_rate_rule():
    for candidate in (KitAdamDenseEquivalent, KitAdamDenseEquivalentOnRead, KitSgdDenseEquivalent,
                      KitSgdDenseEquivalentOnRead):
        report = check(candidate)
        assert report.ok and report.semantics == candidate.claims, str(report)
        current = "current_rate" if candidate.family == "adam" else "sgd_current_rate"
        assert report.tally[current] == (0, 4 if candidate.family == "adam" else 3)


def test_with_a_constant_rate_the_current_rate_rule_is_dense_training_bit_for_bit():
    """Why the current-rate references apply to the schedule scenarios only: elsewhere they would repeat dense."""
    for family, dense, current in (("adam", adam.dense_adamw, adam.current_rate), ("sgd", sgd.dense, sgd.current_rate)):
        for s in scenarios(family, schedules=False) + scenarios(family, "kernel", schedules=False):
            for dtype in (np.float64, np.float32):
                table = s.table.astype(dtype)
                assert np.array_equal(current(table, s.steps, s.hyper), dense(table, s.steps, s.hyper)), s.name
        flat = scenario(f"{family}_schedule_warmup")
        flat = replace(flat, hyper=replace(flat.hyper, schedule=(flat.hyper.lr,) * len(flat.steps)))
        assert np.array_equal(current(flat.table, flat.steps, flat.hyper), dense(flat.table, flat.steps, flat.hyper))

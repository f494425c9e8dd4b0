"""The kernel form of the catalogue: float32 (rows, 4) twins a production embedding kernel (FBGEMM's TBE) can run.

Measured here (and stated in :mod:`sparse_opt.conformance.catalogue`): over every kernel-form scenario and
every ordered pair of references applying to it, the closest agreeing pair scores 0.144 tolerances
(keras3_adam / tf1_adam on adam_gap_10_f32x4) and the closest differing pair 26.0 to 29.2 (lazy /
rowwise_bias on adam_gap_long_f32x4): 26.0 where numpy runs its AVX-512 kernels, 29.2 with its AVX2 or
baseline ones (NPY_DISABLE_CPU_FEATURES), whose float32 roundings differ. Margins of 6.9 and at least 26
either side of the line (the float32 catalogue: 0.053 and 131.6).
"""

from __future__ import annotations

import numpy as np
import pytest

from sparse_opt.conformance import Recording, check, expected, record, reference, references, scenario, scenarios
from sparse_opt.conformance.adapters.kit import KitAdagrad, KitAdagradRowwise, KitSgdLazy
from sparse_opt.conformance.catalogue import KERNEL_SCENARIOS, SCENARIOS, kernel_form, kernel_scenarios
from sparse_opt.conformance.tolerance import ROUNDING_LEVEL


def test_every_catalogue_scenario_has_a_float32_width_4_twin_with_the_same_steps():
    for s in SCENARIOS:
        k = scenario(s.name + "_f32x4")
        cols = s.table.shape[1]
        src = np.arange(4) % cols
        sign = np.where(np.arange(4) < cols, 1.0, -1.0)
        assert k.dtype == np.float32 and k.table.shape == (s.table.shape[0], 4) and k.table.flags.c_contiguous
        assert all(st.row_grads.flags.c_contiguous for st in k.steps)  # failed before: column indexing, Fortran order
        assert k.hyper == s.hyper and k.family == s.family and k.point.startswith(s.point)
        np.testing.assert_array_equal(k.table, s.table.astype(np.float64)[:, src] * sign)  # exact: dyadic
        for a, b in zip(s.steps, k.steps, strict=True):
            np.testing.assert_array_equal(a.row_ids, b.row_ids)
            np.testing.assert_array_equal(b.row_grads, a.row_grads[:, src] * sign)
            assert (a.mask is None) == (b.mask is None)
            if a.mask is not None:
                np.testing.assert_array_equal(b.mask, a.mask[:, src])


def test_the_kernel_form_adds_sgd_without_momentum_and_adagrad_with_weight_decay_and_keeps_the_catalogue():
    names = [s.name for s in KERNEL_SCENARIOS]
    assert len(names) == len(set(names)) == len(SCENARIOS) + 1 + len(scenarios("sgd"))
    m0 = [s for s in kernel_scenarios("sgd") if s.name.endswith("_m0")]
    assert [s.name for s in m0] == [s.name + "_f32x4_m0" for s in scenarios("sgd")]
    assert all(s.hyper.momentum == 0.0 for s in m0)
    wd = scenario("adagrad_weight_decay_f32x4")
    assert wd.hyper.weight_decay == 0.125 and "weight_decay" in wd.features
    assert all(s.dtype == np.float32 and s.table.shape[1] == 4 for s in KERNEL_SCENARIOS)
    assert scenarios() == SCENARIOS and not set(names) & {s.name for s in SCENARIOS}
    with pytest.raises(ValueError, match="form must be one of"):
        scenarios("adam", "kernels")


def test_elementwise_references_follow_the_twin_column_by_column_and_negated():
    """An independent check of the construction: every element-wise reference is odd in (p, g), so in float64 the
    twin's trajectory is the original's, the extra columns negated copies (row-wise ones mix columns: left out)."""
    checked = 0
    for s in SCENARIOS:
        k = scenario(s.name + "_f32x4")
        cols = s.table.shape[1]
        for r in references(s.family):
            if not r.applies_to(s) or r.name.startswith("rowwise"):
                continue
            a, b = expected(s, r).trajectory, expected(k, r).trajectory
            np.testing.assert_array_equal(b[:, :, :cols], a, err_msg=f"{r.name} on {k.name}")
            np.testing.assert_array_equal(b[:, :, cols:], -a[:, :, np.arange(cols, 4) % cols])
            checked += 1
    assert checked > 100


def _separation() -> tuple[float, float]:
    agree, differ = [], []
    for s in KERNEL_SCENARIOS:
        refs = [r for r in references(s.family) if r.applies_to(s)]
        for a in refs:
            for b in refs:
                if a is not b:
                    score = expected(s, b).deviation(expected(s, a).trajectory).score
                    (agree if score <= 1.0 else differ).append(score)
    return max(agree), min(differ)


def test_the_float32_tolerance_still_separates_the_references_on_the_kernel_form():
    """The line between "same semantics" and "another one" has room on both sides (module docstring)."""
    worst_agree, closest_differ = _separation()
    assert worst_agree == pytest.approx(0.144, abs=0.005)
    # the float32 references' roundings follow numpy's SIMD kernels: 25.99 with AVX-512, 29.17 with AVX2 or the
    # baseline (measured 2026-12-02); the claim is the gap, so the test pins the range, not one CPU's value
    assert 25.0 < closest_differ < 30.0
    assert closest_differ > 5 * ROUNDING_LEVEL  # a miss at rounding level is never another reference


def test_kit_optimizers_keep_their_verdicts_on_the_kernel_form():
    for candidate, semantics in ((KitAdagradRowwise, "rowwise_adagrad"), (KitAdagrad, "adagrad"),
                                 (KitSgdLazy, "sgd_lazy")):
        report = check(candidate, scenarios=kernel_scenarios(candidate.family))
        assert report.verdict[0] == semantics and report.divergence is None


def test_kit_adagrad_refuses_weight_decay_instead_of_ignoring_it():
    """Failed before: SparseAdagradTable has no weight_decay and the adapter dropped it (judged 'adagrad_no_decay')."""
    for candidate in (KitAdagrad, KitAdagradRowwise):
        report = check(candidate, scenarios=[scenario("adagrad_weight_decay_f32x4")])
        assert report.results[0].skipped == "SparseAdagradTable has no weight_decay"


class _KernelRowwise(KitAdagradRowwise):
    form = "kernel"


class _BadForm(KitAdagradRowwise):
    form = "kernels"


def test_a_kernel_form_candidate_is_judged_on_the_kernel_form_and_its_recording_remembers(tmp_path):
    report = check(_KernelRowwise)
    assert [r.scenario for r in report.results] == [s.name for s in kernel_scenarios("adagrad")]
    path = tmp_path / "k.npz"
    record(_KernelRowwise).save(path)
    loaded = Recording.load(path)
    assert loaded.form == "kernel"
    assert check(loaded).verdict == report.verdict == ("rowwise_adagrad",)
    with pytest.raises(ValueError, match=r"_BadForm.form must be one of 'catalogue', 'kernel', 'half', got 'kernels'"):
        check(_BadForm)


def test_kernel_form_refuses_a_table_wider_than_four():
    wide = scenario("adam_gap_1")
    too_wide = type(wide)(wide.name, wide.family, wide.point, wide.hyper, np.ones((4, 5)), ())
    with pytest.raises(ValueError, match="5 columns, more than the kernel form's 4"):
        kernel_form(too_wide)


# --------------------------------------------------------------------------- planted variants on the kernel form


class PlantedRowwise:
    """Row-wise Adagrad on the kernel form (float64 inside) with FBGEMM's decay modes and planted deviations."""

    family, form, claims = "adagrad", "kernel", "rowwise_adagrad"
    #: "none", "l2", "decoupled" or "counter" (FBGEMM's equations, ``semantics.adagrad``).
    decay = "none"
    #: Columns the row mean divides by (0: the row's width). 3: a kernel that ignores the padding to 4.
    mean_over = 0
    #: L2 added to the update only, not to the accumulator.
    l2_update_only = False
    #: Decoupled decay on every row at every step (dense), not at touches.
    decay_every_row = False
    #: COUNTER's growth "fixed" into a decay: freq = +1 / count.
    counter_positive = False

    def __init__(self, table: np.ndarray, hyper) -> None:
        self.p, self.h, self.t = table.astype(np.float64), hyper, 0
        self.acc = np.full(table.shape[0], hyper.initial_accumulator_value)
        self.count = np.zeros(table.shape[0])

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        h, p = self.h, self.p
        self.t += 1
        g = np.zeros_like(p)
        np.add.at(g, row_ids, -row_grads if h.maximize else row_grads)
        rows = np.unique(row_ids)
        lr = h.lr / (1 + (self.t - 1) * h.lr_decay)
        gd = g[rows] + h.weight_decay * p[rows] if self.decay == "l2" else g[rows]
        acc_g = g[rows] if self.l2_update_only else gd
        self.acc[rows] += np.sum(acc_g**2, axis=1) / (self.mean_over or p.shape[1])
        mult = (lr / (np.sqrt(self.acc[rows]) + h.eps))[:, None]
        if self.decay == "decoupled" and self.decay_every_row:
            p *= 1 - lr * h.weight_decay
        elif self.decay == "decoupled":
            p[rows] *= 1 - lr * h.weight_decay
        if self.decay == "counter":
            self.count[rows] += 1
            freq = (1.0 if self.counter_positive else -1.0) / self.count[rows]
            p[rows] *= (1 - freq * h.weight_decay * lr)[:, None]
        p[rows] -= mult * gd

    def table(self) -> np.ndarray:
        return self.p.astype(np.float32)


def _planted(**switches) -> type:
    return type("Planted_" + "_".join(f"{k}_{v}" for k, v in switches.items()), (PlantedRowwise,), switches)


@pytest.mark.parametrize("decay, semantics", [("l2", "rowwise_l2"), ("decoupled", "rowwise_decoupled"),
                                              ("counter", "rowwise_counter"), ("none", "rowwise_no_decay")])
def test_fbgemm_decay_modes_written_out_get_their_reference(decay, semantics):
    report = check(_planted(decay=decay, claims=semantics))
    assert report.ok and report.verdict == ("rowwise_adagrad", semantics)


#: Planted deviation -> (claimed reference, first divergence (scenario, step, row, col)), from the scenarios:
#: adagrad_late_first_touch touches row 0 at step 1 (the mean over 3 is off at once); adagrad_weight_decay touches
#: rows 0 and 1 at step 1 and never rows 2, 3 before step 3.
PLANTED = {
    "mean_over_3": ({"mean_over": 3}, "rowwise_adagrad", ("adagrad_late_first_touch_f32x4", 1, 0, 0)),
    "l2_update_only": ({"decay": "l2", "l2_update_only": True}, "rowwise_l2", ("adagrad_weight_decay_f32x4", 1, 0, 0)),
    "decay_every_row": ({"decay": "decoupled", "decay_every_row": True}, "rowwise_decoupled",
                        ("adagrad_weight_decay_f32x4", 1, 2, 0)),
    "counter_positive": ({"decay": "counter", "counter_positive": True}, "rowwise_counter",
                         ("adagrad_weight_decay_f32x4", 1, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_kernel_variants_are_caught_at_their_first_divergent_step(name):
    switches, claim, where = PLANTED[name]
    report = check(_planted(**switches, claims=claim))
    d = report.divergence
    assert not report.ok and claim not in report.verdict
    assert (d.scenario, d.step, d.row, d.col) == where
    assert abs(d.got - d.expected) > 10 * ROUNDING_LEVEL * d.tolerance  # far beyond rounding


def test_schedule_scenarios_in_the_kernel_form_keep_dense_and_the_current_rate_apart():
    """float32 (rows, 4): the kit's modes keep their verdicts under schedules, the kit's catch-up fed the current rate
    is named current_rate, and dense training and the current-rate rule are at least 660 tolerances apart wherever
    a catch-up has anything to do (SGD without momentum and decay has nothing: there they agree)."""
    from test_conformance_planted import AdamSchedulerLr, SgdSchedulerLr

    from sparse_opt.conformance.adapters.kit import (
        KitAdamDenseEquivalent,
        KitAdamDormancyDecay,
        KitAdamLazy,
        KitSgdDenseEquivalentOnRead,
    )

    for candidate in (KitAdamDenseEquivalent, KitAdamDormancyDecay, KitAdamLazy, KitSgdDenseEquivalentOnRead,
                      KitSgdLazy, AdamSchedulerLr, SgdSchedulerLr):
        chosen = [s for s in kernel_scenarios(candidate.family) if s.hyper.schedule]
        report = check(candidate, scenarios=chosen)
        named = {AdamSchedulerLr: "current_rate", SgdSchedulerLr: "sgd_current_rate"}.get(candidate, candidate.claims)
        assert named in report.verdict and not report.errors, str(report)
    apart = []
    for s in kernel_scenarios():
        if s.hyper.schedule:
            dense, current = (("dense_adamw", "current_rate") if s.family == "adam"
                              else ("sgd_dense", "sgd_current_rate"))
            a, b = expected(s, reference(dense)), expected(s, reference(current))
            nothing = s.name.endswith("_m0") and not s.hyper.weight_decay
            assert (b.deviation(a.trajectory).score == 0.0) if nothing else True, s.name
            if not nothing:
                apart.append(min(b.deviation(a.trajectory).score, a.deviation(b.trajectory).score))
    assert len(apart) == 8 and min(apart) == pytest.approx(660, rel=0.01)

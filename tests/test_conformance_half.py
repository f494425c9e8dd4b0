"""The half form: Adagrad's and SGD's kernel-form scenarios with float16 tables, judged within two float16 ulps.

Measured here (and stated in ``sparse_opt/conformance/tolerance.py`` and ``catalogue.py``): references that agree
agree bit for bit, the closest differing pair is 24.0 tolerances apart, the kit's own float16 optimizers are their
references bit for bit, and planted float16 Adagrads of our own are named or caught: rounding the update first
(FBGEMM's ``EXACT_ADAGRAD``) is within tolerance, rounding towards zero is caught where its drift crosses two ulps,
not rounding at all at its first write float16 cannot hold.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparse_opt.conformance import check, expected, reference, references, run, scenario, scenarios
from sparse_opt.conformance.adapters.kit import KitAdagrad, KitAdagradRowwise, KitSgdLazy
from sparse_opt.conformance.catalogue import HALF_SCENARIOS, KERNEL_SCENARIOS
from sparse_opt.conformance.hyper import Hyper
from sparse_opt.conformance.tolerance import HALF_ULPS
from sparse_opt.conformance.vectors import export_vectors


def test_every_adagrad_and_sgd_kernel_scenario_has_an_exact_float16_twin():
    twins = [s for s in KERNEL_SCENARIOS if s.family in ("adagrad", "sgd")]
    assert [h.name for h in HALF_SCENARIOS] == [s.name.replace("_f32x4", "_f16x4") for s in twins]
    for s, h in zip(twins, HALF_SCENARIOS, strict=True):
        assert h.dtype == np.float16 and h.hyper == s.hyper and h.steps == s.steps
        np.testing.assert_array_equal(h.table.astype(np.float32), s.table)
        for step in h.steps:  # the gradients the candidates get in float16 are exact too
            np.testing.assert_array_equal(step.row_grads.astype(np.float16), step.row_grads)
    assert scenarios("adam", "half") == ()
    assert scenario("adagrad_gap_f16x4") is HALF_SCENARIOS[1]


def test_references_round_the_weights_once_where_written():
    """Independent of the reference code: element-wise Adagrad on adagrad_gap_f16x4, by hand in float32, each written
    value rounded to float16; untouched rows keep their initial float16 values."""
    s = scenario("adagrad_gap_f16x4")
    f = np.float32
    p, acc = s.table.astype(f), np.zeros(s.table.shape, f)
    for t, step in enumerate(s.steps):
        for r in np.unique(step.row_ids):
            g = step.row_grads[step.row_ids == r].sum(axis=0).astype(f)
            acc[r] += g * g
            p[r] = (p[r] - f(s.hyper.lr) * g / (np.sqrt(acc[r]) + f(s.hyper.eps))).astype(np.float16)
        np.testing.assert_array_equal(expected(s, reference("adagrad")).trajectory[t], p)
    assert expected(s, reference("adagrad")).ulps == HALF_ULPS == 2.0


def _separation() -> tuple[list[float], float, tuple[str, str, str]]:
    agree, differ = [], []
    for s in HALF_SCENARIOS:
        refs = [r for r in references(s.family) if r.applies_to(s)]
        for a in refs:
            for b in refs:
                if a is not b:
                    score = expected(s, b).deviation(expected(s, a).trajectory).score
                    (agree if score <= 1.0 else differ).append((score, s.name, a.name, b.name))
    closest = min(differ)
    return [a[0] for a in agree], closest[0], closest[1:]


def test_two_float16_ulps_keep_every_pair_of_references_apart_that_the_kernel_form_does():
    agree, closest, where = _separation()
    assert set(agree) == {0.0}  # agreeing references agree bit for bit in float16
    assert closest == 24.0 and where == ("sgd_schedule_weight_decay_f16x4_m0", "sgd_current_rate", "sgd_lazy")
    for h in HALF_SCENARIOS:
        k = scenario(h.name.replace("_f16x4", "_f32x4"))
        for a in references(h.family):
            for b in references(h.family):
                if a is not b and a.applies_to(h) and b.applies_to(h):
                    in_half = expected(h, b).deviation(expected(h, a).trajectory).matched
                    assert in_half == expected(k, b).deviation(expected(k, a).trajectory).matched, (h.name, a, b)


def _half(candidate: type) -> type:
    return type(candidate.__name__ + "Half", (candidate,), {"form": "half"})


@pytest.mark.parametrize("candidate", [KitAdagrad, KitAdagradRowwise, KitSgdLazy], ids=lambda c: c.__name__)
def test_the_kit_float16_optimizers_are_their_references_bit_for_bit(candidate):
    """A second route to the half-form references: SparseAdagradTable / SparseSgdTable with float16 tables."""
    report = check(_half(candidate))
    assert report.ok and report.semantics == candidate.claims, str(report)
    assert all(r.deviations[candidate.claims].max_abs == 0.0 for r in report.results if r.ran)


class Fp16Adagrad:
    """Element-wise Adagrad with float16 weights and float32 state; ``rounding`` says how a written weight rounds."""

    family, form, claims = "adagrad", "half", "adagrad"
    #: "nearest" (the reference), "update_first" (the update rounded to fp16, then the weight: FBGEMM's
    #: EXACT_ADAGRAD), "toward_zero" (another IEEE rounding mode), "none" (float32 weights: forgot to round).
    rounding = "nearest"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        if hyper.lr_decay or hyper.weight_decay:
            raise NotImplementedError("no lr_decay, no weight_decay")
        self.p, self.h = table.astype(np.float32), hyper
        self.acc = np.full_like(self.p, hyper.initial_accumulator_value)

    def _written(self, x: np.ndarray) -> np.ndarray:
        if self.rounding == "none":
            return x
        r = x.astype(np.float16)
        if self.rounding == "toward_zero":
            r = np.where(np.abs(r.astype(np.float32)) > np.abs(x), np.nextafter(r, np.float16(0)), r)
        return r.astype(np.float32)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        f = np.float32
        g = np.zeros_like(self.p)
        np.add.at(g, row_ids, (-row_grads if self.h.maximize else row_grads).astype(f))
        rows = np.unique(row_ids)
        self.acc[rows] += g[rows] ** 2
        update = f(self.h.lr) * g[rows] / (np.sqrt(self.acc[rows]) + f(self.h.eps))
        if self.rounding == "update_first":
            update = update.astype(np.float16).astype(f)
        self.p[rows] = self._written(self.p[rows] - update)

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        ids, where = np.unique(rows, return_inverse=True)
        grads = np.zeros((ids.size, self.p.shape[1]), dtype=np.float32)
        np.add.at(grads, (where, cols), values)
        self.step(ids, grads)

    def table(self) -> np.ndarray:
        return self.p.copy()


def _planted(rounding: str) -> type:
    return type(f"Fp16Adagrad_{rounding}", (Fp16Adagrad,), {"rounding": rounding})


def test_float16_adagrad_rounding_to_nearest_or_its_update_first_is_adagrad():
    exact = check(_planted("nearest"))
    assert exact.verdict[0] == "adagrad" and exact.divergence is None
    assert all(r.deviations["adagrad"].max_abs == 0.0 for r in exact.results if r.ran)
    fbgemm_like = check(_planted("update_first"))
    assert fbgemm_like.verdict[0] == "adagrad" and fbgemm_like.divergence is None
    assert max(r.deviations["adagrad"].score for r in fbgemm_like.results if r.ran) == 0.5  # one ulp: a flip


def _ulps_off(s, trajectory: np.ndarray) -> np.ndarray:
    """|trajectory - adagrad reference| in float16 ulps of the reference's scale (written out, not the harness's)."""
    want = expected(s, reference("adagrad")).trajectory
    scale = np.maximum(np.abs(want), np.max(np.abs(s.table.astype(np.float64))) / 64)
    return np.abs(trajectory - want) / np.spacing(scale.astype(np.float16)).astype(np.float64)


def test_float16_adagrad_rounding_towards_zero_is_caught_where_its_drift_crosses_two_ulps():
    report = check(_planted("toward_zero"))
    d = report.divergence
    assert report.verdict == () and (d.scenario, d.step, d.row, d.col) == ("adagrad_gap_f16x4", 5, 0, 1), str(report)
    s = scenario(d.scenario)
    off = _ulps_off(s, run(_planted("toward_zero"), s).trajectory)
    first = tuple(int(i) for i in np.argwhere(off > HALF_ULPS)[0])
    assert (first[0] + 1,) + first[1:] == (5, 0, 1) and off[4, 0, 1] == 3.0 and off[:4].max() <= 2.0
    # the skipped scenarios (lr_decay, weight decay) come first in the catalogue, none before it ran
    assert [r.scenario for r in report.results if r.ran][0] == "adagrad_gap_f16x4"


def test_float16_adagrad_that_forgets_to_round_is_caught_at_its_first_write_float16_cannot_hold():
    """Step 1 of adagrad_gap: sum = g**2, so the update is lr * g / |g| = +-1/4 and p -+ 1/4 is a float16 number;
    step 2 divides by sqrt(g1**2 + g2**2): row 0 is the first entry that does not round to itself."""
    planted = _planted("none")
    report = check(planted)
    d = report.divergence
    assert (d.scenario, d.step, d.row, d.col) == ("adagrad_gap_f16x4", 2, 0, 0)
    assert abs(d.got - d.expected) < d.tolerance and "not a float16 number" in str(d)
    traj = run(planted, scenario(d.scenario)).trajectory
    assert traj.dtype == np.float32  # read back unrounded
    assert np.array_equal(traj[0], traj[0].astype(np.float16)) and np.float16(traj[1, 0, 0]) != traj[1, 0, 0]
    rows = [line for line in str(report).splitlines() if line.startswith("adagrad_gap_f16x4")]
    assert "not float16 numbers" in rows[0] and "not f16" in rows[1]  # the scenario table, the ulps table


def test_the_half_form_is_not_written_as_vector_files(tmp_path):
    with pytest.raises(ValueError, match="vector files hold float32 and float64 scenarios only"):
        export_vectors(tmp_path, HALF_SCENARIOS[:1])

"""The kit's own optimizers through the conformance check: each follows the semantics it documents, always.

"A correct candidate is never reported as divergent": every kit adapter on the
catalogue, and on random scenarios (schedules, repeats, incomplete rows, empty
steps, hyper-parameters, dtypes) drawn by hypothesis.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_opt.conformance import Hyper, check, scenarios
from sparse_opt.conformance.adapters.kit import CANDIDATES, KitDenseAdam, KitSgdLazy
from sparse_opt import schedules
from sparse_opt.conformance.catalogue import build, scheduled


@pytest.mark.parametrize("candidate", CANDIDATES, ids=[c.__name__ for c in CANDIDATES])
def test_kit_adapter_follows_its_claim_on_the_catalogue_and_skips_only_what_it_lacks(candidate):
    report = check(candidate)
    assert report.divergence is None and report.semantics == candidate.claims and not report.errors
    skipped = {r.scenario: r.skipped for r in report.results if r.skipped}
    assert skipped == ({"adam_maximize": "DenseAdam has no maximize"} if candidate is KitDenseAdam else {})
    # adam_maximize tells dense_adamw apart from the lazy references: without it the verdict is not conclusive
    assert report.unrun == tuple(skipped) and report.ok == (candidate is not KitDenseAdam), str(report)


def test_the_on_read_adapters_run_as_training_loops_and_catch_up_only_what_they_read():
    from sparse_opt.conformance import expected, reference, run, scenario
    from sparse_opt.conformance.adapters.kit import KitAdamDenseEquivalent, KitAdamDenseEquivalentOnRead

    s = scenario("adam_gap_10")
    loop, whole = run(KitAdamDenseEquivalentOnRead, s), run(KitAdamDenseEquivalent, s)
    assert whole.observed is None and loop.observed is not None and loop.observed[-1].all()
    # a gap caught up at once (on read) rounds differently from one step at a time: both within dense_adamw's tolerance
    dense = expected(s, reference("dense_adamw"))
    assert dense.deviation(loop.trajectory, loop.observed).matched and dense.deviation(whole.trajectory).matched
    assert not loop.observed[:-1, 2:].any()  # rows 2 and 3 are not looked up after step 1: read only at the end


def test_check_reads_a_generator_of_scenarios_once():
    chosen = scenarios("sgd")[:2]
    report = check(KitSgdLazy, scenarios=(s for s in chosen))
    assert [r.scenario for r in report.results] == [s.name for s in chosen]
    assert report.ok, str(report)


HYPER = {
    "adam": st.builds(
        Hyper,
        lr=st.sampled_from([2.0**-6, 2.0**-4, 2.0**-3]),
        beta1=st.sampled_from([0.0, 0.5, 0.9, 0.99]),
        beta2=st.sampled_from([0.5, 0.9, 0.99, 0.999]),
        eps=st.sampled_from([1e-12, 1e-8, 1e-3]),
        weight_decay=st.sampled_from([0.0, 0.125]),
        maximize=st.booleans(),
    ),
    "adagrad": st.builds(
        Hyper,
        lr=st.sampled_from([2.0**-4, 2.0**-2]),
        eps=st.sampled_from([1e-10, 1e-3]),
        lr_decay=st.sampled_from([0.0, 0.125]),
        initial_accumulator_value=st.sampled_from([0.0, 0.125]),
        maximize=st.booleans(),
    ),
    "sgd": st.builds(
        Hyper,
        lr=st.sampled_from([2.0**-6, 2.0**-4]),
        momentum=st.sampled_from([0.5, 0.9, 0.99]),
        weight_decay=st.sampled_from([0.0, 0.125]),
        maximize=st.booleans(),
    ),
}


@st.composite
def random_scenarios(draw, family, long=True):
    """A random scenario of ``family``: 2-5 rows, 1-3 columns, 1-40 steps (or, when ``long``, 150-250).

    Hypothesis draws the shape, the hyper-parameters and a seed; the schedule
    (0-5 lookups a step, repeats, a third of them incomplete rows in the
    scenarios that have them) comes from the seed, so long runs are cheap to draw.
    Half the Adam and SGD scenarios have a learning-rate schedule (a warm-up, a
    step decay or a warm-up + cosine of :mod:`sparse_opt.schedules`, peaking at
    the drawn ``lr``), whose changes then fall inside the random dormant gaps.
    """
    rows, cols = draw(st.integers(2, 5)), draw(st.integers(1, 3))
    steps = draw(st.one_of(st.integers(1, 40), st.integers(150, 250)) if long else st.integers(1, 40))
    incomplete = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    schedule = []
    for _ in range(steps):
        lookups = []
        for r in rng.integers(0, rows, size=rng.integers(0, 6)).tolist():
            if incomplete and rng.random() < 1 / 3:
                present = np.flatnonzero(rng.random(cols) < 0.5).tolist() or [0]
                lookups.append((r, tuple(present)))
            else:
                lookups.append(r)
        schedule.append(lookups)
    hyper = draw(HYPER[family])
    if family != "adagrad" and draw(st.booleans()):
        lr, span = hyper.lr, draw(st.integers(1, max(steps, 1)))
        rate = draw(st.sampled_from([
            schedules.linear_warmup(lr, span),
            schedules.step_decay(lr, span, draw(st.sampled_from([0.0, 0.25, 0.5]))),
            schedules.warmup_cosine(lr, span, span + draw(st.integers(1, 40)), draw(st.sampled_from([0.0, lr / 8]))),
        ]))
        hyper = scheduled(hyper, rate, steps)
    return build(
        "random", family, "random", hyper, schedule, seed=seed,
        rows=rows, cols=cols, dtype=draw(st.sampled_from(["float32", "float64"])),
        scale=draw(st.sampled_from([1.0, 2.0**-10])),
    )


@pytest.mark.parametrize("family", ["adam", "adagrad", "sgd"])
@settings(max_examples=20)
@given(data=st.data())
def test_kit_is_never_reported_divergent_on_random_scenarios(family, data):
    scenario = data.draw(random_scenarios(family))
    for candidate in CANDIDATES:
        if candidate.family != family:
            continue
        result = check(candidate, scenarios=[scenario])
        assert result.divergence is None, f"{candidate.__name__}: {result.divergence}"
        ran = result.results[0]
        assert ran.ran or ran.skipped == "DenseAdam has no maximize"


def test_random_scenarios_tell_the_modes_apart():
    """A sanity check of the strategy: a scenario with a gap separates the three Adam modes."""
    s = build("gap", "adam", "gap", Hyper(lr=2.0**-4), [[0, 1], [0], [0], [0, 1]], seed=1)
    from sparse_opt.conformance.adapters.kit import KitAdamDenseEquivalent, KitAdamDormancyDecay, KitAdamLazy

    modes = (KitAdamLazy, KitAdamDormancyDecay, KitAdamDenseEquivalent)
    found = [check(c, scenarios=[s]).results[0].matches for c in modes]
    assert [m[0] for m in found] == ["lazy", "dormancy_decay", "dense_adamw"]
    assert np.all([len(set(m) & {"lazy", "dormancy_decay", "dense_adamw"}) == 1 for m in found])

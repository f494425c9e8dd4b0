"""``check``: run a candidate (or take a recording) through the scenarios and judge it against every reference.

For every scenario the candidate ran, its trajectory is compared with each
applicable reference's (:mod:`.tolerance`). A reference *matches* the candidate
when it is within tolerance in every run scenario it applies to; those are the
verdict, most scenarios first. The first divergence is measured from the
claimed reference (the candidate's ``claims`` attribute, or the ``claims``
argument), or, with no claim and no full match, from the closest reference: the
first scenario (catalogue order), step, row and column out of tolerance. With no
full match the report also names the closest reference and where the candidate
first leaves it, claim or not.

A report is ``ok`` only when every scenario that tells its semantics (the claim,
or the verdict) apart from another reference of the family ran: a candidate that
skips one (``NotImplementedError``, no ``step_entries``) is not judged on it, so
its verdict is not conclusive; those scenarios are named in the report's first
line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from sparse_opt.conformance.candidate import candidate_form, candidate_schedules, check_candidate
from sparse_opt.conformance.case import Scenario
from sparse_opt.conformance.catalogue import scenarios as catalogue
from sparse_opt.conformance.recording import Recording, record
from sparse_opt.conformance.report import Divergence, Report, ScenarioResult
from sparse_opt.conformance.semantics import expected, references
from sparse_opt.conformance.tolerance import Expected


def check(
    candidate: type | Recording,
    *,
    claims: str | None = None,
    scenarios: Iterable[Scenario] | None = None,
) -> Report:
    """Judge a candidate against every reference of its family.

    Parameters
    ----------
    candidate : class or Recording
        A class following the candidate protocol (:mod:`.candidate`), run here
        through the scenarios, or a :class:`~sparse_opt.conformance.Recording`
        of such runs.
    claims : str, optional
        The reference it claims to follow; default: the candidate's ``claims``.
    scenarios : iterable of Scenario, optional
        Default: the scenarios of the candidate's family, in its ``form``
        (the catalogue, or its kernel form: see :mod:`.catalogue`), those with
        a learning-rate schedule only when it takes schedules
        (``schedules = True``; a recording remembers).

    Returns
    -------
    Report

    Examples
    --------
    >>> from sparse_opt.conformance import check
    >>> from sparse_opt.conformance.adapters.kit import KitAdamLazy
    >>> report = check(KitAdamLazy)
    >>> report.semantics, report.divergence
    ('lazy', None)
    """
    if isinstance(candidate, Recording):
        family, form, takes = candidate.family, candidate.form, candidate.schedules
    else:
        family, form = check_candidate(candidate).family, candidate_form(candidate)
        takes = candidate_schedules(candidate)
    # once: a generator is read here only
    chosen = tuple(catalogue(family, form, schedules=takes) if scenarios is None else scenarios)
    recording = candidate if isinstance(candidate, Recording) else record(candidate, chosen)
    refs = references(recording.family)
    expectations = {s.name: {r.name: expected(s, r) for r in refs if r.applies_to(s)} for s in chosen}
    claimed = claims or recording.claims
    # the references that apply to some scenario (and the claimed one): a constant-rate check shows no current_rate
    titles = {r.name: r.title for r in refs if r.name == claimed or any(r.name in e for e in expectations.values())}
    return judge(recording, chosen, expectations, titles, claims, {r.name for r in refs})


def judge(
    recording: Recording,
    scenarios: Iterable[Scenario],
    expectations: Mapping[str, Mapping[str, Expected]],
    titles: Mapping[str, str],
    claims: str | None = None,
    known: Iterable[str] | None = None,
) -> Report:
    """The report for ``recording`` given each scenario's expected trajectories (by reference name).

    The engine behind :func:`check` and :func:`~sparse_opt.conformance.vectors.check_vectors`
    (whose expectations come from exported files). ``titles``: the references reported, in report
    order; ``known``: every reference a claim may name (default: ``titles``).
    """
    claims = claims or recording.claims
    names = list(titles) if known is None else list(known)
    if claims is not None and (claims not in names or claims not in titles):
        raise ValueError(f"claims = {claims!r} is not a {recording.family} reference; choose one of {names}")
    scenarios = tuple(scenarios)
    results = [_result(recording, s, expectations[s.name]) for s in scenarios]
    tally = {}
    for ref in titles:
        devs = [r.deviations[ref] for r in results if r.ran and ref in r.deviations]
        tally[ref] = (sum(d.matched for d in devs), len(devs))
    verdict = tuple(sorted((ref for ref, (m, n) in tally.items() if n and m == n), key=lambda ref: -tally[ref][1]))
    closest = verdict[0] if verdict else _nearest(results, tally)
    target = claims if claims else (None if verdict else closest)
    divergence = None
    if target is not None:
        divergence = _first_divergence(recording, scenarios, expectations, target)
    separation = divergence
    if not verdict and closest is not None and closest != target:
        separation = _first_divergence(recording, scenarios, expectations, closest)
    semantics = claims or (verdict[0] if verdict else None)
    unrun = ()
    if semantics is not None:
        unrun = tuple(r.scenario for r in results if not r.ran and _tells_apart(expectations[r.scenario], semantics))
    return Report(
        recording.candidate, recording.family, claims, tuple(results), dict(titles), tally, verdict, closest,
        divergence, None if verdict else separation, unrun,
    )


def _tells_apart(expected_by_ref: Mapping[str, Expected], ref: str) -> bool:
    """Whether ``ref`` applies to the scenario and some other reference's trajectory leaves its tolerance there."""
    mine = expected_by_ref.get(ref)
    return mine is not None and any(
        not mine.deviation(other.trajectory).matched for name, other in expected_by_ref.items() if name != ref
    )


def _result(recording: Recording, scenario: Scenario, expected_by_ref: Mapping[str, Expected]) -> ScenarioResult:
    run = recording.runs.get(scenario.name)
    if run is None:
        return ScenarioResult(scenario.name, scenario.point, {}, skipped="not in the recording",
                              dtype=scenario.dtype.name)
    if run.fingerprint != scenario.fingerprint:
        stale = "the recording is stale (the scenario's definition changed): regenerate it"
        return ScenarioResult(scenario.name, scenario.point, {}, error=stale, dtype=scenario.dtype.name)
    if run.trajectory is None:
        return ScenarioResult(scenario.name, scenario.point, {}, skipped=run.skipped, error=run.error,
                              dtype=scenario.dtype.name)
    devs = {ref: e.deviation(run.trajectory, run.observed) for ref, e in expected_by_ref.items()}
    return ScenarioResult(scenario.name, scenario.point, devs, dtype=scenario.dtype.name)


def _nearest(results: list[ScenarioResult], tally: Mapping[str, tuple[int, int]]) -> str | None:
    """The reference matched in most scenarios; ties to the smallest total log-score."""
    def log_score(ref: str) -> float:
        return sum(math.log1p(min(r.deviations[ref].score, 1e300)) for r in results if ref in r.deviations)

    candidates = [ref for ref, (_, n) in tally.items() if n]
    if not candidates:
        return None
    return min(candidates, key=lambda ref: (-tally[ref][0], log_score(ref)))


def _first_divergence(
    recording: Recording,
    scenarios: tuple[Scenario, ...],
    expectations: Mapping[str, Mapping[str, Expected]],
    target: str,
) -> Divergence | None:
    for s in scenarios:
        run = recording.runs.get(s.name)
        e = expectations[s.name].get(target)
        if run is None or run.trajectory is None or e is None or run.fingerprint != s.fingerprint:
            continue
        where = e.first_violation(run.trajectory, run.observed)
        if where is not None:
            t, row, col = where
            tol = float(e.tolerance()[t - 1, row, col])
            got, want = float(run.trajectory[t - 1, row, col]), float(e.trajectory[t - 1, row, col])
            return Divergence(target, s.name, t, row, col, want, got, tol)
    return None

"""Recordings: a candidate's runs of the scenarios, saved so a check needs no library.

``tests/conformance/make_recordings.py`` records the real libraries (torch,
TensorFlow) with their adapters; the tests and notebooks load the ``.npz``
files with numpy only and check them like a live candidate. Each run stores the
scenario's fingerprint, so a recording made for an older definition of a
scenario is reported as stale instead of being compared.

File layout (``np.savez_compressed``, loads with ``allow_pickle=False``): one
array per run scenario, named after it (the trajectory, ``(T, rows, cols)``),
``<scenario>.observed`` beside it for a training-loop run (bool ``(T, rows)``:
the rows read, see :mod:`.candidate`), and ``meta``, a 0-d string holding JSON: ``candidate``, ``family``, ``claims``
(or null), ``versions`` (library versions), ``fingerprints``, ``skipped``,
``errors`` (scenario -> message), for a kernel-form candidate only
``form`` (``"kernel"``: its default scenarios are the kernel form's), and for
a candidate that takes learning-rate schedules only ``schedules`` (``true``:
its default scenarios include the schedule scenarios; a recording without the
key was made without them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sparse_opt.conformance.candidate import (
    Run,
    candidate_form,
    candidate_name,
    candidate_schedules,
    check_candidate,
    run,
)
from sparse_opt.conformance.case import Scenario, frozen
from sparse_opt.conformance.catalogue import scenarios as catalogue


@dataclass(frozen=True, eq=False)
class Recording:
    """A candidate's runs of some scenarios.

    Parameters
    ----------
    candidate : str
        The candidate's name.
    family : str
    claims : str or None
        The reference the candidate claims to follow.
    runs : dict of str to Run
        By scenario name, in scenario order.
    versions : dict of str to str
        Library versions the recording was made with.
    form : {"catalogue", "kernel"}
        The candidate's ``form``: which scenarios :func:`~sparse_opt.conformance.check` judges it on by default.
    schedules : bool
        The candidate's ``schedules``: whether its default scenarios include the schedule scenarios.
    """

    candidate: str
    family: str
    claims: str | None
    runs: dict[str, Run]
    versions: dict[str, str] = field(default_factory=dict)
    form: str = "catalogue"
    schedules: bool = False

    def save(self, path: str | Path) -> None:
        """Write the recording to ``path`` (``.npz``)."""
        meta = {
            "candidate": self.candidate,
            "family": self.family,
            "claims": self.claims,
            "versions": self.versions,
            "fingerprints": {name: r.fingerprint for name, r in self.runs.items()},
            "skipped": {name: r.skipped for name, r in self.runs.items() if r.skipped},
            "errors": {name: r.error for name, r in self.runs.items() if r.error},
        }
        if self.form != "catalogue":
            meta["form"] = self.form
        if self.schedules:
            meta["schedules"] = True
        arrays = {name: r.trajectory for name, r in self.runs.items() if r.trajectory is not None}
        if "meta" in arrays or any("." in name for name in arrays):
            raise ValueError("a scenario may not be called 'meta' or have a '.' in its name")
        arrays.update({f"{name}.observed": r.observed for name, r in self.runs.items() if r.observed is not None})
        np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        """Read a recording written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            runs = {}
            for name, fingerprint in meta["fingerprints"].items():
                trajectory = frozen(data[name]) if name in data.files else None
                observed = frozen(data[f"{name}.observed"]) if f"{name}.observed" in data.files else None
                runs[name] = Run(
                    name,
                    fingerprint,
                    trajectory=trajectory,
                    skipped=meta["skipped"].get(name, ""),
                    error=meta["errors"].get(name, ""),
                    observed=observed,
                )
        return cls(meta["candidate"], meta["family"], meta["claims"], runs, meta["versions"],
                   meta.get("form", "catalogue"), meta.get("schedules", False) is True)


def record(
    candidate: type, scenarios: Iterable[Scenario] | None = None, versions: dict[str, str] | None = None
) -> Recording:
    """Run ``candidate`` through ``scenarios`` (default: its family's scenarios in its ``form``, the schedule
    scenarios only when it takes schedules) and keep every run."""
    family, form, takes = check_candidate(candidate).family, candidate_form(candidate), candidate_schedules(candidate)
    chosen = tuple(catalogue(family, form, schedules=takes) if scenarios is None else scenarios)
    runs = {s.name: run(candidate, s) for s in chosen}
    return Recording(candidate_name(candidate), family, getattr(candidate, "claims", None), runs, dict(versions or {}),
                     form, takes)

"""Test vectors for other languages: the scenarios with every reference's expected trajectory, as JSON.

:func:`export_vectors` writes one ``<scenario>.json`` per scenario and an
``index.json`` listing them (the schema is ``docs/conformance_schema.md``): the
initial table, the steps, the hyper-parameters, and for each applicable
reference its float64 trajectory and tolerance. A Rust, C++ or CUDA
implementation reads a file, runs the steps, and compares its table after each
step with the trajectory of the semantics it implements::

    |got - expected| <= max(ulps * spacing_dtype(max(|expected|, floor)), atol)

(``spacing_dtype(x)``: the gap from ``x`` to the next number of the scenario's
dtype). :func:`load_vectors` reads the files back (validating the layout with
numpy only), :func:`check_vectors` checks a Python candidate against them and
:func:`verify_vectors` re-derives every expected trajectory with this package's
references.

Floats are written with Python's shortest round-trip ``repr``, so every value
reads back bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from sparse_opt._arrays import as_index_array
from sparse_opt.conformance.candidate import check_candidate
from sparse_opt.conformance.case import DTYPES, Scenario, Step, frozen
from sparse_opt.conformance.catalogue import SCENARIOS
from sparse_opt.conformance.hyper import FAMILIES, Hyper
from sparse_opt.conformance.recording import record
from sparse_opt.conformance.report import Report
from sparse_opt.conformance.semantics import expected, reference, references
from sparse_opt.conformance.tolerance import Expected
from sparse_opt.conformance.verdict import judge

#: The ``schema`` field of every file this module writes.
SCHEMA = "sparse_opt.conformance.vectors/1"
INDEX = "index.json"


@dataclass(frozen=True, eq=False)
class Vector:
    """One scenario file read back: the scenario, its expected trajectories and the references' titles."""

    scenario: Scenario
    expected: dict[str, Expected]
    titles: dict[str, str]


def _scenario_json(s: Scenario) -> dict[str, Any]:
    steps = [
        {
            "row_ids": step.row_ids.tolist(),
            "row_grads": step.row_grads.tolist(),
            "mask": None if step.mask is None else step.mask.tolist(),
        }
        for step in s.steps
    ]
    refs = []
    for ref in references(s.family):
        if ref.applies_to(s):
            e = expected(s, ref)
            refs.append(
                {
                    "reference": ref.name,
                    "title": ref.title,
                    "modelled": ref.modelled,
                    "tolerance": {"ulps": e.ulps, "floor": e.floor, "atol": e.atol},
                    "trajectory": e.trajectory.tolist(),
                }
            )
    return {
        "schema": SCHEMA,
        "name": s.name,
        "family": s.family,
        "point": s.point,
        "dtype": s.dtype.name,
        "hyper": s.hyper.as_dict(),
        "table": s.table.astype(np.float64).tolist(),
        "steps": steps,
        "expected": refs,
    }


def export_vectors(directory: str | Path, scenarios: Iterable[Scenario] | None = None) -> list[Path]:
    """Write ``index.json`` and one ``<name>.json`` per scenario (default: the whole catalogue) into ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    chosen = tuple(SCENARIOS if scenarios is None else scenarios)
    written = []
    for s in chosen:
        path = out / f"{s.name}.json"
        path.write_text(json.dumps(_scenario_json(s), allow_nan=False) + "\n")
        written.append(path)
    index = {"schema": SCHEMA, "scenarios": [s.name for s in chosen]}
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    return written


#: A JSON number (``bool`` is refused: it is an ``int`` to Python, not a number to JSON).
_NUMBER = (int, float)


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``obj[key]``, checked to exist and to be of ``kind``; ``ValueError`` naming the field otherwise."""
    if not isinstance(obj, dict) or key not in obj:
        raise ValueError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind == _NUMBER and isinstance(value, bool)):
        raise ValueError(f"{where}: field {key!r} has type {type(value).__name__}")
    return value


def _array(value: Any, dtype: type, ndim: int, where: str) -> np.ndarray:
    try:
        a = np.array(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a rectangular array of {dtype.__name__}") from exc
    if a.ndim != ndim and not (a.size == 0 and ndim > 1):
        raise ValueError(f"{where}: expected {ndim} dimensions, got {a.ndim}")
    return a


def _ids(value: Any, where: str) -> np.ndarray:
    """Row ids: integers only (a float or bool id is refused, not truncated)."""
    try:
        return as_index_array(value, where)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from exc


def _vector(doc: dict[str, Any], where: str) -> Vector:
    if _need(doc, "schema", str, where) != SCHEMA:
        raise ValueError(f"{where}: schema is {doc['schema']!r}, this package reads {SCHEMA!r}")
    family = _need(doc, "family", str, where)
    dtype = _need(doc, "dtype", str, where)
    if family not in FAMILIES or dtype not in DTYPES:
        raise ValueError(f"{where}: family {family!r} or dtype {dtype!r} unknown")
    hyper_doc = _need(doc, "hyper", dict, where)
    names = {f.name for f in fields(Hyper)}
    if set(hyper_doc) != names:
        raise ValueError(f"{where}: hyper must have exactly the fields {sorted(names)}")
    hyper = Hyper(**hyper_doc)
    table = _array(_need(doc, "table", list, where), np.float64, 2, f"{where}: table")
    cols = table.shape[1]
    steps = []
    for t, step in enumerate(_need(doc, "steps", list, where), 1):
        at = f"{where}: steps[{t - 1}]"
        ids = _ids(_need(step, "row_ids", list, at), f"{at}.row_ids")
        grads = _array(_need(step, "row_grads", list, at), np.float64, 2, f"{at}.row_grads").reshape(ids.size, cols)
        mask = step.get("mask") if isinstance(step, dict) else None
        steps.append(Step(ids, grads, None if mask is None else _array(mask, bool, 2, f"{at}.mask")))
    name, point = _need(doc, "name", str, where), _need(doc, "point", str, where)
    scenario = Scenario(name, family, point, hyper, table.astype(dtype), tuple(steps))
    expected_by_ref, titles = {}, {}
    for i, e in enumerate(_need(doc, "expected", list, where)):
        at = f"{where}: expected[{i}]"
        name = _need(e, "reference", str, at)
        tol = _need(e, "tolerance", dict, at)
        trajectory = _array(_need(e, "trajectory", list, at), np.float64, 3, f"{at}.trajectory")
        if trajectory.shape != (len(steps),) + table.shape:
            raise ValueError(f"{at}: trajectory has shape {trajectory.shape}, expected {(len(steps),) + table.shape}")
        trajectory = frozen(trajectory)
        floor, atol, ulps = (float(_need(tol, key, _NUMBER, at)) for key in ("floor", "atol", "ulps"))
        expected_by_ref[name] = Expected(name, trajectory, dtype, floor, atol, ulps)
        titles[name] = _need(e, "title", str, at)
        _need(e, "modelled", bool, at)
    return Vector(scenario, expected_by_ref, titles)


def load_vectors(directory: str | Path) -> list[Vector]:
    """Read the files :func:`export_vectors` wrote, in ``index.json`` order; ``ValueError`` names a malformed field."""
    base = Path(directory)
    index = json.loads((base / INDEX).read_text())
    if _need(index, "schema", str, INDEX) != SCHEMA:
        raise ValueError(f"{INDEX}: schema is {index['schema']!r}, this package reads {SCHEMA!r}")
    return [_vector(json.loads((base / f"{name}.json").read_text()), f"{name}.json")
            for name in _need(index, "scenarios", list, INDEX)]


def check_vectors(directory: str | Path, candidate: type, *, claims: str | None = None) -> Report:
    """Run ``candidate`` through the vectors of its family in ``directory`` and judge it against their trajectories."""
    family = check_candidate(candidate).family
    vectors = [v for v in load_vectors(directory) if v.scenario.family == family]
    titles: dict[str, str] = {}
    for v in vectors:
        titles.update(v.titles)
    chosen = [v.scenario for v in vectors]
    recording = record(candidate, chosen)
    return judge(recording, chosen, {v.scenario.name: v.expected for v in vectors}, titles, claims)


def verify_vectors(vectors: str | Path | Iterable[Vector]) -> list[str]:
    """Re-derive every expected trajectory with this package; the disagreements (empty: none).

    ``vectors``: a directory :func:`export_vectors` wrote, or what :func:`load_vectors` read from one.
    """
    problems = []
    for v in load_vectors(vectors) if isinstance(vectors, (str, Path)) else vectors:
        for name, e in v.expected.items():
            try:
                ours = expected(v.scenario, reference(name))
            except (KeyError, ValueError) as exc:
                problems.append(f"{v.scenario.name}: {exc}")
                continue
            score = e.deviation(ours.trajectory).score
            if score > 1:
                problems.append(f"{v.scenario.name}: {name} does not reproduce (score {score:.3g})")
    return problems

"""Test vectors for other languages: the scenarios with every reference's expected trajectory, as JSON.

:func:`export_vectors` writes one ``<scenario>.json`` per scenario and an
``index.json`` listing them (the schema is ``docs/conformance_schema.md``): the
initial table, the steps, the hyper-parameters (with ``schedule``, the rate
of every step, for the scenarios that have one), and for each applicable
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
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from sparse_opt.conformance.candidate import candidate_schedules, check_candidate
from sparse_opt.conformance.case import Scenario, Step, frozen
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
    unwritable = [s.name for s in chosen if s.dtype.name not in VECTOR_DTYPES]
    if unwritable:
        raise ValueError(f"vector files hold {' and '.join(VECTOR_DTYPES)} scenarios only (the half form's float16 "
                         f"reads need the rounding rule of sparse_opt.conformance.tolerance), got {unwritable[0]}")
    written = []
    for s in chosen:
        path = out / f"{s.name}.json"
        path.write_text(json.dumps(_scenario_json(s), allow_nan=False) + "\n")
        written.append(path)
    index = {"schema": SCHEMA, "scenarios": [s.name for s in chosen]}
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    return written


#: The scenario dtypes a vector file may hold (the schema's; the half form's float16 is not one of them).
VECTOR_DTYPES = ("float32", "float64")

#: A scenario name: also its file's stem, so it can only name a file inside the vectors' directory.
_NAME = re.compile(r"[a-z0-9_]+")
_TOP = ("schema", "name", "family", "point", "dtype", "hyper", "table", "steps", "expected")
_STEP = ("row_ids", "row_grads", "mask")
_ENTRY = ("reference", "title", "modelled", "tolerance", "trajectory")
_TOLERANCE = ("ulps", "floor", "atol")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any) -> str:
    """``repr(value)``, with a huge integer shown by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields(obj: Any, keys: Sequence[str], where: str) -> dict[str, Any]:
    """``obj``, checked to be an object with exactly ``keys``; ``ValueError`` naming the field otherwise."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object, got {_kind(obj)}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ValueError(f"{where}: missing field {missing[0]!r}")
    extra = [k for k in obj if k not in keys]
    if extra:
        raise ValueError(f"{where}: unknown field {extra[0]!r} (the fields are {', '.join(keys)})")
    return obj


def _typed(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where} must be a {kind.__name__}, got {_kind(value)}")
    return value


def _number(value: Any, where: str, *, minimum: float | None = None) -> float:
    """A finite JSON number (an integer too; not a bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {_kind(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{where} = {_short(value)} is too large for a float") from None
    if not math.isfinite(x):
        raise ValueError(f"{where} = {x!r} must be finite")
    if minimum is not None and x < minimum:
        raise ValueError(f"{where} = {x!r} must be >= {minimum:g}")
    return x


def _matrix(value: Any, where: str, shape: tuple[int | None, int | None], *, boolean: bool = False) -> np.ndarray:
    """A rectangular list of lists of finite numbers (or of booleans) with ``shape`` (None: any)."""
    rows, cols = shape
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of rows, got {_kind(value)}")
    if rows is not None and len(value) != rows:
        raise ValueError(f"{where} has {len(value)} rows, expected {rows}")
    out = []
    for i, row in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(row, list):
            raise ValueError(f"{at} must be a list of entries, got {_kind(row)}")
        if cols is not None and len(row) != cols:
            raise ValueError(f"{at} has {len(row)} entries, expected {cols}")
        cols = len(row)
        out.append([_typed(x, bool, f"{at}[{j}]") if boolean else _number(x, f"{at}[{j}]") for j, x in enumerate(row)])
    return np.array(out, dtype=bool if boolean else np.float64).reshape(len(value), cols or 0)


def _fits(values: np.ndarray, dtype: str, where: str) -> np.ndarray:
    """``values``, checked to stay finite in ``dtype`` (a float32 scenario cannot hold 1e300)."""
    big = np.argwhere(np.abs(values) > np.finfo(dtype).max)
    if big.size:
        i, j = big[0]
        raise ValueError(f"{where}[{i}][{j}] = {float(values[i, j])!r} overflows {dtype}")
    return values


def _row_ids(value: Any, rows: int, where: str) -> np.ndarray:
    """Row ids: integers in ``[0, rows)`` (a float or bool id is refused, not truncated)."""
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of row ids, got {_kind(value)}")
    for j, r in enumerate(value):
        if isinstance(r, bool) or not isinstance(r, int):
            kind = {float: "float64", bool: "bool"}.get(type(r), _kind(r))
            raise ValueError(f"{where} must be an integer array, got dtype {kind} ({where}[{j}] = {_short(r)})")
        if not 0 <= r < rows:
            raise ValueError(f"{where}[{j}] = {_short(r)} is out of range [0, rows = {rows})")
    return np.array(value, dtype=np.int64)


def _schedule(hyper_doc: dict[str, Any], lr: float, steps: int, where: str) -> tuple[float, ...]:
    """``hyper.schedule``: absent (a constant rate), or one finite rate ``>= 0`` per step whose largest is ``lr``."""
    if "schedule" not in hyper_doc:
        return ()
    rates = _typed(hyper_doc["schedule"], list, where)
    if len(rates) != steps:
        raise ValueError(f"{where} has {len(rates)} rates, expected one per step ({steps})")
    out = tuple(_number(x, f"{where}[{t}]", minimum=0.0) for t, x in enumerate(rates))
    if lr != max(out):
        raise ValueError(f"{where}: its peak {max(out)!r} is not hyper.lr = {lr!r} (lr is the schedule's peak)")
    return out


def _vector(doc: Any, where: str, name: str) -> Vector:
    """One scenario file's content, every field validated (``ValueError`` naming ``where`` and the field)."""
    doc = _fields(doc, _TOP, where)
    if _typed(doc["schema"], str, f"{where}: schema") != SCHEMA:
        raise ValueError(f"{where}: schema is {_short(doc['schema'])}, this package reads {SCHEMA!r}")
    if _typed(doc["name"], str, f"{where}: name") != name:
        raise ValueError(f"{where}: name is {_short(doc['name'])}, but the file (and index.json) say {name!r}")
    family, dtype = _typed(doc["family"], str, f"{where}: family"), _typed(doc["dtype"], str, f"{where}: dtype")
    if family not in FAMILIES:
        raise ValueError(f"{where}: family {_short(family)} unknown; the families are {', '.join(FAMILIES)}")
    if dtype not in VECTOR_DTYPES:
        raise ValueError(f"{where}: dtype {_short(dtype)} unknown; the dtypes are {', '.join(VECTOR_DTYPES)}")
    point = _typed(doc["point"], str, f"{where}: point")
    names = [f.name for f in fields(Hyper) if f.name != "schedule"]
    hyper_doc = doc["hyper"]
    if not isinstance(hyper_doc, dict) or set(hyper_doc) - {"schedule"} != set(names):
        raise ValueError(f"{where}: hyper must have exactly the fields {sorted(names)}, and optionally 'schedule'")
    scalars = {
        key: _typed(value, bool, f"{where}: hyper.{key}") if key == "maximize"
        else _number(value, f"{where}: hyper.{key}")
        for key, value in hyper_doc.items() if key != "schedule"
    }
    table = _matrix(doc["table"], f"{where}: table", (None, None))
    if table.size == 0:
        raise ValueError(f"{where}: table must have at least one row and one column, got shape {table.shape}")
    rows, cols = table.shape
    _fits(table, dtype, f"{where}: table")
    steps_doc = _typed(doc["steps"], list, f"{where}: steps")
    if not steps_doc:
        raise ValueError(f"{where}: steps must list at least one step")
    steps = []
    for t, step in enumerate(steps_doc):
        at = f"{where}: steps[{t}]"
        step = _fields(step, _STEP, at)
        ids = _row_ids(step["row_ids"], rows, f"{at}.row_ids")
        grads = _fits(_matrix(step["row_grads"], f"{at}.row_grads", (ids.size, cols)), dtype, f"{at}.row_grads")
        mask = None if step["mask"] is None else _matrix(step["mask"], f"{at}.mask", (ids.size, cols), boolean=True)
        steps.append(Step(ids, grads, mask))
    hyper = Hyper(**scalars, schedule=_schedule(hyper_doc, scalars["lr"], len(steps), f"{where}: hyper.schedule"))
    scenario = Scenario(name, family, point, hyper, table.astype(dtype), tuple(steps))
    entries = _typed(doc["expected"], list, f"{where}: expected")
    if not entries:
        raise ValueError(f"{where}: expected must list at least one reference")
    expected_by_ref, titles = {}, {}
    for i, e in enumerate(entries):
        at = f"{where}: expected[{i}]"
        e = _fields(e, _ENTRY, at)
        ref = _typed(e["reference"], str, f"{at}.reference")
        if not ref or ref in expected_by_ref:
            raise ValueError(f"{at}.reference {_short(ref)} is empty or repeated")
        tol = _fields(e["tolerance"], _TOLERANCE, f"{at}.tolerance")
        ulps, floor, atol = (_number(tol[key], f"{at}.tolerance.{key}", minimum=0.0) for key in _TOLERANCE)
        trajectory = _typed(e["trajectory"], list, f"{at}.trajectory")
        if len(trajectory) != len(steps):
            raise ValueError(f"{at}.trajectory has {len(trajectory)} steps, expected {len(steps)}")
        states = [_matrix(state, f"{at}.trajectory[{t}]", (rows, cols)) for t, state in enumerate(trajectory)]
        expected_by_ref[ref] = Expected(ref, frozen(np.stack(states)), dtype, floor, atol, ulps)
        titles[ref] = _typed(e["title"], str, f"{at}.title")
        _typed(e["modelled"], bool, f"{at}.modelled")
    return Vector(scenario, expected_by_ref, titles)


def _read_json(path: Path, where: str) -> Any:
    """The JSON value in ``path``; ``ValueError`` naming ``where`` when it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file in {path.parent}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: cannot be read ({exc})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{where}: nested too deeply (a vector file is at most four levels deep)") from None
    except ValueError as exc:  # JSONDecodeError, or an integer beyond Python's digit limit
        raise ValueError(f"{where}: not valid JSON ({exc})") from None


def load_vectors(directory: str | Path) -> list[Vector]:
    """Read the files :func:`export_vectors` wrote, in ``index.json`` order.

    Every field is validated (types, finite numbers, tolerances ``>= 0``, ids in
    range, consistent shapes, a schedule of one rate ``>= 0`` per step peaking at
    ``lr``, scenario names that name a file inside
    ``directory`` and match it); a malformed file raises ``ValueError`` naming
    the file and the field.
    """
    base = Path(directory)
    index = _fields(_read_json(base / INDEX, INDEX), ("schema", "scenarios"), INDEX)
    if _typed(index["schema"], str, f"{INDEX}: schema") != SCHEMA:
        raise ValueError(f"{INDEX}: schema is {_short(index['schema'])}, this package reads {SCHEMA!r}")
    names = _typed(index["scenarios"], list, f"{INDEX}: scenarios")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{INDEX}: scenarios[{i}] = {_short(name)} is not a scenario name (lower-case letters, "
                             "digits and '_' only: it names a file in the vectors' directory)")
        if name in names[:i]:
            raise ValueError(f"{INDEX}: scenarios[{i}] = {name!r} is listed twice")
    return [_vector(_read_json(base / f"{name}.json", f"{name}.json"), f"{name}.json", name) for name in names]


def check_vectors(directory: str | Path, candidate: type, *, claims: str | None = None) -> Report:
    """Run ``candidate`` through the vectors of its family in ``directory`` and judge it against their trajectories.

    The vectors with a learning-rate schedule are left out for a candidate that takes none (as :func:`check`
    leaves out the schedule scenarios).
    """
    family, takes = check_candidate(candidate).family, candidate_schedules(candidate)
    vectors = [v for v in load_vectors(directory)
               if v.scenario.family == family and (takes or not v.scenario.hyper.schedule)]
    titles: dict[str, str] = {}
    for v in vectors:
        titles.update(v.titles)
    order = {r.name: i for i, r in enumerate(references(family))}  # report order; unknown names after, as read
    titles = dict(sorted(titles.items(), key=lambda item: order.get(item[0], len(order))))
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

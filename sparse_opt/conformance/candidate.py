"""The candidate protocol: what an optimizer implements to be checked, and how it is run.

A candidate is a class (not an instance: every scenario gets a fresh one) with a
``family`` and three methods::

    class MyLazyAdam:
        family = "adam"                  # "adam", "adagrad" or "sgd"
        claims = "lazy"                  # optional: the reference it means to follow
        def __init__(self, table, hyper):        # table: (rows, cols) ndarray, hyper: Hyper
            self.p = table.copy()                # ... and the optimizer's state
        def step(self, row_ids, row_grads):      # (n,) int64 ids, any order, repeats allowed; (n, cols)
            ...                                  # one optimizer step (n may be 0: an empty step)
        def table(self):
            return self.p                        # the parameters now, (rows, cols)

- ``__init__`` may raise ``NotImplementedError`` for hyper-parameters it does not
  support (say ``weight_decay``): the scenario is then *skipped*, with the
  message as the reason. Any other exception, in ``__init__`` or anywhere else
  in the candidate, is recorded as that scenario's error.
- ``table()`` returns the parameters as the model would read them now. A lazy
  optimizer with a catch-up (DENSE_EQUIVALENT) catches up first.
- Optional ``read(rows)`` returns the parameters of ``rows`` (sorted, unique
  int64 ids) as the model would read them now, shape ``(len(rows), cols)``.
  A candidate that has it is run as a training loop: before each step the
  harness reads the rows that step looks up (nothing on an empty step), and the
  whole table (``table()``) only after the last step, so a catch-up on read is
  exercised across the scenario's gaps; the trajectory then holds those reads
  (the rows read before step ``t + 1`` are the table after step ``t``), and
  only they are compared. A candidate without ``read`` has its whole table read
  after every step.
- Optional ``step_entries(rows, cols, values)`` takes a coordinate-level sparse
  gradient (incomplete rows: each entry once, row-major within a row); without
  it the incomplete-rows scenarios are skipped.
- Optional ``name`` (default: the class's qualified name) labels the report.
- Optional ``form``: ``"catalogue"`` (default) or ``"kernel"``, for a candidate
  that runs float32 tables of width 4 only (a production embedding kernel);
  :func:`~sparse_opt.conformance.check` then judges it on the kernel form of
  the catalogue (:func:`~sparse_opt.conformance.catalogue.kernel_scenarios`);
  or ``"half"``: float16 tables of width 4 (fp16 weights, the state the
  candidate's own), judged on the half form (Adagrad and SGD). A half-form
  table is read back as float32, not rounded: an entry that is not a float16
  number is out of tolerance (:mod:`.tolerance`).
- Optional ``schedules = True``: the candidate takes a learning-rate schedule.
  Step ``t`` (1-based, empty steps count) then uses the rate ``hyper.rate(t)``
  instead of ``hyper.lr``, and a catch-up may ask ``hyper.rate(j)`` for any
  earlier step ``j`` (``hyper.schedule`` holds them all; ``hyper.rate`` is a
  pure function of the step, the schedule of :mod:`sparse_opt.schedules`'
  contract). The scenarios with a schedule (``hyper.schedule`` not empty) are
  among its default scenarios; a candidate without the attribute keeps
  ``hyper.lr`` (every other scenario's rate) and is checked without them (run
  on one anyway, it is skipped: "takes a constant learning rate only").

Every call gets its own copy of its inputs (the table, the hyper-parameters,
the ids and gradients): a candidate that modifies them changes nothing else.
Gradients arrive in the table's dtype; the hyper-parameters are Python floats.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from sparse_opt.conformance.case import Scenario, frozen
from sparse_opt.conformance.catalogue import FORMS
from sparse_opt.conformance.hyper import FAMILIES, Hyper


@runtime_checkable
class Candidate(Protocol):
    """An optimizer under test (module docstring)."""

    family: ClassVar[str]

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None: ...

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None: ...

    def table(self) -> np.ndarray: ...


def check_candidate(candidate: object) -> type:
    """``candidate`` when it is a class with a valid ``family``; ``TypeError`` saying what the protocol needs otherwise.

    (A missing method shows when the scenario calls it, as that scenario's error.)
    """
    needs = (f"a candidate is a class with a 'family' attribute (one of {', '.join(FAMILIES)}) and methods "
             "__init__(table, hyper), step(row_ids, row_grads) and table() (see sparse_opt.conformance.candidate)")
    if not isinstance(candidate, type):
        kind = type(candidate)
        hint = (f"; pass the class {kind.__qualname__} itself, not an instance (each scenario builds a fresh one)"
                if hasattr(kind, "family") else "")
        raise TypeError(f"{needs}; got {kind.__name__} {candidate!r:.60}{hint}")
    family = getattr(candidate, "family", None)
    if family not in FAMILIES:
        got = "no 'family' attribute" if family is None else f"family = {family!r}"
        raise TypeError(f"{needs}; {candidate.__qualname__} has {got}")
    return candidate


def candidate_form(candidate: type) -> str:
    """The candidate's ``form`` (default ``"catalogue"``); ``ValueError`` naming it when it is not one of the forms."""
    form = getattr(candidate, "form", "catalogue")
    if form not in FORMS:
        raise ValueError(f"{candidate.__qualname__}.form must be one of {', '.join(map(repr, FORMS))}, got {form!r}")
    return str(form)


def candidate_schedules(candidate: type) -> bool:
    """The candidate's ``schedules`` (default False); ``ValueError`` naming it when it is not a bool."""
    takes = getattr(candidate, "schedules", False)
    if not isinstance(takes, bool):
        raise ValueError(f"{candidate.__qualname__}.schedules must be True or False, got {takes!r}")
    return takes


#: Why a candidate without ``schedules = True`` is not run on a scenario with a schedule.
CONSTANT_ONLY = "takes a constant learning rate only (no 'schedules = True')"


def candidate_name(candidate: type) -> str:
    """The candidate's ``name``, or its class's qualified name."""
    return str(getattr(candidate, "name", None) or candidate.__qualname__)


@dataclass(frozen=True, eq=False)
class Run:
    """A candidate's run of one scenario.

    Exactly one of: ``trajectory`` (the table after every step, the scenario's
    dtype; float32 for a float16 scenario: as the candidate returned it),
    ``skipped`` (why it was not run) or ``error`` (where and with which
    exception it stopped). ``observed`` (bool, ``(T, rows)``) says which rows of
    the trajectory were read, for a candidate run as a training loop (``read``);
    ``None`` means every entry was.
    """

    scenario: str
    fingerprint: str
    trajectory: np.ndarray | None = None
    skipped: str = ""
    error: str = ""
    observed: np.ndarray | None = None


def _rows_of(values: object, shape: tuple[int, int], dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` as an array of ``shape`` in ``dtype``; ``ValueError`` naming ``what`` otherwise."""
    out = np.array(values, dtype=dtype)
    if out.shape != shape:
        raise ValueError(f"{what} has shape {out.shape}, expected {shape}")
    return out


def run(candidate: type, scenario: Scenario) -> Run:
    """Feed ``scenario`` to a fresh ``candidate`` and record its table after every step (module docstring)."""
    name, fingerprint = scenario.name, scenario.fingerprint
    check_candidate(candidate)
    dtype, shape, steps = scenario.dtype, scenario.table.shape, scenario.steps
    kept = np.dtype(np.float32) if dtype == np.float16 else dtype  # a half table is read back unrounded
    if scenario.hyper.schedule and not candidate_schedules(candidate):
        return Run(name, fingerprint, skipped=CONSTANT_ONLY)
    where = "__init__"
    try:
        opt = candidate(np.array(scenario.table), replace(scenario.hyper))
        where = "step 1"
        if not all(s.complete for s in steps) and not hasattr(opt, "step_entries"):
            return Run(name, fingerprint, skipped="takes complete rows only (no step_entries)")
        reads = callable(getattr(opt, "read", None))
        tables = np.zeros((len(steps),) + shape, dtype=kept)
        observed = np.zeros((len(steps), shape[0]), dtype=bool)
        for t, step in enumerate(steps, 1):
            where = f"step {t}"
            looked = np.unique(step.row_ids)
            if reads and looked.size:
                what = f"read(rows) before step {t}"
                got = _rows_of(opt.read(np.array(looked)), (looked.size, shape[1]), kept, what)
                if t == 1 and not np.array_equal(got, scenario.table[looked]):
                    raise ValueError("read(rows) before the first step is not the initial table")
                if t > 1:
                    tables[t - 2, looked], observed[t - 2, looked] = got, True
            if step.complete:
                opt.step(np.array(step.row_ids), step.row_grads.astype(dtype))
            else:
                rows, cols, values = step.entries()
                opt.step_entries(rows, cols, values.astype(dtype))
            if not reads or t == len(steps):
                tables[t - 1], observed[t - 1] = _rows_of(opt.table(), shape, kept, "table()"), True
    except NotImplementedError as exc:
        reason = str(exc) or "not supported"
        return Run(name, fingerprint, skipped=reason if where == "__init__" else f"{where}: {reason}")
    except Exception as exc:  # a crash is a finding: report it, do not abort the whole check
        return Run(name, fingerprint, error=f"{where}: {type(exc).__name__}: {exc}")
    return Run(name, fingerprint, trajectory=frozen(tables), observed=frozen(observed) if reads else None)

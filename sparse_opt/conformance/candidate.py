"""The candidate protocol: what an optimizer implements to be checked, and how it is run.

A candidate is a class with a ``family`` and three methods::

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
  message as the reason.
- ``table()`` returns the parameters as the model would read them now. A lazy
  optimizer with a catch-up (DENSE_EQUIVALENT) catches up first.
- Optional ``step_entries(rows, cols, values)`` takes a coordinate-level sparse
  gradient (incomplete rows: each entry once, row-major within a row); without
  it the incomplete-rows scenarios are skipped.
- Optional ``name`` (default: the class's qualified name) labels the report.

Gradients arrive in the table's dtype; the hyper-parameters are Python floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from sparse_opt.conformance.case import Scenario, frozen
from sparse_opt.conformance.hyper import Hyper


@runtime_checkable
class Candidate(Protocol):
    """An optimizer under test (module docstring)."""

    family: ClassVar[str]

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None: ...

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None: ...

    def table(self) -> np.ndarray: ...


def candidate_name(candidate: type) -> str:
    """The candidate's ``name``, or its class's qualified name."""
    return str(getattr(candidate, "name", None) or candidate.__qualname__)


@dataclass(frozen=True, eq=False)
class Run:
    """A candidate's run of one scenario.

    Exactly one of: ``trajectory`` (the table after every step, the scenario's
    dtype), ``skipped`` (why it was not run) or ``error`` (the step and exception
    it stopped at).
    """

    scenario: str
    fingerprint: str
    trajectory: np.ndarray | None = None
    skipped: str = ""
    error: str = ""


def run(candidate: type, scenario: Scenario) -> Run:
    """Feed ``scenario`` to a fresh ``candidate`` and record its table after every step."""
    name, fingerprint = scenario.name, scenario.fingerprint
    try:
        opt = candidate(np.array(scenario.table), scenario.hyper)
    except NotImplementedError as exc:
        return Run(name, fingerprint, skipped=str(exc) or "not supported")
    if not all(s.complete for s in scenario.steps) and not hasattr(opt, "step_entries"):
        return Run(name, fingerprint, skipped="takes complete rows only (no step_entries)")
    dtype = scenario.dtype
    tables = []
    for t, step in enumerate(scenario.steps, 1):
        try:
            if step.complete:
                opt.step(np.array(step.row_ids), step.row_grads.astype(dtype))
            else:
                rows, cols, values = step.entries()
                opt.step_entries(rows, cols, values.astype(dtype))
            now = np.array(opt.table(), dtype=dtype)
            if now.shape != scenario.table.shape:
                raise ValueError(f"table() has shape {now.shape}, expected {scenario.table.shape}")
        except NotImplementedError as exc:
            return Run(name, fingerprint, skipped=f"step {t}: {exc}")
        except Exception as exc:  # a crash is a finding: report it, do not abort the whole check
            return Run(name, fingerprint, error=f"step {t}: {type(exc).__name__}: {exc}")
        tables.append(now)
    return Run(name, fingerprint, trajectory=frozen(np.stack(tables)))

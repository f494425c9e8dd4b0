"""A scenario: a small, deterministic run that isolates one semantic point.

A :class:`Scenario` is an initial table, hyper-parameters and a list of
:class:`Step` s. Each step is what an embedding lookup's backward pass hands an
optimizer: the looked-up ``row_ids`` (any order, repeats allowed, possibly none)
and one gradient row per id. A step may instead carry a ``mask`` saying which
entries of each row are present (*incomplete rows*, a coordinate-level sparse
gradient); the missing entries are absent, not zero.

Gradient values and initial tables are dyadic (``k * 2**-e`` with small
integers ``k``), so they are exact in every floating-point dtype a scenario
uses, and a scenario means the same thing in float32 and float64.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sparse_opt._arrays import as_index_array, check_in_range, readonly
from sparse_opt.conformance.hyper import FAMILIES, Hyper

#: Parameter dtypes a scenario may use (float16: the catalogue's half form, float32 state).
DTYPES = ("float16", "float32", "float64")


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array`` that cannot be made writeable again (shared and cached safely)."""
    return readonly(np.array(array))


@dataclass(frozen=True, eq=False)
class Step:
    """One optimizer step's gradient.

    Parameters
    ----------
    row_ids : ndarray of int64, shape (n,)
        Looked-up rows, in lookup order; repeats allowed; ``n = 0`` is an empty step.
    row_grads : ndarray of float64, shape (n, cols)
        The gradient of each lookup (dyadic: exact in float32 too).
    mask : ndarray of bool, shape (n, cols), optional
        Which entries of each row are present; ``None`` means complete rows.
    """

    row_ids: np.ndarray
    row_grads: np.ndarray
    mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "row_ids", frozen(as_index_array(self.row_ids, "row_ids")))
        object.__setattr__(self, "row_grads", frozen(np.asarray(self.row_grads, dtype=np.float64)))
        if self.row_grads.ndim != 2 or self.row_grads.shape[0] != self.row_ids.size:
            raise ValueError(f"row_grads must have shape ({self.row_ids.size}, cols), got {self.row_grads.shape}")
        if self.mask is not None:
            object.__setattr__(self, "mask", frozen(np.asarray(self.mask, dtype=bool)))
            if self.mask.shape != self.row_grads.shape:
                raise ValueError(f"mask must have shape {self.row_grads.shape}, got {self.mask.shape}")

    @property
    def complete(self) -> bool:
        """True when every looked-up row has all its entries."""
        return self.mask is None

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, cols, values)`` of the present entries, lookup by lookup (row-major within a row)."""
        present = np.ones(self.row_grads.shape, dtype=bool) if self.mask is None else self.mask
        lookup, cols = np.nonzero(present)
        return self.row_ids[lookup], cols.astype(np.int64), self.row_grads[lookup, cols]


@dataclass(frozen=True, eq=False)
class Scenario:
    """A named, deterministic optimizer run over a small table.

    Parameters
    ----------
    name : str
        Unique; ``<family>_<point>``, usable as a file name.
    family : {"adam", "adagrad", "sgd"}
        The optimizers it is meant for.
    point : str
        The semantic point it isolates, one sentence.
    hyper : Hyper
        With a ``schedule``, one rate per step.
    table : ndarray, shape (rows, cols), float16, float32 or float64
        The initial parameters; its dtype is the scenario's dtype.
    steps : tuple of Step
    """

    name: str
    family: str
    point: str
    hyper: Hyper
    table: np.ndarray
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        object.__setattr__(self, "table", frozen(self.table))
        if self.table.ndim != 2 or self.table.dtype.name not in DTYPES:
            raise ValueError(f"table must be a 2-D array of one of {DTYPES}, got {self.table.dtype} {self.table.shape}")
        object.__setattr__(self, "steps", tuple(self.steps))
        if self.hyper.schedule and len(self.hyper.schedule) != len(self.steps):
            raise ValueError(f"{self.name}: the schedule has {len(self.hyper.schedule)} rates for "
                             f"{len(self.steps)} steps (one per step)")
        rows, cols = self.table.shape
        for t, step in enumerate(self.steps, 1):
            if step.row_grads.shape[1] != cols:
                raise ValueError(f"{self.name}: step {t} has rows of {step.row_grads.shape[1]} entries, the table {cols}")
            check_in_range(step.row_ids, rows, f"{self.name}: step {t} row_ids", "rows")

    @property
    def dtype(self) -> np.dtype:
        """The parameters' dtype."""
        return self.table.dtype

    @property
    def features(self) -> frozenset[str]:
        """Optional features used: :meth:`Hyper.features` (``"schedule"`` among them), plus ``"entries"`` for
        incomplete rows."""
        entries = {"entries"} if any(not s.complete for s in self.steps) else set()
        return self.hyper.features(self.family) | entries

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of everything that defines the scenario: a recording made for another definition is stale."""
        h = hashlib.sha256()
        header = {"name": self.name, "family": self.family, "hyper": self.hyper.as_dict(), "dtype": self.dtype.name}
        h.update(json.dumps(header, sort_keys=True).encode())
        h.update(np.ascontiguousarray(self.table, dtype=np.float64).tobytes())
        for s in self.steps:
            h.update(b"|" + s.row_ids.tobytes() + s.row_grads.tobytes())
            if s.mask is not None:
                h.update(b"m" + s.mask.tobytes())
        return h.hexdigest()

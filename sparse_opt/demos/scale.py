"""An embedding table at a user's scale: the bytes each optimizer configuration keeps, by formula and measured.

Behind section 8 of ``notebooks/07_performance.ipynb``. A :class:`Layout` is one
optimizer configuration of an embedding table (optimizer, parameter dtype, state
dtype); :meth:`Layout.bytes_per_param` is what it keeps per parameter as a
formula of the row width, and :func:`measured_bytes_per_param` counts the same
thing from the arrays of a real optimizer on a small table (the formula is
checked against it). :data:`LAYOUTS` are the configurations the notebook works
out for a large table, and :func:`fits` says which of them fit in a given memory.

The time a step or a full ``catch_up()`` takes at that scale is extrapolated
from rates measured on tables that fit (:mod:`sparse_opt.demos.timing`):
:func:`step_ms` and :func:`catch_up_seconds` do the arithmetic.

Needs numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sparse_opt.csr import CsrGradient
from sparse_opt.sparse_adagrad import SparseAdagradConfig, SparseAdagradTable
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgdConfig, SparseSgdTable

#: The optimizers a :class:`Layout` can describe.
OPTIMIZERS: tuple[str, ...] = ("adam", "adagrad_rowwise", "sgd_momentum")

_LAST_STEP_BYTES = 8  # SparseAdamTable's last_step: one int64 per row, in every mode


@dataclass(frozen=True)
class Layout:
    """One optimizer configuration of an embedding table.

    Attributes
    ----------
    name : str
        How the notebook names it.
    optimizer : str
        ``"adam"`` (``SparseAdamTable``, any mode), ``"adagrad_rowwise"``
        (``SparseAdagradTable(rowwise=True)``, FBGEMM's exact row-wise Adagrad) or
        ``"sgd_momentum"`` (``SparseSgdTable`` with momentum, ``LAZY``).
    param_dtype : str
        ``"float32"`` or ``"float16"``: the table's dtype.
    state_dtype : str
        ``"float32"`` (the kit's default) or ``"param"`` (state in the
        parameters' dtype, as torch keeps it). For float32 parameters both are float32.
    """

    name: str
    optimizer: str
    param_dtype: str
    state_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.param_dtype not in ("float32", "float16"):
            raise ValueError(f"param_dtype must be 'float32' or 'float16', got {self.param_dtype!r}")
        if self.state_dtype not in ("float32", "param"):
            raise ValueError(f"state_dtype must be 'float32' or 'param', got {self.state_dtype!r}")

    @property
    def param_bytes(self) -> int:
        """Bytes of one parameter."""
        return np.dtype(self.param_dtype).itemsize

    @property
    def state_float_bytes(self) -> int:
        """Bytes of one float of state."""
        return 4 if self.state_dtype == "float32" else self.param_bytes

    def state_terms(self) -> tuple[int, int]:
        """``(per_entry, per_row)``: state bytes kept per parameter and per row.

        Adam keeps ``m`` and ``v`` per entry and ``last_step`` (int64) per row;
        row-wise Adagrad one float per row; SGD with momentum one float per entry.
        """
        f = self.state_float_bytes
        return {"adam": (2 * f, _LAST_STEP_BYTES), "adagrad_rowwise": (0, f), "sgd_momentum": (f, 0)}[self.optimizer]

    def bytes_per_param(self, cols: int) -> float:
        """Parameter plus state bytes per parameter of a table ``cols`` wide: ``param + per_entry + per_row / cols``.

        Examples
        --------
        >>> Layout("Adam", "adam", "float32").bytes_per_param(128)
        12.0625
        """
        per_entry, per_row = self.state_terms()
        return self.param_bytes + per_entry + per_row / cols

    def formula(self) -> str:
        """:meth:`bytes_per_param` written out, e.g. ``"4 + 8 + 8 / cols"``.

        Examples
        --------
        >>> Layout("row-wise Adagrad", "adagrad_rowwise", "float16").formula()
        '2 + 4 / cols'
        """
        per_entry, per_row = self.state_terms()
        parts = [str(self.param_bytes)] + [str(per_entry)] * bool(per_entry) + [f"{per_row} / cols"] * bool(per_row)
        return " + ".join(parts)

    def table_bytes(self, rows: int, cols: int) -> float:
        """Bytes of parameters and state of a ``rows x cols`` table (:meth:`bytes_per_param` times ``rows * cols``)."""
        return self.bytes_per_param(cols) * rows * cols

    def make(self, table: np.ndarray) -> SparseAdamTable | SparseAdagradTable | SparseSgdTable:
        """The kit's optimizer of this configuration over ``table`` (default hyper-parameters, ``lr=0.1`` for SGD)."""
        state = {"state_dtype": self.state_dtype} if self.param_dtype == "float16" else {}
        if self.optimizer == "adam":
            return SparseAdamTable(table, SparseAdamConfig(**state))
        if self.optimizer == "adagrad_rowwise":
            return SparseAdagradTable(table, SparseAdagradConfig(rowwise=True, **state))
        return SparseSgdTable(table, SparseSgdConfig(lr=0.1, momentum=0.9, **state))


#: The configurations section 8 of notebook 07 works out (bytes per parameter from ``benchmarks/bench_memory.py``).
LAYOUTS: tuple[Layout, ...] = (
    Layout("Adam, float32", "adam", "float32"),
    Layout("Adam, float16 weights, float32 state", "adam", "float16"),
    Layout("Adam, float16 weights and state (torch's)", "adam", "float16", "param"),
    Layout("SGD with momentum, float32", "sgd_momentum", "float32"),
    Layout("row-wise Adagrad, float16 weights", "adagrad_rowwise", "float16"),
)


def measured_bytes_per_param(layout: Layout, rows: int, cols: int) -> tuple[float, float]:
    """``(params, state)`` bytes per parameter of the real optimizer on a ``rows x cols`` table.

    The optimizer (:meth:`Layout.make`) takes one step whose gradient has
    every row, whole (an embedding lookup's gradient); ``params`` is
    ``table.nbytes``, ``state`` the bytes of every array of its
    ``state_dict()``, each divided by ``rows * cols``.
    """
    table = np.zeros((rows, cols), dtype=layout.param_dtype)
    opt = layout.make(table)
    opt.step(CsrGradient.from_rows(np.arange(rows), np.full((rows, cols), 0.5, np.float32), rows))
    state = sum(v.nbytes for v in opt.state_dict().values() if isinstance(v, np.ndarray))
    return table.nbytes / (rows * cols), state / (rows * cols)


def fits(layouts: Sequence[Layout], rows: int, cols: int, memory_bytes: float) -> list[Layout]:
    """The layouts whose parameters and state of a ``rows x cols`` table fit in ``memory_bytes``."""
    return [layout for layout in layouts if layout.table_bytes(rows, cols) <= memory_bytes]


def step_ms(us_per_1000_entries: float, touched_rows: int, cols: int) -> float:
    """Milliseconds of a step that touches ``touched_rows`` whole rows ``cols`` wide, at a measured rate.

    Examples
    --------
    >>> step_ms(5.0, 4096, 128)  # 524,288 entries at 5 us per 1000
    2.62144
    """
    return us_per_1000_entries * touched_rows * cols / 1e6


def catch_up_seconds(ns_per_entry: float, rows: int, cols: int) -> float:
    """Seconds of a full ``catch_up()`` of a ``rows x cols`` table at a measured cost per entry.

    Examples
    --------
    >>> catch_up_seconds(10.0, 50_000_000, 128)
    64.0
    """
    return ns_per_entry * rows * cols / 1e9

"""CSR sparse gradient for a 2-D embedding table.

A :class:`CsrGradient` of shape ``(rows, cols)`` stores ``row_offsets``
(``rows + 1`` entries, starting at 0, non-decreasing, ending at ``nnz``), the
``col_indices`` of each row's entries (strictly ascending within a row) and their
``values`` -- scipy.sparse's canonical CSR. It converts losslessly to and from a
:class:`~sparse_opt.CooGradient` over the flattened table with the linear index
``row * cols + col`` (int64, so a 100000 x 100000 table round-trips).

Internally only the *touched* rows are kept (their ids and where their entries
start), so a gradient built from an embedding lookup (:meth:`CsrGradient.from_rows`)
and an optimizer step over it cost O(nnz), not O(rows): the full ``row_offsets``
array is materialised the first time it is read. When every touched row is
complete (the usual embedding case), ``col_indices`` is implied and materialised
on first read too, and the table optimizers update whole rows at once.
"""

from __future__ import annotations

import numpy as np

from sparse_opt._validation import check_index_dtype, check_size, check_value_dtype
from sparse_opt.coo import (
    CooGradient,
    _as_1d,
    _readonly,
    check_indices_in_range,
    check_strictly_ascending,
    coalesce,
)


def _check_shape(shape: object) -> tuple[int, int]:
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"shape must be a (rows, cols) pair, got {shape!r}")
    return check_size("shape[0]", shape[0]), check_size("shape[1]", shape[1])


class CsrGradient:
    """Sparse gradient of a 2-D table in compressed sparse row form.

    Parameters
    ----------
    row_offsets : array_like of int
        ``rows + 1`` entries: row ``r``'s entries are ``row_offsets[r]`` to
        ``row_offsets[r + 1]``. Starts at 0, never decreases, ends at ``nnz``.
    col_indices : array_like of int
        Column of each entry; strictly ascending within each row, in ``[0, cols)``.
    values : array_like of float
        Gradient value of each entry.
    shape : (int, int)
        ``(rows, cols)`` of the dense table.

    Attributes
    ----------
    row_offsets, col_indices, values : ndarray, read-only
        ``row_offsets`` and ``col_indices`` are int64.
    shape : tuple of int
    nnz : int

    Raises
    ------
    TypeError
        Non-integer offsets or columns, non-float values.
    ValueError
        Wrong lengths, offsets not starting at 0 / decreasing / not ending at nnz,
        a column out of range or not strictly ascending within its row.
    """

    __slots__ = ("values", "shape", "_rows", "_starts", "_cols", "_offsets")

    values: np.ndarray
    shape: tuple[int, int]

    def __init__(self, row_offsets: object, col_indices: object, values: object, shape: tuple[int, int]) -> None:
        rows, cols = _check_shape(shape)
        offsets = _as_1d(row_offsets, "row_offsets")
        col = _as_1d(col_indices, "col_indices")
        vals = _as_1d(values, "values")
        check_index_dtype(offsets, "row_offsets")
        check_index_dtype(col, "col_indices")
        check_value_dtype(vals, "values")
        if offsets.size != rows + 1:
            raise ValueError(f"row_offsets must have rows + 1 = {rows + 1} entries, got {offsets.size}")
        if col.size != vals.size:
            raise ValueError(f"col_indices has {col.size} entries but values has {vals.size}")
        nnz = col.size
        if offsets[0] != 0:
            raise ValueError(f"row_offsets[0] must be 0, got {int(offsets[0])}")
        steps = np.diff(offsets)
        if (steps < 0).any():
            r = int(np.flatnonzero(steps < 0)[0])
            raise ValueError(
                f"row_offsets must not decrease: row_offsets[{r + 1}] = {int(offsets[r + 1])} "
                f"< row_offsets[{r}] = {int(offsets[r])}"
            )
        if offsets[-1] != nnz:
            raise ValueError(f"row_offsets[-1] = {int(offsets[-1])} must equal nnz = {nnz}")
        check_indices_in_range(col, cols, "col_indices", "cols")
        offsets = offsets.astype(np.int64)
        inner = offsets[1:-1]
        boundary = np.zeros(max(nnz - 1, 0), dtype=bool)
        boundary[inner[(inner > 0) & (inner < nnz)] - 1] = True
        check_strictly_ascending(col, "col_indices", ignore=boundary)
        if vals.dtype.kind != "f":
            vals = vals.astype(np.float64)
        touched = np.flatnonzero(steps)
        starts = np.append(offsets[touched], nnz)
        self._set((rows, cols), touched, starts, np.array(col, dtype=np.int64), np.array(vals))
        object.__setattr__(self, "_offsets", _readonly(offsets.copy()))

    def _set(
        self,
        shape: tuple[int, int],
        rows: np.ndarray,
        starts: np.ndarray,
        cols: np.ndarray | None,
        values: np.ndarray,
    ) -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_rows", _readonly(rows.astype(np.int64, copy=False)))
        object.__setattr__(self, "_starts", _readonly(starts.astype(np.int64, copy=False)))
        object.__setattr__(self, "_cols", None if cols is None else _readonly(cols))
        object.__setattr__(self, "values", _readonly(values))
        object.__setattr__(self, "_offsets", None)

    @classmethod
    def _trusted(
        cls,
        shape: tuple[int, int],
        rows: np.ndarray,
        starts: np.ndarray,
        cols: np.ndarray | None,
        values: np.ndarray,
    ) -> CsrGradient:
        """Build from parts known to be canonical; ``cols=None`` means complete rows."""
        self = cls.__new__(cls)
        self._set(shape, rows, starts, cols, values)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CsrGradient is immutable; cannot set {name!r}")

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(self.values.size)

    @property
    def full_rows(self) -> bool:
        """True when every row that has an entry has all ``cols`` of them."""
        return self.nnz == self._rows.size * self.shape[1]

    @property
    def touched_rows(self) -> np.ndarray:
        """Ids of the rows with at least one entry, ascending (int64, read-only)."""
        return self._rows

    @property
    def row_offsets(self) -> np.ndarray:
        """``rows + 1`` int64 offsets (materialised, O(rows), on first read)."""
        if self._offsets is None:
            counts = np.zeros(self.shape[0] + 1, dtype=np.int64)
            counts[self._rows + 1] = np.diff(self._starts)
            object.__setattr__(self, "_offsets", _readonly(np.cumsum(counts)))
        return self._offsets

    @property
    def col_indices(self) -> np.ndarray:
        """Column of each entry (int64, read-only)."""
        if self._cols is None:
            cols = np.tile(np.arange(self.shape[1], dtype=np.int64), self._rows.size)
            object.__setattr__(self, "_cols", _readonly(cols))
        return self._cols

    def row_of_entries(self) -> np.ndarray:
        """Row id of each stored entry (int64, length nnz)."""
        return np.repeat(self._rows, np.diff(self._starts))

    def linear_indices(self) -> np.ndarray:
        """``row * cols + col`` of each entry, int64 and strictly ascending."""
        cols = self.shape[1]
        if self._cols is None:
            return (self._rows[:, None] * cols + np.arange(cols, dtype=np.int64)).reshape(-1)
        return self.row_of_entries() * cols + self._cols

    def to_coo(self) -> CooGradient:
        """The same gradient over the flattened table (``dim = rows * cols``)."""
        return CooGradient._trusted(
            _readonly(self.linear_indices()), self.values, self.shape[0] * self.shape[1]
        )

    @classmethod
    def from_coo(cls, coo: CooGradient, shape: tuple[int, int]) -> CsrGradient:
        """Fold a :class:`CooGradient` over a flattened table back into CSR.

        ``coo.dim`` must equal ``rows * cols``; index ``i`` becomes row
        ``i // cols``, column ``i % cols``. O(nnz).
        """
        if not isinstance(coo, CooGradient):
            raise TypeError(f"coo must be a CooGradient, got {type(coo).__name__}")
        rows, cols = _check_shape(shape)
        if coo.dim != rows * cols:
            raise ValueError(f"coo.dim = {coo.dim} does not equal rows * cols = {rows} * {cols} = {rows * cols}")
        idx = coo.indices
        if idx.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls._trusted((rows, cols), empty, np.zeros(1, dtype=np.int64), empty, coo.values)
        row_of = idx // cols
        first = np.flatnonzero(np.r_[True, row_of[1:] != row_of[:-1]])
        starts = np.append(first, idx.size)
        return cls._trusted((rows, cols), row_of[first], starts, idx - row_of * cols, coo.values)

    @classmethod
    def from_dense(cls, x: object) -> CsrGradient:
        """The non-zero entries of a 2-D float array, row by row."""
        a = np.asarray(x)
        if a.ndim != 2:
            raise ValueError(f"x must be 2-D, got shape {a.shape}")
        check_value_dtype(a, "x")
        vals_dtype = a.dtype if a.dtype.kind == "f" else np.float64
        r, c = np.nonzero(a)
        coo = CooGradient._trusted(r.astype(np.int64) * a.shape[1] + c, a[r, c].astype(vals_dtype), a.size)
        return cls.from_coo(coo, a.shape)

    @classmethod
    def from_rows(cls, row_ids: object, row_grads: object, num_rows: int) -> CsrGradient:
        """The gradient of an embedding lookup: whole rows, repeats summed.

        Parameters
        ----------
        row_ids : array_like of int, shape (n,)
            Looked-up rows, in any order, repeats allowed, each in ``[0, num_rows)``.
        row_grads : array_like of float, shape (n, cols)
            Gradient with respect to each looked-up row.
        num_rows : int
            Rows of the table.

        Returns
        -------
        CsrGradient
            Shape ``(num_rows, cols)``; one complete row per distinct id, holding
            the sum of that id's gradients (added in the order given). Zeros are
            kept as explicit entries, as ``torch.nn.Embedding(sparse=True)`` does.
            O(n log n + n * cols), independent of ``num_rows``.
        """
        num_rows = check_size("num_rows", num_rows)
        ids = _as_1d(row_ids, "row_ids")
        grads = np.asarray(row_grads)
        check_index_dtype(ids, "row_ids")
        check_value_dtype(grads, "row_grads")
        if grads.ndim != 2 or grads.shape[0] != ids.size:
            raise ValueError(f"row_grads must have shape (len(row_ids), cols) = ({ids.size}, cols), got {grads.shape}")
        check_indices_in_range(ids, num_rows, "row_ids", "num_rows")
        if grads.dtype.kind != "f":
            grads = grads.astype(np.float64)
        cols = grads.shape[1]
        if cols == 0:
            ids = ids[:0]
        rows, summed = coalesce(ids, grads)
        starts = np.arange(rows.size + 1, dtype=np.int64) * cols
        return cls._trusted((num_rows, cols), rows, starts, None, summed.reshape(-1))

    def to_dense(self) -> np.ndarray:
        """The dense ``(rows, cols)`` table (dtype of ``values``)."""
        out = np.zeros(self.shape, dtype=self.values.dtype)
        out.reshape(-1)[self.linear_indices()] = self.values
        return out

    def __repr__(self) -> str:
        return f"CsrGradient(nnz={self.nnz}, shape={self.shape}, dtype={self.values.dtype})"

"""CSR sparse gradient for a 2-D embedding table.

A :class:`CsrGradient` of shape ``(rows, cols)`` stores ``row_offsets``
(``rows + 1`` entries, starting at 0, non-decreasing, ending at ``nnz``), the
``col_indices`` of each row's entries (strictly ascending within a row) and their
``values`` -- scipy.sparse's canonical CSR. It converts losslessly to and from a
:class:`~sparse_opt.CooGradient` over the flattened table with the linear index
``row * cols + col`` (int64, so a 100000 x 100000 table round-trips; a shape
with ``rows * cols >= 2**63`` is refused, since its linear indices would wrap).

Internally only the *touched* rows are kept (their ids and where their entries
start), so a gradient built from an embedding lookup (:meth:`CsrGradient.from_rows`)
and an optimizer step over it cost O(nnz), not O(rows): the full ``row_offsets``
array is materialised the first time it is read. When every touched row is
complete (the usual embedding case), ``col_indices`` is implied and materialised
on first read too, and the table optimizers update whole rows at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparse_opt._arrays import INT64_MAX, as_index_array, as_size, as_value_array, check_in_range, readonly
from sparse_opt._coalesce import coalesce
from sparse_opt.coo import CooGradient, check_strictly_ascending


def check_shape(shape: object) -> tuple[int, int]:
    """``shape`` as ``(rows, cols)`` Python ints whose product fits an int64 linear index."""
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape must be a (rows, cols) tuple, got {type(shape).__name__}")
    if len(shape) != 2:
        raise ValueError(f"shape must be a (rows, cols) pair, got {shape!r}")
    rows, cols = as_size("shape[0]", shape[0]), as_size("shape[1]", shape[1])
    if rows * cols > INT64_MAX:
        raise ValueError(
            f"shape {(rows, cols)} has rows * cols = {rows * cols} coordinates; linear indices "
            "row * cols + col must fit in int64 (at most 2**63 - 1)"
        )
    return rows, cols


def _check_row_entries(starts: np.ndarray, cols_idx: np.ndarray, cols: int) -> None:
    """Columns in ``[0, cols)`` and strictly ascending within each row (rows start at ``starts``)."""
    nnz = cols_idx.size
    check_in_range(cols_idx, cols, "col_indices", "cols")
    boundary = np.zeros(max(nnz - 1, 0), dtype=bool)
    inner = starts[1:-1]
    boundary[inner[(inner > 0) & (inner < nnz)] - 1] = True
    check_strictly_ascending(cols_idx, "col_indices", ignore=boundary)


class CsrGradient:
    """Sparse gradient of a 2-D table in compressed sparse row form.

    Parameters
    ----------
    row_offsets : array_like of int
        ``rows + 1`` entries: row ``r``'s entries are ``row_offsets[r]`` to
        ``row_offsets[r + 1]``. Starts at 0, never decreases, ends at ``nnz``.
        Any integer dtype, checked exactly.
    col_indices : array_like of int
        Column of each entry; strictly ascending within each row, in ``[0, cols)``.
    values : array_like of float
        Gradient value of each entry.
    shape : (int, int)
        ``(rows, cols)`` of the dense table; ``rows * cols`` must be below ``2**63``.

    Attributes
    ----------
    row_offsets, col_indices, values : ndarray, read-only
        ``row_offsets`` and ``col_indices`` are int64.
    shape : tuple of int
    nnz : int

    Raises
    ------
    TypeError
        Non-integer offsets or columns, non-float values, a shape that is not a
        tuple, or the wrong kind of object.
    ValueError
        Wrong lengths, offsets not starting at 0 / out of ``[0, nnz]`` /
        decreasing / not ending at nnz, a column out of range or not strictly
        ascending within its row.

    Notes
    -----
    Immutable and stored read-only for good, like :class:`~sparse_opt.CooGradient`:
    copies are the object itself, pickling keeps only the touched rows (O(nnz),
    whatever the table) and re-validates them on the way back.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> g = so.CsrGradient.from_rows([2, 0, 2], np.ones((3, 2)), num_rows=4)
    >>> g.row_offsets, g.col_indices, g.values
    (array([0, 2, 2, 4, 4]), array([0, 1, 0, 1]), array([1., 1., 2., 2.]))
    >>> g.to_coo().indices
    array([0, 1, 4, 5])
    """

    __slots__ = ("values", "shape", "_rows", "_starts", "_cols", "_offsets")

    values: np.ndarray
    shape: tuple[int, int]

    def __init__(self, row_offsets: object, col_indices: object, values: object, shape: tuple[int, int]) -> None:
        rows, cols = check_shape(shape)
        offsets = as_index_array(row_offsets, "row_offsets")
        col = as_index_array(col_indices, "col_indices")
        vals = as_value_array(values, "values", 1)
        if offsets.size != rows + 1:
            raise ValueError(f"row_offsets must have rows + 1 = {rows + 1} entries, got {offsets.size}")
        if col.size != vals.size:
            raise ValueError(f"col_indices has {col.size} entries but values has {vals.size}")
        nnz = col.size
        if offsets[0] != 0:
            raise ValueError(f"row_offsets[0] must be 0, got {int(offsets[0])}")
        check_in_range(offsets, nnz + 1, "row_offsets", "nnz + 1")
        steps = np.diff(offsets)  # exact: every offset is in [0, nnz]
        if (steps < 0).any():
            r = int(np.flatnonzero(steps < 0)[0])
            raise ValueError(
                f"row_offsets must not decrease: row_offsets[{r + 1}] = {int(offsets[r + 1])} "
                f"< row_offsets[{r}] = {int(offsets[r])}"
            )
        if offsets[-1] != nnz:
            raise ValueError(f"row_offsets[-1] = {int(offsets[-1])} must equal nnz = {nnz}")
        _check_row_entries(offsets, col, cols)
        touched = np.flatnonzero(steps)
        starts = np.append(offsets[touched], nnz)
        self._set((rows, cols), touched, starts, col.copy(), vals.copy())
        object.__setattr__(self, "_offsets", readonly(offsets.copy()))

    def _set(
        self,
        shape: tuple[int, int],
        rows: np.ndarray,
        starts: np.ndarray,
        cols: np.ndarray | None,
        values: np.ndarray,
    ) -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_rows", readonly(rows.astype(np.int64, copy=False)))
        object.__setattr__(self, "_starts", readonly(starts.astype(np.int64, copy=False)))
        object.__setattr__(self, "_cols", None if cols is None else readonly(cols))
        object.__setattr__(self, "values", readonly(values))
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
        """Build from parts known to be canonical and owned by nobody else; ``cols=None`` means complete rows."""
        self = cls.__new__(cls)
        self._set(shape, rows, starts, cols, values)
        return self

    @classmethod
    def _from_parts(
        cls,
        shape: tuple[int, int],
        rows: object,
        starts: object,
        cols: object | None,
        values: object,
    ) -> CsrGradient:
        """Rebuild from the touched-row form (unpickling), validating it as the constructor would."""
        num_rows, num_cols = check_shape(shape)
        row_ids = as_index_array(rows, "rows")
        begin = as_index_array(starts, "starts")
        vals = as_value_array(values, "values", 1)
        nnz = vals.size
        check_in_range(row_ids, num_rows, "rows", "shape[0]")
        check_strictly_ascending(row_ids, "rows")
        if begin.size != row_ids.size + 1 or begin[0] != 0 or begin[-1] != nnz:
            raise ValueError("starts must have len(rows) + 1 entries, from 0 to nnz")
        check_in_range(begin, nnz + 1, "starts", "nnz + 1")
        if (np.diff(begin) <= 0).any():
            raise ValueError("starts must be strictly ascending (every listed row has an entry)")
        if cols is None:
            if nnz != row_ids.size * num_cols or not np.array_equal(begin, np.arange(row_ids.size + 1) * num_cols):
                raise ValueError("complete rows need cols entries each")
            col = None
        else:
            col = as_index_array(cols, "col_indices").copy()
            if col.size != nnz:
                raise ValueError(f"col_indices has {col.size} entries but values has {nnz}")
            _check_row_entries(begin, col, num_cols)
        return cls._trusted((num_rows, num_cols), row_ids.copy(), begin.copy(), col, vals.copy())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CsrGradient is immutable; cannot set {name!r}")

    def __copy__(self) -> CsrGradient:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CsrGradient:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        cols = None if self._cols is None else np.array(self._cols)
        parts = (self.shape, np.array(self._rows), np.array(self._starts), cols, np.array(self.values))
        return (CsrGradient._from_parts, parts)

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
            object.__setattr__(self, "_offsets", readonly(np.cumsum(counts)))
        return self._offsets

    @property
    def col_indices(self) -> np.ndarray:
        """Column of each entry (int64, read-only)."""
        if self._cols is None:
            cols = np.tile(np.arange(self.shape[1], dtype=np.int64), self._rows.size)
            object.__setattr__(self, "_cols", readonly(cols))
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
        return CooGradient._trusted(self.linear_indices(), self.values, self.shape[0] * self.shape[1])

    @classmethod
    def from_coo(cls, coo: CooGradient, shape: tuple[int, int]) -> CsrGradient:
        """Fold a :class:`CooGradient` over a flattened table back into CSR.

        ``coo.dim`` must equal ``rows * cols``; index ``i`` becomes row
        ``i // cols``, column ``i % cols``. O(nnz).
        """
        if not isinstance(coo, CooGradient):
            raise TypeError(f"coo must be a CooGradient, got {type(coo).__name__}")
        rows, cols = check_shape(shape)
        if coo.dim != rows * cols:
            raise ValueError(f"coo.dim = {coo.dim} does not equal rows * cols = {rows} * {cols} = {rows * cols}")
        idx = coo.indices
        if idx.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls._trusted((rows, cols), empty, np.zeros(1, dtype=np.int64), empty, coo.values)
        row_of, col_of = np.divmod(idx, cols)
        first = np.flatnonzero(np.r_[True, row_of[1:] != row_of[:-1]])
        starts = np.append(first, idx.size)
        return cls._trusted((rows, cols), row_of[first], starts, col_of, coo.values)

    @classmethod
    def from_dense(cls, x: object) -> CsrGradient:
        """The non-zero entries of a 2-D float array, row by row (NaN counts as non-zero)."""
        a = as_value_array(x, "x", 2)
        rows, cols = check_shape(a.shape)
        r, c = np.nonzero(a)
        coo = CooGradient._trusted(r.astype(np.int64) * cols + c, a[r, c], rows * cols)
        return cls.from_coo(coo, (rows, cols))

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
        num_rows = as_size("num_rows", num_rows)
        ids = as_index_array(row_ids, "row_ids")
        grads = as_value_array(row_grads, "row_grads", 2)
        if grads.shape[0] != ids.size:
            raise ValueError(f"row_grads must have shape (len(row_ids), cols) = ({ids.size}, cols), got {grads.shape}")
        rows, cols = check_shape((num_rows, grads.shape[1]))
        check_in_range(ids, rows, "row_ids", "num_rows")
        if cols == 0:
            ids = ids[:0]
        unique, summed = coalesce(ids, grads)
        starts = np.arange(unique.size + 1, dtype=np.int64) * cols
        return cls._trusted((rows, cols), unique, starts, None, summed.reshape(-1))

    @classmethod
    def from_torch(cls, tensor: Any) -> CsrGradient:
        """From a 2-D torch sparse COO tensor, uncoalesced allowed (see :func:`sparse_opt.interop.csr_from_torch`)."""
        from sparse_opt.interop import csr_from_torch
        return csr_from_torch(tensor)

    def to_torch(self, *, hybrid: bool = False) -> Any:
        """A coalesced torch sparse COO tensor (see :func:`sparse_opt.interop.csr_to_torch`)."""
        from sparse_opt.interop import csr_to_torch
        return csr_to_torch(self, hybrid=hybrid)

    @classmethod
    def from_scipy(cls, matrix: Any) -> CsrGradient:
        """From a 2-D scipy sparse array or matrix (see :func:`sparse_opt.interop.csr_from_scipy`)."""
        from sparse_opt.interop import csr_from_scipy
        return csr_from_scipy(matrix)

    def to_scipy(self, format: str = "csr") -> Any:
        """A scipy ``csr_array`` or ``coo_array`` (see :func:`sparse_opt.interop.csr_to_scipy`)."""
        from sparse_opt.interop import csr_to_scipy
        return csr_to_scipy(self, format)

    def to_dense(self) -> np.ndarray:
        """The dense ``(rows, cols)`` table (dtype of ``values``)."""
        out = np.zeros(self.shape, dtype=self.values.dtype)
        out.reshape(-1)[self.linear_indices()] = self.values
        return out

    def __repr__(self) -> str:
        return f"CsrGradient(nnz={self.nnz}, shape={self.shape}, dtype={self.values.dtype})"

"""COO sparse gradient for a 1-D parameter (or a flattened table).

A :class:`CooGradient` is the canonical coordinate list of a sparse vector: the
touched ``indices`` (strictly ascending, hence sorted and unique), their gradient
``values`` and the logical length ``dim`` of the dense vector. The canonical form
is what a lazy optimizer needs: each coordinate appears once, so one gather,
one update and one scatter apply the step. :meth:`CooGradient.from_unsorted`
performs the *coalesce* step (sort, then sum duplicates) that PyTorch
(``Tensor.coalesce``) and TensorFlow (``IndexedSlices`` aggregation) do before a
non-linear update.
"""

from __future__ import annotations

import numpy as np

from sparse_opt._validation import check_index_dtype, check_size, check_value_dtype


def _as_1d(x: object, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    return a


def check_indices_in_range(indices: np.ndarray, bound: int, name: str, bound_name: str) -> None:
    """Raise ``ValueError`` naming the first entry of ``indices`` outside ``[0, bound)``."""
    if indices.size == 0:
        return
    bad = (indices < 0) | (indices >= bound)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{k}] = {int(indices[k])} is out of range [0, {bound_name} = {bound})")


def check_strictly_ascending(indices: np.ndarray, name: str, ignore: np.ndarray | None = None) -> None:
    """Raise ``ValueError`` naming the first position where ``indices`` does not increase.

    ``ignore`` (bool, length ``len(indices) - 1``) masks out boundaries where a
    decrease is allowed (between two CSR rows).
    """
    if indices.size < 2:
        return
    bad = indices[1:] <= indices[:-1]
    if ignore is not None:
        bad &= ~ignore
    if bad.any():
        k = int(np.flatnonzero(bad)[0]) + 1
        what = "duplicate" if indices[k] == indices[k - 1] else "not sorted"
        raise ValueError(
            f"{name} must be strictly ascending: {name}[{k}] = {int(indices[k])} follows "
            f"{name}[{k - 1}] = {int(indices[k - 1])} ({what}; use from_unsorted to coalesce)"
        )


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def coalesce(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort ``indices`` and sum the ``values`` of repeated indices, along axis 0.

    ``values`` may be 1-D (one number per index) or 2-D (one row per index, as an
    embedding lookup's gradient). Sorting is stable, so repeated entries are added
    in the order they were given. Costs O(n log n) in the number of entries. Both
    returned arrays are fresh (never views of the inputs).
    """
    if indices.size == 0:
        return indices.astype(np.int64), values.copy()
    order = np.argsort(indices, kind="stable")
    sorted_idx = indices[order]
    starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
    sorted_vals = values[order]
    if starts.size == sorted_idx.size:
        return sorted_idx.astype(np.int64, copy=False), sorted_vals
    return sorted_idx[starts].astype(np.int64, copy=False), np.add.reduceat(sorted_vals, starts, axis=0)


class CooGradient:
    """Sparse gradient of a 1-D parameter as a canonical coordinate list.

    Parameters
    ----------
    indices : array_like of int
        Touched coordinates, strictly ascending, each in ``[0, dim)``.
    values : array_like of float
        Gradient value at each index (same length). float32 and float64 are kept;
        other float dtypes are kept as given and cast by the optimizer.
    dim : int
        Length of the dense vector this gradient belongs to (``>= 0``).

    Attributes
    ----------
    indices : ndarray of int64, read-only
    values : ndarray of float, read-only
    dim : int
    nnz : int
        Number of stored entries (explicit zeros count).

    Raises
    ------
    TypeError
        Non-integer indices, non-float values, non-int ``dim``.
    ValueError
        Not 1-D, lengths differ, an index out of ``[0, dim)``, indices not strictly
        ascending (the message names the first offending position).

    Notes
    -----
    The arrays are copied and made read-only, so the canonical form cannot be
    broken after validation. Values are not required to be finite here (a
    gradient can hold a NaN); an optimizer's ``step`` refuses non-finite values.
    """

    __slots__ = ("indices", "values", "dim")

    indices: np.ndarray
    values: np.ndarray
    dim: int

    def __init__(self, indices: object, values: object, dim: int) -> None:
        dim = check_size("dim", dim)
        idx = _as_1d(indices, "indices")
        vals = _as_1d(values, "values")
        check_index_dtype(idx, "indices")
        check_value_dtype(vals, "values")
        if idx.shape != vals.shape:
            raise ValueError(f"indices has {idx.size} entries but values has {vals.size}")
        check_indices_in_range(idx, dim, "indices", "dim")
        check_strictly_ascending(idx, "indices")
        if vals.dtype.kind != "f":  # only an empty list of another real dtype gets here
            vals = vals.astype(np.float64)
        self._set(np.array(idx, dtype=np.int64), np.array(vals), dim)

    def _set(self, indices: np.ndarray, values: np.ndarray, dim: int) -> None:
        object.__setattr__(self, "indices", _readonly(indices))
        object.__setattr__(self, "values", _readonly(values))
        object.__setattr__(self, "dim", dim)

    @classmethod
    def _trusted(cls, indices: np.ndarray, values: np.ndarray, dim: int) -> CooGradient:
        """Build from arrays already known to be canonical (int64, fresh copies)."""
        self = cls.__new__(cls)
        self._set(indices, values, dim)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CooGradient is immutable; cannot set {name!r}")

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(self.indices.size)

    @classmethod
    def from_unsorted(cls, indices: object, values: object, dim: int) -> CooGradient:
        """Coalesce an arbitrary coordinate list: sort it and sum repeated indices.

        This is the ``coalesce`` every framework performs before a non-linear
        (Adam-like) update, since ``v`` depends on ``(g_a + g_b)**2``, not on
        ``g_a**2 + g_b**2``. Duplicates are summed in the order given.
        """
        dim = check_size("dim", dim)
        idx = _as_1d(indices, "indices")
        vals = _as_1d(values, "values")
        check_index_dtype(idx, "indices")
        check_value_dtype(vals, "values")
        if idx.shape != vals.shape:
            raise ValueError(f"indices has {idx.size} entries but values has {vals.size}")
        check_indices_in_range(idx, dim, "indices", "dim")
        if vals.dtype.kind != "f":
            vals = vals.astype(np.float64)
        out_idx, out_vals = coalesce(idx, vals)
        return cls._trusted(out_idx, out_vals, dim)

    @classmethod
    def from_dense(cls, x: object) -> CooGradient:
        """The non-zero entries of a 1-D float array (NaN counts as non-zero)."""
        a = np.asarray(x)
        if a.ndim != 1:
            raise ValueError(f"x must be 1-D, got shape {a.shape}")
        check_value_dtype(a, "x")
        nz = np.flatnonzero(a)
        return cls._trusted(nz.astype(np.int64), a[nz].astype(a.dtype if a.dtype.kind == "f" else np.float64), a.size)

    def to_dense(self) -> np.ndarray:
        """The dense vector of length ``dim`` (dtype of ``values``)."""
        out = np.zeros(self.dim, dtype=self.values.dtype)
        out[self.indices] = self.values
        return out

    def __repr__(self) -> str:
        return f"CooGradient(nnz={self.nnz}, dim={self.dim}, dtype={self.values.dtype})"

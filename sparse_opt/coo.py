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

from typing import Any

import numpy as np

from sparse_opt._arrays import as_index_array, as_size, as_value_array, check_in_range, readonly
from sparse_opt._coalesce import coalesce


def check_strictly_ascending(indices: np.ndarray, name: str, ignore: np.ndarray | None = None) -> None:
    """Raise ``ValueError`` naming the first position where the int64 ``indices`` do not increase.

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


def _checked_coordinates(indices: object, values: object, dim: object) -> tuple[int, np.ndarray, np.ndarray]:
    """Validate a coordinate list in any order: ``dim``, int64 indices in ``[0, dim)``, float values."""
    dim = as_size("dim", dim)
    idx = as_index_array(indices, "indices")
    vals = as_value_array(values, "values", 1)
    if idx.shape != vals.shape:
        raise ValueError(f"indices has {idx.size} entries but values has {vals.size}")
    check_in_range(idx, dim, "indices", "dim")
    return dim, idx, vals


class CooGradient:
    """Sparse gradient of a 1-D parameter as a canonical coordinate list.

    Parameters
    ----------
    indices : array_like of int
        Touched coordinates, strictly ascending, each in ``[0, dim)``. Any integer
        dtype; values are checked exactly (a ``uint64`` of ``2**63`` is refused,
        never wrapped).
    values : array_like of float
        Gradient value at each index (same length). float32 and float64 are kept;
        other float dtypes are kept as given and cast by the optimizer.
    dim : int
        Length of the dense vector this gradient belongs to, in ``[0, 2**63)``.

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
        Non-integer indices, non-float values, non-int ``dim``, or the wrong kind
        of object (None, a mapping, a generator).
    ValueError
        Not 1-D, lengths differ, an index out of ``[0, dim)``, indices not strictly
        ascending (the message names the first offending position).

    Notes
    -----
    The arrays are copied and stored read-only for good (they cannot be made
    writeable again), so the canonical form cannot be broken after validation.
    The gradient is immutable: ``copy.copy`` and ``copy.deepcopy`` return it
    unchanged, and pickling re-validates it on the way back. Values are not
    required to be finite here (a gradient can hold a NaN); an optimizer's
    ``step`` refuses non-finite values.

    Examples
    --------
    >>> import sparse_opt as so
    >>> g = so.CooGradient.from_unsorted([5, 1, 5], [1.0, 2.0, 0.5], dim=8)
    >>> g.indices, g.values
    (array([1, 5]), array([2. , 1.5]))
    >>> g.to_dense()
    array([0. , 2. , 0. , 0. , 0. , 1.5, 0. , 0. ])
    """

    __slots__ = ("indices", "values", "dim")

    indices: np.ndarray
    values: np.ndarray
    dim: int

    def __init__(self, indices: object, values: object, dim: int) -> None:
        dim, idx, vals = _checked_coordinates(indices, values, dim)
        check_strictly_ascending(idx, "indices")
        self._set(idx.copy(), vals.copy(), dim)

    def _set(self, indices: np.ndarray, values: np.ndarray, dim: int) -> None:
        object.__setattr__(self, "indices", readonly(indices))
        object.__setattr__(self, "values", readonly(values))
        object.__setattr__(self, "dim", dim)

    @classmethod
    def _trusted(cls, indices: np.ndarray, values: np.ndarray, dim: int) -> CooGradient:
        """Build from arrays already known to be canonical (int64, owned by nobody else)."""
        self = cls.__new__(cls)
        self._set(indices, values, dim)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CooGradient is immutable; cannot set {name!r}")

    def __copy__(self) -> CooGradient:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CooGradient:
        return self

    def __reduce__(self) -> tuple[type, tuple[np.ndarray, np.ndarray, int]]:
        return (CooGradient, (np.array(self.indices), np.array(self.values), self.dim))

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
        dim, idx, vals = _checked_coordinates(indices, values, dim)
        out_idx, out_vals = coalesce(idx, vals)
        return cls._trusted(out_idx, out_vals, dim)

    @classmethod
    def from_dense(cls, x: object) -> CooGradient:
        """The non-zero entries of a 1-D float array (NaN counts as non-zero)."""
        a = as_value_array(x, "x", 1)
        nz = np.flatnonzero(a)
        return cls._trusted(nz.astype(np.int64), a[nz], a.size)

    def to_dense(self) -> np.ndarray:
        """The dense vector of length ``dim`` (dtype of ``values``)."""
        out = np.zeros(self.dim, dtype=self.values.dtype)
        out[self.indices] = self.values
        return out

    def __repr__(self) -> str:
        return f"CooGradient(nnz={self.nnz}, dim={self.dim}, dtype={self.values.dtype})"

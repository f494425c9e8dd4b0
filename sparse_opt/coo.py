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
    if indices.size == 0 or (int(indices.min()) >= 0 and int(indices.max()) < bound):
        return
    k = int(np.flatnonzero((indices < 0) | (indices >= bound))[0])
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


def stable_sort(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(np.sort(indices), np.argsort(indices, kind="stable"))`` of non-negative integers, as int64.

    When the position fits in the low bits beside the largest index, each index
    and its position are packed into one int64 key: the keys are distinct, so
    numpy's fastest (unstable, SIMD) sort orders them exactly as a stable sort
    orders the indices, several times faster than ``kind="stable"``. Otherwise
    it falls back to the stable argsort. O(n log n).
    """
    n = indices.size
    shift = max(n - 1, 1).bit_length()
    if n and int(indices.max()) < 1 << (63 - shift):
        key = indices.astype(np.int64) << shift
        key |= np.arange(n, dtype=np.int64)
        key.sort()
        return key >> shift, key & ((1 << shift) - 1)
    order = np.argsort(indices, kind="stable")
    return indices[order].astype(np.int64, copy=False), order


def run_starts(a: np.ndarray) -> np.ndarray:
    """Positions (int64, ascending, 0 first) where the non-empty 1-D ``a`` differs from its predecessor."""
    new = np.empty(a.size, dtype=bool)
    new[0] = True
    np.not_equal(a[1:], a[:-1], out=new[1:])
    return new.nonzero()[0]


def run_lengths(starts: np.ndarray, total: int) -> np.ndarray:
    """Lengths of the runs that begin at ``starts`` (non-empty, ascending), the last one ending at ``total``."""
    lengths = np.empty_like(starts)
    lengths[:-1] = starts[1:]
    lengths[-1] = total
    lengths -= starts
    return lengths


def sum_runs(values: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sum ``values[order[a:b]]`` along axis 0 for each run ``[a, b)`` marked by ``starts``.

    ``starts`` are the ascending first positions of the runs (non-empty; the
    last run ends at ``len(order)``). Each run is summed left to right,
    ``((x0 + x1) + x2) + ...``, in the dtype of ``values``: the result equals
    ``np.add.at`` into zeros (up to the sign of a zero, which is kept here: a
    run of ``-0.0`` sums to ``-0.0``).

    Every run's first value is gathered at once; runs of two or more values are
    grouped by length into power-of-two classes, each class padded to its
    longest run with ``-0.0`` (``x + -0.0 == x`` for every ``x``) into a
    C-contiguous ``(length, runs, ...)`` block and summed over axis 0 in one
    call. (numpy reduces a leading axis of a C-contiguous array by adding whole
    sub-arrays ``block[i]`` one after the other -- its pairwise summation applies
    only along the innermost axis -- which is the left-to-right order wanted; a
    block with one number per rank is summed with ``np.add.accumulate``,
    sequential by definition.) The blocks of all classes are gathered in one
    ``take``. Padding at most doubles a class, so this costs O(len(order)) time
    and memory, in a fixed number of numpy calls plus one per class (at most
    ``log2(longest run)`` classes).
    """
    counts = run_lengths(starts, order.size)
    out = values.take(order[starts], axis=0)
    multi = (counts > 1).nonzero()[0]
    if multi.size == 0:
        return out
    # runs with repeats, sorted by length class 1, 2, ... (lengths in (2**(k-1), 2**k])
    length = counts[multi]
    cls = np.frexp(length - 1)[1]
    by_class = cls.argsort(kind="stable")
    multi, length, cls = multi[by_class], length[by_class], cls[by_class]
    group = run_starts(cls)  # first run of each class
    members = run_lengths(group, multi.size)
    width = np.maximum.reduceat(length, group)
    size = width * members
    offset = size.cumsum() - size
    # slot s of class block g holds rank // members, member % members (rank-major)
    rank, member = np.divmod(np.arange(offset[-1] + size[-1]) - offset.repeat(size), members.repeat(size))
    run = group.repeat(size) + member
    pad = rank >= length[run]
    pos = starts[multi[run]] + rank
    pos[pad] = 0
    block = values.take(order[pos], axis=0)
    block[pad] = -0.0
    sums = np.empty((multi.size, *values.shape[1:]), dtype=values.dtype)
    for g, n, w, o in zip(group.tolist(), members.tolist(), width.tolist(), offset.tolist()):
        part = block[o : o + w * n].reshape(w, n, *values.shape[1:])
        if part[0].size == 1:
            sums[g] = np.add.accumulate(part.reshape(-1))[-1]
        else:
            np.add.reduce(part, axis=0, initial=-0.0, out=sums[g : g + n])
    out[multi] = sums
    return out


def coalesce(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort ``indices`` and sum the ``values`` of repeated indices, along axis 0.

    ``values`` may be 1-D (one number per index) or 2-D (one row per index, as an
    embedding lookup's gradient). ``indices`` must be non-negative. Repeated
    entries are added left to right in the order they were given (as
    ``np.add.at`` adds them), see :func:`sum_runs`. Costs O(n log n) in the
    number of entries. Both returned arrays are fresh (never views of the inputs).
    """
    if indices.size == 0:
        return indices.astype(np.int64), values.copy()
    sorted_idx, order = stable_sort(indices)
    starts = run_starts(sorted_idx)
    if starts.size == sorted_idx.size:
        return sorted_idx, values.take(order, axis=0)
    return sorted_idx[starts], sum_runs(values, order, starts)


def _checked_coordinates(indices: object, values: object, dim: object) -> tuple[int, np.ndarray, np.ndarray]:
    """Validate a coordinate list (any order): ``dim``, 1-D integer indices in ``[0, dim)``, float values.

    Returns ``(dim, indices, values)``; an empty list of a non-float dtype gets float64 values.
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
    return dim, idx, vals


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
        dim, idx, vals = _checked_coordinates(indices, values, dim)
        check_strictly_ascending(idx, "indices")
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
        dim, idx, vals = _checked_coordinates(indices, values, dim)
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

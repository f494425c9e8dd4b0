"""Coalescing: sort a coordinate list and sum repeated indices, as every framework does before a non-linear update.

An embedding lookup with a repeated id produces a repeated coordinate; Adam's
second moment needs ``(g_a + g_b)**2``, not ``g_a**2 + g_b**2``, so repeats are
summed first (PyTorch's ``Tensor.coalesce``, TensorFlow's ``IndexedSlices``
aggregation). :func:`coalesce` means ``np.unique(indices)`` and ``np.add.at``
of the values into zeros, in the order given (except that a run of ``-0.0``
sums to ``-0.0``, keeping the sign as a sum of ``-0.0`` values should). The
helpers below compute exactly that, fourteen times faster than ``np.add.at`` on
an embedding batch of 4096 ids of width 64 (measured: 0.12 ms against 1.6 ms),
which is why they exist. :func:`distinct` is ``np.unique(values,
return_inverse=True)`` for the steps a catch-up groups its terms by, without
the sort where the steps span few values or come in runs.
"""

from __future__ import annotations

import numpy as np


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


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of the int64 ``values`` (any shape; the inverse is flat), the same arrays.

    By counting (``np.bincount`` over the span) where the values span at most
    ``4 n + 1024`` integers (the last steps of a training step's rows); else
    by sorting only the heads of the runs of equal neighbours where those are
    at most a quarter of the values (the pieces' starts, repeated for each of
    their nodes); else by sorting. O(n + span) or O(n + runs log runs)
    instead of O(n log n).
    """
    flat = values.reshape(-1)
    if not flat.size:
        return flat.astype(np.int64), np.zeros(0, dtype=np.int64)
    low = int(flat.min())
    span = int(flat.max()) - low + 1
    if span <= 4 * flat.size + 1024:
        present = np.bincount(flat - low, minlength=span) > 0
        return np.flatnonzero(present) + low, (np.cumsum(present) - 1)[flat - low]
    heads = run_starts(flat)
    if 4 * heads.size <= flat.size:
        unique, inverse = np.unique(flat[heads], return_inverse=True)
        return unique, np.repeat(inverse, run_lengths(heads, flat.size))
    return np.unique(flat, return_inverse=True)


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

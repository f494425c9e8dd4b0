"""Turning a :class:`~sparse_opt.conformance.Step` into the gradient a reference consumes.

All in the dtype the reference is evaluated in. ``maximize`` negates every
lookup first (before any summing), as torch does. :func:`working` is where a
reference evaluated on a float16 table (the half form) gets its arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt.conformance.case import Step


def working(table: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """The parameters a reference computes with, and ``store``, what writing a new value does to it.

    A float32 or float64 table: a copy, and values are stored as computed. A
    float16 table (the catalogue's half form): a float32 copy (exact), the
    state and the arithmetic in float32, and every value written to the
    parameters rounded to nearest float16 once (kept in float32): the kit's
    float16 optimizers with ``state_dtype="float32"`` (SPEC, "Low-precision
    tables"), written here without the kit's code.

    Examples
    --------
    >>> import numpy as np
    >>> p, store = working(np.ones(2, dtype=np.float16))
    >>> p.dtype, store(p - np.float32(2**-12))   # below half a float16 ulp: the write loses it
    (dtype('float32'), array([1., 1.], dtype=float32))
    """
    if table.dtype != np.float16:
        return table.copy(), lambda x: x
    return table.astype(np.float32), lambda x: x.astype(np.float16).astype(np.float32)  # numpy's cast: nearest-even


def _signed(step: Step, dtype: np.dtype, maximize: bool) -> np.ndarray:
    g = step.row_grads.astype(dtype)
    return -g if maximize else g


def summed(step: Step, shape: tuple[int, int], dtype: np.dtype, maximize: bool) -> tuple[np.ndarray, np.ndarray]:
    """The coalesced gradient ``(g, touched)``: repeated entries summed in lookup order; ``touched`` per entry."""
    rows, cols, _ = step.entries()
    values = _signed(step, dtype, maximize)
    present = np.ones(values.shape, bool) if step.mask is None else step.mask
    g = np.zeros(shape, dtype=dtype)
    np.add.at(g, (rows, cols), values[present])
    touched = np.zeros(shape, dtype=bool)
    touched[rows, cols] = True
    return g, touched


def summed_squares(step: Step, shape: tuple[int, int], dtype: np.dtype, maximize: bool) -> np.ndarray:
    """``sum_i g_i**2`` per entry over the lookups: the square of each lookup, then summed."""
    values = _signed(step, dtype, maximize)
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, step.row_ids, values * values)
    return out


def lookups(step: Step, dtype: np.dtype, maximize: bool) -> list[tuple[int, np.ndarray]]:
    """``(row, gradient row)`` for each lookup, in order (for kernels that apply duplicates one by one)."""
    values = _signed(step, dtype, maximize)
    return [(int(r), values[i]) for i, r in enumerate(step.row_ids)]


def touched_rows(step: Step, rows: int) -> np.ndarray:
    """Bool ``(rows,)``: the rows with at least one lookup."""
    out = np.zeros(rows, dtype=bool)
    out[step.row_ids] = True
    return out

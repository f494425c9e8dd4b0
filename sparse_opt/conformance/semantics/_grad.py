"""Turning a :class:`~sparse_opt.conformance.Step` into the gradient a reference consumes.

All in the dtype the reference is evaluated in. ``maximize`` negates every
lookup first (before any summing), as torch does.
"""

from __future__ import annotations

import numpy as np

from sparse_opt.conformance.case import Step


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

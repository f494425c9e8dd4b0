"""``last_step``: the global step at which each coordinate was last brought current.

A lazy Adam needs, for every touched coordinate, the step ``s`` of its previous
update: the gap ``t - s`` sets the dormancy decay, and the dormant steps
``s + 1 .. t - 1`` are what ``DENSE_EQUIVALENT`` catches up. Two layouts, chosen
once by the kind of parameter:

- :class:`CoordinateSteps` (1-D parameters): one int64 per coordinate.
- :class:`RowSteps` (tables): one int64 per row, since an embedding gradient
  updates whole rows and the entries of a row then share their step -- 8 bytes
  per row instead of per entry. A step with an *incomplete* row (some columns
  only) gives that row's entries different steps; such a row is *split*: its
  entries' steps move to a pool of per-entry rows, and back to the per-row array
  as soon as a step (or a catch-up) makes the whole row share one step again.
  A split costs O(cols) for that row only: no step allocates anything of the
  table's size, whatever its gradient.

Both answer the same four questions: the previous steps of the coordinates a
step addresses (:meth:`previous`), recording a new one (:meth:`stamp`), the
record as an array of the parameters' shape (:meth:`as_array`, O(table)), and
its compact state-dict form (:meth:`compact`).

An address is ``(index, by_rows)``: table rows (``by_rows``) or coordinates of
the flattened parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def previous_steps(last_step: Any, index: np.ndarray, ndim: int) -> np.ndarray:
    """``last_step[index]``, shaped to broadcast against the ``ndim``-D values gathered at ``index``.

    A table's rows usually have one step each (shape ``(k,)``); against rows of
    values (``(k, cols)``) they get a trailing axis, ``(k, 1)``.
    """
    last = np.asarray(last_step[index])
    return last.reshape(*last.shape, *([1] * (ndim - last.ndim)))


class CoordinateSteps:
    """One int64 step per coordinate of a 1-D parameter (0 = never updated)."""

    def __init__(self, size: int) -> None:
        self.steps = np.zeros(size, dtype=np.int64)

    def previous(self, index: np.ndarray, by_rows: bool = False) -> np.ndarray:
        """``steps[index]``: shape ``(len(index),)``."""
        return self.steps[index]

    def stamp(self, index: np.ndarray, step: int, by_rows: bool = False) -> None:
        """Record ``step`` for the coordinates ``index``."""
        self.steps[index] = step

    def as_array(self) -> np.ndarray:
        """The record itself (the caller makes it read-only)."""
        return self.steps

    def compact(self) -> np.ndarray:
        """A copy for a state dict."""
        return self.steps.copy()

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """Shapes :meth:`load` accepts."""
        return (self.steps.shape,)

    def load(self, steps: np.ndarray) -> None:
        """Adopt a validated, freshly copied array."""
        self.steps = steps


class RowSteps:
    """Steps of a ``(rows, cols)`` table: one per row, per entry only for split rows.

    Attributes
    ----------
    row_step : ndarray of int64, shape (rows,)
        The step of every entry of a row that is not split.
    split_ids : ndarray of int64
        Ids of the split rows, ascending.
    split_slots : ndarray of int64
        For each split row, its row of :attr:`pool`.
    pool : ndarray of int64, shape (capacity, cols)
        Per-entry steps of the split rows (slots not in ``split_slots`` are free).
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.cols = cols
        self.row_step = np.zeros(rows, dtype=np.int64)
        self._no_splits()

    def _no_splits(self) -> None:
        self.split_ids = np.zeros(0, dtype=np.int64)
        self.split_slots = np.zeros(0, dtype=np.int64)
        self.pool = np.zeros((0, self.cols), dtype=np.int64)
        self.free = np.zeros(0, dtype=np.int64)

    # -- lookups -----------------------------------------------------------------
    def _find(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``rows``: whether it is split, and its position in :attr:`split_ids`."""
        if self.split_ids.size == 0:
            return np.zeros(rows.shape, dtype=bool), np.zeros(rows.shape, dtype=np.int64)
        pos = np.searchsorted(self.split_ids, rows)
        clipped = np.minimum(pos, self.split_ids.size - 1)
        return self.split_ids[clipped] == rows, clipped

    def previous(self, index: np.ndarray, by_rows: bool) -> np.ndarray:
        """Previous steps of the addressed coordinates.

        By rows: shape ``(k,)`` when none of the rows is split (one step per
        row), else ``(k, cols)``. By flat coordinates: shape ``(k,)``.
        """
        if by_rows:
            prev = self.row_step[index]
            hit, pos = self._find(index)
            if not hit.any():
                return prev
            out = np.repeat(prev[:, None], self.cols, axis=1)
            out[hit] = self.pool[self.split_slots[pos[hit]]]
            return out
        rows, cols = np.divmod(index, self.cols)
        prev = self.row_step[rows]
        hit, pos = self._find(rows)
        if hit.any():
            prev[hit] = self.pool[self.split_slots[pos[hit]], cols[hit]]
        return prev

    # -- updates -----------------------------------------------------------------
    def _unsplit(self, rows: np.ndarray) -> None:
        """Forget the per-entry steps of those of ``rows`` (ascending, unique) that are split."""
        hit, pos = self._find(rows)
        if hit.any():
            self.free = np.concatenate([self.free, self.split_slots[pos[hit]]])
            keep = np.ones(self.split_ids.size, dtype=bool)
            keep[pos[hit]] = False
            self.split_ids, self.split_slots = self.split_ids[keep], self.split_slots[keep]

    def _split(self, rows: np.ndarray) -> None:
        """Give each of ``rows`` (ascending, unique, none split yet) a pool row holding its current step."""
        need = rows.size - self.free.size
        if need > 0:
            grown = max(need, self.pool.shape[0])  # capacity at least doubles: amortised O(cols) per split
            self.free = np.concatenate([self.free, np.arange(self.pool.shape[0], self.pool.shape[0] + grown)])
            self.pool = np.concatenate([self.pool, np.zeros((grown, self.cols), dtype=np.int64)])
        slots, self.free = self.free[: rows.size], self.free[rows.size :]
        self.pool[slots] = self.row_step[rows][:, None]
        ids = np.concatenate([self.split_ids, rows])
        order = np.argsort(ids, kind="stable")
        self.split_ids = ids[order]
        self.split_slots = np.concatenate([self.split_slots, slots])[order]

    def stamp(self, index: np.ndarray, step: int, by_rows: bool) -> None:
        """Record ``step`` for the addressed coordinates (``index`` ascending, unique)."""
        if by_rows:
            self.row_step[index] = step
            self._unsplit(index)
            return
        rows, cols = np.divmod(index, self.cols)
        ids, first, counts = np.unique(rows, return_index=True, return_counts=True)
        whole = counts == self.cols
        if whole.any():
            self.stamp(ids[whole], step, by_rows=True)
        partial = ~whole
        if not partial.any():
            return
        part_ids = ids[partial]
        hit, _ = self._find(part_ids)
        self._split(part_ids[~hit])
        entry_partial = np.repeat(partial, counts)
        hit, pos = self._find(rows[entry_partial])
        self.pool[self.split_slots[pos], cols[entry_partial]] = step
        # a split row whose entries now all share one step is a plain row again
        slots = self.split_slots[self._find(part_ids)[1]]
        uniform = (self.pool[slots] == self.pool[slots, :1]).all(axis=1)
        if uniform.any():
            self.row_step[part_ids[uniform]] = self.pool[slots[uniform], 0]
            self._unsplit(part_ids[uniform])

    # -- whole record ------------------------------------------------------------
    def as_array(self) -> np.ndarray:
        """Every entry's step, shape ``(rows, cols)``: a broadcast view unless rows are split (then O(table))."""
        if self.split_ids.size == 0:
            return np.broadcast_to(self.row_step[:, None], (self.row_step.size, self.cols))
        out = np.repeat(self.row_step[:, None], self.cols, axis=1)
        out[self.split_ids] = self.pool[self.split_slots]
        return out

    def compact(self) -> np.ndarray:
        """``(rows,)`` while no row is split (8 bytes per row), else the full ``(rows, cols)`` array."""
        if self.split_ids.size == 0:
            return self.row_step.copy()
        return np.array(self.as_array())

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """Shapes :meth:`load` accepts: per row, or per entry."""
        return ((self.row_step.size,), (self.row_step.size, self.cols))

    def load(self, steps: np.ndarray) -> None:
        """Adopt a validated array of either shape; rows whose entries differ become split."""
        self._no_splits()
        if steps.ndim == 1:
            self.row_step = steps
            return
        if self.cols == 0:
            self.row_step = np.zeros(steps.shape[0], dtype=np.int64)
            return
        self.row_step = steps[:, 0].copy()
        differ = np.flatnonzero((steps != steps[:, :1]).any(axis=1))
        if differ.size:
            self._split(differ)
            self.pool[self.split_slots] = steps[self.split_ids]

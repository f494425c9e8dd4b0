"""``last_step``: the global step at which each coordinate was last brought current.

A lazy Adam needs, for every touched coordinate, the step ``s`` of its previous
update: the gap ``t - s`` sets the dormancy decay, and the dormant steps
``s + 1 .. t - 1`` are what ``DENSE_EQUIVALENT`` catches up. The functional
cores (:func:`~sparse_opt.sparse_adam.sparse_adam_update`, ...) take those
previous steps as a plain int64 array; the optimizers keep the record here and
stamp it after a core has accepted a step. Two layouts, chosen once by the kind
of parameter:

- :class:`CoordinateSteps` (1-D parameters): one int64 per coordinate.
- :class:`RowSteps` (tables): one int64 per row, since an embedding gradient
  updates whole rows and the entries of a row then share their step -- 8 bytes
  per row instead of per entry. A step with an *incomplete* row (some columns
  only) gives that row's entries different steps; such a row is *split*: its
  entries' steps move to a pool of per-entry rows, and back to the per-row array
  as soon as a step (or a catch-up) stamps the whole row again. A split costs
  O(cols) for that row only, and so does its checkpoint: no step, state dict or
  read of ``last_step`` allocates anything of the table's size.

Both answer the same questions: the previous steps of the coordinates a step
addresses (:meth:`~RowSteps.previous`), recording a new one
(:meth:`~RowSteps.stamp`), the read-only public view (:meth:`~RowSteps.view`),
and the state-dict form (:meth:`~RowSteps.entries`, :meth:`~RowSteps.state`,
:meth:`~RowSteps.check`, :meth:`~RowSteps.load`).

An address is ``(index, by_rows)``: table rows (``by_rows``) or coordinates of
the flattened parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from sparse_opt._arrays import readonly
from sparse_opt._state import Entry

#: State-dict keys of a table's split rows: their ids (ascending) and their per-entry steps.
SPLIT_ROWS, SPLIT_STEPS = "last_step_split_rows", "last_step_split"


def as_column(last: np.ndarray, ndim: int) -> np.ndarray:
    """Previous steps shaped to broadcast against ``ndim``-D values: a row's one step ``(k,)`` becomes ``(k, 1)``."""
    last = np.asarray(last)
    return last.reshape(*last.shape, *([1] * (ndim - last.ndim)))


def _steps_entry(shapes: tuple[tuple[int | None, ...], ...], key: str = "last_step", optional: bool = False) -> Entry:
    return Entry(key, shapes, np.dtype(np.int64), bounded_by="step_count", optional=optional)


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

    def view(self) -> np.ndarray:
        """The record, read-only."""
        return readonly(self.steps)

    def entries(self) -> list[Entry]:
        """The state-dict entry: ``last_step``, one per coordinate."""
        return [_steps_entry((self.steps.shape,))]

    def state(self) -> dict[str, np.ndarray]:
        """``{"last_step": steps}`` (the state-dict engine copies it)."""
        return {"last_step": self.steps}

    def check(self, loaded: Mapping[str, Any]) -> None:
        """Nothing beyond the entry's own checks."""

    def load(self, loaded: Mapping[str, Any]) -> None:
        """Adopt a validated, freshly copied array."""
        self.steps = loaded["last_step"]


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
        """Previous steps of the addressed coordinates (a new array).

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
        """Record ``step`` for the addressed coordinates (``index`` ascending, unique).

        Steps only grow, so an incomplete row stamped now is split until a later
        stamp covers the whole row: its other entries hold earlier steps.
        """
        if by_rows:
            self.row_step[index] = step
            self._unsplit(index)
            return
        rows, cols = np.divmod(index, self.cols)
        ids, counts = np.unique(rows, return_counts=True)
        whole = counts == self.cols
        if whole.any():
            self.stamp(ids[whole], step, by_rows=True)
        partial = ~whole
        if not partial.any():
            return
        part_ids = ids[partial]
        self._split(part_ids[~self._find(part_ids)[0]])
        entry_partial = np.repeat(partial, counts)
        pos = self._find(rows[entry_partial])[1]
        self.pool[self.split_slots[pos], cols[entry_partial]] = step

    # -- whole record ------------------------------------------------------------
    def as_array(self) -> np.ndarray:
        """Every entry's step, shape ``(rows, cols)``: a broadcast view unless rows are split (then O(table))."""
        if self.split_ids.size == 0:
            return np.broadcast_to(self.row_step[:, None], (self.row_step.size, self.cols))
        out = np.repeat(self.row_step[:, None], self.cols, axis=1)
        out[self.split_ids] = self.pool[self.split_slots]
        return out

    def view(self) -> np.ndarray | SplitStepsView:
        """The read-only ``last_step`` of the table's shape, allocating nothing of the table's size.

        A broadcast of the per-row steps while no row is split; a
        :class:`SplitStepsView` that computes only what is indexed otherwise.
        """
        if self.split_ids.size == 0:
            return readonly(self.as_array())
        return SplitStepsView(self)

    # -- state dict --------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """``last_step`` per row (or, on load, per entry) and the split rows' ids and per-entry steps.

        The split keys are optional on load: a checkpoint written before they
        existed (``(rows,)`` or ``(rows, cols)`` only) loads as it always did.
        """
        rows = self.row_step.size
        return [
            _steps_entry(((rows,), (rows, self.cols))),
            Entry(SPLIT_ROWS, ((None,),), np.dtype(np.int64), optional=True),
            _steps_entry(((None, self.cols),), SPLIT_STEPS, optional=True),
        ]

    def state(self) -> dict[str, np.ndarray]:
        """Per-row steps (a split row: its latest entry's) plus the split rows, O(rows + split entries)."""
        steps = self.pool[self.split_slots]
        row_step = self.row_step
        if self.split_ids.size:
            row_step = row_step.copy()
            row_step[self.split_ids] = steps.max(axis=1)
        return {"last_step": row_step, SPLIT_ROWS: self.split_ids, SPLIT_STEPS: steps}

    def check(self, loaded: Mapping[str, Any]) -> None:
        """Refuse split rows that are not ascending, unique and in range, or that do not match their steps."""
        ids, steps = loaded.get(SPLIT_ROWS), loaded.get(SPLIT_STEPS)
        if (ids is None) != (steps is None):
            have, missing = (SPLIT_ROWS, SPLIT_STEPS) if steps is None else (SPLIT_STEPS, SPLIT_ROWS)
            raise ValueError(f"state_dict has {have!r} but not {missing!r}: the split rows need both")
        if ids is None:
            return
        if steps.shape[0] != ids.size:
            raise ValueError(
                f"state_dict[{SPLIT_STEPS!r}] has {steps.shape[0]} rows for {ids.size} ids in {SPLIT_ROWS!r}"
            )
        bad = np.flatnonzero((ids < 0) | (ids >= self.row_step.size) | np.r_[False, np.diff(ids) <= 0])
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"state_dict[{SPLIT_ROWS!r}] holds {int(ids[k])} at position {k}: split row ids must be "
                f"strictly ascending, >= 0 and below rows = {self.row_step.size}"
            )
        if loaded["last_step"].ndim == 2 and ids.size:
            raise ValueError(f"state_dict has a per-entry 'last_step' and {SPLIT_ROWS!r}: give one form, not both")

    def load(self, loaded: Mapping[str, Any]) -> None:
        """Adopt validated arrays of either form; rows whose entries differ become split."""
        self._no_splits()
        steps = loaded["last_step"]
        if steps.ndim == 2:
            self.row_step = steps[:, 0].copy() if self.cols else np.zeros(steps.shape[0], dtype=np.int64)
            ids = np.flatnonzero((steps != steps[:, :1]).any(axis=1)) if self.cols else np.zeros(0, np.int64)
            per_entry = steps[ids]
        else:
            self.row_step = steps
            ids = loaded.get(SPLIT_ROWS, np.zeros(0, dtype=np.int64))
            per_entry = loaded.get(SPLIT_STEPS, np.zeros((0, self.cols), dtype=np.int64))
            uniform = (per_entry == per_entry[:, :1]).all(axis=1) if self.cols else np.ones(ids.size, bool)
            self.row_step[ids[uniform]] = per_entry[uniform, 0] if self.cols else 0
            ids, per_entry = ids[~uniform], per_entry[~uniform]
        if ids.size:
            self._split(ids)
            self.pool[self.split_slots] = per_entry


class SplitStepsView(NDArrayOperatorsMixin):
    """A table's ``last_step`` while some rows are split: read-only, computing only what is indexed.

    It has the table's ``shape`` and int64 ``dtype``; indexing (``view[ids]``,
    ``view[ids, 0]``, slices, masks) returns a new array of just those entries,
    and arithmetic or ``np.asarray(view)`` materialises the whole record
    (O(table), at the caller's request). Assignment is refused: the record is
    the optimizer's (restore it with ``load_state_dict``).
    """

    __slots__ = ("_record",)

    def __init__(self, record: RowSteps) -> None:
        self._record = record

    @property
    def shape(self) -> tuple[int, int]:
        return (self._record.row_step.size, self._record.cols)

    dtype = np.dtype(np.int64)
    ndim = 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        rows, cols = self.shape
        if len(key) == 2 and not any(isinstance(k, slice) or k is Ellipsis or k is None for k in key):
            r, c = (np.asarray(k) for k in key)  # point-wise: numpy broadcasts the two index arrays together
            r = np.arange(rows)[r] if r.dtype == bool else r
            lin = np.add(np.arange(rows)[r] * cols, np.arange(cols)[c])
            return self._record.previous(lin.reshape(-1), by_rows=False).reshape(lin.shape)
        if key and key[0] is Ellipsis:
            ids, rest = np.arange(rows), key
        else:
            ids, rest = np.arange(rows)[key[0]], (Ellipsis, *key[1:])
        prev = self._record.previous(np.reshape(ids, -1), by_rows=True)
        out = np.broadcast_to(as_column(prev, 2), (prev.shape[0], cols)).reshape(*np.shape(ids), cols)
        return np.array(out[rest])

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ValueError("assignment destination is read-only: last_step is the optimizer's record")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self._record.as_array()
        return out if dtype is None else out.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(np.asarray(x) if isinstance(x, SplitStepsView) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def tolist(self) -> list:
        return np.asarray(self).tolist()

    def copy(self) -> np.ndarray:
        return np.asarray(self)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def reshape(self, *shape: Any) -> np.ndarray:
        return np.asarray(self).reshape(*shape)

    def __repr__(self) -> str:
        return f"SplitStepsView(shape={self.shape}, split rows={self._record.split_ids.size})"

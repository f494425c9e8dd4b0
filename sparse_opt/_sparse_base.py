"""What every lazy sparse optimizer shares: checking a gradient, finding its coordinates, counting steps.

A sparse step gathers the touched coordinates of the parameters and of each
state array, computes their new values, checks them, and scatters them back.
The 1-D optimizers address coordinates by a :class:`~sparse_opt.CooGradient`'s
indices. The table optimizers address whole rows when every touched row of the
:class:`~sparse_opt.CsrGradient` is complete (an embedding lookup's gradient:
one gather per row instead of one per element), and coordinates of the
flattened table by linear index ``row * cols + col`` otherwise. Both give
identical results, because every update is elementwise.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from sparse_opt._arrays import INT64_MAX, as_index_array, cast_values, check_in_range
from sparse_opt._rounding import Precision
from sparse_opt._state import Entry, Stateful
from sparse_opt._step_record import CoordinateSteps, RowSteps, SplitStepsView
from sparse_opt._validation import check_param_array
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient


class Target(NamedTuple):
    """Where a validated gradient lands.

    Attributes
    ----------
    index : ndarray of int64
        Ascending, unique: coordinates (of the flattened parameters) or table rows.
    grad : ndarray
        Gradient values in the parameters' dtype: ``(k,)`` for coordinates,
        ``(k, cols)`` for rows.
    by_rows : bool
        Whether ``index`` addresses rows of a 2-D table.
    """

    index: np.ndarray
    grad: np.ndarray
    by_rows: bool


def locate(grad: object, params: np.ndarray, dtype: np.dtype | None = None) -> Target:
    """Validate ``grad`` against ``params`` and return its :class:`Target`; nothing is mutated.

    1-D parameters take a :class:`CooGradient` with ``dim == params.size``; 2-D
    parameters a :class:`CsrGradient` with ``shape == params.shape``. Values must
    be finite and representable in ``dtype`` (default the parameters'; the
    optimizers pass their state's, :mod:`sparse_opt._rounding`), to which they are cast.
    """
    dtype = params.dtype if dtype is None else dtype
    if params.ndim == 1:
        if not isinstance(grad, CooGradient):
            raise TypeError(f"grad must be a CooGradient for a 1-D parameter, got {type(grad).__name__}")
        if grad.dim != params.size:
            raise ValueError(f"grad.dim = {grad.dim} does not match the parameter's size {params.size}")
        return Target(grad.indices, cast_values(grad.values, dtype, "grad.values", grad.indices), False)
    if not isinstance(grad, CsrGradient):
        raise TypeError(f"grad must be a CsrGradient for a 2-D table, got {type(grad).__name__}")
    if grad.shape != params.shape:
        raise ValueError(f"grad.shape = {grad.shape} does not match the table's shape {params.shape}")
    if grad.full_rows:
        rows = grad.values.reshape(grad.touched_rows.size, params.shape[1])
        return Target(grad.touched_rows, cast_values(rows, dtype, "grad rows", grad.touched_rows, "table row"), True)
    index = grad.linear_indices()
    return Target(index, cast_values(grad.values, dtype, "grad.values", index), False)


def addressed(array: np.ndarray, target_by_rows: bool) -> np.ndarray:
    """``array`` as the target's index addresses it: the table itself, or its flattened view."""
    return array if target_by_rows else array.reshape(-1)


#: Entries a ``catch_up(None)`` brings current at a time: bounded temporaries on any table.
CATCH_UP_BLOCK = 1 << 16


class SparseOptimizer(Stateful):
    """Base of the lazy optimizers: parameters, config, global step count, ``step``, ``catch_up``.

    Subclasses set ``_ndim`` (1 for COO gradients, 2 for CSR tables) and
    ``_config_type``, and implement :meth:`_apply` (the update of the touched
    coordinates, validating its results before writing anything) and the
    :class:`~sparse_opt._state.Stateful` methods. Those that keep a ``last_step``
    record (:meth:`_keeps_steps`) get it as :attr:`_record`; those with a
    DENSE_EQUIVALENT mode implement :meth:`_catch_up`. Every one gets
    :attr:`_precision` (:class:`~sparse_opt._rounding.Precision`) from its
    config's ``state_dtype``, ``rounding`` and ``seed``: the state's dtype (to which
    gradients are cast), the arithmetic, and where a half parameter is rounded.
    """

    _ndim: ClassVar[int]
    _config_type: ClassVar[type]

    def __init__(self, params: np.ndarray, config: Any) -> None:
        self.params = check_param_array(params, self._ndim, "params", allow_half=True)
        if not isinstance(config, self._config_type):
            raise TypeError(f"config must be a {self._config_type.__name__}, got {type(config).__name__}")
        self.config = config
        self._precision = Precision(self.params.dtype, config.state_dtype, config.rounding, config.seed)
        self.step_count = 0
        self._record: CoordinateSteps | RowSteps | None = None
        if self._keeps_steps():
            self._record = CoordinateSteps(self.params.size) if self._ndim == 1 else RowSteps(*self.params.shape)

    def _keeps_steps(self) -> bool:
        """Whether this optimizer records ``last_step`` (subclasses decide from their config)."""
        return False

    @property
    def last_step(self) -> np.ndarray | SplitStepsView | None:
        """Global step through which each coordinate is current (int64, the parameters' shape, read-only).

        0 means never updated. ``None`` for an optimizer that keeps no record.
        Reading it allocates nothing of the table's size: a read-only view of
        the record (for a table with split rows, a
        :class:`~sparse_opt._step_record.SplitStepsView` that computes what is
        indexed; ``np.asarray`` materialises it).
        """
        return None if self._record is None else self._record.view()

    def _step_entries(self) -> list[Entry]:
        """The state-dict entries of ``last_step`` (:mod:`sparse_opt._step_record`)."""
        return [] if self._record is None else self._record.entries()

    def _step_values(self) -> dict[str, np.ndarray]:
        return {} if self._record is None else self._record.state()

    def _check_state(self, loaded: dict[str, Any]) -> None:
        if self._record is not None:
            self._record.check(loaded)

    def _apply(self, target: Target, step: int) -> None:
        raise NotImplementedError

    def step(self, grad: CooGradient | CsrGradient) -> None:
        """Apply one update from ``grad`` to the touched coordinates only.

        The gradient is validated completely, and the new values computed and
        checked, before anything changes: on an error, parameters and state are
        exactly as before. An empty gradient still advances ``step_count``.
        """
        target = locate(grad, self.params, self._precision.state)
        if self.step_count >= INT64_MAX:
            raise ValueError(f"step_count = {self.step_count} has reached 2**63 - 1, the last step an int64 records")
        if target.index.size:
            self._apply(target, self.step_count + 1)
        self.step_count += 1

    def _dense_equivalent(self) -> bool:
        return False

    def _why_no_catch_up(self) -> str:
        """Why this optimizer has nothing to catch up (the ``catch_up`` error message)."""
        return (
            f"this optimizer's mode is {self.config.mode.name}, whose dormant coordinates "
            "have no dense state to catch up to"
        )

    def catch_up(self, index: object = None) -> None:
        """Bring coordinates current through ``step_count``, as the dense optimizer would hold them.

        DENSE_EQUIVALENT mode only. Afterwards ``params[index]`` (and the state
        there) is exactly what dense training, fed zero gradients where this
        optimizer had none, holds now.

        Parameters
        ----------
        index : array_like of int, optional
            Coordinate indices (tables: row ids), any order, repeats allowed.
            ``None`` means all (O(table), in blocks of :data:`CATCH_UP_BLOCK`
            entries). Validated first (integer dtype, range): nothing changes on
            an error. Costs O(len(index)) (tables: times the width), whatever
            the gaps.

        Raises
        ------
        ValueError
            In any mode but DENSE_EQUIVALENT, or for an index out of range.
            ``TypeError`` for a non-integer index. ``step_count`` does not advance.
        """
        if not self._dense_equivalent():
            raise ValueError(f"catch_up is for mode DENSE_EQUIVALENT: {self._why_no_catch_up()}")
        by_rows = self._ndim == 2
        if index is None:
            size = self.params.shape[0]
            block = max(1, CATCH_UP_BLOCK // max(1, self.params.size // max(size, 1)))
            for start in range(0, size, block):
                self._catch_up(np.arange(start, min(size, start + block)), by_rows)
            return
        idx = as_index_array(index, "index")
        check_in_range(idx, self.params.shape[0], "index", "rows" if by_rows else "params.size")
        idx = np.unique(idx)
        if idx.size:
            self._catch_up(idx, by_rows)

    def _catch_up(self, index: np.ndarray, by_rows: bool) -> None:
        raise NotImplementedError

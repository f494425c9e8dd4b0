"""What every lazy sparse optimizer shares: checking a gradient and finding its targets.

A sparse step gathers the touched coordinates of the parameters and of each
state array, computes their new values, and scatters them back. The
1-D optimizers address coordinates by the :class:`~sparse_opt.CooGradient`'s
indices. The table optimizers address whole rows when every touched row of the
:class:`~sparse_opt.CsrGradient` is complete (an embedding lookup's gradient:
one fancy-index per row instead of one per element), and the flattened table
by linear index ``row * cols + col`` otherwise. Both give bit-identical results,
because the update is elementwise.

For the same reason a step can be taken piece by piece: the optimizers update
:data:`CHUNK_ENTRIES` gradient entries at a time, so that the rows a piece
gathers are still in cache when it scatters them back, and the temporaries of
a step stay small whatever the batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from sparse_opt._state_io import check_config, check_keys, take_array, take_int
from sparse_opt._validation import check_finite, check_param_array
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient

#: Gradient entries an optimizer updates at a time (whole rows for a table):
#: 128 KiB per float32 temporary, so a piece's gathered rows and temporaries
#: stay in a core's L2 cache until they are scattered back.
CHUNK_ENTRIES = 32768


class Target:
    """Where a validated gradient lands: an index into (views of) the arrays, and values.

    Attributes
    ----------
    index : ndarray of int64
        Coordinates (1-D view) or row ids (row view) to gather and scatter.
    grad : ndarray
        Gradient values in the parameters' dtype, shaped like ``array[index]``.
    by_rows : bool
        Whether ``index`` addresses rows of the 2-D arrays; otherwise it addresses
        their flattened (``reshape(-1)``) views.
    """

    __slots__ = ("index", "grad", "by_rows")

    def __init__(self, index: np.ndarray, grad: np.ndarray, by_rows: bool) -> None:
        self.index = index
        self.grad = grad
        self.by_rows = by_rows

    @property
    def empty(self) -> bool:
        """Whether the gradient touches nothing."""
        return self.grad.size == 0

    def chunk_length(self) -> int:
        """Indices per piece of :meth:`chunks`: :data:`CHUNK_ENTRIES` entries' worth (at least one row)."""
        per_index = self.grad.shape[1] if self.by_rows else 1
        return max(1, CHUNK_ENTRIES // max(per_index, 1))

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Consecutive pieces ``(index, grad)`` of :meth:`chunk_length` indices (the last one shorter).

        Updating the pieces one after the other gives the same numbers as
        updating the whole target: each coordinate's update involves only itself.
        """
        size = self.chunk_length()
        for start in range(0, self.index.size, size):
            yield self.index[start : start + size], self.grad[start : start + size]

    def buffers(self, count: int, dtype: np.dtype | type | None = None) -> list[np.ndarray]:
        """``count`` uninitialised arrays shaped like the largest piece's ``grad``, to reuse for every piece.

        Their dtype is ``grad``'s unless ``dtype`` is given.
        """
        shape = (min(self.index.size, self.chunk_length()), *self.grad.shape[1:])
        return [np.empty(shape, dtype=self.grad.dtype if dtype is None else dtype) for _ in range(count)]

    def address(self, array: np.ndarray) -> Addressed:
        """``array`` (parameters or a state array) as this target reads and writes it."""
        return Addressed(array, self.by_rows)


class Addressed:
    """One array as a step reads and writes it: whole rows of a table, or coordinates of its flat view.

    Writing rows goes through a view of the (C-contiguous) table with one
    opaque ``np.void`` item per row, so each row is a single ``memcpy`` rather
    than ``cols`` element copies; reading uses ``take`` with ``mode="clip"``,
    which writes straight into an ``out`` array instead of through a buffer (the
    indices were validated with the gradient, so nothing is ever clipped).

    Parameters
    ----------
    array : ndarray
        2-D when ``by_rows``; any C-contiguous array otherwise.
    by_rows : bool
        Whether indices address rows (see :class:`Target`).
    """

    __slots__ = ("array", "items", "item")

    def __init__(self, array: np.ndarray, by_rows: bool) -> None:
        self.array = array if by_rows else array.reshape(-1)
        self.items: np.ndarray | None = None
        self.item: np.dtype | None = None
        if by_rows and array.flags.c_contiguous and array.shape[1]:
            self.item = np.dtype((np.void, array.shape[1] * array.itemsize))
            self.items = array.view(self.item).reshape(array.shape[0])

    def gather(self, index: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The addressed entries: a fresh C-contiguous array, or written into ``out`` (C-contiguous)."""
        return self.array.take(index, axis=0, out=out, mode="clip")

    def scatter(self, index: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` (a C-contiguous array shaped like the addressed entries, same dtype)."""
        if self.items is None:
            self.array[index] = values
        else:
            self.items[index] = values.view(self.item).reshape(index.size)

    def filler(self, value: float) -> np.ndarray | float:
        """What :meth:`fill` writes to set every addressed entry to ``value``."""
        if self.items is None:
            return value
        return np.full(self.array.shape[1], value, dtype=self.array.dtype).view(self.item).reshape(())

    def fill(self, index: np.ndarray, filler: np.ndarray | float) -> None:
        """Set the addressed entries to the value :meth:`filler` was made from."""
        if self.items is None:
            self.array[index] = filler
        else:
            self.items[index] = filler


def locate(grad: object, params: np.ndarray) -> Target:
    """Validate ``grad`` against ``params`` and return its :class:`Target`.

    1-D parameters take a :class:`CooGradient` with ``dim == params.size``; 2-D
    parameters a :class:`CsrGradient` with ``shape == params.shape``. Values must
    be finite; they are cast to the parameters' dtype. Nothing is mutated.
    """
    dtype = params.dtype
    if params.ndim == 1:
        if not isinstance(grad, CooGradient):
            raise TypeError(f"grad must be a CooGradient for a 1-D parameter, got {type(grad).__name__}")
        if grad.dim != params.size:
            raise ValueError(f"grad.dim = {grad.dim} does not match the parameter's size {params.size}")
        values = grad.values.astype(dtype, copy=False)
        check_finite(values, "grad.values", grad.indices)
        return Target(grad.indices, values, by_rows=False)
    if not isinstance(grad, CsrGradient):
        raise TypeError(f"grad must be a CsrGradient for a 2-D table, got {type(grad).__name__}")
    if grad.shape != params.shape:
        raise ValueError(f"grad.shape = {grad.shape} does not match the table's shape {params.shape}")
    values = grad.values.astype(dtype, copy=False)
    if grad.full_rows:
        rows = values.reshape(grad.touched_rows.size, params.shape[1])
        check_finite(rows, "grad rows", grad.touched_rows, "table row")
        return Target(grad.touched_rows, rows, by_rows=True)
    index = grad.linear_indices()
    check_finite(values, "grad.values", index)
    return Target(index, values, by_rows=False)


class SparseOptimizer:
    """Base of the lazy optimizers: parameters, global step count, state I/O.

    Subclasses set ``_ndim`` (1 for COO gradients, 2 for CSR tables) and
    ``_state_names`` (the per-coordinate state arrays, attributes of the same
    name), and implement :meth:`_apply` (the update of the touched coordinates).
    """

    _ndim: ClassVar[int]
    _config_type: ClassVar[type]

    def __init__(self, params: np.ndarray, config: Any) -> None:
        self.params = check_param_array(params, self._ndim, "params")
        if not isinstance(config, self._config_type):
            raise TypeError(f"config must be a {self._config_type.__name__}, got {type(config).__name__}")
        self.config = config
        self.step_count = 0

    def _state_arrays(self) -> dict[str, np.ndarray]:
        """The per-coordinate state arrays, by name (subclasses override)."""
        return {}

    def _apply(self, target: Target, step: int) -> None:
        raise NotImplementedError

    def step(self, grad: CooGradient | CsrGradient) -> None:
        """Apply one update from ``grad`` to the touched coordinates only.

        The gradient is validated completely before anything changes: on an
        error, parameters and state are exactly as before. An empty gradient
        still advances ``step_count``.
        """
        target = locate(grad, self.params)
        self._apply(target, self.step_count + 1)
        self.step_count += 1

    def state_dict(self) -> dict[str, Any]:
        """Config, ``step_count`` and copies of the state arrays, as plain numpy values.

        The result round-trips through ``np.savez`` and
        ``np.load(..., allow_pickle=False)``.
        """
        out: dict[str, Any] = dict(self.config.as_dict())
        out["step_count"] = np.int64(self.step_count)
        for name, array in self._state_arrays().items():
            out[name] = array.copy()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; shapes, dtypes and config must match.

        Raises ``ValueError`` on any mismatch, leaving the optimizer unchanged.
        """
        arrays = self._state_arrays()
        config = self.config.as_dict()
        check_keys(state_dict, [*config, "step_count", *arrays])
        check_config(state_dict, config)
        step_count = take_int(state_dict, "step_count")
        loaded = {name: take_array(state_dict, name, a.shape, a.dtype) for name, a in arrays.items()}
        self._check_loaded(loaded, step_count)
        self._adopt_state(loaded)
        self.step_count = step_count

    def _adopt_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Swap in validated, freshly copied state arrays (subclasses may store them differently)."""
        for name, array in arrays.items():
            setattr(self, name, array)

    def _check_loaded(self, arrays: dict[str, np.ndarray], step_count: int) -> None:
        """Semantic checks of loaded state (finite values, ranges)."""
        for name, a in arrays.items():
            if a.dtype.kind == "f":
                check_finite(a, f"state_dict[{name!r}]")

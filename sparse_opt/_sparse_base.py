"""What every lazy sparse optimizer shares: checking a gradient and finding its targets.

A sparse step gathers the touched coordinates of the parameters and of each
state array, computes their new values, and scatters them back. The
1-D optimizers address coordinates by the :class:`~sparse_opt.CooGradient`'s
indices. The table optimizers address whole rows when every touched row of the
:class:`~sparse_opt.CsrGradient` is complete (an embedding lookup's gradient:
one fancy-index per row instead of one per element), and the flattened table
by linear index ``row * cols + col`` otherwise. Both give bit-identical results,
because the update is elementwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from sparse_opt._state_io import check_config, check_keys, take_array, take_int
from sparse_opt._validation import check_finite, check_param_array
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient


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

    def view(self, array: np.ndarray) -> np.ndarray:
        """The view of ``array`` that ``index`` addresses (no copy)."""
        return array if self.by_rows else array.reshape(-1)


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
        for name, array in loaded.items():
            setattr(self, name, array)
        self.step_count = step_count

    def _check_loaded(self, arrays: dict[str, np.ndarray], step_count: int) -> None:
        """Semantic checks of loaded state (finite values, ranges)."""
        for name, a in arrays.items():
            if a.dtype.kind == "f":
                check_finite(a, f"state_dict[{name!r}]")

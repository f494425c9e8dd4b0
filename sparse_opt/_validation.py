"""Argument checks shared by every optimizer and gradient type.

Every check raises before anything is mutated, with a message that names the
field and the offending value or position (the convention of ``torch.optim``'s
``Invalid learning rate: -1`` and of ``scipy.sparse``'s format checks).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_param_array(x: object, ndim: int | None, name: str = "params") -> np.ndarray:
    """Check that ``x`` can be updated in place as an optimizer's parameters.

    Parameters must be a writeable, C-contiguous ``float32`` or ``float64``
    :class:`numpy.ndarray` (``ndim`` dimensions unless ``ndim`` is None). The very
    same array is returned: optimizers update the caller's array, never a copy.
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
    if not x.flags.writeable:
        raise ValueError(f"{name} is read-only; the optimizer updates it in place")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (np.ascontiguousarray makes a copy you can keep)")
    return x


def check_finite(
    values: np.ndarray, name: str, positions: np.ndarray | None = None, position_name: str = "coordinate"
) -> None:
    """Raise ``ValueError`` naming the first NaN or infinite entry of ``values``.

    ``positions``, when given, maps the first axis of ``values`` to what it stands
    for (a sparse gradient's coordinates, or a table's row ids), so the message
    can name both.
    """
    finite = np.isfinite(values)
    if finite.all():
        return
    first = int(np.flatnonzero(~finite.reshape(-1))[0])
    where = tuple(int(i) for i in np.unravel_index(first, values.shape))
    label = where[0] if len(where) == 1 else where
    bad = values.reshape(-1)[first]
    at = f" ({position_name} {int(positions[where[0]])})" if positions is not None else ""
    raise ValueError(f"{name}[{label}] = {bad} is not finite{at}")


def check_scalar(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float inside the given bounds, or raise.

    ``low``/``high`` are inclusive unless ``low_open``/``high_open``. NaN is
    always refused, infinities unless ``allow_inf``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"Invalid {name}: {v} (must be finite)")
    if low is not None and (v < low or (low_open and v == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"Invalid {name}: {v} (must be {bound})")
    if high is not None and (v > high or (high_open and v == high)):
        bound = f"< {high}" if high_open else f"<= {high}"
        raise ValueError(f"Invalid {name}: {v} (must be {bound})")
    return v


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a bool; only real booleans are accepted."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_index_dtype(x: np.ndarray, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` holds integers (bools are refused).

    An empty array of any real dtype is accepted, so ``[]`` is a valid empty
    index list.
    """
    if x.size == 0 and (x.dtype.kind in "iuf"):
        return
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {x.dtype}")


def check_value_dtype(x: np.ndarray, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` holds real floating point numbers.

    An empty array of any real dtype is accepted (``[]`` is a valid empty list).
    """
    if x.size == 0 and (x.dtype.kind in "iuf"):
        return
    if x.dtype.kind != "f":
        raise TypeError(f"{name} must be a floating point array, got dtype {x.dtype}")


def check_size(name: str, value: object) -> int:
    """Return ``value`` as a non-negative Python int (a dimension or a count)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative int, got {value!r}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{name} must be non-negative, got {v}")
    return v


def as_param_list(params: object) -> list[np.ndarray]:
    """Normalise ``params`` (one ndarray, or a list/tuple of them) to a list.

    Each entry is checked with :func:`check_param_array` (any number of
    dimensions) and the same arrays are kept, so updates land in the caller's
    arrays. The same array may not appear twice.
    """
    if isinstance(params, np.ndarray):
        items: Sequence[object] = [params]
    elif isinstance(params, (list, tuple)):
        items = params
    else:
        raise TypeError(f"params must be an ndarray or a list of ndarrays, got {type(params).__name__}")
    if len(items) == 0:
        raise ValueError("params is an empty list")
    out = [check_param_array(p, None, f"params[{i}]") for i, p in enumerate(items)]
    for i, p in enumerate(out):
        for j in range(i):
            if np.shares_memory(p, out[j]):
                raise ValueError(f"params[{i}] shares memory with params[{j}]")
    return out


def check_dense_grads(grads: object, params: list[np.ndarray]) -> list[np.ndarray | None]:
    """Check one dense gradient per parameter and cast each to its dtype.

    ``grads`` is a list (or, for a single parameter, one array) with one entry per
    parameter; ``None`` skips that parameter. A gradient that shares memory with a
    parameter is copied (as ``p.grad`` in torch never aliases ``p``). A sparse gradient object
    (:class:`~sparse_opt.CooGradient`, :class:`~sparse_opt.CsrGradient`, or
    anything that is not array-like numbers) is refused with ``TypeError``. Shapes
    must match exactly and every value must be finite.
    """
    if isinstance(grads, (np.ndarray, np.generic)) and len(params) == 1:
        grads = [grads]
    if not isinstance(grads, (list, tuple)):
        raise TypeError(f"grads must be a list with one entry per parameter, got {type(grads).__name__}")
    if len(grads) != len(params):
        raise ValueError(f"grads has {len(grads)} entries but there are {len(params)} parameters")
    out: list[np.ndarray | None] = []
    for i, (g, p) in enumerate(zip(grads, params)):
        if g is None:
            out.append(None)
            continue
        if hasattr(g, "nnz") or not isinstance(g, (np.ndarray, numbers.Real, list, tuple)):
            raise TypeError(
                f"grads[{i}] is a {type(g).__name__}; this optimizer takes dense ndarray gradients only "
                "(call .to_dense() on a sparse gradient if a dense update is what you want)"
            )
        a = np.asarray(g)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"grads[{i}] must hold real numbers, got dtype {a.dtype}")
        if a.shape != p.shape:
            raise ValueError(f"grads[{i}] has shape {a.shape} but params[{i}] has shape {p.shape}")
        check_finite(a, f"grads[{i}]")
        if a.dtype != p.dtype:
            with np.errstate(over="ignore"):
                cast = a.astype(p.dtype)
            overflow = ~np.isfinite(cast)
            if overflow.any():
                bad = a.reshape(-1)[int(np.flatnonzero(overflow.reshape(-1))[0])]
                raise ValueError(f"grads[{i}] holds {bad}, which overflows {p.dtype}")
            a = cast
        if any(np.may_share_memory(a, q) for q in params):
            a = a.copy()  # step([p]) must not see p change in the middle of the update
        out.append(a)
    return out

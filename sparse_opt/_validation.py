"""Argument checks shared by every optimizer: hyper-parameters, parameter arrays, dense gradients, new state.

Every check raises before anything is mutated, with a message that names the
field and the offending value or position (the convention of ``torch.optim``'s
``Invalid learning rate: -1`` and of ``scipy.sparse``'s format checks).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np

from sparse_opt._arrays import cast_values, check_array_like, describe_position, first_not_finite

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_param_array(x: object, ndim: int | None, name: str = "params", allow_half: bool = False) -> np.ndarray:
    """Check that ``x`` can be updated in place as an optimizer's parameters.

    Parameters must be a writeable, C-contiguous ``float32`` or ``float64``
    (with ``allow_half`` also ``float16`` or ``ml_dtypes.bfloat16``, recognised by
    name: :mod:`sparse_opt._rounding`)
    :class:`numpy.ndarray` (``ndim`` dimensions unless ``ndim`` is None); a
    :class:`numpy.memmap` is one (a table larger than memory). Other subclasses
    are refused with ``TypeError``: ``np.matrix`` turns ``*`` into a matrix
    product and keeps two dimensions under indexing, a masked array would
    silently ignore its mask. The very same array is returned: optimizers update
    the caller's array, never a copy.
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if type(x) is not np.ndarray and not isinstance(x, np.memmap):
        raise TypeError(
            f"{name} must be a plain numpy.ndarray (or numpy.memmap), got {type(x).__name__}; "
            "np.asarray(x) gives the plain array"
        )
    if x.dtype not in FLOAT_DTYPES and not (allow_half and x.dtype.name in ("float16", "bfloat16")):
        allowed = "float32, float64, float16 or bfloat16" if allow_half else "float32 or float64"
        raise TypeError(f"{name} must have dtype {allowed}, got {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
    if not x.flags.writeable:
        raise ValueError(f"{name} is read-only; the optimizer updates it in place")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (np.ascontiguousarray makes a copy you can keep)")
    return x


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


def check_lr(lr: object, name: str = "lr") -> float | Callable[[int], float]:
    """A learning rate: a float ``>= 0`` (returned as float), or a schedule ``t -> float`` (returned as is).

    A schedule's values are checked at the steps that ask for them
    (:mod:`sparse_opt._rates`).
    """
    if callable(lr) and not isinstance(lr, (numbers.Real, np.generic)):
        return lr  # type: ignore[return-value]
    if not isinstance(lr, (numbers.Real, np.generic)) or isinstance(lr, (bool, np.bool_)):
        raise TypeError(f"{name} must be a float >= 0 or a schedule (a callable t -> float), got {lr!r}")
    return check_scalar(name, lr, low=0.0)


def check_decoupled_decay(lr: float, weight_decay: float) -> None:
    """Refuse ``lr * weight_decay > 1``: the decoupled decay factor ``1 - lr * weight_decay`` would be negative."""
    if lr * weight_decay > 1.0:
        raise ValueError(
            f"Invalid weight_decay: {weight_decay} (lr * weight_decay = {lr * weight_decay} > 1 "
            "would make the decay factor 1 - lr * weight_decay negative)"
        )


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a bool; only real booleans are accepted."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def as_param_list(params: object) -> list[np.ndarray]:
    """Normalise ``params`` (one ndarray, or a list/tuple of them) to a list.

    Each entry is checked with :func:`check_param_array` (any number of
    dimensions) and the same arrays are kept, so updates land in the caller's
    arrays. No two may share memory.
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


def check_dense_grads(
    grads: object,
    params: list[np.ndarray],
    state: Sequence[np.ndarray] = (),
    dtypes: Sequence[np.dtype] | None = None,
) -> list[np.ndarray | None]:
    """Check one dense gradient per parameter and cast each to its dtype (or to ``dtypes[i]``).

    ``grads`` is a list (or, for a single parameter, one array) with one entry per
    parameter; ``None`` skips that parameter. A sparse gradient object (anything
    with ``nnz``) or any other non-numeric object is refused with ``TypeError``.
    Shapes must match exactly and every value must be finite and representable in
    the parameter's dtype (the cast path of :func:`~sparse_opt._arrays.cast_values`).
    A gradient that shares memory with a parameter or with any array in ``state``
    is copied first: ``step([p])`` or ``step(opt.m)`` means the gradient's values
    at the call, as torch's ``p.grad`` (never a parameter or a state tensor) does.
    """
    if isinstance(grads, (np.ndarray, np.generic)) and len(params) == 1:
        grads = [grads]
    if not isinstance(grads, (list, tuple)):
        raise TypeError(f"grads must be a list with one entry per parameter, got {type(grads).__name__}")
    if len(grads) != len(params):
        raise ValueError(f"grads has {len(grads)} entries but there are {len(params)} parameters")
    owned = [*params, *state]
    out: list[np.ndarray | None] = []
    for i, (g, p) in enumerate(zip(grads, params)):
        if g is None:
            out.append(None)
            continue
        if hasattr(g, "nnz"):
            raise TypeError(
                f"grads[{i}] is a {type(g).__name__}; this optimizer takes dense ndarray gradients only "
                "(call .to_dense() on a sparse gradient if a dense update is what you want)"
            )
        check_array_like(g, f"grads[{i}]")
        a = np.asarray(g)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"grads[{i}] must hold real numbers, got dtype {a.dtype}")
        if a.shape != p.shape:
            raise ValueError(f"grads[{i}] has shape {a.shape} but params[{i}] has shape {p.shape}")
        if a.dtype.kind != "f":
            a = a.astype(np.float64)
        cast = cast_values(a, p.dtype if dtypes is None else dtypes[i], f"grads[{i}]")
        if cast is a and any(np.may_share_memory(a, q) for q in owned):
            cast = a.copy()
        out.append(cast)
    return out


def check_new_state(
    name: str,
    values: np.ndarray,
    positions: np.ndarray | None = None,
    position_name: str = "coordinate",
    nonnegative: bool = False,
) -> None:
    """Refuse a step whose new state ``values`` would hold a NaN or infinity.

    Called on the computed state before anything is written, so that a refused
    step leaves parameters and state as they were, and every state an optimizer
    reaches is one its ``load_state_dict`` accepts. ``nonnegative`` (second
    moments, accumulators) makes the check one reduction instead of two.
    """
    k = first_not_finite(values, nonnegative)
    if k is not None:
        where = describe_position(name, values, k, "", positions, position_name)
        raise ValueError(
            f"step refused: it would make {where}, which is not finite (a gradient too large for "
            f"{values.dtype}?); parameters and state are unchanged"
        )

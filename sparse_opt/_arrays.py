"""Turning caller input into the arrays the kit stores: exact integers, one cast path, read-only views.

Three conversions every gradient and optimizer shares, each checked before
anything is stored or mutated:

- :func:`as_index_array` and :func:`as_size` take integers of any dtype (signed,
  unsigned, narrow, or Python ints) and return int64 *exactly*: a value that does
  not fit (``2**63`` or more, a negative size) is refused with a ``ValueError``
  naming the field and position, never wrapped. The wrong kind of object (None,
  a mapping, a set, a string, an iterator) is a ``TypeError``.
- :func:`cast_values` is the one path from a gradient's values to the
  parameters' dtype: a NaN or infinity is refused ("is not finite"), and so is a
  finite value that the cast would overflow ("overflows float32"), without the
  ``RuntimeWarning`` numpy's cast would emit.
- :func:`readonly` returns a view of an array through a read-only buffer, so
  that neither the view nor anything derived from it can be made writeable
  again (``setflags(write=True)`` raises). The kit's gradients store their
  arrays this way, and the optimizers expose their ``last_step`` record so.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping, Set

import numpy as np

#: The largest int64, the bound of every size, index and step count.
INT64_MAX = 2**63 - 1

_NOT_ARRAY_LIKE = (str, bytes, Mapping, Set, Iterator)


def check_array_like(x: object, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` may be read as an array (an ndarray, list, tuple, range, ...).

    None, mappings, sets, strings and iterators (generators) are refused: numpy
    would turn them into an object array or a 0-d array and the error would come
    later, and say less.
    """
    if x is None or isinstance(x, _NOT_ARRAY_LIKE):
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask.reshape(-1))[0])


def as_index_array(x: object, name: str) -> np.ndarray:
    """``x`` as a 1-D int64 array, converted exactly.

    Any integer dtype is accepted (``uint64`` included), as are lists of Python
    ints and an empty list (whatever dtype numpy gives it). A value outside the
    int64 range raises ``ValueError`` naming its position; a non-integer dtype
    raises ``TypeError``. The result may share memory with ``x``.
    """
    check_array_like(x, name)
    a = np.asarray(x)
    if a.dtype == object:
        a = _exact_from_objects(a, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size == 0 and a.dtype.kind in "iuf":
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > INT64_MAX:
        k = _first(a > INT64_MAX)
        raise ValueError(f"{name}[{k}] = {int(a[k])} does not fit in int64 (at most 2**63 - 1)")
    return a.astype(np.int64, copy=False)


def _exact_from_objects(a: np.ndarray, name: str) -> np.ndarray:
    """An object array of Python integers (too large for numpy's own dtypes) as int64, or raise."""
    flat = a.reshape(-1)
    for k, item in enumerate(flat):
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Integral):
            raise TypeError(f"{name} must be an integer array, got {type(item).__name__} at position {k}")
        if not -INT64_MAX - 1 <= int(item) <= INT64_MAX:
            raise ValueError(f"{name}[{k}] = {int(item)} does not fit in int64 (at most 2**63 - 1)")
    return np.array([int(item) for item in flat], dtype=np.int64).reshape(a.shape)


def as_value_array(x: object, name: str, ndim: int) -> np.ndarray:
    """``x`` as an ``ndim``-D floating point array (float dtypes are kept; an empty list becomes float64).

    Raises ``TypeError`` for a non-float dtype or the wrong kind of object and
    ``ValueError`` for the wrong number of dimensions. May share memory with ``x``.
    """
    check_array_like(x, name)
    a = np.asarray(x)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    if a.size == 0 and a.dtype.kind in "iuf":
        return a.astype(a.dtype if a.dtype.kind == "f" else np.float64, copy=False)
    if a.dtype.kind != "f":
        raise TypeError(f"{name} must be a floating point array, got dtype {a.dtype}")
    return a


def as_size(name: str, value: object) -> int:
    """``value`` as a Python int in ``[0, 2**63 - 1]`` (a dimension or a count).

    Integers of any type are accepted (numpy scalars too); bools and non-integers
    raise ``TypeError``, negative values and values of ``2**63`` or more
    ``ValueError``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative int, got {value!r}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{name} must be non-negative, got {v}")
    if v > INT64_MAX:
        raise ValueError(f"{name} = {v} is too large (at most 2**63 - 1)")
    return v


def check_in_range(indices: np.ndarray, bound: int, name: str, bound_name: str) -> None:
    """Raise ``ValueError`` naming the first int64 entry of ``indices`` outside ``[0, bound)``."""
    if indices.size == 0 or (int(indices.min()) >= 0 and int(indices.max()) < bound):
        return
    k = _first((indices < 0) | (indices >= bound))
    raise ValueError(f"{name}[{k}] = {int(indices[k])} is out of range [0, {bound_name} = {bound})")


def first_not_finite(values: np.ndarray, nonnegative: bool = False) -> int | None:
    """Flat position of the first NaN or infinity in ``values``, or None if all are finite.

    The fast path is one reduction (``max``, which propagates NaN) for values
    known to be ``>= 0``, two (``max`` and ``min``) otherwise.
    """
    if values.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        if np.isfinite(values.max()) and (nonnegative or np.isfinite(values.min())):
            return None
    return _first(~np.isfinite(values))


def describe_position(
    name: str,
    values: np.ndarray,
    flat: int,
    what: str,
    positions: np.ndarray | None = None,
    position_name: str = "coordinate",
) -> str:
    """``"name[i] = value <what> (coordinate j)"`` for flat position ``flat`` of ``values``.

    ``positions``, when given, maps the first axis of ``values`` to what it stands
    for (a sparse gradient's coordinates, or a table's row ids).
    """
    where = tuple(int(i) for i in np.unravel_index(flat, values.shape))
    label = where[0] if len(where) == 1 else where
    at = f" ({position_name} {int(positions[where[0]])})" if positions is not None else ""
    return f"{name}[{label}] = {values.reshape(-1)[flat].item()!r}{' ' + what if what else ''}{at}"


def check_finite(
    values: np.ndarray, name: str, positions: np.ndarray | None = None, position_name: str = "coordinate"
) -> None:
    """Raise ``ValueError`` naming the first NaN or infinite entry of ``values`` (and its coordinate or row)."""
    k = first_not_finite(values)
    if k is not None:
        raise ValueError(describe_position(name, values, k, "is not finite", positions, position_name))


def cast_values(
    values: np.ndarray,
    dtype: np.dtype,
    name: str,
    positions: np.ndarray | None = None,
    position_name: str = "coordinate",
) -> np.ndarray:
    """``values`` (finite) in ``dtype``: the one gradient-cast path of every optimizer.

    Raises ``ValueError`` for a NaN or infinity ("is not finite") and for a
    finite value the cast overflows ("overflows float32"), naming the position
    (and, with ``positions``, the coordinate or row). No warning is emitted. The
    result is ``values`` itself when it already has ``dtype``.
    """
    check_finite(values, name, positions, position_name)
    if values.dtype == dtype:
        return values
    with np.errstate(over="ignore"):
        cast = values.astype(dtype)
    k = first_not_finite(cast)
    if k is not None:
        raise ValueError(describe_position(name, values, k, f"overflows {np.dtype(dtype)}", positions, position_name))
    return cast


def readonly(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` that can never be made writeable (its buffer is a read-only memoryview).

    The view shares ``a``'s memory, so it shows later changes the owner makes
    through ``a``; ``setflags(write=True)`` on it, or on any view of it, raises.
    """
    return np.asarray(memoryview(a).toreadonly())

"""Reading a ``state_dict`` back: the checks every ``load_state_dict`` shares.

A state dict is a flat mapping from string keys to numpy arrays and scalars, so
it round-trips through ``np.savez`` and ``np.load(..., allow_pickle=False)``
(which hands scalars back as 0-d arrays). Loading validates everything first and
returns fresh copies; the caller then swaps them in, so a refused load leaves the
optimizer exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np


def check_keys(d: Mapping[str, object], expected: Iterable[str]) -> None:
    """Raise ``ValueError`` unless ``d`` has exactly the ``expected`` keys."""
    if not isinstance(d, Mapping) and not hasattr(d, "keys"):
        raise TypeError(f"state_dict must be a mapping, got {type(d).__name__}")
    have, want = set(d.keys()), set(expected)
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        raise ValueError(f"state_dict keys do not match: missing {missing}, unexpected {extra}")


def take_array(d: Mapping[str, object], key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Return a C-contiguous copy of ``d[key]`` after checking shape and dtype."""
    a = np.asarray(d[key])
    if a.shape != tuple(shape):
        raise ValueError(f"state_dict[{key!r}] has shape {a.shape}, expected {tuple(shape)}")
    if a.dtype != np.dtype(dtype):
        raise ValueError(f"state_dict[{key!r}] has dtype {a.dtype}, expected {np.dtype(dtype)}")
    return np.array(a, order="C", copy=True)


def take_int(d: Mapping[str, object], key: str, low: int = 0) -> int:
    """Return ``d[key]`` as a Python int ``>= low`` (a 0-d integer array is fine)."""
    a = np.asarray(d[key])
    if a.shape != () or a.dtype.kind not in "iu":
        raise ValueError(f"state_dict[{key!r}] must be an integer scalar, got {a!r}")
    v = int(a)
    if v < low:
        raise ValueError(f"state_dict[{key!r}] = {v} must be >= {low}")
    return v


def check_config(d: Mapping[str, object], expected: Mapping[str, object]) -> None:
    """Raise ``ValueError`` unless every config entry in ``d`` equals ``expected``.

    Values are compared as Python scalars after ``.item()``, so a config saved
    with ``np.savez`` compares equal to the live one. ``None`` cannot be saved
    without pickling, so optional floats are stored as NaN (NaN equals NaN here).
    """
    for key, want in expected.items():
        a = np.asarray(d[key])
        if a.shape != ():
            raise ValueError(f"state_dict[{key!r}] must be a scalar, got shape {a.shape}")
        got = a.item()
        both_nan = isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want)
        same_kind = isinstance(got, bool) == isinstance(want, bool)
        if not both_nan and (got != want or not same_kind):
            raise ValueError(f"state_dict[{key!r}] = {got!r} does not match this optimizer's {key} = {want!r}")

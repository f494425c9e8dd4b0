"""Deterministic text for the values an exercise report shows.

The notebooks' outputs are compared by nbval, so a report must print the same
characters on every machine, whatever numpy's print options are: floats are
written here with Python's own formatting at a fixed number of significant
digits (six in listings, twelve where two close numbers are set side by side),
long axes are shortened the same way every time, and no ``repr`` that could
carry a memory address is used for arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

#: Significant digits of a float in a listing.
DIGITS = 6
#: Significant digits when an expected and an observed number are compared.
PRECISE_DIGITS = 12
#: An axis longer than this is shortened to its first and last few items.
MAX_ITEMS = 10
_HEAD, _TAIL = 6, 3
#: dtypes not worth naming after an array (the defaults of float and integer arrays).
_PLAIN_DTYPES = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(bool))


def format_float(x: float | np.floating[Any], digits: int = DIGITS) -> str:
    """``x`` with ``digits`` significant digits (``nan``, ``inf``, ``-inf``, ``-0`` as such)."""
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def format_scalar(x: Any, digits: int = DIGITS) -> str:
    """A number (Python or numpy) as text: integers exactly, floats at ``digits`` digits."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        return format_float(x, digits)
    return repr(x)


def _items(n: int) -> list[int | None]:
    """Positions shown along an axis of length ``n`` (``None`` marks the elision)."""
    if n <= MAX_ITEMS:
        return list(range(n))
    return [*range(_HEAD), None, *range(n - _TAIL, n)]


def _array_lines(a: np.ndarray) -> list[str]:
    """Nested-list text of ``a``, one line per innermost row."""
    if a.ndim == 0:
        return [format_scalar(a[()])]
    if a.ndim == 1:
        parts = ["..." if i is None else format_scalar(a[i]) for i in _items(a.shape[0])]
        return ["[" + ", ".join(parts) + "]"]
    if a.size == 0:
        return [f"[]  (shape {a.shape})"]
    lines: list[str] = []
    items = _items(a.shape[0])
    for k, i in enumerate(items):
        sub = [" " * (a.ndim - 1) + "..."] if i is None else _array_lines(a[i])
        last = k == len(items) - 1
        for j, line in enumerate(sub):
            tail = "," if (j == len(sub) - 1 and not last) else ""
            lines.append(line + tail)
    lines = ["[" + lines[0], *(" " + line for line in lines[1:])]
    lines[-1] += "]"
    return lines


def format_lines(value: Any) -> list[str]:
    """``value`` as one or more lines of text (arrays as nested lists, with a non-default dtype named).

    Never raises: a value that cannot be shown (its ``repr`` fails) is named by its type.
    """
    try:
        return _lines(value)
    except Exception:
        return [f"<{type(value).__name__} object>"]


def _lines(value: Any) -> list[str]:
    if value is None or isinstance(value, (str, bool, int, float, np.generic)):
        return [repr(value) if isinstance(value, str) or value is None else format_scalar(value)]
    if isinstance(value, np.ndarray):
        lines = _array_lines(value)
        if value.dtype not in _PLAIN_DTYPES:
            lines[-1] += f"  (dtype {value.dtype})"
        return lines
    if isinstance(value, (tuple, list)):
        if all(isinstance(v, (int, float, np.generic)) for v in value):
            text = ", ".join(format_scalar(v) for v in value)
            if isinstance(value, list):
                return [f"[{text}]"]
            return [f"({text},)" if len(value) == 1 else f"({text})"]
        lines = []
        for i, v in enumerate(value):
            sub = format_lines(v)
            lines.append(f"{i}: {sub[0]}")
            lines.extend("   " + line for line in sub[1:])
        return lines or ["[]"]
    if isinstance(value, Mapping):
        if all(isinstance(v, (str, bool, int, float, np.generic)) for v in value.values()):
            return ["{" + ", ".join(f"{k!r}: {format_lines(v)[0]}" for k, v in value.items()) + "}"]
        lines = []
        for k, v in value.items():
            if isinstance(v, Mapping):
                lines += [f"{k}:", *("  " + line for line in format_lines(v))]
            else:
                lines += named_lines(str(k), v, "")
        return lines
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={_field_text(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return [f"{type(value).__name__}({fields})"]
    return [f"<{type(value).__name__} object>"]


def _field_text(value: Any) -> str:
    """A dataclass field on one line (an enum member by its name)."""
    name = getattr(value, "name", None)
    if name is not None and hasattr(value, "value"):
        return f"{type(value).__name__}.{name}"
    return " ".join(format_lines(value))


def named_lines(name: str, value: Any, indent: str) -> list[str]:
    """``name = value`` with continuation lines aligned under the value."""
    lines = format_lines(value)
    pad = indent + " " * (len(name) + 3)
    if len(lines) > 1 and not isinstance(value, np.ndarray):
        return [f"{indent}{name} =", *(indent + "  " + line for line in lines)]
    return [f"{indent}{name} = {lines[0]}", *(pad + line for line in lines[1:])]


def describe_type(value: Any) -> str:
    """A short phrase for what a value is (for 'got a list of 3 items' messages)."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    return f"a {type(value).__name__}"

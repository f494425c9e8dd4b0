"""Deterministic text for the values an exercise report shows.

The notebooks' outputs are compared by nbval, so a report must print the same
characters on every machine, whatever numpy's print options are: floats are
written here with Python's own formatting at a fixed number of significant
digits (six in listings, twelve where two close numbers are set side by side;
more, up to 17, where two different numbers need them to look different),
long axes are shortened the same way every time, and no ``repr`` that could
carry a memory address is used for arrays.

A learner's value is shown as what it holds (:func:`plain`), never through the
methods it defines: a subclass of ``float`` or ``ndarray`` cannot make the
report print numbers it does not hold.
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


def plain(value: Any) -> Any:
    """What ``value`` holds, read without calling any method it defines.

    An instance of a subclass of ``ndarray``, of a numpy scalar type, of
    ``int``, ``float`` or ``str`` (which may override ``__eq__``, ``__float__``,
    ``__getitem__``, ...) becomes a base-class ``ndarray`` (a copy), numpy
    scalar, ``int``, ``float`` or ``str`` of the same contents; a tuple or list
    becomes a plain tuple or list of its items (the items themselves unchanged).
    Anything else is returned as it is. Types are read with ``type()``, which an
    object cannot fake (``isinstance`` believes a ``__class__`` attribute).
    """
    kind = type(value)
    if issubclass(kind, np.ndarray):
        return np.array(np.ndarray.view(value, np.ndarray))
    if issubclass(kind, str):  # before np.generic: np.str_ is both
        return str.__str__(value)
    if issubclass(kind, np.generic):
        return np.asarray(value)[()]  # numpy converts its own scalars from their data, not their methods
    if kind is bool:
        return value
    if issubclass(kind, int):
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, tuple):
        return tuple(tuple.__iter__(value))
    if issubclass(kind, list):
        return list(list.__iter__(value))
    return value


def is_number(value: Any) -> bool:
    """Whether ``value`` is a plain Python or numpy scalar (bool, int, float, or a numpy scalar)."""
    return type(value) in (bool, int, float) or issubclass(type(value), np.generic)


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


def _array_lines(a: np.ndarray, digits: int) -> list[str]:
    """Nested-list text of ``a``, one line per innermost row."""
    if a.ndim == 0:
        return [format_scalar(a[()], digits)]
    if a.ndim == 1:
        parts = ["..." if i is None else format_scalar(a[i], digits) for i in _items(a.shape[0])]
        return ["[" + ", ".join(parts) + "]"]
    if a.size == 0:
        return [f"[]  (shape {a.shape})"]
    lines: list[str] = []
    items = _items(a.shape[0])
    for k, i in enumerate(items):
        sub = [" " * (a.ndim - 1) + "..."] if i is None else _array_lines(a[i], digits)
        last = k == len(items) - 1
        for j, line in enumerate(sub):
            tail = "," if (j == len(sub) - 1 and not last) else ""
            lines.append(line + tail)
    lines = ["[" + lines[0], *(" " + line for line in lines[1:])]
    lines[-1] += "]"
    return lines


def format_lines(value: Any, digits: int = DIGITS) -> list[str]:
    """``value`` as one or more lines of text (arrays as nested lists, with a non-default dtype named).

    Floats have ``digits`` significant digits.

    Never raises: a value that cannot be shown (its ``repr`` fails) is named by its type.
    """
    try:
        return _lines(value, digits)
    except Exception:
        return [f"<{type(value).__name__} object>"]


def _lines(value: Any, digits: int) -> list[str]:
    original, value = value, plain(value)
    if value is None or type(value) is str:
        return [repr(value)]
    if is_number(value):
        return [format_scalar(value, digits)]
    if type(value) is np.ndarray:
        lines = _array_lines(value, digits)
        if value.dtype not in _PLAIN_DTYPES:
            lines[-1] += f"  (dtype {value.dtype})"
        return lines
    if type(value) in (tuple, list):
        items = [plain(v) for v in value]
        if all(is_number(v) for v in items):
            text = ", ".join(format_scalar(v, digits) for v in items)
            if type(value) is list:
                return [f"[{text}]"]
            return [f"({text},)" if len(items) == 1 else f"({text})"]
        lines = []
        for i, v in enumerate(value):
            sub = format_lines(v, digits)
            lines.append(f"{i}: {sub[0]}")
            lines.extend("   " + line for line in sub[1:])
        return lines or ["[]"]
    if issubclass(type(value), Mapping):
        if all(type(v) is str or is_number(v) for v in value.values()):
            return ["{" + ", ".join(f"{k!r}: {format_lines(v, digits)[0]}" for k, v in value.items()) + "}"]
        lines = []
        for k, v in value.items():
            if isinstance(v, Mapping):
                lines += [f"{k}:", *("  " + line for line in format_lines(v, digits))]
            else:
                lines += named_lines(str(k), v, "", digits)
        return lines
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={_field_text(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return [f"{type(value).__name__}({fields})"]
    return [f"<{type(original).__name__} object>"]


def _field_text(value: Any) -> str:
    """A dataclass field on one line (an enum member by its name)."""
    name = getattr(value, "name", None)
    if name is not None and hasattr(value, "value"):
        return f"{type(value).__name__}.{name}"
    return " ".join(format_lines(value))


def named_lines(name: str, value: Any, indent: str, digits: int = DIGITS) -> list[str]:
    """``name = value`` with continuation lines aligned under the value (floats at ``digits`` digits)."""
    lines = format_lines(value, digits)
    pad = indent + " " * (len(name) + 3)
    if len(lines) > 1 and not issubclass(type(value), np.ndarray):
        return [f"{indent}{name} =", *(indent + "  " + line for line in lines)]
    return [f"{indent}{name} = {lines[0]}", *(pad + line for line in lines[1:])]


def describe_type(value: Any) -> str:
    """A short phrase for what a value is (for 'got a list of 3 items' messages); never raises."""
    if value is None:
        return "None"
    try:
        held = plain(value)
    except Exception:  # a subclass whose data cannot be read: name it by its type alone
        held = None
    name = type(value).__name__
    if type(held) is np.ndarray:
        kind = "an array" if type(value) is np.ndarray else f"{_article(name)} {name} (an ndarray subclass)"
        return f"{kind} of shape {held.shape}"
    if type(held) in (tuple, list):
        count = len(held)
        return f"{_article(name)} {name} of {count} item{'s' if count != 1 else ''}"
    return f"{_article(name)} {name}"


def _article(word: str) -> str:
    """'a' or 'an' before ``word`` (by its first letter)."""
    return "an" if word.lstrip("_")[:1].lower() in tuple("aeiou") else "a"

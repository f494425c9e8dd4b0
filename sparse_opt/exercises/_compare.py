"""Comparing a learner's output with the reference's: what differs first, said in one sentence.

An exercise's function returns one value or a tuple of named values
(:class:`Output`). :func:`compare` walks them in order and reports the first
problem it meets: the wrong structure (None, a tuple of the wrong length, not
numbers), the wrong shape, values that differ beyond the tolerance, or -- once
the values agree -- the wrong dtype. Integer and string outputs must be equal;
floats must agree to ``|got - expected| <= atol + rtol * |expected|`` (NaN
matches only NaN); a float array must have a float dtype (a scalar may be an
int of the right value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_opt.exercises._format import PRECISE_DIGITS, describe_type, format_float, format_scalar


@dataclass(frozen=True)
class Output:
    """One value an exercise's function returns (or updates in place).

    Parameters
    ----------
    name : str
        How the report calls it (``"indices"``, ``"p"``).
    dtype : str, optional
        An exact dtype the statement requires (``"int64"``). Without it a float
        output must be a float array and an integer output an integer one.
    per_step : bool
        Axis 0 counts training steps: a difference is located at "step k"
        (1-based), and when this is the only output the report shows only that
        step.
    axes : tuple of str
        Names of the (remaining) axes for locating a difference ("row", "col").
    """

    name: str
    dtype: str | None = None
    per_step: bool = False
    axes: tuple[str, ...] = ()

    def locate(self, index: tuple[int, ...]) -> str:
        """Where ``index`` is: ``at values[2]``, ``in table at row 1, col 0``, ``in table at step 3, row 0, col 1``."""
        steps, rest = (index[:1], index[1:]) if self.per_step else ((), index)
        words = [f"step {steps[0] + 1}"] if steps else []
        if self.axes:
            words += [f"{axis} {i}" for axis, i in zip(self.axes, rest, strict=False)]
        elif rest:
            at = f" at {words[0]}" if words else ""
            return f"at {self.name}[{', '.join(str(i) for i in rest)}]{at}"
        return f"in {self.name} at {', '.join(words)}" if words else f"in {self.name}"


@dataclass(frozen=True)
class Mismatch:
    """The first difference between an output and the expected one.

    ``kind`` is ``"structure"``, ``"shape"``, ``"value"`` or ``"dtype"``;
    ``output`` names the output concerned; ``step`` is the 0-based step of a
    value difference in a ``per_step`` output.
    """

    kind: str
    output: str
    text: str
    step: int | None = None


def _precise(x: Any) -> str:
    """A number to compare with another: floats at twelve significant digits."""
    if isinstance(x, (float, np.floating)):
        return format_float(x, PRECISE_DIGITS)
    return format_scalar(x)


def _as_numbers(value: Any) -> np.ndarray | None:
    """``value`` as a numeric ndarray, or None if it is not numbers."""
    try:
        a = np.asarray(value)
    except Exception:  # ragged lists, or a learner's object whose __array__ raises: not numbers either way
        return None
    return a if a.dtype.kind in "biuf" else None


def _compare_one(
    expected: Any, got: Any, out: Output, rtol: float, atol: float, check_dtype: bool
) -> Mismatch | None:
    name = out.name
    if expected is None:
        if got is None:
            return None
        return Mismatch("structure", name, f"{name} should be None, got {describe_type(got)}")
    if got is None:
        return Mismatch("structure", name, f"{name} is None")
    if isinstance(expected, str):
        if got == expected:
            return None
        return Mismatch("value", name, f"{name}: expected {expected!r}, got {got!r}")
    want = np.asarray(expected)
    have = _as_numbers(got)
    if have is None:
        return Mismatch("structure", name, f"{name} should be numbers, got {describe_type(got)}")
    if have.shape != want.shape:
        return Mismatch("shape", name, f"{name} has shape {have.shape}, expected shape {want.shape}")
    if want.dtype.kind in "biu":
        same = np.asarray(have == want)
    else:
        with np.errstate(all="ignore"):
            same = np.isclose(have.astype(np.float64), want, rtol=rtol, atol=atol, equal_nan=True)
    if not same.all():
        index = tuple(int(i) for i in np.argwhere(~same)[0])
        e, g = want[index], have[index]
        text = f"first difference {out.locate(index)}: expected {_precise(e)}, got {_precise(g)}"
        if want.dtype.kind == "f" and np.isfinite(e) and np.isfinite(g):
            text += f" (off by {format_float(abs(float(g) - float(e)), 3)})"
        return Mismatch("value", name, text, step=index[0] if out.per_step else None)
    if check_dtype:
        if out.dtype is not None and have.dtype != np.dtype(out.dtype):
            return Mismatch("dtype", name, f"{name} has dtype {have.dtype}, expected {out.dtype}")
        if want.dtype.kind == "f" and have.dtype.kind != "f" and want.ndim > 0:  # an integral scalar is the number
            return Mismatch("dtype", name, f"{name} has dtype {have.dtype}, expected a float dtype")
    return None


def compare(
    expected: Any,
    got: Any,
    outputs: Sequence[Output],
    *,
    who: str,
    rtol: float,
    atol: float,
    check_dtype: bool = True,
) -> Mismatch | None:
    """The first way ``got`` differs from ``expected``, or None if it matches.

    Parameters
    ----------
    expected, got
        One value when there is one output, else a tuple with one item per output.
    outputs : sequence of Output
    who : str
        The function's name, for messages about the whole result.
    rtol, atol : float
        Tolerance on float values.
    check_dtype : bool
        Also require the dtypes (off when matching a known wrong answer).
    """
    if len(outputs) == 1:
        if got is None and expected is not None:
            return Mismatch("structure", "", f"{who} returned None: end it with `return {outputs[0].name}`")
        return _compare_one(expected, got, outputs[0], rtol, atol, check_dtype)
    names = ", ".join(o.name for o in outputs)
    if got is None:
        return Mismatch("structure", "", f"{who} returned None: end it with `return {names}`")
    if not isinstance(got, (tuple, list)) or len(got) != len(outputs):
        return Mismatch(
            "structure", "", f"{who} should return a tuple of {len(outputs)} ({names}), got {describe_type(got)}"
        )
    for e, g, out in zip(expected, got, outputs, strict=True):
        found = _compare_one(e, g, out, rtol, atol, check_dtype)
        if found is not None:
            return found
    return None

"""Comparing a learner's output with the reference's: what differs first, said in one sentence.

An exercise's function returns one value or a tuple of named values
(:class:`Output`). :func:`compare` walks them in order and reports the first
problem it meets: the wrong structure (None, a tuple of the wrong length, a
value of the wrong type), the wrong shape, the wrong dtype, or values that
differ beyond the tolerance.

The learner's values are judged by what they hold, never by their own
methods: each is read with :func:`~sparse_opt.exercises._format.plain` into
the type the reference returned before anything is compared, so an object
whose ``__eq__`` says yes to everything (``unittest.mock.ANY``), one with an
``__array__`` or ``__float__``, or a subclass of ``str``, ``float`` or
``ndarray`` that overrides its methods is refused or judged by its contents.
An output the reference returns as an array must be a numpy array (a list is
refused as such); a scalar output may be a Python or numpy number or a 0-d
array; a string output must be a ``str``. A float output must have the
reference's dtype (a scalar may also be an integer of the right value), an
integer output an integer dtype (the exact one when :attr:`Output.dtype`
says so). Integers and strings must be equal; floats must agree to
``|got - expected| <= atol + rtol * |expected|`` (NaN matches only NaN), and a
difference is printed with as many digits as it takes to tell the two apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_opt.exercises._format import (
    DIGITS,
    PRECISE_DIGITS,
    describe_type,
    format_float,
    format_scalar,
    is_number,
    plain,
)


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

    ``kind`` is ``"structure"``, ``"shape"``, ``"dtype"`` or ``"value"``;
    ``output`` names the output concerned; ``step`` is the 0-based step of a
    value difference in a ``per_step`` output; ``digits`` the significant
    digits a listing needs to show the differing numbers differently.
    """

    kind: str
    output: str
    text: str
    step: int | None = None
    digits: int = DIGITS


def as_numbers(value: Any) -> np.ndarray | None:
    """A learner's ``value`` as a plain ndarray of real numbers or booleans (0-d for a scalar), or None.

    Only a numpy array, a numpy scalar or a Python bool, int or float is
    numbers; it is read by what it holds (a copy), without calling its methods.
    """
    held = plain(value)
    if type(held) is np.ndarray:
        numbers = held
    elif is_number(held):
        numbers = np.asarray(held)  # an int beyond 64 bits becomes an object array: not numbers
    else:
        return None
    return numbers if numbers.dtype.kind in "biuf" else None


def digits_apart(e: Any, g: Any, least: int = DIGITS) -> int:
    """The fewest significant digits, from ``least`` up to 17, at which the numbers ``e`` and ``g`` print differently.

    17 digits tell any two float64 apart; numbers that print alike at every
    count (equal ones) give 17.
    """
    return next((d for d in range(least, 17) if format_scalar(e, d) != format_scalar(g, d)), 17)


def _not_numbers(name: str, want: np.ndarray, got: Any) -> Mismatch:
    """Why ``got`` (not convertible by :func:`as_numbers`, or not an array where one is expected) was refused."""
    if issubclass(type(got), np.ndarray):
        dtype = np.ndarray.view(got, np.ndarray).dtype
        return Mismatch("structure", name, f"{name} should hold real numbers, got an array of dtype {dtype}")
    what = "a numpy array" if want.ndim else "a number"
    return Mismatch("structure", name, f"{name} should be {what}, got {describe_type(got)}")


def _dtype_problem(want: np.ndarray, have: np.ndarray, out: Output) -> str | None:
    """What is wrong with ``have``'s dtype for output ``out``, or None."""
    if out.dtype is not None:
        required = np.dtype(out.dtype)
    elif want.dtype.kind in "iu" and have.dtype.kind in "iu":
        return None  # any integer dtype holds an integer output
    elif want.dtype.kind == "f" and want.ndim == 0 and have.dtype.kind in "iu":
        return None  # an integral scalar is the number
    else:
        required = want.dtype
    return None if have.dtype == required else f"{out.name} has dtype {have.dtype}, expected {required}"


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
        text = plain(got)
        if type(text) is not str:
            return Mismatch("structure", name, f"{name} should be a str, got {describe_type(got)}")
        if text == expected:
            return None
        return Mismatch("value", name, f"{name}: expected {expected!r}, got {text!r}")
    want = np.asarray(expected)
    have = as_numbers(got)
    if have is None or (want.ndim and not issubclass(type(got), np.ndarray)):
        return _not_numbers(name, want, got)
    if have.shape != want.shape:
        return Mismatch("shape", name, f"{name} has shape {have.shape}, expected shape {want.shape}")
    if check_dtype and (problem := _dtype_problem(want, have, out)) is not None:
        return Mismatch("dtype", name, problem)
    if want.dtype.kind in "biu" and have.dtype.kind in "biu":
        same = np.asarray(have == want)
    else:
        with np.errstate(all="ignore"):
            same = np.isclose(
                have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            )
    if same.all():
        return None
    index = tuple(int(i) for i in np.argwhere(~same)[0])
    e, g = want[index], have[index]
    digits = digits_apart(e, g, PRECISE_DIGITS)
    text = f"first difference {out.locate(index)}: expected {format_scalar(e, digits)}, got {format_scalar(g, digits)}"
    if want.dtype.kind == "f" and np.isfinite(e) and np.isfinite(g):
        text += f" (off by {format_float(abs(float(g) - float(e)), 3)})"
    step = index[0] if out.per_step else None
    return Mismatch("value", name, text, step=step, digits=digits_apart(e, g))


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
    items = plain(got)
    if type(items) not in (tuple, list) or len(items) != len(outputs):
        return Mismatch(
            "structure", "", f"{who} should return a tuple of {len(outputs)} ({names}), got {describe_type(got)}"
        )
    for e, g, out in zip(expected, items, outputs, strict=True):
        found = _compare_one(e, g, out, rtol, atol, check_dtype)
        if found is not None:
            return found
    return None

"""Checked exercises: the learner writes the function a lesson is about, and the kit checks it.

In a notebook::

    from sparse_opt.exercises import check, hint, solution

    def coalesce(indices, values):
        raise NotImplementedError  # your code here

    check(coalesce)          # 'not attempted yet: coalesce still raises NotImplementedError'
    hint("coalesce")         # the next hint, one more each call
    solution("coalesce")     # a model answer

Stubs and model answers assume the notebooks' imports, ``import numpy as np``
and ``import sparse_opt as so``.

:func:`check` finds the exercise by the function's (or class's) name, runs it
on the exercise's edge cases and seeded random cases against the kit's
reference, and returns a :class:`CheckResult` whose text is the report: the
first case that fails, its inputs, the expected and the observed output, and,
when the output equals a known wrong answer, what the mistake is. It never
raises. Exercises by lesson (``for_lesson("03")``):

- 01: ``coalesce``, ``coo_to_csr``
- 02: ``lazy_sgd_step``, ``sgd_catch_up``
- 03: ``adam_step``, ``bias_corrected_update``, ``dormancy_decay_moments``, ``adam_catch_up``
- 04: ``relative_divergence``, ``train_step``
- 05: ``factored_second_moment``, ``adafactor_row_col_update``
- 06: ``egdd_gain_update``, ``egdd_lr_scale_update``
- 07: ``state_bytes_per_param``, ``lazy_row_update``
- 08: ``LazyAdam`` (a conformance candidate class), ``which_eps_placement``
- 09: ``skipped_displacement``, ``decay_over_gap``
- 10: ``stagnates``, ``stochastic_round``
"""

from __future__ import annotations

from typing import Any

from sparse_opt.exercises import (
    lesson01,
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson08,
    lesson09,
    lesson10,
)
from sparse_opt.exercises._core import CheckResult, Exercise, Text

__all__ = ["EXERCISES", "CheckResult", "Exercise", "check", "for_lesson", "get", "hint", "names", "solution", "stub"]

#: Every exercise, in lesson order.
EXERCISES: tuple[Exercise, ...] = (
    *lesson01.EXERCISES,
    *lesson02.EXERCISES,
    *lesson03.EXERCISES,
    *lesson04.EXERCISES,
    *lesson05.EXERCISES,
    *lesson06.EXERCISES,
    *lesson07.EXERCISES,
    *lesson08.EXERCISES,
    *lesson09.EXERCISES,
    *lesson10.EXERCISES,
)

_BY_NAME: dict[str, Exercise] = {e.name: e for e in EXERCISES}


def names() -> list[str]:
    """The exercises' names, in lesson order."""
    return [e.name for e in EXERCISES]


def _unknown(name: object) -> str:
    listing = ", ".join(f"{e.name} ({e.lesson})" for e in EXERCISES)
    return f"there is no exercise named {name!r}; the exercises (lesson) are: {listing}"


def get(name: str) -> Exercise:
    """The exercise called ``name``; ``LookupError`` (listing the exercises) if there is none."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise LookupError(_unknown(name)) from None


def check(fn: Any, name: str | None = None) -> CheckResult:
    """Check the learner's function (or class) against the exercise of the same name.

    Parameters
    ----------
    fn : callable
        The learner's function or class, e.g. ``check(coalesce)``.
    name : str, optional
        The exercise, when the function is called something else.

    Returns
    -------
    CheckResult
        Displays as the report. Never raises: an unknown name gives a failed
        result whose message lists the exercises.
    """
    key = name if name is not None else getattr(fn, "__name__", None)
    exercise = _BY_NAME.get(key) if isinstance(key, str) else None
    if exercise is None:
        if key is None:
            message = (
                f"check needs the function itself (e.g. check(coalesce)), got {type(fn).__name__}; "
                "pass name='...' to say which exercise it answers"
            )
        else:
            message = _unknown(key)
        return CheckResult(str(key), False, message, attempted=False)
    return exercise.check(fn)


def hint(name: str, number: int | None = None) -> Text:
    """The next hint for exercise ``name`` (each call gives one more), or hint ``number`` (1-based)."""
    return get(name).hint(number)


def solution(name: str) -> Text:
    """The model answer of exercise ``name``, as source text."""
    return get(name).solution()


def stub(name: str) -> Text:
    """The stub of exercise ``name``, as the notebook shows it."""
    return get(name).stub()


def for_lesson(lesson: str | int) -> list[Exercise]:
    """The exercises of one lesson (``"03"``, ``"3"`` or ``3``), in order."""
    key = f"{int(lesson):02d}" if str(lesson).strip().isdigit() else str(lesson)
    return [e for e in EXERCISES if e.lesson == key]

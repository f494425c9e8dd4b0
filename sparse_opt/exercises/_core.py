"""An :class:`Exercise` checks a learner's function against the kit's reference and explains the first mismatch.

Each exercise owns a reference (the kit's own code where the kit has it), a
list of deterministic :class:`Case`\\ s (named edge cases, then seeded random
ones), the known wrong answers it can recognise (:class:`Diagnosis`), hints,
a stub and a model solution. :meth:`Exercise.check` runs the learner's
function on every case, in order, and stops at the first one whose result
differs; the :class:`CheckResult` says which case, with which inputs, what was
expected, what came back and -- where the result equals a known wrong answer --
what the mistake is. Checking never raises: a stub gets "not attempted yet",
an exception in the learner's code is reported with its type, message and
line, and warnings are silenced while the learner's code runs (the report
shows the NaN or inf they would announce).
"""

from __future__ import annotations

import copy
import dis
import html
import inspect
import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import numpy as np

from sparse_opt.exercises._compare import Mismatch, Output, compare
from sparse_opt.exercises._format import DIGITS, describe_type, format_lines, named_lines, plain


class Text(str):
    """A string that a notebook displays as plain text (no quotes, real line breaks)."""

    def __repr__(self) -> str:
        return str(self)


def source(text: str) -> str:
    """Source text written indented inside a module, dedented, with one final newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


@dataclass(frozen=True)
class Case:
    """One set of inputs: ``inputs`` maps each argument name to its value, in call order."""

    name: str
    inputs: Mapping[str, Any]


@dataclass(frozen=True)
class Diagnosis:
    """A known wrong answer: ``variant`` (same signature as the exercise) and what the mistake is."""

    message: str
    variant: Callable[..., Any]


@dataclass(frozen=True)
class Outcome:
    """What running a function on a case produced.

    ``output`` is what is compared (the return value, or the arrays updated in
    place); ``returned`` the return value itself; ``mutated`` the inputs that
    changed although they should not have; ``inefficiency`` a cost problem
    found while the values were right (work or memory of the table's size).
    """

    output: Any
    returned: Any = None
    mutated: tuple[str, ...] = ()
    inefficiency: str | None = None


class LearnerError(Exception):
    """Raised by a runner when the learner's code raised ``error`` during ``where`` (e.g. "step 3")."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(where, error)
        self.where = where
        self.error = error


class AnswerError(Exception):
    """Raised by a runner when the learner's answer has the wrong form; the message is the report."""


Runner = Callable[[Any, Mapping[str, Any]], Outcome]


def unchanged(before: Any, after: Any) -> bool:
    """Whether ``after`` (a copy that was passed to a function) still equals ``before``, NaN included."""
    if isinstance(before, np.ndarray):
        return (
            isinstance(after, np.ndarray)
            and before.shape == after.shape
            and before.dtype == after.dtype
            and bool(np.array_equal(before, after, equal_nan=before.dtype.kind in "fc"))
        )
    if isinstance(before, (list, tuple)):
        return type(before) is type(after) and len(before) == len(after) and all(map(unchanged, before, after))
    if isinstance(before, Mapping):
        return isinstance(after, Mapping) and before.keys() == after.keys() and all(
            unchanged(before[k], after[k]) for k in before
        )
    return bool(before == after)


def call_function(fn: Callable[..., Any], inputs: Mapping[str, Any], in_place: Sequence[str] = ()) -> Outcome:
    """Call ``fn`` on copies of ``inputs`` (positionally, in order) and record what it did.

    The inputs named in ``in_place`` are the function's outputs (it updates
    them); any other input that changed is reported as mutated.
    """
    args = copy.deepcopy(dict(inputs))
    returned = fn(*args.values())
    mutated = tuple(k for k in inputs if k not in in_place and not unchanged(inputs[k], args[k]))
    if not in_place:
        return Outcome(returned, returned, mutated)
    output = args[in_place[0]] if len(in_place) == 1 else tuple(args[k] for k in in_place)
    return Outcome(output, returned, mutated)


def learner_functions(obj: Any) -> dict[CodeType, str]:
    """The code objects of a learner's function, or of a class's own methods, with their names."""
    if isinstance(obj, type):
        return {
            f.__code__: f"{obj.__name__}.{key}" for key, f in vars(obj).items() if inspect.isfunction(f)
        }
    code = getattr(obj, "__code__", None)
    return {code: obj.__name__} if isinstance(code, CodeType) else {}


#: The only operations of a body that returns a constant: ``pass``, ``...``, a docstring, ``return None``.
_CONSTANT_BODY = frozenset({"RESUME", "NOP", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST", "POP_TOP", "CACHE"})


def has_empty_body(code: CodeType) -> bool:
    """Whether the function of ``code`` does nothing but return None or ``...`` (its body is ``pass`` or ``...``)."""
    return all(
        ins.opname in _CONSTANT_BODY and (ins.opname not in ("LOAD_CONST", "RETURN_CONST") or ins.argval in (None, ...))
        for ins in dis.get_instructions(code)
    )


def _where_raised(error: BaseException, functions: Mapping[CodeType, str]) -> tuple[str, int] | None:
    """The learner's function and line (1 = its ``def`` line) in which ``error`` was raised, innermost first."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        name = functions.get(tb.tb_frame.f_code)
        if name is not None:
            found = (name, tb.tb_lineno - tb.tb_frame.f_code.co_firstlineno + 1)
        tb = tb.tb_next
    return found


@dataclass(frozen=True, eq=False)
class CheckResult:
    """What :meth:`Exercise.check` found; its text (``str``, ``repr``, HTML) is the report.

    Attributes
    ----------
    exercise : str
        The exercise's name.
    passed : bool
        Every case matched the reference.
    message : str
        One sentence: the verdict, the known mistake recognised, or what differs.
    attempted : bool
        False for a stub (and for a call the checker could not match to an exercise).
    case : str or None
        The first case that failed.
    inputs : mapping or None
        Its inputs.
    expected, got
        The reference's output and the learner's on that case (``got`` only if
        the function returned).
    detail : str or None
        Where the values first differ, when the message is a diagnosis.
    outputs : tuple of str
        Names of the outputs, to label ``expected`` and ``got``.
    sections : tuple of str
        What the report shows of the case: ``"inputs"``, ``"expected"`` (when the
        output is in question) and ``"got"`` (when the function returned one).
    digits : int
        Significant digits of the floats in ``expected`` and ``got``: six, or
        as many as it takes to show the first differing numbers differently.
    """

    exercise: str
    passed: bool
    message: str
    attempted: bool = True
    case: str | None = None
    inputs: Mapping[str, Any] | None = None
    expected: Any = None
    got: Any = None
    detail: str | None = None
    outputs: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    digits: int = DIGITS

    def report(self) -> str:
        """The readable report: verdict, then the failing case's inputs, expected and observed outputs."""
        if self.case is None:
            return self.message
        lines = [f"{self.exercise}: failed on case '{self.case}'", f"  {self.message}"]
        if self.detail:
            lines.append(f"  {self.detail}")
        if "inputs" in self.sections:
            lines.append("  inputs:")
            for key, value in (self.inputs or {}).items():
                lines += named_lines(key, value, "    ")
        if "expected" in self.sections:
            lines.append("  expected:")
            lines += self._output_lines(self.expected)
        if "got" in self.sections:
            lines.append("  got:")
            lines += self._output_lines(self.got)
        return "\n".join(lines)

    def _output_lines(self, value: Any) -> list[str]:
        if len(self.outputs) == 1:
            return named_lines(self.outputs[0], value, "    ", self.digits)
        items = plain(value)
        if type(items) in (tuple, list) and len(items) == len(self.outputs):
            return [
                line for name, v in zip(self.outputs, items, strict=True)
                for line in named_lines(name, v, "    ", self.digits)
            ]
        return ["    " + line for line in format_lines(value, self.digits)]

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return self.report()

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed else ("#9e9e9e" if not self.attempted else "#c62828")
        return (
            f'<div style="border-left: 4px solid {color}; padding: 0.1em 0.8em; margin: 0.2em 0;">'
            f'<pre style="margin: 0; white-space: pre-wrap;">{html.escape(self.report())}</pre></div>'
        )


@dataclass(frozen=True)
class _Failure:
    """The first failing case, before it becomes a CheckResult."""

    case: Case
    message: str
    outcome: Outcome | None = None
    mismatch: Mismatch | None = None
    attempted: bool = True


@dataclass(eq=False)
class Exercise:
    """A function (or class) the learner writes, checked against a reference.

    Parameters
    ----------
    name : str
        The learner's function or class name; :func:`sparse_opt.exercises.check`
        finds the exercise by it.
    lesson : str
        Two digits, the notebook's number.
    title : str
        One line: what the function does.
    statement : str
        What the function must do: its exact signature, inputs and return
        convention.
    reference : callable
        Same signature as the learner's function; the expected outputs come
        from it (the kit's own code where the kit has it).
    cases : sequence of Case
        Deterministic inputs, edge cases first; the check stops at the first
        that fails.
    outputs : sequence of Output
        What the function returns (or, with ``in_place``, updates).
    solution_source : str
        Source of a model answer, written for learners (:meth:`solution`).
    stub_source : str
        Source of the stub the notebook shows (:meth:`stub`).
    hints : sequence of str
        Progressive hints, from the idea to nearly the code.
    diagnoses : sequence of Diagnosis
        Known wrong answers, each with the message shown when the learner's
        output equals its output.
    in_place : sequence of str
        Inputs the function updates in place; they are its outputs.
    runner : callable, optional
        ``runner(fn, inputs) -> Outcome`` for exercises that are not one call
        (a training loop, a class); it copies the inputs itself. By default
        :func:`call_function`.
    rtol, atol : float
        Tolerance on float outputs.
    """

    name: str
    lesson: str
    title: str
    statement: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    outputs: Sequence[Output]
    solution_source: str
    stub_source: str
    hints: Sequence[str]
    diagnoses: Sequence[Diagnosis] = ()
    in_place: Sequence[str] = ()
    runner: Runner | None = None
    rtol: float = 1e-9
    atol: float = 1e-12
    _next_hint: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.statement = Text(self.statement)

    def __repr__(self) -> str:
        return f"<Exercise {self.name} (lesson {self.lesson}): {self.title}>"

    def solution(self) -> Text:
        """The model answer's source (what ``solution("name")`` shows)."""
        return Text(self.solution_source)

    def stub(self) -> Text:
        """The stub's source, as the notebook shows it."""
        return Text(self.stub_source)

    def hint(self, number: int | None = None) -> Text:
        """The next hint (or hint ``number``, 1-based, after which the next call continues from there)."""
        if number is not None:
            if not 1 <= number <= len(self.hints):
                return Text(f"{self.name} has hints 1 to {len(self.hints)}; there is no hint {number}.")
            self._next_hint = number - 1
        if self._next_hint >= len(self.hints):
            return Text(f"No more hints for {self.name}: solution({self.name!r}) shows a model answer.")
        k = self._next_hint
        self._next_hint += 1
        return Text(f"Hint {k + 1} of {len(self.hints)} for {self.name}: {self.hints[k]}")

    def _run(self, fn: Any, case: Case) -> Outcome:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if self.runner is not None:
                return self.runner(fn, case.inputs)
            return call_function(fn, case.inputs, self.in_place)

    def expected(self, case: Case) -> Any:
        """The reference's output on ``case``."""
        return self._run(self.reference, case).output

    def _differs(self, expected: Any, got: Any, check_dtype: bool = True) -> Mismatch | None:
        return compare(
            expected, got, self.outputs, who=self.name, rtol=self.rtol, atol=self.atol, check_dtype=check_dtype
        )

    def check(self, fn: Any) -> CheckResult:
        """Run ``fn`` on every case and report the first mismatch (never raises)."""
        try:
            return self._check(fn)
        except Exception as err:  # the checker must not raise, whatever the learner's function returns
            message = f"the checker could not judge {self.name}: {type(err).__name__}: {err}"
            return CheckResult(self.name, False, message)

    def _check(self, fn: Any) -> CheckResult:
        if not callable(fn):
            return CheckResult(
                self.name,
                False,
                f"check needs {self.name} itself, got {describe_type(fn)}: write check({self.name}), "
                f"not check({self.name}(...))",
                attempted=False,
            )
        functions = learner_functions(fn)
        empty = [name for code, name in functions.items() if has_empty_body(code)]
        if empty:
            return CheckResult(self.name, False, f"not attempted yet: {empty[0]} has an empty body", attempted=False)
        for case in self.cases:
            failure = self._check_case(fn, case, functions)
            if failure is None:
                continue
            if not failure.attempted:
                return CheckResult(self.name, False, failure.message, attempted=False)
            return self._result(fn, failure)
        count = len(self.cases)
        return CheckResult(self.name, True, f"{self.name}: passed all {count} cases")

    def _check_case(self, fn: Any, case: Case, functions: Mapping[CodeType, str]) -> _Failure | None:
        try:
            outcome = self._run(fn, case)
        except Exception as err:
            return self._exception_failure(case, err, functions)
        if outcome.mutated:
            names = ", ".join(outcome.mutated)
            return _Failure(
                case,
                f"{self.name} changed its input {names}: leave the inputs as they are "
                "(build new arrays, or work on a copy)",
                outcome,
            )
        mismatch = self._differs(self.expected(case), outcome.output)
        if mismatch is None:
            return None if outcome.inefficiency is None else _Failure(case, outcome.inefficiency, outcome)
        return _Failure(case, mismatch.text, outcome, mismatch)

    def _exception_failure(self, case: Case, err: Exception, functions: Mapping[CodeType, str]) -> _Failure:
        if isinstance(err, AnswerError):
            return _Failure(case, str(err))
        where, error = (err.where, err.error) if isinstance(err, LearnerError) else (None, err)
        raised = _where_raised(error, functions)
        if isinstance(error, NotImplementedError):
            who = raised[0] if raised and not raised[0].endswith(".__init__") else self.name
            return _Failure(case, f"not attempted yet: {who} still raises NotImplementedError", attempted=False)
        place = [where] if where else []
        if raised:
            place.append(f"line {raised[1]} of {raised[0]}")
        suffix = f" ({', '.join(place)})" if place else ""
        return _Failure(case, f"{self.name} raised {type(error).__name__}: {error}{suffix}")

    def _result(self, fn: Any, failure: _Failure) -> CheckResult:
        case, outcome, mismatch = failure.case, failure.outcome, failure.mismatch
        expected = self.expected(case)
        message, detail = failure.message, None
        if outcome is not None and mismatch is not None and mismatch.kind in ("shape", "value"):
            known = self._known_mistake(fn, case, outcome, expected)
            if known is not None:
                message, detail = known, mismatch.text
        got = None if outcome is None else outcome.output
        names = tuple(o.name for o in self.outputs)
        if mismatch is not None and mismatch.step is not None and len(names) == 1:  # only the step that differs
            step = mismatch.step
            expected, got = np.asarray(expected)[step], plain(got)[step]
            names = (f"{names[0]} after step {step + 1}",)
        if mismatch is not None:
            sections: tuple[str, ...] = ("inputs", "expected", "got")
        else:  # an exception (the expected output helps), or a side effect with the right values
            sections = ("inputs", "expected") if outcome is None else ("inputs",)
        return CheckResult(
            self.name, False, message, case=case.name, inputs=case.inputs, expected=expected, got=got,
            detail=detail, outputs=names, sections=sections, digits=DIGITS if mismatch is None else mismatch.digits,
        )

    def _known_mistake(self, fn: Any, case: Case, outcome: Outcome, expected: Any) -> str | None:
        """What the mistake is, when the learner's output equals that of a known wrong answer.

        In order: right values returned instead of written in place; a diagnosis
        whose variant gives the same output (preferring one that agrees with the
        learner on every case, as two mistakes can coincide on one); a flipped sign.
        """
        got = outcome.output
        if self.in_place and outcome.returned is not None and self._differs(expected, outcome.returned) is None:
            return (
                f"{' and '.join(self.in_place)} were not updated in place: {self.name} returned the right values as "
                f"new arrays; write into the arrays passed in ({self.in_place[0]}[index] = ...), do not rebind "
                "the names"
            )
        matching = [d for d in self.diagnoses if self._behaves_like(d, case, got)]
        if matching:
            outputs = {other.name: self._output_or_raised(fn, other) for other in self.cases}
            everywhere = (
                d for d in matching
                if all(outputs[o.name] is not _RAISED and self._behaves_like(d, o, outputs[o.name]) for o in self.cases)
            )
            return next(everywhere, matching[0]).message
        if len(self.outputs) > 1:  # expected is a tuple of outputs, of different shapes: no single array to negate
            return None
        want = np.asarray(expected)
        if want.dtype.kind == "f" and self._differs(-want, got, False) is None:
            return f"the sign is flipped: {self.name} returns the negative of the expected result"
        return None

    def _output_or_raised(self, fn: Any, case: Case) -> Any:
        try:
            return self._run(fn, case).output
        except Exception:
            return _RAISED

    def _behaves_like(self, diagnosis: Diagnosis, case: Case, got: Any) -> bool:
        wrong = self._output_or_raised(diagnosis.variant, case)
        return wrong is not _RAISED and self._differs(wrong, got, check_dtype=False) is None


#: Marks a case on which a function raised (while looking for a known mistake).
_RAISED = object()

"""Grade a class: run each submitted notebook in a fresh kernel and check the learner's functions.

``python -m sparse_opt.exercises grade DIR`` takes every ``*.ipynb`` in ``DIR``
as one student's submission (the student is the file name without
``.ipynb``), and for each:

1. starts a fresh kernel and runs the notebook's code cells in order, with a
   time limit for the whole notebook; a cell that raises does not stop the
   others (the first error is recorded), and a cell still running at the
   limit is interrupted and the rest are skipped;
2. in the same kernel, for every exercise graded, runs an injected cell that
   looks the learner's function up by name in the kernel's namespace and runs
   :func:`sparse_opt.exercises.check` on it (each with its own time limit),
   so a deleted or edited ``check(...)`` cell does not matter.

The exercises graded are those of ``lessons`` when given, otherwise every
exercise whose function a submission's code defines or checks (``def name``,
``class name``, ``check(name``), so a class that handed in notebook 01 is
graded on ``coalesce`` and ``coo_to_csr``.

Each student gets one status per exercise:

- ``passed``;
- ``failed: <the first line of the checker's diagnosis>``;
- ``not attempted`` (the stub is still there);
- ``missing`` (the name is not defined in the kernel after the notebook ran);
- ``error: <type>: <message> (cell N)`` (the name is not defined and the cell
  that defines it, the notebook's N-th cell counted from 1, markdown included,
  raised, e.g. a syntax error; or the notebook could not be read or run, or
  its kernel died);
- ``timeout`` (the notebook's time limit ran out before the name was defined,
  or the check of the learner's function did not finish in its limit).

The results are written as CSV (one row per student, one column per exercise,
then the student's total and first error) and summarised on stdout.

nbclient (with nbformat and a Jupyter kernel) is needed only here; it comes
with the ``notebooks`` extra and is imported when grading starts.
"""

from __future__ import annotations

import csv
import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparse_opt.exercises import EXERCISES, check, for_lesson, names

__all__ = ["Submission", "grade", "grade_notebook", "report", "summary", "write_csv"]

#: Prefix of the line each injected check cell prints (the rest of the line is JSON).
MARK = "@@sparse_opt.grade@@ "

#: What the injected check cell calls (after importing its module).
_REPORT = "sparse_opt.exercises.grade.report"

#: The error name a cell gets when it hits its time limit.
_TIMEOUT = "sparse_opt.grade.Timeout"

#: Seconds a kernel may take to answer after it was interrupted at the time limit.
RECOVER_SECONDS = 10

#: Seconds to wait for a cell's last output after its reply (nbclient's ``iopub_timeout``; a cell that hit its
#: time limit waits this long too).
IOPUB_SECONDS = 4


@dataclass
class Submission:
    """One student's graded notebook.

    Attributes
    ----------
    student : str
        The notebook's file name without ``.ipynb``.
    path : Path
        The notebook.
    statuses : dict of str to str
        Exercise name to status (see the module's docstring).
    first_error : str or None
        The first error raised by one of the notebook's cells, or why it could
        not be run, as ``"<type>: <message> (cell N)"``.
    timed_out : bool
        The notebook's time limit ran out before its last cell finished.
    seconds : float
        Wall-clock time spent on this submission.
    """

    student: str
    path: Path
    statuses: dict[str, str] = field(default_factory=dict)
    first_error: str | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        """How many exercises passed."""
        return sum(status == "passed" for status in self.statuses.values())


def report(namespace: Mapping[str, Any], name: str) -> None:
    """Print one exercise's verdict on ``namespace[name]`` as a JSON line after :data:`MARK`.

    This runs inside the student's kernel (the injected cell calls it with
    ``globals()``); it uses :func:`sparse_opt.exercises.check`, which never raises.
    """
    if name not in namespace:
        print(MARK + json.dumps({"name": name, "defined": False}))
        return
    result = check(namespace[name], name=name)
    verdict = {"name": name, "defined": True, "passed": result.passed, "attempted": result.attempted,
               "message": result.message}
    print(MARK + json.dumps(verdict))


def _status(verdict: Mapping[str, Any]) -> str:
    if verdict["passed"]:
        return "passed"
    if not verdict["attempted"]:
        return "not attempted"
    lines = str(verdict["message"]).strip().splitlines()
    return "failed: " + (lines[0] if lines else "(no message)")


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^\s*(def|class)\s+{re.escape(name)}\b", source, re.M) is not None


def _mentions(source: str, name: str) -> bool:
    return _defines(source, name) or re.search(rf"\bcheck\(\s*{re.escape(name)}\b", source) is not None


def _one_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def _code_cells(notebook: Any) -> list[tuple[int, Any]]:
    return [(i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code" and c.source.strip()]


def _read(path: Path) -> Any:
    import nbformat

    return nbformat.read(str(path), as_version=4)


def exercises_in(paths: Iterable[Path]) -> list[str]:
    """The exercises whose function some notebook's code defines or checks, in lesson order.

    A notebook that cannot be read contributes none.
    """
    found: set[str] = set()
    for path in paths:
        try:
            notebook = _read(path)
        except Exception:
            continue
        code = "\n".join(c.source for _, c in _code_cells(notebook))
        found.update(name for name in names() if _mentions(code, name))
    return [name for name in names() if name in found]


def grade_notebook(
    path: Path, exercises: Sequence[str], timeout: float = 120.0, check_timeout: float = 30.0,
    kernel_name: str = "python3",
) -> Submission:
    """Run one notebook in a fresh kernel and check ``exercises`` in it (never raises for the student's faults).

    Parameters
    ----------
    path : Path
        The submitted notebook.
    exercises : sequence of str
        The exercises to grade (names from :func:`sparse_opt.exercises.names`).
    timeout : float
        Seconds for the notebook's cells, all together.
    check_timeout : float
        Seconds for the check of each exercise.
    kernel_name : str
        The Jupyter kernel to run it in (the notebook's own kernelspec is ignored).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    started = time.monotonic()
    sub = Submission(path.stem, path)
    try:
        notebook = _read(path)
    except Exception as err:
        sub.first_error = f"the notebook cannot be read: {type(err).__name__}: {_one_line(str(err))}"
        sub.statuses = {name: f"error: {sub.first_error}" for name in exercises}
        sub.seconds = time.monotonic() - started
        return sub
    # At a time limit nbclient interrupts the kernel and answers the cell with this error at once (and stops
    # listening to it); raising CellTimeoutError instead would leave its output listener running, which then
    # swallows the next cell's output.
    client = NotebookClient(
        notebook, kernel_name=kernel_name, allow_errors=True, timeout=None, shutdown_kernel="immediate",
        interrupt_on_timeout=True, error_on_timeout={"ename": _TIMEOUT, "evalue": "", "traceback": []},
        iopub_timeout=IOPUB_SECONDS,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    replies: list[Mapping[str, Any] | None] = []
    client.on_cell_executed = lambda cell, cell_index, execute_reply: replies.append(execute_reply)
    errors: list[tuple[int, str]] = []  # (cell index from 0, "type: message (cell index + 1)")
    wedged = False
    where = "while the kernel started"

    def run(cell: Any, index: int, seconds: float) -> str:
        """Execute one cell: 'ok', 'timeout' (interrupted at the limit, the kernel answers again) or 'wedged'."""
        nonlocal wedged
        if _execute(client, cell, index, seconds, replies):
            return "ok"
        if not _execute(client, _new_cell("pass"), -1, RECOVER_SECONDS, replies):
            wedged = True  # the learner's code swallowed the interrupt: nothing more can run in this kernel
            return "wedged"
        return "timeout"

    try:
        with client.setup_kernel():
            deadline = time.monotonic() + timeout
            for index, cell in _code_cells(notebook):
                where = f"in cell {index + 1}"
                remaining = deadline - time.monotonic()
                outcome = "timeout" if remaining <= 0 else run(cell, index, remaining)
                for output in cell.get("outputs", []):
                    if output.get("output_type") == "error" and outcome == "ok":
                        errors.append((index, f"{output.ename}: {_one_line(output.evalue)} (cell {index + 1})"))
                        break
                if outcome != "ok":
                    sub.timed_out = True
                    break
            for name in exercises:
                if wedged:
                    sub.statuses[name] = "timeout"
                    continue
                where = f"while checking {name}"
                check_cell = _new_cell(f"import sparse_opt.exercises.grade\n{_REPORT}(globals(), {name!r})")
                outcome = run(check_cell, -1, check_timeout)
                verdict = _verdict(check_cell)
                if outcome != "ok":
                    sub.statuses[name] = "timeout"
                elif verdict is None:
                    sub.statuses[name] = "error: " + _cell_error(check_cell)
                elif verdict["defined"]:
                    sub.statuses[name] = _status(verdict)
                else:
                    sub.statuses[name] = _undefined_status(name, notebook, errors, sub.timed_out)
    except DeadKernelError as err:
        message = f"the kernel died {where}: {_one_line(str(err))}"
        errors.append((-1, message))
        for name in exercises:
            sub.statuses.setdefault(name, f"error: {message}")
    except Exception as err:  # a kernel that cannot start, a broken notebook: reported, not fatal
        message = f"the notebook could not be run: {type(err).__name__}: {_one_line(str(err))}"
        errors.append((-1, message))
        for name in exercises:
            sub.statuses.setdefault(name, f"error: {message}")
    sub.first_error = errors[0][1] if errors else None
    sub.seconds = time.monotonic() - started
    return sub


def _execute(client: Any, cell: Any, index: int, seconds: float, replies: list[Any]) -> bool:
    """Run ``cell`` with a limit of ``seconds``; False if it hit the limit (and the kernel was interrupted)."""
    client.timeout = max(1, math.ceil(seconds))
    replies.clear()
    client.execute_cell(cell, index)
    reply = replies[-1] if replies else None
    return not (reply is not None and reply.get("content", {}).get("ename") == _TIMEOUT)


def _new_cell(source: str) -> Any:
    import nbformat

    return nbformat.v4.new_code_cell(source)


def _verdict(cell: Any) -> dict[str, Any] | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            for line in output.text.splitlines():
                if line.startswith(MARK):
                    return json.loads(line[len(MARK):])
    return None


def _cell_error(cell: Any) -> str:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"the check raised {output.ename}: {_one_line(output.evalue)}"
    return "the check printed no verdict"


def _undefined_status(name: str, notebook: Any, errors: Sequence[tuple[int, str]], timed_out: bool) -> str:
    for index, message in errors:
        if index >= 0 and _defines(notebook.cells[index].source, name):
            return f"error: {message}"
    return "timeout" if timed_out else "missing"


def grade(
    directory: Path, lessons: Sequence[str] = (), timeout: float = 120.0, check_timeout: float = 30.0,
    kernel_name: str = "python3",
) -> tuple[list[str], list[Submission]]:
    """Grade every ``*.ipynb`` in ``directory`` (sorted by name).

    Parameters
    ----------
    directory : Path
        One notebook per student.
    lessons : sequence of str
        Grade the exercises of these lessons (``"01"``, ``"3"``); by default
        those the submissions' code defines or checks.
    timeout, check_timeout, kernel_name
        As in :func:`grade_notebook`.

    Returns
    -------
    exercises : list of str
        The exercises graded, in lesson order.
    submissions : list of Submission
        One per notebook.

    Raises
    ------
    ValueError
        ``directory`` is not a directory or holds no notebook; a lesson has no
        exercises; a time limit is not a positive number.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"grade: directory {str(directory)!r} does not exist or is not a directory")
    for label, value in (("timeout", timeout), ("check_timeout", check_timeout)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"grade: {label} must be a positive number of seconds, got {value!r}")
    paths = sorted(p for p in directory.glob("*.ipynb") if p.is_file())
    if not paths:
        raise ValueError(f"grade: no submissions (*.ipynb) in {str(directory)!r}")
    if lessons:
        chosen: list[str] = []
        for lesson in lessons:
            found = for_lesson(lesson)
            if not found:
                known = sorted({e.lesson for e in EXERCISES})
                raise ValueError(f"grade: lesson {lesson!r} has no exercises; lessons with exercises: {known}")
            chosen += [e.name for e in found if e.name not in chosen]
        exercises = [name for name in names() if name in chosen]
    else:
        exercises = exercises_in(paths)
    submissions = [grade_notebook(p, exercises, timeout, check_timeout, kernel_name) for p in paths]
    return exercises, submissions


def write_csv(path: Path, exercises: Sequence[str], submissions: Sequence[Submission]) -> None:
    """One row per student: ``student``, a status per exercise, ``passed`` (``k/n``), ``first_error``."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *exercises, "passed", "first_error"])
        for sub in submissions:
            writer.writerow([
                sub.student, *(sub.statuses[name] for name in exercises), f"{sub.passed}/{len(exercises)}",
                sub.first_error or "",
            ])


def summary(exercises: Sequence[str], submissions: Sequence[Submission]) -> str:
    """The printed summary: per exercise how many students passed, per student a total and what went wrong."""
    count = len(submissions)
    width = max([len(name) for name in exercises] + [len(s.student) for s in submissions] + [8])
    lines = [f"{count} submission{'s' if count != 1 else ''}, {len(exercises)} exercise"
             f"{'s' if len(exercises) != 1 else ''}", "", "per exercise:"]
    for name in exercises:
        passed = sum(s.statuses[name] == "passed" for s in submissions)
        lines.append(f"  {name:<{width}}  {passed} of {count} passed")
    lines += ["", "per student:"]
    for sub in submissions:
        notes = [f"{name}: {sub.statuses[name]}" for name in exercises if sub.statuses[name] != "passed"]
        if sub.timed_out:
            notes.append("the notebook hit its time limit")
        if sub.first_error:
            notes.append(f"first error: {sub.first_error}")
        tail = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"  {sub.student:<{width}}  {sub.passed}/{len(exercises)}{tail}")
    return "\n".join(lines)

"""``python -m sparse_opt.exercises grade DIR`` on planted submissions built from the real notebooks' exercise cells.

One class hands in notebook 01 (five students: all model answers, one wrong answer, a loop that never
ends, the ``check(...)`` lines deleted, a syntax error); a second class hands in notebook 02 (one student
deletes a whole exercise cell). Each submission is the notebook's exercise cells as stored, with the
stubs' bodies replaced by the learner's, after an import cell of numpy and sparse_opt (the notebooks' own
first cells also start matplotlib and widgets, which only makes each kernel slower to grade).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparse_opt import exercises as ex
from sparse_opt.exercises import grade as grading
from sparse_opt.exercises.__main__ import main

pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

#: coalesce without summing the repeated indices' values: the checker's planted diagnosis recognises it.
COALESCE_KEEPS_ONE = '''
def coalesce(indices, values):
    unique, first = np.unique(np.asarray(indices, dtype=np.int64), return_index=True)
    return unique, np.asarray(values, dtype=np.float64)[first]
'''

COALESCE_LOOPS = '''
def coalesce(indices, values):
    while True:
        pass
'''


#: The imports the exercises assume (the notebooks' first cells also load matplotlib and widgets: slower to start).
IMPORTS = nbformat.v4.new_code_cell("import numpy as np\n\nimport sparse_opt as so")


def exercise_cells(notebook: str) -> tuple[dict, list[dict]]:
    """An import cell and the notebook's exercise cells (those calling check), as stored."""
    nb = nbformat.read(str(NOTEBOOKS / notebook), as_version=4)
    exercise = [c for c in nb.cells if c.cell_type == "code" and re.search(r"^check\(\w+\)", c.source, re.M)]
    assert exercise, f"{notebook} has no exercise cell"
    return nb, [IMPORTS, *exercise]


def answer(cell_source: str, name: str, body: str | None) -> str:
    """The cell with the stub of ``name`` replaced by ``body`` (the model answer when None)."""
    stub = ex.stub(name).strip()
    assert stub in cell_source, f"the stub of {name} is not in its cell"
    return cell_source.replace(stub, (ex.solution(name) if body is None else body).strip())


def write(directory: Path, student: str, nb: dict, cells: list[dict]) -> None:
    out = nbformat.v4.new_notebook(metadata=nb.metadata)
    out.cells = [nbformat.v4.new_code_cell(c.source if isinstance(c, dict) else c) for c in cells]
    nbformat.write(out, str(directory / f"{student}.ipynb"))


def name_of(cell_source: str) -> str | None:
    found = re.search(r"^check\((\w+)\)", cell_source, re.M)
    return found.group(1) if found else None


def planted_class_01(directory: Path) -> None:
    nb, (imports, *cells) = exercise_cells("01_sparse_gradients.ipynb")
    names = [name_of(c.source) for c in cells]
    assert names == ["coalesce", "coo_to_csr"]
    right = [answer(c.source, n, None) for c, n in zip(cells, names, strict=True)]
    write(directory, "ada", nb, [imports.source, *right])
    write(directory, "ben", nb, [imports.source, answer(cells[0].source, "coalesce", COALESCE_KEEPS_ONE), right[1]])
    write(directory, "cleo", nb, [imports.source, answer(cells[0].source, "coalesce", COALESCE_LOOPS), right[1]])
    no_checks = [re.sub(r"^check\(\w+\)\s*$", "", s, flags=re.M) for s in right]
    assert all("check(" not in s for s in no_checks)
    write(directory, "dev", nb, [imports.source, *no_checks])
    write(directory, "eve", nb, [imports.source, right[0].replace("def coalesce(indices, values):",
                                                                   "def coalesce(indices, values)"), right[1]])


@pytest.fixture(scope="module")
def graded_01(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str, float]:
    directory = tmp_path_factory.mktemp("class01")
    planted_class_01(directory)
    started = time.monotonic()
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(grading, "IOPUB_SECONDS", 1)  # how long a timed-out cell waits for its last output
        status = main(["grade", str(directory), "--timeout", "6", "--check-timeout", "3"])
    return directory, status, printed.getvalue(), time.monotonic() - started


def read_table(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_every_planted_submission_gets_its_status(graded_01: tuple[Path, int, str, float]) -> None:
    directory, status, _, _ = graded_01
    assert status == 0
    with open(directory / "grades.csv", newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert header == ["student", "coalesce", "coo_to_csr", "passed", "first_error"]
    table = read_table(directory / "grades.csv")
    assert list(table) == ["ada", "ben", "cleo", "dev", "eve"]
    assert table["ada"] == {"student": "ada", "coalesce": "passed", "coo_to_csr": "passed", "passed": "2/2",
                                "first_error": ""}
    # the checker's own diagnosis of the planted mistake, its first line
    keeps_one = next(d.message for d in ex.get("coalesce").diagnoses if d.message.startswith("only the first value"))
    assert table["ben"]["coalesce"] == "failed: " + keeps_one.splitlines()[0]
    assert (table["ben"]["coo_to_csr"], table["ben"]["passed"]) == ("passed", "1/2")
    # the notebook's own check(coalesce) hangs: interrupted at the time limit, the rest of the notebook skipped
    # (coo_to_csr is never defined), and the injected check of coalesce hits its own limit
    assert (table["cleo"]["coalesce"], table["cleo"]["coo_to_csr"], table["cleo"]["passed"]) == (
        "timeout", "timeout", "0/2")
    # check(...) lines deleted: the functions are still found and checked
    assert (table["dev"]["coalesce"], table["dev"]["coo_to_csr"], table["dev"]["passed"]) == ("passed", "passed", "2/2")
    # a syntax error in the cell that defines coalesce: that exercise is an error, the next cell still ran
    assert table["eve"]["coalesce"].startswith("error: SyntaxError: ")
    assert table["eve"]["coalesce"].endswith("(cell 2)")  # the notebook's second cell, counted from 1
    assert table["eve"]["first_error"] == table["eve"]["coalesce"][len("error: "):]
    assert (table["eve"]["coo_to_csr"], table["eve"]["passed"]) == ("passed", "1/2")


def test_summary_counts_per_exercise_and_per_student(graded_01: tuple[Path, int, str, float]) -> None:
    directory, _, printed, _ = graded_01
    lines = printed.splitlines()
    assert lines[0] == "5 submissions, 2 exercises"
    assert re.search(r"^  coalesce +2 of 5 passed$", printed, re.M)  # ada, dev
    assert re.search(r"^  coo_to_csr +4 of 5 passed$", printed, re.M)  # all but cleo
    assert re.search(r"^  ada +2/2$", printed, re.M)
    cleo = r"^  cleo +0/2 +\(coalesce: timeout; coo_to_csr: timeout; the notebook hit its time limit\)$"
    assert re.search(cleo, printed, re.M)
    assert lines[-1] == f"written: {directory / 'grades.csv'}"


def test_the_time_limit_bounds_the_run(graded_01: tuple[Path, int, str, float]) -> None:
    # cleo's notebook stops at its 6 s limit (+ the interrupt) and her loop's check at 3 s; the others take a
    # few seconds each. Without the limits the loop would never return.
    _, _, _, seconds = graded_01
    assert seconds < 45, seconds


def test_a_deleted_exercise_cell_is_missing_a_stub_not_attempted_and_lessons_choose_the_columns(
    tmp_path: Path,
) -> None:
    nb, (imports, *cells) = exercise_cells("02_sparse_sgd.ipynb")
    names = [name_of(c.source) for c in cells]
    assert names == ["lazy_sgd_step", "sgd_catch_up"]
    write(tmp_path, "finn", nb, [imports.source, answer(cells[0].source, names[0], None)])  # exercise 2 deleted
    write(tmp_path, "gus", nb, [imports.source, *(c.source for c in cells)])  # the notebook as handed out
    exercises, (finn, gus) = grading.grade(tmp_path, lessons=["2"], timeout=20, check_timeout=4)
    assert exercises == ["lazy_sgd_step", "sgd_catch_up"]
    assert finn.statuses == {"lazy_sgd_step": "passed", "sgd_catch_up": "missing"}
    assert (finn.passed, finn.first_error, finn.timed_out) == (1, None, False)
    assert gus.statuses == {"lazy_sgd_step": "not attempted", "sgd_catch_up": "not attempted"}
    assert gus.first_error is None  # check() reports a stub, it does not raise
    # without --lesson the columns come from what the class's code defines or checks
    assert grading.exercises_in([tmp_path / "finn.ipynb"]) == ["lazy_sgd_step"]
    assert grading.exercises_in([tmp_path / "finn.ipynb", tmp_path / "gus.ipynb"]) == exercises


def test_an_unreadable_notebook_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "hal.ipynb").write_text("{ not json", encoding="utf-8")
    exercises, (hal,) = grading.grade(tmp_path, lessons=["01"], timeout=5, check_timeout=2)
    assert exercises == ["coalesce", "coo_to_csr"]
    assert hal.first_error is not None and hal.first_error.startswith("the notebook cannot be read: ")
    assert all(s == "error: " + hal.first_error for s in hal.statuses.values())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["grade", "{missing}"], "does not exist or is not a directory"),
        (["grade", "{empty}"], "no submissions (*.ipynb)"),
        (["grade", "{empty}", "--lesson", "99"], "lesson '99' has no exercises"),
        (["grade", "{empty}", "--timeout", "0"], "timeout must be a positive number of seconds, got 0.0"),
        (["grade", "{empty}", "--check-timeout", "nan"], "check_timeout must be a positive number of seconds"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    if "--lesson" in argv:
        nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "empty" / "x.ipynb"))
    argv = [a.format(missing=tmp_path / "nope", empty=tmp_path / "empty") for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_report_prints_one_json_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    exec(ex.solution("coalesce"), {"np": __import__("numpy")}, namespace)
    grading.report(namespace, "coalesce")
    grading.report({}, "coo_to_csr")
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith(grading.MARK) and second.startswith(grading.MARK)
    assert json.loads(first[len(grading.MARK):]) == {
        "name": "coalesce", "defined": True, "passed": True, "attempted": True,
        "message": f"coalesce: passed all {len(ex.get('coalesce').cases)} cases"}
    assert json.loads(second[len(grading.MARK):]) == {"name": "coo_to_csr", "defined": False}


def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "sparse_opt.exercises", "grade", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip() == f"grade: no submissions (*.ipynb) in {str(tmp_path)!r}"


def test_a_kernel_that_swallows_the_interrupt_or_dies_is_reported_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ivy's loop catches KeyboardInterrupt, so her kernel never answers again: every exercise is a timeout and
    # the kernel is shut down instead of the grader waiting for ever. jay's second cell kills his kernel.
    monkeypatch.setattr(grading, "RECOVER_SECONDS", 2)
    monkeypatch.setattr(grading, "IOPUB_SECONDS", 1)
    loop = "import time\n\n\ndef coalesce(indices, values):\n    return indices, values\n\n\nwhile True:\n" \
           "    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass"
    write(tmp_path, "ivy", nbformat.v4.new_notebook(), [loop])
    write(tmp_path, "jay", nbformat.v4.new_notebook(), [ex.solution("coalesce"), "import os\n\nos._exit(1)"])
    started = time.monotonic()
    exercises, (ivy, jay) = grading.grade(tmp_path, lessons=["01"], timeout=2, check_timeout=2)
    assert ivy.statuses == {"coalesce": "timeout", "coo_to_csr": "timeout"} and ivy.timed_out
    assert jay.first_error == "the kernel died in cell 2: Kernel died"
    assert jay.statuses == {name: "error: " + jay.first_error for name in exercises}
    assert time.monotonic() - started < 35

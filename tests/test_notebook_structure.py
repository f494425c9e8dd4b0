"""The stored notebooks keep the shape of a course lesson, and their outputs are the executed ones.

nbval compares outputs cell by cell and the e2e test runs them in JupyterLab; these
checks read the files only (a second each) and catch what those two would report
late or not at all: a lesson that lost its objectives, summary, questions,
references or exercises; a notebook saved unexecuted or with an error in it; a
widget whose figure never reaches the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
LESSONS = [p for p in NOTEBOOKS if re.match(r"0[1-8]_", p.name)]
IGNORE_OUTPUT = "nbval-ignore-output"


def cells(path: Path, kind: str) -> list[dict]:
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == kind]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def headings(path: Path) -> list[str]:
    return [line for c in cells(path, "markdown") for line in text(c).splitlines() if line.startswith("#")]


def test_every_lesson_is_there():
    assert [p.name[:2] for p in LESSONS] == [f"0{n}" for n in range(1, 9)]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_opens_with_objectives_and_assumptions(path: Path):
    opening = "\n".join(text(c) for c in cells(path, "markdown")[:2])
    assert re.search(r"\*\*(what )?you will be able to", opening, re.IGNORECASE), f"{path.name}: no objectives"
    assert re.search(r"\*\*(what )?(it|this) assumes", opening, re.IGNORECASE), f"{path.name}: no prerequisites"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_has_references_exercises_summary_and_questions_in_that_order(path: Path):
    found = [h.lstrip("#").strip() for h in headings(path)]
    order = [found.index(name) if name in found else -1 for name in ("References", "Exercises", "Summary")]
    assert -1 not in order, f"{path.name}: sections {found}"
    assert order == sorted(order), f"{path.name}: references, exercises and summary out of order: {found}"
    assert "Questions" in found and found.index("Questions") > order[-1], f"{path.name}: no questions after the summary"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_checks_at_least_two_exercises_left_as_stubs(path: Path):
    code = [text(c) for c in cells(path, "code")]
    checked = [s for s in code if re.search(r"^check\(", s, re.MULTILINE)]
    assert len(checked) >= 2, f"{path.name}: {len(checked)} exercise checks"
    stubs = sum(s.count("raise NotImplementedError") for s in checked)
    attempted = sum("not attempted yet" in output_text(c) for c in cells(path, "code"))
    assert stubs >= 1 and attempted >= 1, f"{path.name}: the stored exercises should be stubs, shown as not attempted"


def output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_are_one_clean_top_to_bottom_run(path: Path):
    code = cells(path, "code")
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), f"{path.name}: not run top to bottom"
    errors = [i for i, c in enumerate(code, 1) for out in c["outputs"] if out["output_type"] == "error"]
    assert not errors, f"{path.name}: stored errors in code cells {errors}"
    stderr = [i for i, c in enumerate(code, 1) for out in c["outputs"] if out.get("name") == "stderr"]
    assert not stderr, f"{path.name}: warnings or stderr stored in code cells {stderr}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_widgets_display_their_figures_and_are_excused_from_output_comparison(path: Path):
    """The kit's figures are made without pyplot, so nothing shows them implicitly.

    ``widgets.interactive`` / ``interact`` display a returned Figure only through
    matplotlib's inline pyplot hook, which a pyplot-free Figure never reaches: the
    widget then redraws nothing. Widget callbacks ``display`` their figure and are
    wired with ``interactive_output``. A widget's stored output is a model id,
    different on every run, so its cell is tagged ``nbval-ignore-output``.
    """
    for number, cell in enumerate(cells(path, "code"), 1):
        source = text(cell)
        assert not re.search(r"\binteract(ive)?\(", source), f"{path.name} cell {number}: use interactive_output"
        if "interactive_output(" in source:
            assert IGNORE_OUTPUT in cell["metadata"].get("tags", []), f"{path.name} cell {number}: widget not tagged"

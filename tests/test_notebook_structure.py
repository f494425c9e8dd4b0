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
LESSONS = [p for p in NOTEBOOKS if re.match(r"(0[1-9]|1[0-9])_", p.name)]
IGNORE_OUTPUT = "nbval-ignore-output"


def cells(path: Path, kind: str) -> list[dict]:
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == kind]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def headings(path: Path) -> list[str]:
    return [line for c in cells(path, "markdown") for line in text(c).splitlines() if line.startswith("#")]


def test_every_lesson_is_there():
    assert [p.name[:2] for p in LESSONS] == [f"{n:02d}" for n in range(1, 11)]


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


# A number printed at rounding level changes with the CPU (numpy's AVX-512, AVX2 and baseline
# kernels round differently), so nbval's comparison with the stored run fails on another machine.
# A claim "agrees to rounding" prints the bound it asserts ("less than 1e-14"), never the measured
# difference. Flagged: a number below ROUNDING_LEVEL in scientific notation, other than a bound
# (mantissa 1, as in 1e-14, or introduced by below / less than / under / < / tolerance), on a line
# that compares two results, or in a table whose header or title does.
ROUNDING_LEVEL = 1e-10
SCIENTIFIC = re.compile(r"(?<![\w.])[-+]?(\d+(?:\.\d+)?)e[-+]?\d+", re.IGNORECASE)
COMPARISON = re.compile(r"differ|agree|within|error|off by|deviat|divergen|\|diff\||rounding|relative|residual|mismatch", re.I)
BOUND_BEFORE = re.compile(r"(below|less than|under|<=?|tolerance|eps\w*\s*=)\s*$", re.IGNORECASE)


def rounding_level_numbers(output: str) -> list[str]:
    """The lines of an output that print a difference at rounding level instead of a bound.

    Parameters
    ----------
    output : str
        One output's text (stream, text/plain, or text/html with the tags removed).

    Returns
    -------
    list of str
        Each offending line, stripped.
    """
    flagged, context = [], ""
    lines = output.splitlines()
    for number, line in enumerate(lines):
        if "|" not in line:
            context = line  # a table's title, or the line itself
        elif number == 0 or "|" not in lines[number - 1]:
            context = (lines[number - 1] if number else "") + " " + line  # title and header of the table
        if not (COMPARISON.search(line) or ("|" in line and COMPARISON.search(context))):
            continue
        for match in SCIENTIFIC.finditer(line):
            value, mantissa = abs(float(match.group())), float(match.group(1))
            if 0 < value < ROUNDING_LEVEL and mantissa != 1 and not BOUND_BEFORE.search(line[: match.start()]):
                flagged.append(line.strip())
                break
    return flagged


def stored_output_texts(path: Path) -> list[tuple[int, str]]:
    """(code cell number, text) for every stored text output of a notebook."""
    texts = []
    for number, cell in enumerate(cells(path, "code"), 1):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for part in ("".join(out.get("text", "")), "".join(data.get("text/plain", ""))):
                texts.append((number, part))
            html = "".join(data.get("text/html", ""))
            texts.append((number, re.sub(r"<[^>]*>", " ", html)))
    return texts


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("DENSE_EQUIVALENT's m, v and parameter differ from dense Adam's by at most 6.5e-16 (relative).", True),
        ("log(gain) / gain_learning_rate is within 4.7e-12 of a whole number at every step.", True),
        ("rank1   : the largest relative error over all 200 steps is 6.8e-16, below 1e-12.", True),
        ("lr |  max |E_DE - E_dense| / max |E_dense| | max |test loss difference|\n 0.001 |  9.0e-14 |  1.1e-16", True),
        ("Divergence from dense Adam: median\n rows | LAZY | DENSE_EQUIVALENT\n 87 | 0.22 | 2.6e-15 [2.4e-15, 5.7e-15]", True),
        ("DENSE_EQUIVALENT's m, v and parameter differ from dense Adam's by less than 1e-14 (relative): rounding.", False),
        ("log(gain) / gain_learning_rate is within 1e-10 of a whole number at every step: rounding.", False),
        ("expected -0.7539062494, got -0.7539062491 (|diff| 2.955e-10 > tolerance 4.938e-15)", False),
        ("the two forms' iterates differ by 0.0e+00 at every step", False),
        ("step | momentum SGD | EGDD\n  300 |     7.73e-07 |  1.47e-14", False),
        ("their gbar had decayed to as little as 1.2e-13", False),
        ("|g| in the row | torch, eps1=1.19e-7 | paper, eps1=1e-30", False),
    ],
)
def test_rounding_level_detector(line: str, flagged: bool):
    assert bool(rounding_level_numbers(line)) == flagged


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_stored_output_prints_a_difference_at_rounding_level(path: Path):
    found = [f"code cell {number}: {line}" for number, text in stored_output_texts(path) for line in rounding_level_numbers(text)]
    assert not found, f"{path.name} prints differences at rounding level (print the bound it asserts):\n" + "\n".join(found)

"""The course's hours are measured, not guessed: the README's course table, its plans and docs/teachers.md
give the times ``docs/lesson_time.py`` computes from the notebooks (prose words, code lines, exercises and
questions at the rates stated there), and each plan adds up within its length.

The times are computed from the notebook files at test time, so a lesson that grows fails here until the
README and the guide say how long it now takes.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "teachers.md"


def load_lesson_time() -> ModuleType:
    """docs/lesson_time.py imported as a module (registered, so its dataclass resolves its module)."""
    spec = importlib.util.spec_from_file_location("lesson_time", ROOT / "docs" / "lesson_time.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["lesson_time"] = module
    spec.loader.exec_module(module)
    return module


lt = load_lesson_time()
COMPUTED = lt.lesson_minutes()
WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def readme() -> str:
    return README.read_text(encoding="utf-8")


def plan_line(opening: str) -> str:
    """The README's bullet whose bold title matches the regex ``opening``, joined over its continuation lines."""
    match = re.search(rf"^- \*\*{opening}.*?(?=^\S|^- |\Z)", readme(), re.M | re.S)
    assert match, f"the README has no plan '{opening}'"
    return " ".join(match.group().split())


def sections(spec: str) -> set[int]:
    """'1-3' -> {1, 2, 3}; '4 and 6' -> {4, 6}; '2' -> {2}; '1, 2 and 5' -> {1, 2, 5}."""
    found: set[int] = set()
    for part in re.split(r",\s*|\s+and\s+", spec.strip()):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


# -- the computation itself ------------------------------------------------------------------------


def notebook(tmp_path: Path, cells: list[tuple[str, str]], name: str = "01_tiny.ipynb") -> Path:
    nb = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": text, **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for kind, text in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


TINY = [
    ("markdown", "# 01 · Tiny\n\nFive words of opening here."),  # 9 words
    ("code", "import numpy as np\n\n# a comment line\nx = 1  # not only a comment"),  # 2 lines
    ("markdown", "## 1. First\n\nthree more words"),  # 6 words
    ("code", "y = 2"),  # 1 line
    ("markdown", "## 2. Second\n\nfour words in two"),  # 7 words
    ("code", "z = 3\nw = 4"),  # 2 lines
    ("markdown", "## Exercises"),  # 2 words
    ("code", "check(adam_step)  # shown passing: not an exercise"),  # 1 line
    ("code", "def f(x):\n    raise NotImplementedError\n\n\ncheck(f)"),  # 3 lines, an exercise
    ("markdown", "## Summary\n\nDone.\n\n### Questions\n\n1. Why?\n2. How\n   exactly?\n"),  # 10 words, 2 questions
]


def test_counts_words_code_lines_exercises_and_questions(tmp_path: Path) -> None:
    c = lt.counts(notebook(tmp_path, TINY))
    assert (c.words, c.code_lines, c.exercises, c.questions) == (34, 9, 1, 2)
    expected = 34 / lt.WORDS_PER_MINUTE + 9 * lt.MINUTES_PER_CODE_LINE + lt.MINUTES_PER_EXERCISE + 2 * lt.MINUTES_PER_QUESTION
    assert c.minutes == pytest.approx(expected, rel=1e-12)
    assert c.planned == 5 * round(expected / 5)


def test_section_counts_take_the_opening_and_the_sections_asked_for(tmp_path: Path) -> None:
    path = notebook(tmp_path, TINY)
    assert (lt.section_counts(path, set()).words, lt.section_counts(path, set()).code_lines) == (9, 2)
    first = lt.section_counts(path, {1})
    assert (first.words, first.code_lines, first.exercises, first.questions) == (15, 3, 0, 0)
    both = lt.section_counts(path, {1, 2})
    assert (both.words, both.code_lines) == (22, 5)


def test_rounding_is_to_the_nearest_five_minutes_halves_up() -> None:
    per_word = 1 / lt.WORDS_PER_MINUTE
    assert lt.Counts(round(12.4 / per_word), 0, 0, 0).planned == 10
    assert lt.Counts(0, 0, 1, 0).planned == 10
    assert lt.Counts(0, 0, 1, 1).planned == 15  # 13 min
    assert lt.Counts(0, 0, 0, 0).planned == 5  # never 0
    below, above = (lt.Counts(words, 0, 0, 0) for words in (2187, 2188))  # 12.497 and 12.503 min at 175 a minute
    assert below.minutes < 12.5 < above.minutes and (below.planned, above.planned) == (10, 15)


def test_every_course_notebook_is_timed() -> None:
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in lt.notebooks().values()) == names
    assert [k for k in COMPUTED if k.isdigit()] == [f"{k:02d}" for k in range(11)]


# -- what the README and the guide say ---------------------------------------------------------------


def test_the_readme_course_table_gives_the_computed_times() -> None:
    table = dict(re.findall(r"^\| `(\d\d[a-z]?)_\w+` \|.*\| (\d+) min \|$", readme(), re.M))
    assert sorted(table) == sorted(COMPUTED), "the course table lists every notebook with its time in minutes"
    wrong = {k: (int(table[k]), COMPUTED[k]) for k in COMPUTED if int(table[k]) != COMPUTED[k]}
    assert not wrong, f"README time, computed time (python docs/lesson_time.py): {wrong}"


def test_the_guide_gives_the_computed_times_and_states_the_rates() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    times = dict(re.findall(r"^## (?:Lesson|Appendix) (\d\d[a-z]?) .*?^\*\*Time\*\* \(the README's plan\): (\d+) min$", guide, re.M | re.S))
    assert {k: int(v) for k, v in times.items()} == COMPUTED
    rates = (
        f"{lt.WORDS_PER_MINUTE:g} words a minute",
        f"{60 / lt.MINUTES_PER_CODE_LINE:g} lines of code an hour",
        f"{lt.MINUTES_PER_EXERCISE:g} minutes an exercise",
        f"{lt.MINUTES_PER_QUESTION:g} minutes a question",
        f"nearest {lt.ROUND_TO} minutes",
    )
    missing = [r for r in rates if r not in " ".join(guide.split())]
    assert not missing, f"docs/teachers.md does not state the rates of docs/lesson_time.py: {missing}"


def test_the_lab_adds_up() -> None:
    line = plan_line(r"A \d+-minute lab")
    length, total = re.match(r"- \*\*A (\d+)-minute lab\*\* \((\d+) min\):", line).groups()
    items = re.findall(r"\b(\d\d[a-z]?)(?: sections? ([\d ,and-]+?))? \((\d+)\)", line)
    assert items, line
    for number, spec, minutes in items:
        expected = lt.section_minutes(number, sections(spec)) if spec else COMPUTED[number]
        assert int(minutes) == expected, f"lab: {number} sections {spec or 'all'} takes {expected} min, not {minutes}"
    assert sum(int(m) for _, _, m in items) == int(total) <= int(length), line


def test_the_sessions_add_up() -> None:
    line = plan_line(r"\w+ sessions of \w+ hours")
    count, hours, brk = re.match(r"- \*\*(\w+) sessions of (\w+) hours\*\* \(each with a (\d+)-minute break\):", line).groups()
    sessions = re.split(r"\((\d)\) ", line)[1:]
    numbers = [int(n) for n in sessions[0::2]]
    assert numbers == list(range(1, WORD_NUMBERS[count.lower()] + 1)), line
    planned: list[str] = []
    for text in sessions[1::2]:
        minutes = int(re.search(r"\((\d+) min\)", text).group(1))
        lessons = re.findall(r"(?<![\d.])(\d\d[a-z]?)(?![\d.]| min)", text.split(f"({minutes} min)")[0])
        planned += lessons
        assert minutes == sum(COMPUTED[k] for k in lessons), f"{lessons}: {minutes} min planned, computed {[COMPUTED[k] for k in lessons]}"
        assert minutes + int(brk) <= WORD_NUMBERS[hours] * 60, f"{lessons} do not fit in {hours} hours with the break"
    lessons_only = [k for k in COMPUTED if k.isdigit()]
    assert sorted(planned) == lessons_only, f"every lesson once across the sessions: {planned}"

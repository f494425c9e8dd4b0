"""docs/teachers.md keeps up with the course: an answer for every question at the end of every lesson and
appendix (by notebook and number, opening with the question's own first words), every checker diagnosis of
every exercise listed under its lesson, and each notebook's time as the README plans it (which
tests/test_lesson_times.py checks against the time computed from the notebook)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sparse_opt import exercises as ex

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "teachers.md"
#: the course's notebooks: the lessons "00_..." to "08_..." and appendices such as "03a_..."
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if re.match(r"\d\d[a-z]?_", p.name))
LESSONS = [p.name.split("_", 1)[0] for p in NOTEBOOKS]


def normal(text: str) -> str:
    return " ".join(text.split())


def questions(notebook: Path) -> dict[int, str]:
    """The numbered questions after the notebook's "Questions" heading, number -> text (whitespace collapsed)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found: dict[int, str] = {}
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        heading = re.search(r"^#+\s*Questions\s*$", text, re.M)
        if heading is None:
            continue
        number = None
        for line in text[heading.end():].splitlines():
            item = re.match(r"^(\d+)\.\s+(.*)$", line)
            if item:
                number = int(item.group(1))
                assert number not in found, f"{notebook.name}: question {number} twice"
                found[number] = item.group(2)
            elif number is not None and line.startswith((" ", "\t")) and line.strip():
                found[number] += " " + line.strip()
            elif line.strip():
                number = None  # prose after the list ends it
    return {k: normal(v) for k, v in found.items()}


def guide_sections() -> dict[str, str]:
    """The guide's sections, one per notebook: "00" -> the text of "## Lesson 00 ...", "03a" -> "## Appendix 03a ..."."""
    text = GUIDE.read_text(encoding="utf-8")
    parts = re.split(r"^## (?:Lesson|Appendix) (\d\d[a-z]?) ", text, flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    return {k: re.split(r"^## ", v, flags=re.M)[0] for k, v in sections.items()}


def answers(section: str) -> dict[int, str]:
    """``**Qn.** *first words of the question* answer...`` -> {n: first words}."""
    entries = re.findall(r"^\*\*Q(\d+)\.\*\* \*([^*]+)\*\s+\S", section, re.M)
    numbers = [int(n) for n, _ in entries]
    assert len(numbers) == len(set(numbers)), f"an answer number appears twice: {numbers}"
    return {int(n): normal(words) for n, words in entries}


def test_every_lesson_has_a_section_and_a_questions_list() -> None:
    assert [k for k in LESSONS if k.isdigit()] == [f"{k:02d}" for k in range(11)]
    assert sorted(guide_sections()) == LESSONS, "docs/teachers.md needs a '## Lesson NN' (or '## Appendix NNa') section per notebook"
    for notebook in NOTEBOOKS:
        assert questions(notebook), f"{notebook.name} has no numbered Questions"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_question_has_its_answer(notebook: Path) -> None:
    asked = questions(notebook)
    given = answers(guide_sections()[notebook.name.split("_", 1)[0]])
    assert sorted(given) == sorted(asked), (
        f"{notebook.name}: questions {sorted(asked)}, answers in docs/teachers.md {sorted(given)}"
    )
    for number, words in given.items():
        assert len(words) >= 15, f"{notebook.name} Q{number}: quote more of the question than {words!r}"
        assert asked[number].startswith(words), (
            f"{notebook.name} Q{number} now reads {asked[number]!r}; the guide answers {words!r}"
        )


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=[e.name for e in ex.EXERCISES])
def test_every_diagnosis_is_listed_under_its_lesson(exercise: ex.Exercise) -> None:
    section = guide_sections()[exercise.lesson]
    assert f"- `{exercise.name}`:" in section
    listed = section.split(f"- `{exercise.name}`:", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    assert [line[2:] for line in listed.strip().splitlines()] == [d.message for d in exercise.diagnoses]


def test_each_lessons_time_is_the_readmes() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    planned = dict(re.findall(r"^\| `(\d\d[a-z]?)_\w+` \|.*\| ([^|]+?) \|$", readme, re.M))
    assert sorted(planned) == LESSONS, "the README's course table lists every notebook with its time"
    for lesson, section in guide_sections().items():
        time = re.search(r"^\*\*Time\*\* \(the README's plan\): (.+)$", section, re.M)
        assert time is not None, f"lesson {lesson} has no time"
        assert time.group(1).strip() == planned[lesson].strip(), lesson

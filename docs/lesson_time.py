"""How long each lesson of the course takes, computed from the notebooks at stated rates.

A lesson's time is the time to read its prose, to read and run its code, to do its exercises and
to answer its questions::

    minutes = words / WORDS_PER_MINUTE + code_lines * MINUTES_PER_CODE_LINE
              + exercises * MINUTES_PER_EXERCISE + questions * MINUTES_PER_QUESTION

rounded to the nearest 5 minutes (``planned``). What is counted, from the notebook file:

- ``words``: the whitespace-separated words of every markdown cell (prose, equations, the exercises'
  specifications and the questions' text; an equation's symbols count as words, which slows the
  reading of a formula-heavy cell, as it should). Code outputs are not counted.
- ``code_lines``: the non-blank lines of every code cell that are not only a comment.
- ``exercises``: the code cells that call ``check(...)`` on a stub (``raise NotImplementedError``):
  the exercises a student writes, not a check that is shown passing.
- ``questions``: the numbered items after the lesson's ``Questions`` heading.

The rates, and where they come from:

- ``WORDS_PER_MINUTE = 175``: M. Brysbaert, "How many words do we read per minute? A review and
  meta-analysis of reading rate", Journal of Memory and Language 109 (2019) 104047,
  doi:10.1016/j.jml.2019.104047. Adults read English non-fiction silently at 238 words per minute on
  average, and most between 175 and 300. A lesson is technical text read to learn, with equations,
  so the rate is the bottom of that range.
- ``MINUTES_PER_CODE_LINE = 0.12`` (500 lines an hour): the rate at which reviewers prepare for an
  inspection of application code in a high-level language, about 500 lines of code per hour
  (W. S. Humphrey, *Managing the Software Process*, Addison-Wesley 1989, as quoted in S. McConnell,
  *Code Complete*, 2nd ed., Microsoft Press 2004, section 21.3). Reading a cell closely enough to
  predict what it prints is such a reading; running it is included.
- ``MINUTES_PER_EXERCISE = 10`` and ``MINUTES_PER_QUESTION = 3``: not published rates (none was found
  for a checked function of 5 to 15 lines with hints, or for a short written answer), but the kit's own
  assumption, stated so that it can be replaced by the times measured in a class.

``section_minutes`` gives the time of some numbered sections of a lesson (its opening included), for
plans that teach part of a lesson: prose and code only, no exercises or questions.

Run ``python docs/lesson_time.py`` for the table; ``tests/test_lesson_times.py`` checks that the
README's course table and plan and ``docs/teachers.md`` give these times.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"

WORDS_PER_MINUTE = 175.0
MINUTES_PER_CODE_LINE = 60.0 / 500.0
MINUTES_PER_EXERCISE = 10.0
MINUTES_PER_QUESTION = 3.0
ROUND_TO = 5

#: a notebook of the course: a lesson "03_..." or an appendix "03a_..."
COURSE_NOTEBOOK = re.compile(r"^(\d\d[a-z]?)_\w+\.ipynb$")
SECTION = re.compile(r"^##\s+(\d+)\.\s", re.M)
OTHER_PART = re.compile(r"^##\s+(?!\d+\.)", re.M)
QUESTIONS = re.compile(r"^#+\s*Questions\s*$", re.M)


@dataclass(frozen=True)
class Counts:
    """What a lesson (or a part of it) asks of a student."""

    words: int
    code_lines: int
    exercises: int
    questions: int

    @property
    def minutes(self) -> float:
        """The unrounded time in minutes at the module's rates."""
        return (
            self.words / WORDS_PER_MINUTE
            + self.code_lines * MINUTES_PER_CODE_LINE
            + self.exercises * MINUTES_PER_EXERCISE
            + self.questions * MINUTES_PER_QUESTION
        )

    @property
    def planned(self) -> int:
        """The time rounded to the nearest ``ROUND_TO`` minutes (halves up), at least ``ROUND_TO``."""
        return max(ROUND_TO, ROUND_TO * math.floor(self.minutes / ROUND_TO + 0.5))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def code_lines(source: str) -> int:
    """Non-blank lines of a code cell that are not only a comment."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def is_exercise(source: str) -> bool:
    """A code cell that checks a stub the student is to write."""
    return bool(re.search(r"^check\(", source, re.M)) and "raise NotImplementedError" in source


def question_count(text: str) -> int:
    """The numbered items of the list after a ``Questions`` heading in one markdown cell's text."""
    heading = QUESTIONS.search(text)
    if heading is None:
        return 0
    return len(re.findall(r"^\d+\.\s", text[heading.end():], re.M))


def counts(path: Path) -> Counts:
    """Words, code lines, exercises and questions of a whole notebook."""
    words = lines = exercises = questions = 0
    for cell in _cells(path):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            words += len(text.split())
            questions += question_count(text)
        elif cell["cell_type"] == "code":
            lines += code_lines(text)
            exercises += is_exercise(text)
    return Counts(words, lines, exercises, questions)


def section_counts(path: Path, sections: set[int]) -> Counts:
    """Words and code lines of the opening (before section 1) and of the numbered ``sections``.

    A numbered section runs from its ``## N.`` heading to the next level-2 heading; References,
    Exercises, Summary and Questions are not numbered and are never counted here.
    """
    words = lines = 0
    current: int | None = 0  # the opening
    for cell in _cells(path):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            counted = 0
            for chunk in re.split(r"(?=^##\s)", text, flags=re.M):
                number = SECTION.match(chunk)
                if number:
                    current = int(number.group(1))
                elif OTHER_PART.match(chunk):
                    current = None
                if current == 0 or current in sections:
                    counted += len(chunk.split())
            words += counted
        elif cell["cell_type"] == "code" and (current == 0 or current in sections):
            lines += code_lines(text)
    return Counts(words, lines, 0, 0)


def notebooks(directory: Path = NOTEBOOK_DIR) -> dict[str, Path]:
    """The course's notebooks by their number ("00" ... "08", "03a" for an appendix), in order."""
    found = {}
    for path in sorted(directory.glob("*.ipynb")):
        match = COURSE_NOTEBOOK.match(path.name)
        if match:
            found[match.group(1)] = path
    return found


def lesson_minutes(directory: Path = NOTEBOOK_DIR) -> dict[str, int]:
    """Each notebook's planned time in minutes, by number."""
    return {number: counts(path).planned for number, path in notebooks(directory).items()}


def section_minutes(number: str, sections: set[int], directory: Path = NOTEBOOK_DIR) -> int:
    """The planned time of part of a lesson: its opening and the numbered ``sections``."""
    return section_counts(notebooks(directory)[number], sections).planned


def main() -> int:
    print(
        f"rates: {WORDS_PER_MINUTE:g} words a minute, {1 / MINUTES_PER_CODE_LINE:g} code lines a minute, "
        f"{MINUTES_PER_EXERCISE:g} min an exercise, {MINUTES_PER_QUESTION:g} min a question; rounded to {ROUND_TO} min"
    )
    print(f"{'notebook':<38} {'words':>6} {'code':>5} {'ex.':>4} {'qu.':>4} {'minutes':>8} {'planned':>8}")
    total = 0
    for path in notebooks().values():
        c = counts(path)
        total += c.planned
        print(f"{path.stem:<38} {c.words:>6} {c.code_lines:>5} {c.exercises:>4} {c.questions:>4} {c.minutes:>8.1f} {c.planned:>8}")
    print(f"{'all notebooks':<38} {'':>6} {'':>5} {'':>4} {'':>4} {'':>8} {total:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

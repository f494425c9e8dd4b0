"""``python -m sparse_opt.exercises``: the course's exercises from the command line.

``python -m sparse_opt.exercises grade DIR [--lesson 01 ...] [--timeout 120] [--check-timeout 30]
[--out grades.csv] [--kernel python3]`` grades a class (see :mod:`sparse_opt.exercises.grade`):
it writes the per-student, per-exercise CSV (``DIR/grades.csv`` by default) and prints a summary.
It exits 0 when every submission was graded (whatever the students' results), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m sparse_opt.exercises", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="run each submitted notebook and check the learner's functions")
    grade.add_argument("directory", type=Path, help="one notebook (*.ipynb) per student, named after the student")
    grade.add_argument("--lesson", action="append", default=[], metavar="NN",
                       help="grade this lesson's exercises (repeatable); default: those the submissions define")
    grade.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                       help="time limit for running one notebook (default 120)")
    grade.add_argument("--check-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="time limit for checking one exercise (default 30)")
    grade.add_argument("--out", type=Path, default=None, metavar="CSV", help="where to write the table "
                       "(default DIRECTORY/grades.csv)")
    grade.add_argument("--kernel", default="python3", help="Jupyter kernel to run the notebooks in (default python3)")
    args = parser.parse_args(argv)

    from sparse_opt.exercises import grade as grading

    try:
        exercises, submissions = grading.grade(
            args.directory, args.lesson, args.timeout, args.check_timeout, args.kernel
        )
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"grade needs nbclient (pip install 'sparse_opt[notebooks]'): {err}", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else args.directory / "grades.csv"
    grading.write_csv(out, exercises, submissions)
    print(grading.summary(exercises, submissions))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

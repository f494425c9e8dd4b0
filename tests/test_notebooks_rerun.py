"""No notebook depends on the order its cells were last run in: every code cell runs twice in a row.

A reader re-runs a cell after changing it, then runs a later one. ``make test`` checks this
inside nbval's own run (the root ``conftest.py``, option ``--nbval-rerun-cells``): each
notebook code cell is run a second time in nbval's kernel right after nbval compares its
first run with the stored outputs, and a cell that fails on its second run, or makes a
later cell print something else, fails. One execution per notebook serves both checks.

These tests run the plugin on small notebooks made here, and check that the README's
test command (``make test``) runs every notebook under strict nbval with the option, and
CI again at numpy's baseline SIMD level.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbval")

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


def notebook(*cells: tuple[str, str]) -> str:
    """A notebook stored as if run once top to bottom: (source, its stdout) per code cell."""
    nb = nbformat.v4.new_notebook()
    for count, (source, stdout) in enumerate(cells, 1):
        outputs = [nbformat.v4.new_output("stream", name="stdout", text=stdout)] if stdout else []
        nb.cells.append(nbformat.v4.new_code_cell(source, execution_count=count, outputs=outputs))
    return nbformat.writes(nb)


NOTEBOOKS = {
    # the second run of cell 1 pops from an empty list
    "consumes": notebook(("stack = [1]", ""), ("top = stack.pop()\nprint(top)", "1\n"), ("print(top + 1)", "2\n")),
    # runs cleanly twice, but the second run of cell 1 changes what cell 2 prints
    "accumulates": notebook(("total = 0", ""), ("total += 5", ""), ("print(total)", "5\n")),
    # order independent: recomputes its state from scratch
    "clean": notebook(("import math\nvalues = [1.0, 4.0]", ""), ("roots = [math.sqrt(v) for v in values]\nprint(roots)", "[1.0, 2.0]\n")),
    # the consuming cell is slow, so it is run once
    "slow": notebook(("import time\nqueue = [1]", ""), ("time.sleep(2.5)\nprint(queue.pop())", "1\n")),
}


@pytest.fixture
def notebooks(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest((ROOT / "conftest.py").read_text(encoding="utf-8"))
    for name, text in NOTEBOOKS.items():
        (pytester.path / f"{name}.ipynb").write_text(text, encoding="utf-8")
    return pytester


NBVAL = ("-p", "no:cacheprovider", "--nbval", "--nbval-current-env")


def test_second_runs_catch_consumed_state_and_changed_outputs(notebooks: pytest.Pytester) -> None:
    result = notebooks.runpytest_subprocess(*NBVAL, "--nbval-rerun-cells", "--nbval-rerun-max-seconds=1.5", "-rf")
    failed = sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED"))
    assert failed == ["accumulates.ipynb::Cell", "consumes.ipynb::Cell"], result.outlines
    text = result.stdout.str()
    assert "Cell 1: Cell fails when run a second time" in text, text
    assert "IndexError" in text and "pop from empty list" in text
    assert "Cell 2: Cell outputs differ" in text, text
    result.assert_outcomes(passed=8, failed=2)


def test_without_the_option_nbval_runs_each_cell_once(notebooks: pytest.Pytester) -> None:
    result = notebooks.runpytest_subprocess(*NBVAL, "consumes.ipynb", "accumulates.ipynb")
    result.assert_outcomes(passed=6)


def test_the_test_command_and_ci_run_every_notebook_under_strict_nbval_with_second_runs() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    nbval = re.search(r"^NBVAL :=(.*)$", makefile, re.MULTILINE)
    assert nbval and "--nbval " in nbval.group(1) + " " and "--nbval-rerun-cells" in nbval.group(1)
    assert "--nbval-lax" not in makefile
    recipes = dict(re.findall(r"^([\w-]+): .*\n((?:\t.*\n)+)", makefile, re.MULTILINE))
    assert "test-code" in recipes["test"] and "test-notebooks" in recipes["test"]
    assert "pytest notebooks $(NBVAL)" in recipes["test-notebooks"]
    assert "sparse_opt tests" in recipes["test-code"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.MULTILINE)
    assert re.search(r'^NPY_DISABLE_CPU_FEATURES="\$BASELINE" make test-notebooks$', ci, re.MULTILINE)

"""No notebook depends on the order its cells were last run in: every code cell runs twice in a row.

nbval runs each notebook once, top to bottom. A reader does not: they re-run a cell
after changing it, then run a later one. Here each notebook is executed in a fresh
kernel with every code cell run a second time right after the first, and a cell that
fails on its second run (a name rebound by a later cell, state a cell consumes) or
makes a later cell fail is reported. Cells whose first run took longer than
``SLOW_CELL_S`` (notebook 04's sweep) are not run again, to keep the suite's time
bounded; their results are re-read by the cells after them anyway.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
SLOW_CELL_S = 15.0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_code_cell_can_run_twice(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            started = time.monotonic()
            client.execute_cell(cell, index)
            if time.monotonic() - started > SLOW_CELL_S:
                continue
            try:
                client.execute_cell(cell, index)
            except nbclient.exceptions.CellExecutionError as error:
                pytest.fail(f"{path.name}, code cell {index}: fails when run a second time\n{error}")

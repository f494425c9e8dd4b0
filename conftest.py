"""nbval, plus a second run of every code cell in nbval's own kernel (``--nbval-rerun-cells``).

A reader does not run a notebook once top to bottom: they re-run a cell after changing it,
then run a later one. With ``--nbval-rerun-cells`` each notebook cell that nbval has just run
and compared with its stored outputs is run a second time in the same kernel, and a cell that
fails on its second run (a name rebound by a later cell, state the cell consumes) fails the
test. The next cell then runs after both runs, so nbval's comparison of its outputs with the
stored ones also checks that running a cell twice changes nothing a later cell prints.
Cells whose first run took longer than ``--nbval-rerun-max-seconds`` are run once.

One kernel and one execution per notebook serve both checks (``make test`` used to execute
every notebook again in a separate test for the second runs).
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

import pytest

DEFAULT_RERUN_MAX_SECONDS = 15.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nbval")
    group.addoption(
        "--nbval-rerun-cells",
        action="store_true",
        help="run every notebook code cell a second time in nbval's kernel right after nbval checks it",
    )
    group.addoption(
        "--nbval-rerun-max-seconds",
        type=float,
        default=DEFAULT_RERUN_MAX_SECONDS,
        help="cells whose first run took longer than this are not run a second time (default %(default)s)",
    )


def second_run_error(kernel: Any, source: str, timeout: float) -> str | None:
    """Run ``source`` in nbval's running kernel; return the error's traceback text, or None.

    Parameters
    ----------
    kernel : nbval.kernel.RunningKernel
        The notebook's kernel, as nbval left it after the cell's first run.
    source : str
        The cell's code.
    timeout : float
        Seconds to wait for the kernel to finish the cell.

    Returns
    -------
    str or None
        The traceback of the exception the second run raised, or None if it ran cleanly.
    """
    msg_id = kernel.execute_cell_input(source, allow_stdin=False)
    error = None
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = kernel.get_message(stream="iopub", timeout=max(deadline - time.monotonic(), 1.0))
        except Empty:
            kernel.interrupt()
            return f"second run did not finish within {timeout:g} s"
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            error = "\n".join(msg["content"]["traceback"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    kernel.await_reply(msg_id, timeout=timeout)
    return error


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    started = time.monotonic()
    result = yield  # nbval's run and comparison; an exception here propagates unchanged
    if not item.config.getoption("nbval_rerun_cells", False) or type(item).__name__ != "IPyNbCell":
        return result
    if item.options["skip"] or time.monotonic() - started > item.config.getoption("nbval_rerun_max_seconds"):
        return result
    error = second_run_error(item.parent.kernel, item.cell.source, item.config.option.nbval_cell_timeout)
    if error is not None:
        item.parent.timed_out = error.startswith("second run did not finish")
        item.raise_cell_error("Cell fails when run a second time (nbval's run passed)", "\n" + error)
    return result

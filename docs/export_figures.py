"""``make figures``: every figure of every notebook as SVG and PNG, for slides and handouts.

Each notebook is executed afresh (nbclient, the notebook's own kernel) with the
inline backend asked for both formats; every figure a cell shows is written to
``build/figures/<notebook>-<n>.svg`` and ``.png``, numbered in the order the
notebook shows them. The stored notebooks are not modified.

Each notebook gets a time limit (``--time-limit``, seconds): a notebook still
running then, or one whose cell raises, is reported with the cell it was at, its
kernel is shut down, and the other notebooks are still exported; the command
exits with status 1 if any notebook failed. Run from the repository root::

    python docs/export_figures.py [--time-limit SECONDS] [OUT_DIR] [NOTEBOOK ...]

NOTEBOOK is a file name in ``notebooks/`` or a path.

Why the widgets' Output mimic is replaced: nbclient plays the front end of an
``ipywidgets.Output`` (``interactive_output`` uses one) and echoes every output
the widget captures back to the kernel as a comm message on the shell socket,
the socket on which it is waiting for the cell's ``execute_reply``. When that
output is large (a figure as SVG is hundreds of kB), the reply that arrives
meanwhile does not wake nbclient's asyncio poll: it is only found when the poll
gives up, after the whole cell timeout, and the cell then counts as finished.
Notebook 01 stalled that way for the 600 s cell timeout, exporter and kernel both
idle (measured: a 600 kB SVG shown through ``interactive_output`` made its cell
last exactly the cell timeout, 8, 20 or 40 s as set, and 2 s without the echo;
pyzmq's poll finds the waiting reply only in its final check at the timeout, so
nbclient reports no error). The kernel does not need the echo for an export (nothing reads the
widget's ``outputs`` back), so :class:`QuietOutputWidget` keeps the outputs and
sends nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbclient.output_widget import OutputWidget

ROOT = Path(__file__).resolve().parents[1]
FORMATS = '%config InlineBackend.figure_formats = ["png", "svg"]'
#: Seconds a notebook may take, kernel start included, unless ``--time-limit`` says otherwise.
DEFAULT_TIME_LIMIT = 900.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ExportError(RuntimeError):
    """A notebook whose figures could not be exported: a cell failed, or it ran past its time limit."""


class QuietOutputWidget(OutputWidget):
    """nbclient's ``ipywidgets.Output`` mimic that keeps what the widget captures and sends nothing back.

    nbclient's own mimic sends the captured outputs to the kernel on the shell
    socket while waiting there for the cell's reply; see the module docstring
    for the stall that causes.
    """

    def sync_state(self) -> None:
        """Do not echo the captured outputs to the kernel (they stay in ``self.outputs``)."""


def _source_head(source: str, width: int = 60) -> str:
    """The first line of a cell's source, cut to ``width`` characters."""
    first = source.strip().splitlines()[0] if source.strip() else ""
    return first if len(first) <= width else first[: width - 3] + "..."


def execute(nb: nbformat.NotebookNode, cwd: Path, time_limit: float, name: str) -> None:
    """Execute ``nb`` in place in a kernel of its own, within ``time_limit`` seconds in all.

    ``nb`` is the stored notebook with the :data:`FORMATS` cell inserted first;
    messages number the cells as the stored notebook does (from 0, that cell not
    counted) and ``name`` names the notebook.

    Raises
    ------
    ExportError
        A cell raised, or the notebook was still running after ``time_limit``
        seconds; the message names the notebook and the cell. The kernel is shut
        down in both cases.
    """
    if not time_limit > 0:
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    at: dict[str, object] = {}

    def on_cell_execute(cell: nbformat.NotebookNode, cell_index: int) -> None:
        at.update(index=cell_index - 1, head=_source_head(cell.source))

    client = NotebookClient(
        nb,
        timeout=int(time_limit) + 1,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(cwd)}},
        on_cell_execute=on_cell_execute,
    )
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = QuietOutputWidget

    def where() -> str:
        if not at:
            return "the kernel's start"
        return f"cell {at['index']} ({at['head']!r})" if at["index"] >= 0 else "the figure-format set-up cell"

    async def run() -> bool:
        """Execute; False if the time limit came first (the execution is then cancelled, its kernel shut down)."""
        task = asyncio.ensure_future(client.async_execute())
        done, _ = await asyncio.wait({task}, timeout=time_limit)
        if done:
            task.result()  # re-raises a cell's error
            return True
        task.cancel()
        try:  # nbclient shuts the kernel down as the cancellation unwinds, and may say it died
            await task
        except (asyncio.CancelledError, Exception):  # whatever the cancelled execution raises, the time limit is the cause
            pass
        return False

    try:
        finished = asyncio.run(run())
    except CellExecutionError as err:
        raise ExportError(f"{name}: failed at {where()}: {err.ename}: {_ANSI.sub('', err.evalue)}") from err
    except Exception as err:  # a kernel that died or did not start: reported with the notebook and the cell
        raise ExportError(f"{name}: failed at {where()}: {type(err).__name__}: {err}") from err
    if not finished:
        raise ExportError(
            f"{name}: still running after its time limit of {time_limit:g} s, at {where()};"
            " its kernel was shut down (raise the limit with --time-limit, or FIGURES_TIME_LIMIT=... for make)"
        )


def export(notebook: Path, out_dir: Path, time_limit: float = DEFAULT_TIME_LIMIT) -> list[Path]:
    """Execute ``notebook`` with SVG and PNG figure output; write and return the figure files.

    Raises
    ------
    ExportError
        See :func:`execute`; no file is written for a notebook that failed.
    """
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(FORMATS))
    execute(nb, notebook.parent, time_limit, notebook.name)
    written, count = [], 0
    for cell in nb.cells[1:]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/svg+xml" not in data and "image/png" not in data:
                continue
            count += 1
            stem = out_dir / f"{notebook.stem}-{count:02d}"
            if "image/svg+xml" in data:
                svg = data["image/svg+xml"]
                path = stem.with_suffix(".svg")
                path.write_text("".join(svg) if isinstance(svg, list) else svg, encoding="utf-8")
                written.append(path)
            if "image/png" in data:
                path = stem.with_suffix(".png")
                path.write_bytes(base64.b64decode(data["image/png"]))
                written.append(path)
    return written


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, default=ROOT / "build" / "figures", help="output folder [build/figures]")
    p.add_argument("notebooks", nargs="*", help="file names in notebooks/ or paths [every notebook]")
    p.add_argument(
        "--time-limit", type=float, default=DEFAULT_TIME_LIMIT,
        help=f"seconds each notebook may take, kernel start included [{DEFAULT_TIME_LIMIT:g}]",
    )
    args = p.parse_args(argv)
    if not args.time_limit > 0:
        p.error(f"--time-limit must be a positive number of seconds, got {args.time_limit!r}")
    return args


def main(argv: Sequence[str]) -> int:
    """Export every notebook named (all by default); return the exit status (1 if any failed)."""
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    notebooks = [Path(n) if Path(n).is_file() else ROOT / "notebooks" / n for n in args.notebooks]
    notebooks = notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    failed = []
    for nb in notebooks:
        start = time.perf_counter()
        try:
            files = export(nb, args.out, args.time_limit)
        except ExportError as err:
            print(f"FAILED {err}", file=sys.stderr, flush=True)
            failed.append(nb.name)
            continue
        print(f"{nb.name}: {len(files)} files in {time.perf_counter() - start:.0f} s", flush=True)
    if failed:
        print(f"figures of {len(failed)} of {len(notebooks)} notebooks not exported: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

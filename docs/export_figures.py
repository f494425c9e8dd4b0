"""``make figures``: every figure of every notebook as SVG and PNG, for slides and handouts.

Each notebook is executed afresh (nbclient, the notebook's own kernel) with the
inline backend asked for both formats; every figure a cell shows is written to
``build/figures/<notebook>-<n>.svg`` and ``.png``, numbered in the order the
notebook shows them. The stored notebooks are not modified. Run from the
repository root::

    python docs/export_figures.py [OUT_DIR] [NOTEBOOK ...]
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FORMATS = '%config InlineBackend.figure_formats = ["png", "svg"]'


def export(notebook: Path, out_dir: Path) -> list[Path]:
    """Execute ``notebook`` with SVG and PNG figure output; write and return the figure files."""
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(FORMATS))
    NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(notebook.parent)}}).execute()
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


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else ROOT / "build" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    names = argv[1:]
    notebooks = [ROOT / "notebooks" / n for n in names] if names else sorted((ROOT / "notebooks").glob("*.ipynb"))
    for nb in notebooks:
        files = export(nb, out)
        print(f"{nb.name}: {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1:])

"""``make html``: the executed notebooks as a static site that needs no kernel to read.

Each notebook under ``notebooks/`` is converted with its stored outputs (nbconvert's
HTML exporter, the JupyterLab look) into ``build/html/``, and ``index.html`` lists
them in course order with their titles and what each one answers (the first
paragraph of the notebook). Run from the repository root::

    python docs/build_html.py [OUT_DIR]
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]


def title_and_summary(nb: nbformat.NotebookNode) -> tuple[str, str]:
    """The notebook's first heading and the paragraph that follows it (plain text)."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.strip().splitlines()
        if lines and lines[0].startswith("#"):
            title = lines[0].lstrip("#").strip()
            body = " ".join(line.strip() for line in lines[1:] if line.strip() and not line.startswith("#"))
            return title, body.split(". ")[0].rstrip(".") + "."
    return "(untitled)", ""


def build(out_dir: Path) -> list[Path]:
    """Write one HTML page per notebook and an index; return the pages written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    entries, pages = [], []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        body, _ = exporter.from_notebook_node(nb)
        page = out_dir / f"{path.stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
        title, summary = title_and_summary(nb)
        entries.append(f'<li><a href="{page.name}">{html.escape(title)}</a><br><small>{html.escape(summary)}</small></li>')
    index = (
        "<!doctype html><html><head><meta charset='utf-8'><title>sparse_opt notebooks</title></head>"
        "<body style='font-family: sans-serif; max-width: 50em; margin: 2em auto'>"
        "<h1>sparse_opt: optimizers for embedding tables, the notebooks</h1>"
        "<p>Executed notebooks with their outputs; to run them, see the README (<code>make lab</code>).</p>"
        f"<ol>{''.join(entries)}</ol></body></html>"
    )
    (out_dir / "index.html").write_text(index, encoding="utf-8")
    return pages


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "html"
    written = build(out)
    print(f"wrote {len(written)} notebooks and index.html to {out}")

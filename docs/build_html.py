"""``make html``: the executed notebooks as a static site that needs no kernel and no network to read.

Each notebook under ``notebooks/`` is converted with its stored outputs (nbconvert's
HTML exporter, the JupyterLab look, through the ``offline`` template beside this
file) into ``build/html/``, and ``index.html`` lists them in course order with
their titles and what each one is about (the first prose paragraph of the
notebook, rendered from its Markdown). Run from the repository root::

    python docs/build_html.py [OUT_DIR]

Offline: MathJax is copied from the ``jupyter-server-mathjax`` package (MathJax
2.7, the version nbconvert's template configures) into ``OUT_DIR/mathjax/`` and
every page loads it from there; no page loads a script from the network.
Widgets need a kernel, so a widget output is shown as a note saying so
(:func:`without_widgets`).

Only complete runs are published: a notebook whose code cells do not carry the
execution counts 1, 2, 3, ... in order (a cell never run, or still running when
JupyterLab autosaved in the middle of Run All, or cells run out of order) is
refused with a message naming the cell, and nothing is written.
"""

from __future__ import annotations

import html
import re
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = Path(__file__).resolve().parent / "html_template"
#: Where the pages find MathJax, relative to them, and the combined configuration they load.
MATHJAX_DIR = "mathjax"
MATHJAX_URL = f"{MATHJAX_DIR}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe,local/offline"
#: ``config/local/offline.js`` in the copy: nbconvert's settings (``$...$``, AMS numbering) and the
#: STIX-Web fonts, the only web fonts jupyter-server-mathjax ships (MathJax's default, TeX, would fall
#: back to the reader's system fonts: misplaced accents and radicals).
MATHJAX_LOCAL_CONFIG = r"""MathJax.Hub.Config({
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  displayAlign: "center",
  messageStyle: "none",
  "HTML-CSS": {availableFonts: [], imageFont: null, preferredFont: null, webFont: "STIX-Web", linebreaks: {automatic: true}}
});
MathJax.Ajax.loadComplete("[MathJax]/config/local/offline.js");
"""
#: What a paragraph that is not prose starts with: a heading, a list, a quote, a table,
#: display math or code.
NOT_PROSE = ("#", "* ", "- ", "+ ", ">", "|", "$$", "```")
#: A label paragraph: "**What you will be able to do**", "**What it assumes**: ...", "**Sections.** ...".
LABEL = re.compile(r"\*\*[^*]*[.:]\*\*|\*\*[^*]*\*\*\s*(:|$)")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "<p><em>Interactive controls: they need a running kernel."
    " Open this notebook in JupyterLab (<code>make lab</code>) to use them.</em></p>"
)


class IncompleteRunError(ValueError):
    """A notebook whose stored outputs are not one complete run from a fresh kernel."""


def mathjax_source() -> Path:
    """The folder of MathJax that the ``jupyter-server-mathjax`` package ships (``MathJax.js`` in it)."""
    try:
        static = Path(str(resources.files("jupyter_server_mathjax") / "static"))
    except ModuleNotFoundError:
        raise RuntimeError(
            "make html serves MathJax from the jupyter-server-mathjax package, which is not installed:"
            " pip install -e '.[notebooks]' (or pip install jupyter-server-mathjax)"
        ) from None
    if not (static / "MathJax.js").is_file():
        raise RuntimeError(f"jupyter-server-mathjax is installed but {static / 'MathJax.js'} is missing")
    return static


def check_complete_run(nb: nbformat.NotebookNode, name: str) -> None:
    """Refuse ``nb`` unless its non-empty code cells carry the execution counts 1, 2, 3, ... in order.

    That is what "Restart Kernel and Run All Cells" (or nbval, or nbclient) leaves.
    A cell without a count was never run or was still queued or running when the
    notebook was saved; a count out of sequence means the outputs come from
    different runs.

    Raises
    ------
    IncompleteRunError
        Naming ``name``, the first offending cell (its index and first line), and
        how many code cells are affected.
    """
    problems = []
    expected = 1
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        count = cell.get("execution_count")
        head = cell.source.strip().splitlines()[0][:60]
        if count is None:
            problems.append(f"cell {index} ({head!r}) has no execution count (never run, or still running when saved)")
        elif count != expected:
            problems.append(f"cell {index} ({head!r}) has execution count {count} where the run gives {expected}")
        expected += 1
    if problems:
        raise IncompleteRunError(
            f"{name}: its stored run is incomplete, not published: {problems[0]}"
            f" ({len(problems)} of {expected - 1} code cells affected). Run it top to bottom"
            " (Kernel > Restart Kernel and Run All Cells), wait for the last cell, save, and build again."
        )


def _paragraphs(source: str) -> list[str]:
    """The blank-line-separated blocks of a Markdown source, each stripped."""
    blocks, current = [], []
    for line in source.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current).strip())
            current = []
    if current:
        blocks.append("\n".join(current).strip())
    return blocks


def title_and_summary(nb: nbformat.NotebookNode) -> tuple[str, str]:
    """The notebook's first heading and the first prose paragraph of its cell, both as Markdown.

    A paragraph is prose unless it starts like a heading, a list, a quote, a
    table, display math or code (:data:`NOT_PROSE`) or is a bold label
    (:data:`LABEL`); if the cell has none, its first paragraph after the heading
    is taken.
    """
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        blocks = _paragraphs(cell.source)
        if blocks and blocks[0].startswith("#"):
            heading, *rest = blocks[0].splitlines()
            title = heading.lstrip("#").strip()
            after = ["\n".join(rest).strip()] if rest else []
            after += blocks[1:]
            after = [b for b in after if b]
            prose = [b for b in after if not b.startswith(NOT_PROSE) and not LABEL.match(b)]
            return title, (prose or after or [""])[0]
    return "(untitled)", ""


def without_widgets(nb: nbformat.NotebookNode) -> None:
    """Replace each widget output of ``nb`` by :data:`WIDGET_NOTE` and drop the stored widget state.

    A page has no kernel, and these widgets call Python on every change, so a
    rendered slider would move nothing; the text fallback (``IntSlider(...)``)
    would say nothing.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                output["data"] = {"text/html": WIDGET_NOTE}
                output["metadata"] = {}


def markdown_inline(text: str) -> str:
    """``text`` (one line of Markdown) as HTML without the enclosing paragraph."""
    rendered = markdown2html_mistune(text).strip()
    if rendered.startswith("<p>") and rendered.endswith("</p>"):
        rendered = rendered[3:-4]
    return rendered


def index_page(entries: Sequence[tuple[str, str, str]]) -> str:
    """The site's index: ``entries`` are (page file name, title, summary), titles and summaries in Markdown."""
    items = "".join(
        f'<li><a href="{html.escape(page)}">{markdown_inline(title)}</a>'
        f"<div class='summary'>{markdown2html_mistune(summary) if summary else ''}</div></li>"
        for page, title, summary in entries
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>sparse_opt notebooks</title>"
        "<style>body { font-family: sans-serif; max-width: 50em; margin: 2em auto }"
        " li { margin-bottom: 1em } .summary p { margin: 0.3em 0; font-size: 0.9em }</style>"
        f"<script src='{MATHJAX_URL}'></script></head>"
        "<body><h1>sparse_opt: optimizers for embedding tables, the notebooks</h1>"
        "<p>Executed notebooks with their outputs; to run them, see the README (<code>make lab</code>).</p>"
        f"<ol>{items}</ol></body></html>"
    )


def build(out_dir: Path, notebooks: Sequence[Path] | None = None) -> list[Path]:
    """Write one HTML page per notebook, the index and MathJax into ``out_dir``; return the pages written.

    ``notebooks`` defaults to every ``notebooks/*.ipynb`` in name order. Every
    notebook is read and checked (:func:`check_complete_run`) before anything is
    written.

    Raises
    ------
    IncompleteRunError
        If any notebook's stored run is incomplete (all of them named).
    """
    paths = sorted((ROOT / "notebooks").glob("*.ipynb")) if notebooks is None else list(notebooks)
    read, refused = [], []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        try:
            check_complete_run(nb, path.name)
        except IncompleteRunError as err:
            refused.append(str(err))
        read.append((path, nb))
    if refused:
        raise IncompleteRunError("\n".join(refused))
    mathjax = mathjax_source()

    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(mathjax, out_dir / MATHJAX_DIR, dirs_exist_ok=True)
    (out_dir / MATHJAX_DIR / "config" / "local").mkdir(exist_ok=True)
    (out_dir / MATHJAX_DIR / "config" / "local" / "offline.js").write_text(MATHJAX_LOCAL_CONFIG, encoding="utf-8")
    exporter = HTMLExporter(
        template_name="offline", extra_template_basedirs=[str(TEMPLATES)], mathjax_url=MATHJAX_URL
    )
    entries, pages = [], []
    for path, nb in read:
        without_widgets(nb)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        page = out_dir / f"{path.stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
        entries.append((page.name, *title_and_summary(nb)))
    (out_dir / "index.html").write_text(index_page(entries), encoding="utf-8")
    return pages


def main(argv: Sequence[str]) -> int:
    """Build the site into ``argv[0]`` (default ``build/html``); return the exit status."""
    out = Path(argv[0]) if argv else ROOT / "build" / "html"
    try:
        written = build(out)
    except IncompleteRunError as err:
        print(f"make html: nothing written.\n{err}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} notebooks, index.html and MathJax to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

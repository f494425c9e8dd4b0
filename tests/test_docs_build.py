"""``make html``, ``make figures`` and ``make bench``: the commands around the course, on tiny synthetic notebooks.

- figures: a large figure inside an ``ipywidgets.Output`` (what ``interactive_output``
  shows) used to stall the export for nbclient's whole cell timeout (600 s), the
  exporter and the kernel idle; a notebook past its time limit, or with a failing
  cell, is reported with the cell and the other notebooks are still exported.
- html: no page loads a script from the network (MathJax is copied from an
  installed package), index summaries are rendered Markdown, and a notebook
  whose stored run is incomplete is refused before anything is written.
- bench and figures take their Python, options and time limit from make variables.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("nbconvert")

ROOT = Path(__file__).resolve().parents[1]
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def load(path: Path) -> ModuleType:
    """A script under docs/ imported as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    return load(ROOT / "docs" / "export_figures.py")


@pytest.fixture(scope="module")
def site() -> ModuleType:
    return load(ROOT / "docs" / "build_html.py")


def notebook(path: Path, cells: list, counts: list | None = None, metadata: dict | None = None) -> Path:
    """Write a notebook of ``cells`` (a str is a code cell, ("md", text) a Markdown cell) to ``path``.

    ``counts`` gives the code cells' execution counts (default 1, 2, 3, ...).
    """
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = KERNELSPEC
    nb.metadata.update(metadata or {})
    code = iter(counts) if counts is not None else iter(range(1, len(cells) + 1))
    for c in cells:
        if isinstance(c, tuple):
            nb.cells.append(nbformat.v4.new_markdown_cell(c[1]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c, execution_count=next(code)))
    nbformat.write(nb, path)
    return path


def run_guarded(argv: list[str], timeout: float, logs: Path) -> subprocess.CompletedProcess:
    """Run ``argv`` in its own process group, output to files in ``logs`` (a kernel left behind holds no pipe open).

    A run still going after ``timeout`` seconds is killed, group and kernels with it, and the test fails.
    """
    with open(logs / "run.out", "w+") as out, open(logs / "run.err", "w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, start_new_session=True, cwd=ROOT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{argv[1:]} still running after {timeout} s: it stalled")
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())


# ---------------------------------------------------------------------------------------------- figures

#: A figure of about 600 kB as SVG, the size of notebook 01's explorer figure, shown in a widget's Output.
BIG_SVG_IN_OUTPUT_WIDGET = """\
import ipywidgets as widgets
from IPython.display import SVG, display
svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><!--' + 'x' * 600_000 + '--></svg>'
slider = widgets.IntSlider()
display(slider, widgets.interactive_output(lambda x: display(SVG(svg)), {"x": slider}))"""

FIGURE = """\
%matplotlib inline
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([0, 1], [1, 0])
plt.show()"""


def test_the_output_widget_mimic_sends_nothing_to_the_kernel(figures):
    """nbclient's mimic echoes each captured output on the shell socket, where it waits for the cell's reply."""

    class Channel:
        sent: list = []

        def send(self, msg):
            self.sent.append(msg)

    class Client:
        shell_channel = Channel()
        session = None

    state = {"outputs": [], "msg_id": ""}
    widget = figures.QuietOutputWidget("comm-1", state, Client(), executor=None)
    msg = {
        "msg_type": "display_data",
        "header": {"msg_type": "display_data"},
        "parent_header": {},
        "content": {"data": {"text/plain": "x"}, "metadata": {}},
    }
    widget.output([], msg, None, 0)
    assert Channel.sent == [] and [o["data"]["text/plain"] for o in widget.outputs] == ["x"]


def test_a_large_figure_in_an_output_widget_does_not_stall_the_export(tmp_path, figures):
    """It used to wait the whole 600 s cell timeout (notebook 01's hang); the limit here is far below that."""
    nb = notebook(tmp_path / "widget.ipynb", [BIG_SVG_IN_OUTPUT_WIDGET, FIGURE])
    out = tmp_path / "figures"
    run = run_guarded([sys.executable, "docs/export_figures.py", "--time-limit", "90", str(out), str(nb)], 150, tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["widget-01.png", "widget-01.svg"]
    assert "widget.ipynb: 2 files" in run.stdout


def test_a_notebook_past_its_limit_or_failing_is_reported_and_the_others_exported(tmp_path):
    sleepy = notebook(tmp_path / "sleepy.ipynb", ["x = 1", "import time\ntime.sleep(600)"])
    broken = notebook(tmp_path / "broken.ipynb", ["x = 1", "1 / 0"])
    good = notebook(tmp_path / "good.ipynb", [FIGURE])
    out = tmp_path / "figures"
    argv = [sys.executable, "docs/export_figures.py", "--time-limit", "20", str(out), str(sleepy), str(broken), str(good)]
    run = run_guarded(argv, 150, tmp_path)  # the sleeping kernel must be shut down, not left holding the run
    assert run.returncode == 1
    assert "FAILED sleepy.ipynb: still running after its time limit of 20 s, at cell 1 ('import time')" in run.stderr
    assert "FAILED broken.ipynb: failed at cell 1 ('1 / 0'): ZeroDivisionError: division by zero" in run.stderr
    assert "2 of 3 notebooks not exported: sleepy.ipynb, broken.ipynb" in run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["good-01.png", "good-01.svg"]


def test_figures_time_limit_must_be_positive(figures):
    with pytest.raises(SystemExit):
        figures.parse_args(["--time-limit", "0"])


# ------------------------------------------------------------------------------------------------- html


def test_an_incomplete_run_is_refused_and_nothing_written(tmp_path, site):
    """A lab's autosave in the middle of Run All: the cells after the running one have no count."""
    good = notebook(tmp_path / "a_good.ipynb", [("md", "# A\n\nFine."), "x = 1", "", "y = 2"], counts=[1, None, 2])
    mid_run = notebook(tmp_path / "b_mid_run.ipynb", [("md", "# B"), "x = 1", "y = 2", "z = 3"], counts=[1, 2, None])
    out = tmp_path / "site"
    with pytest.raises(site.IncompleteRunError) as err:
        site.build(out, [good, mid_run])
    message = str(err.value)
    assert "b_mid_run.ipynb: its stored run is incomplete, not published: cell 3 ('z = 3') has no execution count" in message
    assert "(1 of 3 code cells affected)" in message and "a_good" not in message
    assert not out.exists()


@pytest.mark.parametrize(
    "counts, first",
    [
        ([1, 3, 2], "cell 2 ('y = 2') has execution count 3 where the run gives 2"),  # run out of order
        ([4, 5, 6], "cell 1 ('x = 1') has execution count 4 where the run gives 1"),  # not from a fresh kernel
        ([None, None, None], "cell 1 ('x = 1') has no execution count"),  # never run
    ],
)
def test_execution_counts_must_be_one_run_in_order(tmp_path, site, counts, first):
    path = notebook(tmp_path / "n.ipynb", [("md", "# N"), "x = 1", "y = 2", "z = 3"], counts=counts)
    with pytest.raises(site.IncompleteRunError, match=re.escape(first)):
        site.check_complete_run(nbformat.read(path, as_version=4), "n.ipynb")
    site.check_complete_run(nbformat.read(notebook(path, [("md", "# N"), "x = 1", "y = 2", "z = 3"]), 4), "n.ipynb")


def test_the_summary_is_the_first_prose_paragraph(site):
    """Labels ("**What it assumes**: ...", "**Sections.** ...") and lists are skipped; bold-led prose is not."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# 06 · EGDD\n\n**What you will be able to do**\n\n* item\n\n**What it assumes**: momentum.\n\n"
        "**Sections.** 1 A · 2 B\n\n```\ncode\n```\n\n**EGDD** (a rule) tunes its own step sizes.\n\nLater."
    )])
    assert site.title_and_summary(nb) == ("06 · EGDD", "**EGDD** (a rule) tunes its own step sizes.")


def test_index_summaries_are_rendered_markdown(site):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# 01 · Sparse gradients in `sparse_opt`\n\n**What you will be able to do**\n\n* a list item\n\n"
        "An embedding lookup `out = table[ids]` gives a **sparse** gradient, with $x_i^2$ in it.\n\nMore."
    )])
    title, summary = site.title_and_summary(nb)
    assert summary.startswith("An embedding lookup")
    index = site.index_page([("01.html", title, summary)])
    assert '<a href="01.html">01 · Sparse gradients in <code>sparse_opt</code></a>' in index
    assert "<code>out = table[ids]</code> gives a <strong>sparse</strong> gradient, with $x_i^2$ in it." in index
    assert "**" not in index and "`" not in index and "* a list item" not in index


def script_sources(page: str) -> list[str]:
    return re.findall(r"<script[^>]*\bsrc\s*=\s*['\"]([^'\"]*)", page) + re.findall(r"import\(\s*['\"]([^'\"]*)", page)


def test_pages_load_mathjax_locally_and_nothing_from_the_network(tmp_path, site):
    widget_state = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2, "version_minor": 0}}
    path = notebook(tmp_path / "w.ipynb", [("md", "# W\n\nMath: $a^2 + b^2$."), "1"], metadata={"widgets": widget_state})
    nb = nbformat.read(path, as_version=4)
    view = {"version_major": 2, "version_minor": 0, "model_id": "abc"}
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", {"application/vnd.jupyter.widget-view+json": view, "text/plain": "IntSlider()"})]
    nbformat.write(nb, path)
    out = tmp_path / "site"
    site.build(out, [path])
    page = (out / "w.html").read_text()
    sources = script_sources(page) + script_sources((out / "index.html").read_text())
    assert sources and all(not re.match(r"(https?:)?//", s) for s in sources), sources
    assert sources.count("mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe,local/offline") == 2
    assert (out / "mathjax" / "MathJax.js").is_file()
    assert (out / "mathjax" / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()
    assert 'webFont: "STIX-Web"' in (out / "mathjax" / "config" / "local" / "offline.js").read_text()
    assert (out / "mathjax" / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").is_dir()
    assert "unpkg" not in page and "cdnjs" not in page
    assert "Interactive controls: they need a running kernel" in page and "widget-state+json" not in page


def test_the_real_site_loads_no_script_from_the_network(tmp_path, site):
    """One real notebook with widgets and math (building all nine takes about a minute)."""
    out = tmp_path / "site"
    site.build(out, [ROOT / "notebooks" / "01_sparse_gradients.ipynb"])
    for page in out.glob("*.html"):
        sources = script_sources(page.read_text())
        assert sources and not [s for s in sources if re.match(r"(https?:)?//", s)], (page.name, sources)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_math_is_typeset_offline_in_chromium(tmp_path, site):
    """MathJax from the copy beside the page (file://, no network) typesets the TeX, in its STIX web fonts.

    Plain parentheses and brackets stay text (``\\(`` and ``\\[`` are the delimiters, not ``(`` and ``[``).
    """
    text = "# M\n\nInline $a^2 + b^2 = c^2$ and (plain words) in [brackets].\n\n$$\\sum_i \\hat{x}_i$$"
    path = notebook(tmp_path / "m.ipynb", [("md", text)], counts=[])
    out = tmp_path / "site"
    site.build(out, [path])
    run = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=30000",
         "--dump-dom", (out / "m.html").as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    dom = run.stdout
    assert "</html>" in dom, run.stderr[-2000:]
    assert dom.count('class="MathJax"') == 2 and dom.count('class="MathJax_Display"') == 1, "math not typeset"
    assert "STIXMathJax" in dom, "MathJax did not use its STIX web fonts"
    assert "(plain words) in [brackets]." in dom and "Math Processing Error" not in dom


# ------------------------------------------------------------------------------------------------- make


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_bench_and_figures_take_their_python_options_and_limit():
    def dry(*args: str) -> str:
        return subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    # -W: as if pyproject.toml had changed, so a bench that needed .venv would install it first
    line = dry("bench", "-W", "pyproject.toml", "BENCH_PYTHON=/opt/torch/bin/python", "BENCH_ARGS=--quick --no-dense")
    assert "/opt/torch/bin/python benchmarks/bench_sparse_step.py --quick --no-dense" in line
    assert "pip install" not in line  # another Python needs no .venv
    assert ".venv/bin/python benchmarks/bench_sparse_step.py" in dry("bench")
    assert "docs/export_figures.py --time-limit 5 build/figures" in dry("figures", "FIGURES_TIME_LIMIT=5")


def test_unjudged_goal_lines_say_which_table_the_goals_need_and_which_was_timed(monkeypatch):
    """They said '(not judged: not the goals' table)': now both tables, and why the ratios differ."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_sparse_step as b

    from sparse_opt.demos.contenders import DENSE_EQUIVALENT_ADAM, DORMANCY_ADAM
    from sparse_opt.demos.timing import StepTiming
    from sparse_opt.demos.workload import Workload

    quick = Workload(rows=100_000, cols=64, batch=1024, seed=0)
    ms = {DENSE_EQUIVALENT_ADAM: 2.0, DORMANCY_ADAM: 1.0, "torch Adam (dense)": 500.0}
    text = b.dense_equivalent_goals([StepTiming(name, quick, 1.0, (m / 1e3,)) for name, m in ms.items()])
    lines = text.splitlines()
    assert all(line.endswith("not judged: this run's table is not the goal's (see below)") for line in lines[1:3])
    assert "the goals are set on 1,000,000 x 64 float32, 4096 Zipf(1) ids a step" in text
    assert "this run timed 100,000 x 64 float32, 1024 Zipf(1) ids a step" in text
    assert "not the goals' table" not in text
    assert b.on_goal_table(b.GOAL_WORKLOAD) and b.on_goal_table(Workload(1_000_000, 64, 4096, seed=9))
    assert not b.on_goal_table(quick)

"""Every notebook, run for real in JupyterLab in headless Chromium, as a reader would.

For each notebook: open it in Lab, clear its stored outputs, Run > Run All Cells, wait
until the kernel is idle and every code cell has an execution count, check that no
cell shows a traceback or a broken widget, then move the first slider of every cell
that has sliders with the keyboard and check that a plot in the notebook is redrawn.
A screenshot of each notebook lands in ``artifacts/e2e/<notebook>.png``.

Run with ``python -m pytest tests/e2e -m e2e -q`` (``make test-e2e``).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from .conftest import NOTEBOOKS_ENV, REPO_ROOT, LabServer, notebooks_dir

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

pytestmark = pytest.mark.e2e

ARTIFACTS_DIR = REPO_ROOT / "artifacts" / "e2e"
KERNEL_READY_TIMEOUT_S = 90.0
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"  # the MIME type of a displayed widget
RUN_ALL_TIMEOUT_S = 300.0  # Run All of one notebook; 04, the course experiment, needs about a minute on a loaded 2-core machine
RUN_ALL_START_TIMEOUT_S = 15.0
REDRAW_TIMEOUT_S = 30.0
VIEWPORT = {"width": 1440, "height": 1200}
UI_TIMEOUT_MS = 30_000
POLL_S = 0.25
EXECUTED_PROMPT = re.compile(r"^\[\d+\]:$")

# One look at the open notebook, taken in the page. The toolbar's execution indicator
# already says "idle" while the status bar still says "No Kernel | Initializing", so a
# kernel counts as idle only when both agree. Error outputs are rendered in
# JupyterLab 4.6 as stderr text (data-mime-type="application/vnd.jupyter.stderr",
# the same as warnings), so a traceback is told apart by its text.
SNAPSHOT_JS = """
(panel) => {
  const text = (node) => (node ? node.textContent : "");
  const status = panel.querySelector(".jp-Notebook-ExecutionIndicator");
  const codeCells = Array.from(panel.querySelectorAll(".jp-Notebook .jp-CodeCell"));
  const problems = [];
  codeCells.forEach((cell, index) => {
    const outputs = cell.querySelectorAll(".jp-OutputArea-output");
    for (const output of outputs) {
      const body = text(output).trim();
      const isTraceback =
        output.getAttribute("data-mime-type") === "application/vnd.jupyter.stderr" &&
        body.includes("Traceback");
      if (isTraceback || body.startsWith("Error displaying widget")) {
        problems.push(`code cell ${index + 1}: ${body.slice(0, 1500)}`);
      }
    }
    for (const broken of cell.querySelectorAll(".jupyter-widgets-error-widget")) {
      const shown = text(broken.parentElement).slice(0, 500);
      problems.push(`code cell ${index + 1}: widget failed to render: ${shown}`);
    }
  });
  const kernel = Array.from(document.querySelectorAll("#jp-main-statusbar .jp-StatusBar-TextItem"))
    .map((item) => item.textContent.trim())
    .find((label) => label.includes(" | "));
  return {
    status: status ? status.getAttribute("data-status") || "" : "",
    kernel: kernel || "",
    prompts: codeCells.map((cell) => text(cell.querySelector(".jp-InputArea-prompt")).trim()),
    empty: codeCells.map((cell) => text(cell.querySelector(".cm-content")).trim() === ""),
    loadingWidgets: Array.from(panel.querySelectorAll(".jp-OutputArea-output"))
      .filter((output) => text(output).trim() === "Loading widget...").length,
    problems,
  };
}
"""
IMAGES_JS = "(panel) => Array.from(panel.querySelectorAll('.jp-Notebook img')).map((img) => img.src)"


def _notebook_params() -> list[Any]:
    """One parameter per notebook, or a single skipped one when there are none."""
    folder = notebooks_dir()
    notebooks = sorted(folder.glob("*.ipynb"))
    if notebooks:
        return [pytest.param(path, id=path.stem) for path in notebooks]
    reason = f"no notebooks in {folder} (set {NOTEBOOKS_ENV} to test another folder)"
    return [pytest.param(None, id="no-notebooks", marks=pytest.mark.skip(reason=reason))]


@dataclass
class LiveNotebook:
    """A notebook opened in the test JupyterLab, with what the browser console reported."""

    name: str
    page: Page
    console_errors: list[str] = field(default_factory=list)

    @property
    def panel(self) -> Locator:
        """The notebook's panel (the only one open: each page resets the workspace)."""
        return self.page.locator(".jp-NotebookPanel")

    def snapshot(self) -> dict[str, Any]:
        """Kernel status, prompts, empty cells and visible problems of the notebook."""
        return self.panel.evaluate(SNAPSHOT_JS)

    def images(self) -> list[str]:
        """A short digest of every image in the notebook, cell outputs and widget outputs alike."""
        sources = self.panel.evaluate(IMAGES_JS)
        return [hashlib.sha256(src.encode()).hexdigest()[:12] for src in sources]

    def describe(self, snapshot: dict[str, Any] | None = None) -> str:
        """What a failure message should show about the page's state."""
        state = snapshot or self.snapshot()
        dialogs = self.page.locator(".jp-Dialog").all_inner_texts()
        lines = [
            f"notebook {self.name}: kernel {state['kernel']!r} ({state['status']!r}),"
            f" prompts {state['prompts']}",
            *(f"problem: {problem}" for problem in state["problems"]),
            *(f"open dialog: {dialog!r}" for dialog in dialogs),
            *(f"browser console: {message}" for message in self.console_errors[-10:]),
        ]
        return "\n".join(lines)

    def click_menu(self, menu: str, item: str) -> None:
        """Choose ``menu > item`` in Lab's menu bar, as a person would."""
        self.page.get_by_role("menuitem", name=menu, exact=True).click()
        self.page.get_by_role("menuitem", name=item, exact=True).click()

    def wait_for(
        self, condition: Callable[[dict[str, Any]], bool], timeout_s: float, what: str
    ) -> None:
        """Poll the notebook's snapshot until ``condition`` holds; fail after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not condition(state := self.snapshot()):
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {timeout_s:.0f} s\n{self.describe(state)}")
            time.sleep(POLL_S)


def _kernel_idle(state: dict[str, Any]) -> bool:
    """Whether the notebook's kernel has started and is idle."""
    return (
        state["status"] == "idle"
        and state["kernel"].endswith(" | Idle")
        and not state["kernel"].startswith("No Kernel")
    )


def _pending(state: dict[str, Any]) -> list[int]:
    """1-based indices of the non-empty code cells without an execution count."""
    return [
        index + 1
        for index, (prompt, empty) in enumerate(zip(state["prompts"], state["empty"], strict=True))
        if not empty and not EXECUTED_PROMPT.match(prompt)
    ]


def _run_all_cells(notebook: LiveNotebook) -> None:
    """Clear the stored outputs, Run > Run All Cells, and wait until every code cell ran."""
    notebook.click_menu("Edit", "Clear Outputs of All Cells")
    notebook.wait_for(
        lambda state: not any(EXECUTED_PROMPT.match(prompt) for prompt in state["prompts"]),
        UI_TIMEOUT_MS / 1000,
        "Edit > Clear Outputs of All Cells left execution counts",
    )
    notebook.click_menu("Run", "Run All Cells")
    clicked = time.monotonic()
    started = False
    while True:
        state = notebook.snapshot()
        pending = _pending(state)
        running = "[*]:" in state["prompts"]
        started = started or running or any(EXECUTED_PROMPT.match(prompt) for prompt in state["prompts"])
        settled = started and not running and _kernel_idle(state)
        if settled and state["problems"]:
            pytest.fail(f"Run All Cells showed an error\n{notebook.describe(state)}")
        if settled and not pending:
            return
        elapsed = time.monotonic() - clicked
        if not started and elapsed > RUN_ALL_START_TIMEOUT_S:
            pytest.fail(
                f"Run All Cells started no cell within {RUN_ALL_START_TIMEOUT_S:.0f} s\n"
                + notebook.describe(state)
            )
        if elapsed > RUN_ALL_TIMEOUT_S:
            pytest.fail(
                f"cells still pending after {RUN_ALL_TIMEOUT_S:.0f} s: {pending}\n"
                + notebook.describe(state)
            )
        time.sleep(POLL_S)


def _move_slider(notebook: LiveNotebook, handle: Locator) -> tuple[str, str]:
    """Move a noUiSlider handle by one step with the keyboard; return (before, after) values.

    The value is read from ``aria-valuetext``: noUiSlider rounds ``aria-valuenow`` to one
    decimal, so a 0.01 step would look like no move at all.
    """
    handle.scroll_into_view_if_needed()
    before = handle.get_attribute("aria-valuetext") or ""
    handle.focus()
    for key in ("ArrowRight", "ArrowLeft"):  # at the maximum, step down instead
        notebook.page.keyboard.press(key)
        after = handle.get_attribute("aria-valuetext") or ""
        if after != before:
            return before, after
    pytest.fail(f"the slider did not move with the arrow keys (value {before})\n{notebook.describe()}")


def _wait_for_redraw(notebook: LiveNotebook, images_before: list[str], what: str) -> None:
    """Wait until the kernel is idle and the notebook shows at least as many, changed, images."""
    deadline = time.monotonic() + REDRAW_TIMEOUT_S
    settled = 0
    while settled < 2:  # two polls in a row: not a transient clear_output
        state = notebook.snapshot()
        images = notebook.images()
        redrawn = images != images_before and len(images) >= len(images_before)
        settled = settled + 1 if redrawn and _kernel_idle(state) else 0
        if state["problems"]:
            pytest.fail(f"{what} raised an error\n{notebook.describe(state)}")
        if time.monotonic() > deadline:
            pytest.fail(
                f"{what}: no plot was redrawn within {REDRAW_TIMEOUT_S:.0f} s"
                f" ({len(images_before)} images before, {len(images)} after)\n{notebook.describe(state)}"
            )
        time.sleep(POLL_S)


def _exercise_sliders(notebook: LiveNotebook) -> None:
    """Move the first slider of every code cell that has sliders; each move must redraw a plot."""
    cells = notebook.panel.locator(".jp-Notebook .jp-CodeCell")
    slider_cells = [
        (index + 1, cell)
        for index, cell in enumerate(cells.all())
        if cell.locator(".widget-slider .noUi-handle").count()
    ]
    if not slider_cells:
        state = notebook.snapshot()
        pytest.fail(
            f"no rendered slider found ({state['loadingWidgets']} outputs still say 'Loading widget...')"
            f"\n{notebook.describe(state)}"
        )
    for number, cell in slider_cells:
        handle = cell.locator(".widget-slider .noUi-handle").first
        images_before = notebook.images()
        before, after = _move_slider(notebook, handle)
        _wait_for_redraw(notebook, images_before, f"code cell {number}: slider {before} -> {after}")


@pytest.fixture
def live_notebook(notebook: Path, lab_server: LabServer, browser: Browser) -> Iterator[LiveNotebook]:
    """The notebook opened in a fresh page of the shared Lab.

    Afterwards, pass or fail: a screenshot, then the page is closed and the kernel shut down.
    """
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    opened = LiveNotebook(name=notebook.name, page=page)
    page.on(
        "console",
        lambda message: opened.console_errors.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: opened.console_errors.append(str(error)))
    try:
        page.goto(f"{lab_server.base_url}/lab/tree/{quote(notebook.name)}?reset")
        opened.panel.wait_for()
        yield opened
    finally:
        ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS_DIR / f"{notebook.stem}.png"), full_page=True)
        context.close()
        lab_server.shutdown_sessions()


def _stores_widgets(name: str) -> bool:
    """Whether the stored notebook displays a widget (the appendix 03a, for one, is reading with no controls)."""
    cells = json.loads((notebooks_dir() / name).read_text(encoding="utf-8"))["cells"]
    return any(WIDGET_VIEW in output.get("data", {}) for cell in cells for output in cell.get("outputs", []))


@pytest.mark.parametrize("notebook", _notebook_params())
def test_notebook_runs_and_sliders_redraw(live_notebook: LiveNotebook) -> None:
    """Run All Cells leaves no error, every widget renders, and each slider redraws a plot (where there are any)."""
    live_notebook.wait_for(_kernel_idle, KERNEL_READY_TIMEOUT_S, "kernel started and idle")
    _run_all_cells(live_notebook)
    if _stores_widgets(live_notebook.name):
        _exercise_sliders(live_notebook)
    final = live_notebook.snapshot()
    assert not final["problems"], live_notebook.describe(final)
    assert final["loadingWidgets"] == 0, f"widgets never rendered\n{live_notebook.describe(final)}"

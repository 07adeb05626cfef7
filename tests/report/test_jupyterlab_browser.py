"""JupyterLab, used as a person does, in headless Chromium with the network cut (issue 17, acceptance 1).

A real ``jupyter lab`` server (tmp root, tmp Jupyter folders, a copy of the smoke run as its only
results) and Debian's chromium driven through the menu bar, the keyboard and the rendered widgets:

* notebook 02, opened by hand (no ``run_dir``), runs every cell without a traceback; its explorer
  shows 7 controls, its text and a chart, and follows a strategy change and budget/window edits;
* negative control: once the explorer's callback is disconnected (through a cell typed into the
  page), the same checking helper reports "output did not change";
* notebook 01 with the smoke profile's parameters injected (papermill, not executed) runs every
  cell and draws figure 2;
* no console error, and no request left 127.0.0.1.

Outside CI a machine without chromium or playwright skips; under CI it fails
(as tests/report/test_report_browser.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from compaction_lab.core import paths
from tests.lab_browser import (
    EXPLORER_CONTROLS,
    add_cell_and_run,
    cell_figure,
    change_and_observe,
    notebook_state,
    open_lab,
    open_notebook,
    run_all_and_wait,
    running_lab,
    select_option,
    set_slider,
    show_notebook,
    slider_value,
    wait_for_explorer,
    wait_until_executed,
)

pytestmark = pytest.mark.slow

NB01 = "01_context_composition.ipynb"
NB02 = "02_projection_anatomy.ipynb"
NB03 = "03_closed_book_exam.ipynb"
#: The smoke run's executed notebook 03, copied into the server root under this name.
EXECUTED03 = "run-03_closed_book_exam.ipynb"

#: The explorer settings the checks walk through; `expected` recomputes each in Python.
#: truncate-oldest keeps every record at the default W = 128000; with O lowered to 4000 a window of
#: 8000 (just above O) cuts the smoke chains, so the tokens change, not only the capacity.
STRATEGY = "truncate-oldest"
OUTPUT_CEILING = 4_000
WINDOW = 8_000
#: The negative control's window: with the callback connected the text would change again.
WINDOW_AFTER_DISCONNECT = 16_000

#: Typed into a new cell: stop every explorer control from calling back (what the issue's control removes).
#: ``type(e) is`` rather than ``isinstance``: gc also holds dead weak proxies, and isinstance on one raises
#: ReferenceError.
DISCONNECT = (
    "import gc; from compaction_lab.report.explorer import ProjectionExplorer; "
    "n = [c.unobserve(e._on_change, names='value') for e in gc.get_objects() "
    "if type(e) is ProjectionExplorer for c in e._controls.values()]; print('disconnected', len(n))"
)
#: Typed into a new cell after the negative change: the window value the kernel holds. The kernel
#: handles widget messages and cells in order, so once this prints, a connected callback would have run.
#: It asks the slider itself: once disconnected, nothing holds the explorer any more and it is collected.
SHOW_WINDOW = (
    "import ipywidgets; print('kernel window', [w.value for w in gc.get_objects() "
    "if type(w) is ipywidgets.IntSlider and w.description == 'window W'])"
)

#: Seconds the negative control waits for a change that must not come (after the kernel has
#: provably seen the new value, so this is only the page's redraw time).
NEGATIVE_WAIT_S = 5.0

#: Console errors JupyterLab logs that say nothing about the notebooks: none are known so far.
BENIGN_CONSOLE_ERRORS: tuple[str, ...] = ()

_SUMMARY = re.compile(r"^(?P<strategy>[\w-]+): (?P<tokens>[\d,]+) tokens in (?P<segments>\d+) segments \(capacity ")


def _smoke_parameters(notebook: Path) -> dict:
    """The smoke profile's parameters that `notebook` declares (its parameters cell)."""
    import papermill as pm

    profile = yaml.safe_load((paths.params_dir() / "smoke.yaml").read_text(encoding="utf-8"))
    declared = pm.inspect_notebook(str(notebook))
    return {k: v for k, v in profile["parameters"].items() if k in declared}


@pytest.fixture(scope="module")
def folders(smoke_run, tmp_path_factory) -> dict[str, Path]:
    """A results folder holding a copy of the smoke run, and a server root with notebooks 02 and 01."""
    import papermill as pm

    base = tmp_path_factory.mktemp("jupyterlab")
    results, root = base / "results", base / "root"
    root.mkdir()
    # A copy: notebook 02 opened by hand copies from "the latest complete run"; smoke_run stays untouched.
    shutil.copytree(smoke_run.run_dir, results / smoke_run.run_dir.name)
    shutil.copy2(paths.NOTEBOOKS_DIR / NB02, root / NB02)
    # An executed notebook of a run folder, as `make lab` users open one: its outputs, its kernel.
    shutil.copy2(smoke_run.run_dir / NB03, root / EXECUTED03)
    src01 = paths.NOTEBOOKS_DIR / NB01
    params = {**_smoke_parameters(src01), "run_dir": str(results / "lab-01")}
    pm.execute_notebook(str(src01), str(root / NB01), parameters=params, prepare_only=True, progress_bar=False)
    return {"base": base, "results": results, "root": root, "run": results / smoke_run.run_dir.name}


@pytest.fixture(scope="module")
def lab(chromium, folders):
    """One JupyterLab server and one Chromium page on it, for the whole module."""
    env = {"COMPACTION_LAB_RESULTS": str(folders["results"])}
    with running_lab(folders["base"] / "jupyter", folders["root"], env) as server, open_lab(server) as page:
        yield page


@pytest.fixture(scope="module")
def nb02(lab):
    """Notebook 02 opened by its URL and run through Run -> Run All Cells."""
    open_notebook(lab, NB02)
    return run_all_and_wait(lab, NB02)


@pytest.fixture(scope="module")
def expected(folders):
    """``expected(**settings)``: the summary numbers `ProjectionExplorer.update` gives in Python."""
    from compaction_lab import summarize
    from compaction_lab.ingest import sources
    from compaction_lab.report.explorer import ProjectionExplorer
    from compaction_lab.strategies import CompactionContext

    # As notebook 02 builds it with its defaults (W, O and the extractive stand-in summarizer).
    sessions = sources.load_saved(folders["run"])
    ctx = CompactionContext(
        window=128_000, output_ceiling=32_000, summarizer=summarize.get_summarizer("extractive", {})
    )
    ex = ProjectionExplorer(sessions, ctx)
    defaults = {"session_id": sessions[0].id, "window": 128_000, "output_ceiling": 32_000}
    defaults |= {"tail_tokens": 8_192, "history_target": 32_768, "evidence_tokens": 2_048}

    def _expected(**settings) -> tuple[int, int]:
        table = ex.update(**{**defaults, **settings})
        return ex.last.tokens, len(table)

    return _expected


@pytest.fixture(scope="module")
def explorer(lab, nb02):
    """The explorer's first state, three changes with its callback and the negative control."""
    if not nb02.finished:
        pytest.fail("notebook 02 did not finish, so the explorer cannot be checked:\n" + nb02.describe())
    show_notebook(lab, NB02)
    steps = {"initial": wait_for_explorer(lab)}
    steps["strategy"] = change_and_observe(
        lab, f"strategy -> {STRATEGY}", lambda: select_option(lab, "strategy", STRATEGY)
    )
    steps["output"] = change_and_observe(
        lab, f"output O -> {OUTPUT_CEILING}", lambda: set_slider(lab, "output-ceiling", OUTPUT_CEILING)
    )
    steps["window"] = change_and_observe(lab, f"window W -> {WINDOW}", lambda: set_slider(lab, "window", WINDOW))
    steps["disconnect"] = add_cell_and_run(lab, DISCONNECT)

    def _change_then_sync():
        set_slider(lab, "window", WINDOW_AFTER_DISCONNECT)
        steps["kernel_window"] = add_cell_and_run(lab, SHOW_WINDOW)

    steps["negative"] = change_and_observe(
        lab, f"window W -> {WINDOW_AFTER_DISCONNECT} (callback disconnected)", _change_then_sync, NEGATIVE_WAIT_S
    )
    steps["slider"] = slider_value(lab, "window")
    return steps


@pytest.fixture(scope="module")
def nb01(lab, folders):
    """Notebook 01 with the smoke parameters injected, opened from the file browser and run from the menu."""
    open_notebook(lab, NB01)
    run = run_all_and_wait(lab, NB01)
    return run, (cell_figure(lab, 'charts.draw(out, "fig2_composition"') if run.finished else None)


@pytest.fixture(scope="module")
def executed03(lab, nb01):
    """The run's executed notebook 03 opened from the file browser, not run: what it shows and its kernel."""
    open_notebook(lab, EXECUTED03)  # waits for "<kernel> | Idle": the recorded kernel was found and started
    wait_until_executed(lab)  # ... and for this notebook's own kernel, not the status bar of the one before
    return notebook_state(lab, EXECUTED03), cell_figure(lab, 'charts.draw(out, "fig1_retained"')


def _summary(text: str) -> dict:
    match = _SUMMARY.match(text)
    assert match, f"the explorer's text does not read '<strategy>: N tokens in M segments (capacity ...': {text!r}"
    return {
        "strategy": match["strategy"],
        "tokens": int(match["tokens"].replace(",", "")),
        "segments": int(match["segments"]),
    }


# --------------------------------------------------------------------------- notebook 02


def test_notebook_02_runs_every_cell_without_an_error(lab, nb02):
    assert nb02.finished, "not every cell ran, or the kernel is not idle:\n" + nb02.describe() + "\n" + lab.describe()
    assert len(nb02.cells) >= 8, nb02.describe()
    assert not nb02.errors, "cells with a traceback:\n" + nb02.describe()
    # Opened by hand, it found its inputs in the copied smoke run (interactive.prepare says so).
    assert any("copied from the latest complete run" in c.output for c in nb02.cells), nb02.describe()


def test_explorer_shows_its_controls_text_and_chart(explorer, expected):
    first = explorer["initial"]
    assert first.controls == tuple(EXPLORER_CONTROLS.values()), str(first)
    summary = _summary(first.text)
    assert (summary["tokens"], summary["segments"]) == expected(strategy=summary["strategy"]), str(first)
    assert first.table_rows > 0, str(first)
    assert first.figure.drawn, str(first)


def test_explorer_follows_a_strategy_change(explorer, expected):
    step = explorer["strategy"]
    assert step.changed, step.describe()
    summary = _summary(step.after.text)
    assert summary["strategy"] == STRATEGY, step.describe()
    assert (summary["tokens"], summary["segments"]) == expected(strategy=STRATEGY), step.describe()
    assert step.after.figure.drawn, step.describe()


def test_explorer_follows_the_output_ceiling_and_window(explorer, expected):
    lowered, narrowed = explorer["output"], explorer["window"]
    assert lowered.changed, lowered.describe()
    assert narrowed.changed, narrowed.describe()
    before, after = _summary(narrowed.before.text), _summary(narrowed.after.text)
    settings = {"strategy": STRATEGY, "output_ceiling": OUTPUT_CEILING, "window": WINDOW}
    assert (after["tokens"], after["segments"]) == expected(**settings), narrowed.describe()
    assert after["tokens"] < before["tokens"], "a window just above O should cut the chain:\n" + narrowed.describe()
    assert narrowed.after.figure.drawn, narrowed.describe()


def test_explorer_negative_control_disconnected_callback_is_caught(explorer):
    # The disconnect reached every control, and the kernel got the new window value...
    assert "disconnected 7" in explorer["disconnect"].output, explorer["disconnect"]
    assert f"kernel window [{WINDOW_AFTER_DISCONNECT}]" in explorer["kernel_window"].output, explorer["kernel_window"]
    assert explorer["slider"] == str(WINDOW_AFTER_DISCONNECT), explorer["slider"]
    # ...so the same helper that saw every change above must now see none.
    negative = explorer["negative"]
    assert not negative.changed, "the output changed with the callback disconnected:\n" + negative.describe()
    assert negative.after.text == explorer["window"].after.text, negative.describe()


# --------------------------------------------------------------------------- notebook 01


def test_notebook_01_with_smoke_parameters_draws_figure_2(lab, nb01, folders):
    run, figure = nb01
    assert run.finished, "not every cell ran, or the kernel is not idle:\n" + run.describe() + "\n" + lab.describe()
    assert not run.errors, "cells with a traceback:\n" + run.describe()
    assert figure is not None and figure.drawn, f"figure 2 shows {figure}:\n" + run.describe()
    # The injected run_dir was used: the notebook wrote its figure there.
    assert (folders["results"] / "lab-01" / "figures" / "fig2_composition.png").exists(), run.describe()


def test_an_executed_notebook_of_a_run_opens_with_its_outputs(lab, executed03):
    state, figure = executed03
    # Every code cell shows the execution count the run recorded, and the recorded kernel is up and idle.
    assert state.finished, state.describe() + "\n" + lab.describe()
    assert not state.errors, "cells with a traceback:\n" + state.describe()
    assert figure.drawn, f"figure 1 shows {figure}:\n" + state.describe()


# --------------------------------------------------------------------------- the page as a whole


def test_no_console_errors_and_no_request_left_the_machine(lab, nb02, explorer, nb01, executed03):
    errors = [e for e in lab.console_errors if not any(b in e for b in BENIGN_CONSOLE_ERRORS)]
    assert not errors, lab.describe()
    assert not lab.external_requests, lab.describe()

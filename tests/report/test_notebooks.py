"""House rules for the committed notebooks (no outputs, a parameters cell, an opening markdown cell)."""

import ast
import json
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from compaction_lab.core import paths
from compaction_lab.run import chain, runner

NOTEBOOKS = sorted(paths.NOTEBOOKS_DIR.glob("*.ipynb"))


def test_the_chain_is_the_notebooks_folder_in_flow_order():
    """`chain.CHAIN` describes every notebook in ``notebooks/`` (and only those), in run order, and each reads
    only notebooks that run before it."""
    assert runner.chain_notebooks() == list(chain.names())
    assert sorted(chain.names()) == [p.stem for p in NOTEBOOKS]
    assert len(chain.names()) == 7
    # numbered in run order: the share notebook, which reads every other, is last
    assert list(chain.names()) == sorted(chain.names())
    assert chain.names()[-2:] == ("06_continuation_exam", "07_share")
    for name in ("default", "my_sessions", "model"):
        assert runner.load_profile(name).notebooks == chain.names(), name
    for i, nb in enumerate(chain.names()):
        assert set(chain.step(nb).reads) <= set(chain.names()[:i]), nb
    with pytest.raises(ValueError, match="unknown notebook '08_nothing'; known: 01_context_composition, "):
        chain.step("08_nothing")


def test_a_notebook_needs_what_it_reads_and_follows_of_the_run():
    """`chain.needs`: what must finish before a notebook starts in a chain of several kernels."""
    full = chain.names()
    assert chain.needs("01_context_composition", full) == set()
    assert chain.needs("02_projection_anatomy", full) == {"01_context_composition"}
    assert chain.needs("03_closed_book_exam", full) == {"01_context_composition"}
    assert chain.needs("04_cost_model", full) == {"01_context_composition", "03_closed_book_exam"}
    # 05 takes the bank 03 saved and 06 draws 03's recall: after 03 when it runs, without it when not.
    for nb in ("05_open_book_exam", "06_continuation_exam"):
        assert chain.needs(nb, full) == {"01_context_composition", "03_closed_book_exam"}, nb
        assert chain.needs(nb, ["01_context_composition", nb]) == {"01_context_composition"}, nb
    assert chain.needs("07_share", full) == set(full[:-1])
    # A notebook the chain does not describe waits for everything before it, and is waited for.
    custom = ["01_context_composition", "my_extra", "02_projection_anatomy"]
    assert chain.needs("my_extra", custom) == {"01_context_composition"}
    assert chain.needs("02_projection_anatomy", custom) == {"01_context_composition", "my_extra"}


def test_a_runs_width_is_the_most_notebooks_that_can_execute_at_once():
    """`chain.width`: the kernels a run can keep busy. The default chain: 02, 04, 05 and 06 once 01 and 03 are
    done; notebooks that each wait on the one before: one."""
    full = list(chain.names())
    first, second, third = full[:3]
    assert chain.width(full) == 4
    assert chain.width([first]) == chain.width([first, second]) == chain.width([first, third]) == 1
    assert chain.width([first, second, third]) == 2  # 02 beside 03
    assert chain.width(["01_context_composition", "04_cost_model", "05_open_book_exam"]) == 2
    assert chain.width(["my_extra", "my_other"]) == 1  # a notebook the chain does not describe waits for all
    assert chain.width([]) == 0


def test_of_the_notebooks_ready_the_one_most_wait_on_starts_first():
    """`chain.downstream` / `by_urgency`: 03 (04 and then 06 wait on it) takes the free kernel before 02."""
    full = chain.names()
    assert [chain.downstream(nb, full) for nb in full] == [3, 1, 2, 1, 1, 1, 0]  # 01 02 03 04 05 07 06
    ready = [nb for nb in full if chain.needs(nb, full) == {"01_context_composition"}]
    assert chain.by_urgency(ready, full) == ["03_closed_book_exam", "02_projection_anatomy"]
    after_03 = ["04_cost_model", "05_open_book_exam", "06_continuation_exam"]
    assert chain.by_urgency(reversed(after_03), full) == after_03  # a tie: run order
    # Without 04, 05 and 07 only 06 waits on 03, as on 02: run order again.
    short = ["01_context_composition", "02_projection_anatomy", "03_closed_book_exam", "07_share"]
    assert chain.by_urgency(["03_closed_book_exam", "02_projection_anatomy"], short) == [
        "02_projection_anatomy",
        "03_closed_book_exam",
    ]


@pytest.mark.slow
def test_a_run_in_one_kernel_gives_what_the_run_in_two_gave(smoke_run, tmp_path):
    """Notebooks executing side by side (the smoke run: two kernels) write the same tables and figures as one
    after the other, and run.json lists them in run order."""
    import pandas as pd

    # papermill's ``cwd`` changes the whole process's directory around a notebook: two at once left it in the
    # run folder (the kernels start there through nbclient instead).
    here = Path.cwd()
    assert smoke_run.run_dir.resolve() not in (here, *here.parents)
    info = json.loads((smoke_run.run_dir / "run.json").read_text())
    assert info["kernels"] == 2 and [n["notebook"] for n in info["notebooks"]] == list(chain.names())
    assert info["notebook_running"] is None and info["notebooks_running"] == []
    one = runner.run_profile("smoke", results=tmp_path, progress=False, kernels=1, notebook_html=False).run_dir
    tables = sorted(p.name for p in smoke_run.run_dir.glob("*.parquet"))
    assert tables == sorted(p.name for p in one.glob("*.parquet")) and len(tables) > 20
    for name in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(smoke_run.run_dir / name), pd.read_parquet(one / name))
    figures = sorted(p.name for p in (smoke_run.run_dir / "figures").glob("*.svg"))
    assert figures == sorted(p.name for p in (one / "figures").glob("*.svg")) and figures
    for name in figures:
        assert (smoke_run.run_dir / "figures" / name).read_bytes() == (one / "figures" / name).read_bytes(), name


@pytest.mark.slow
def test_a_smoke_run_writes_and_draws_what_the_chain_says(smoke_run):
    """Each notebook of a smoke run wrote every file the chain lists for it and drew its figures; no table or
    figure in the run folder is one the chain does not list."""
    d = smoke_run.run_dir
    for nb in chain.names():
        step = chain.step(nb)
        for name in step.writes:
            assert (d / name).exists(), f"{nb} did not write {name}"
        for stem in step.figures:
            assert all((d / "figures" / f"{stem}.{x}").is_file() for x in ("png", "svg", "html")), stem
    written = {name for nb in chain.names() for name in chain.step(nb).writes}
    assert {p.name for p in d.glob("*.parquet")} <= written
    assert {p.stem for p in (d / "figures").iterdir()} == {s for nb in chain.names() for s in chain.step(nb).figures}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: a code cell has outputs"
            assert cell.execution_count is None, f"{path.name}: a code cell has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opens_with_markdown_and_has_one_typed_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown"
    intro = nb.cells[0].source.lower()
    for word in ("purpose", "inputs", "outputs", "parameters"):
        assert word in intro, f"{path.name}: opening cell does not describe {word}"
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    tree = ast.parse(tagged[0].source)
    # Every parameter is annotated (typed) and carries a default.
    assigns = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))]
    assert assigns and all(isinstance(n, ast.AnnAssign) and n.value is not None for n in assigns)
    # Every parameter line has a comment that says what it is.
    for line in tagged[0].source.splitlines()[1:]:
        if line.strip() and not line.lstrip().startswith("#"):
            assert "#" in line, f"{path.name}: parameter without a comment: {line!r}"
    # papermill parses every declared parameter (a comment it cannot parse would silently drop one).
    declared = {n.target.id for n in assigns}
    assert set(pm.inspect_notebook(str(path))) == declared and "run_dir" in declared


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_thin(path):
    """Logic lives in the library: no loops, no function or class definitions in notebook cells."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            assert not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.ClassDef)), (
                f"{path.name}: logic belongs in lib/compaction_lab, found {type(node).__name__}"
            )
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            assert len(cell.source.splitlines()) <= 12, f"{path.name}: a cell longer than a few lines"

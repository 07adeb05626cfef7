"""House rules for the committed notebooks (no outputs, a parameters cell, an opening markdown cell)."""

import ast

import nbformat
import papermill as pm
import pytest

from compaction_lab.core import paths
from compaction_lab.run import runner as report

NOTEBOOKS = sorted(paths.NOTEBOOKS_DIR.glob("*.ipynb"))


#: The chain, in data-flow order (docs/architecture.md): the notebooks every full profile runs.
CHAIN = [
    "01_context_composition",
    "02_projection_anatomy",
    "03_closed_book_exam",
    "04_cost_model",
    "05_open_book_exam",
    "06_share",
]


def test_the_chain_is_the_six_notebooks_in_flow_order():
    assert report.chain_notebooks() == CHAIN
    for name in ("default", "my_sessions", "model"):
        assert list(report.load_profile(name).notebooks) == CHAIN, name


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

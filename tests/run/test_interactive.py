"""A notebook opened by hand ("Run All" in JupyterLab, no run_dir) finds or makes its inputs and says which."""

from __future__ import annotations

import io
import json

import nbformat
import papermill as pm
import pytest

from compaction_lab.core import paths, runfolder
from compaction_lab.run import chain, interactive


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTION_LAB_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def _run(results, name: str, status: str, marks: list[str]):
    folder = results / name
    (folder / "sessions").mkdir(parents=True)
    (folder / "sessions" / "s1.jsonl").write_text("{}\n")
    (folder / runfolder.RUN_JSON).write_text(json.dumps({"status": status, "profile": "smoke", "started": name}))
    for nb in marks:
        (folder / interactive.MARK[nb]).write_bytes(b"table of " + nb.encode())
    (folder / "02_projection_anatomy.html").write_text("<html></html>")
    return folder


def test_a_papermill_run_keeps_its_folder(tmp_path, results):
    out = interactive.prepare(str(tmp_path / "run"), "04_cost_model", out=io.StringIO())
    assert out == (tmp_path / "run").resolve() and not (out / "sessions").exists()


def test_inputs_come_from_the_latest_complete_run(results, monkeypatch):
    _run(results, "smoke-20260101-000000", "ok", ["01_context_composition", "03_closed_book_exam"])
    newest_ok = _run(results, "smoke-20260102-000000", "ok", ["01_context_composition", "03_closed_book_exam"])
    _run(results, "smoke-20260103-000000", "failed", ["01_context_composition", "03_closed_book_exam"])
    _run(results, "smoke-20260104-000000", "ok", ["01_context_composition"])  # lacks notebook 03's table
    monkeypatch.setattr(interactive, "_execute", lambda nb, folder: pytest.fail(f"{nb} should not run"))
    said = io.StringIO()
    out = interactive.prepare("", "04_cost_model", out=said)
    assert out == (results / "interactive").resolve()
    assert newest_ok.name in said.getvalue() and "copied" in said.getvalue()
    assert (out / "exam_recall.parquet").read_bytes() == b"table of 03_closed_book_exam"
    assert (out / "sessions" / "s1.jsonl").exists()
    assert not (out / runfolder.RUN_JSON).exists() and not (out / "02_projection_anatomy.html").exists()
    # A second time the inputs are there: nothing copied, nothing said.
    again = io.StringIO()
    assert interactive.prepare("", "04_cost_model", out=again) == out and again.getvalue() == ""


def test_with_no_complete_run_the_missing_notebooks_run_first(results, monkeypatch):
    ran = []

    def execute(nb, folder):
        ran.append(nb)
        (folder / interactive.MARK[nb]).write_bytes(b"made")

    monkeypatch.setattr(interactive, "_execute", execute)
    said = io.StringIO()
    interactive.prepare("", "04_cost_model", out=said)
    assert ran == ["01_context_composition", "03_closed_book_exam"]
    assert "no complete run" in said.getvalue() and "running them first" in said.getvalue()


def test_an_unknown_notebook_is_an_error():
    with pytest.raises(ValueError, match="unknown notebook"):
        interactive.prepare("", "07_nothing")


def test_every_chain_notebook_prepares_its_inputs():
    """Each notebook that reads another's outputs (the chain says which) asks `interactive.prepare` for its
    folder, under its own name; what it needs and how a folder shows each input are the chain's."""
    readers = [nb for nb in chain.names() if chain.step(nb).reads]
    assert sorted(readers) == [p.stem for p in sorted(paths.NOTEBOOKS_DIR.glob("0[2-9]_*.ipynb"))]
    for nb in readers:
        code = "\n".join(
            c.source for c in nbformat.read(paths.NOTEBOOKS_DIR / f"{nb}.ipynb", 4).cells if c.cell_type == "code"
        )
        assert f'interactive.prepare(run_dir, "{nb}")' in code, nb
    assert dict(interactive.NEEDS) == {nb: chain.step(nb).reads for nb in chain.names()}
    assert dict(interactive.MARK) == {nb: chain.step(nb).mark for nb in chain.names()}
    assert interactive.NEEDS["04_cost_model"] == ("01_context_composition", "03_closed_book_exam")
    assert interactive.MARK["03_closed_book_exam"] == "exam_recall.parquet"


@pytest.mark.slow
def test_notebook_02_opened_by_hand_runs_as_is(results):
    """Run All on notebook 02 with no run folder and nothing run before: it runs notebook 01 first, then itself."""
    out = results / "nb02.ipynb"
    results.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        str(paths.NOTEBOOKS_DIR / "02_projection_anatomy.ipynb"),
        str(out),
        parameters={"strategy_names": ["full", "codex"], "fig8_windows": [8000], "fig8_output_ceilings": [4000]},
        progress_bar=False,
    )
    text = "".join(
        o.get("text", "") for c in nbformat.read(out, 4).cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "no complete run holds the inputs of 01_context_composition" in text
    folder = results / "interactive"
    assert (folder / "composition.parquet").exists() and (folder / "projections.parquet").exists()
    assert (folder / "01_context_composition.ipynb").exists()  # the executed copy of what ran first

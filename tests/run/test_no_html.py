"""What rendering costs is in run.json, and `--no-html` skips the notebooks' HTML for batch reruns (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction_lab import cli

TINY = "description: one small chain\nnotebooks: [01_context_composition]\nparameters: {n_chains: 1, window_tokens: 1500}\n"


def _run(tmp_path: Path, capsys, *extra: str) -> Path:
    prof = tmp_path / "tiny.yaml"
    prof.write_text(TINY)
    argv = ["run", "--profile", str(prof), "--results", str(tmp_path / "r"), "--quiet", *extra]
    assert cli.main(argv) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_run_json_says_what_rendering_the_notebooks_and_the_report_cost(tmp_path, capsys):
    run_dir = _run(tmp_path, capsys, "--name", "with")
    doc = json.loads((run_dir / "run.json").read_text())
    (nb,) = doc["notebooks"]
    assert nb["html"] == "01_context_composition.html" and (run_dir / nb["html"]).exists()
    assert nb["html_seconds"] > 0 and doc["html_seconds"] == nb["html_seconds"]
    assert doc["report_seconds"] > 0 and (run_dir / "report.html").exists()


@pytest.mark.slow
def test_no_html_renders_no_notebook_but_the_report_is_complete(tmp_path, capsys):
    run_dir = _run(tmp_path, capsys, "--name", "without", "--no-html")
    doc = json.loads((run_dir / "run.json").read_text())
    (nb,) = doc["notebooks"]
    assert nb["html"] is None and nb["html_seconds"] is None and doc["html_seconds"] is None
    assert [p.name for p in run_dir.glob("*.html")] == ["report.html"]
    page = (run_dir / "report.html").read_text()
    assert "01_context_composition.ipynb" in page  # the report links the executed notebook instead
    assert doc["report_seconds"] > 0 and (run_dir / "figures" / "fig2_composition.svg").exists()


def test_resume_refuses_no_html(tmp_path, capsys):
    assert cli.main(["run", "--resume", str(tmp_path), "--no-html"]) == 2
    assert "--no-html" in capsys.readouterr().err

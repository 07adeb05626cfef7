"""The run folder contract in docs/run-folder.md is what a run writes, file for file (issue 48).

The README names no file list of its own: it points at docs/run-folder.md, and these tests hold that
document to a run. The smoke run stands for `make run`: it runs the default profile's notebooks, on
smaller chains.
"""

from __future__ import annotations

import re

from compaction_lab.core.paths import REPO_ROOT
from compaction_lab.run import runner

#: What the runner itself writes, documented in its own sections of docs/run-folder.md.
_RUNNER = {"run.json", "report.html"}
#: Words that mark a row of the contract as written only by some runs.
_CONDITIONAL = ("only", "own sessions", "imports", "when ")
#: The files every figure is saved as (docs/run-folder.md, "Figures").
_FIGURE_SUFFIXES = {".png", ".svg", ".html"}


def _doc() -> str:
    return (REPO_ROOT / "docs" / "run-folder.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    """The text of one section of docs/run-folder.md, up to the next heading of any level."""
    return re.split(r"\n#{2,3} ", _doc().split(title, 1)[1], maxsplit=1)[0]


def _contract_rows() -> list[tuple[set[str], str]]:
    """The rows of docs/run-folder.md's "What the notebooks write" table: (file names, the row's text)."""
    rows = []
    for line in _section("## What the notebooks write").splitlines():
        if line.startswith("| `"):
            first, rest = line.split(" | ", 1)
            rows.append((set(re.findall(r"`([^`]+)`", first)), rest))
    return rows


def _figure_stems() -> set[str]:
    """The stems of docs/run-folder.md's "Figures" table (one row per notebook)."""
    stems: set[str] = set()
    for line in _section("### Figures").splitlines():
        if re.match(r"^\| \d\d \|", line):
            stems |= set(re.findall(r"`([^`]+)`", line.split(" | ", 1)[1]))
    return stems


def _top_level(run_dir) -> set[str]:
    """Top-level files a run wrote, besides the runner's and the notebooks' own (.ipynb and its .html)."""
    notebooks = {p.stem for p in run_dir.glob("*.ipynb")}
    return {
        p.name
        for p in run_dir.iterdir()
        if p.is_file() and p.name not in _RUNNER and p.stem not in notebooks and not p.name.startswith(".")
    }


def test_every_file_a_run_writes_is_in_the_contract_and_every_unconditional_one_is_written(smoke_run):
    rows = _contract_rows()
    documented = set().union(*(names for names, _ in rows))
    written = _top_level(smoke_run.run_dir)
    assert written - documented == set(), "written but not in docs/run-folder.md"
    # a row that says when it is written ("only", "imports only", "own sessions") need not be in every run
    expected = {n for names, rest in rows if not any(w in rest for w in _CONDITIONAL) for n in names if "<" not in n}
    assert expected - written == set(), "in docs/run-folder.md but not written by the smoke run"


def test_the_whole_run_folder_is_the_contract_and_nothing_else(smoke_run):
    """Every file of the folder, recursively, is one the contract names; the runner's and every notebook's are there."""
    run_dir = smoke_run.run_dir
    notebooks = runner.load_profile("smoke").notebooks
    stems = _figure_stems()
    tables = set().union(*(names for names, _ in _contract_rows()))
    unexplained = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(run_dir)
        top = rel.parts[0]
        if len(rel.parts) == 1:
            ok = rel.name in _RUNNER | tables or (rel.stem in notebooks and rel.suffix in (".ipynb", ".html"))
        elif top == "sessions":  # sessions/<session>.jsonl, sessions/facts.jsonl
            ok = len(rel.parts) == 2 and rel.suffix == ".jsonl"
        elif top == "figures":
            ok = len(rel.parts) == 2 and rel.stem in stems and rel.suffix in _FIGURE_SUFFIXES
        else:
            ok = False
        if not ok:
            unexplained.append(rel.as_posix())
    assert unexplained == [], "written by a run but not in docs/run-folder.md"
    for name in _RUNNER | {f"{nb}.{ext}" for nb in notebooks for ext in ("ipynb", "html")}:
        assert (run_dir / name).is_file(), name


def test_the_figures_table_lists_exactly_the_figures_a_run_draws(smoke_run):
    drawn = {p.stem for p in (smoke_run.run_dir / "figures").iterdir()}
    assert drawn == _figure_stems()
    for stem in drawn:
        assert {p.suffix for p in (smoke_run.run_dir / "figures").glob(f"{stem}.*")} == _FIGURE_SUFFIXES, stem


def test_the_smoke_run_stands_for_make_run():
    """The smoke profile runs the notebooks `make run` (the default profile) runs, so it writes the same names."""
    load = lambda name: runner.load_profile(name).notebooks
    assert load("smoke") == load("default")
    assert re.search(r"^PROFILE \?= default$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)

"""The run folder's documented names are what a run writes (issue 48): docs/run-folder.md and the README's list."""

from __future__ import annotations

import re

from compaction_lab.core.paths import REPO_ROOT

#: A file name as the docs write one (a table, a bank, an archive, a report).
_FILE = re.compile(r"[A-Za-z0-9_<>./-]+\.(?:parquet|jsonl|json|sqlite|txt)")

#: What the runner itself writes, documented in its own sections of docs/run-folder.md.
_RUNNER = {"run.json", "report.html"}


def _contract_rows() -> list[tuple[set[str], str]]:
    """The rows of docs/run-folder.md's "What the notebooks write" table: (file names, the row's text)."""
    text = (REPO_ROOT / "docs" / "run-folder.md").read_text(encoding="utf-8")
    section = text.split("## What the notebooks write", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first, rest = line.split(" | ", 1)
            rows.append((set(re.findall(r"`([^`]+)`", first)), rest))
    return rows


def _written(run_dir) -> set[str]:
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
    written = _written(smoke_run.run_dir)
    assert written - documented == set(), "written but not in docs/run-folder.md"
    # a row that says when it is written ("only", "imports only", "own sessions") need not be in every run
    conditional = ("only", "own sessions", "imports", "when ")
    expected = {n for names, rest in rows if not any(w in rest for w in conditional) for n in names if "<" not in n}
    assert expected - written == set(), "in docs/run-folder.md but not written by the smoke run"


def test_the_readmes_run_folder_list_names_only_what_a_run_writes(smoke_run):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## What a run produces", 1)[1].split("```", 2)[1]
    names = set()
    for line in block.splitlines():
        if "when importing" in line:  # written only by runs on imported logs
            continue
        names |= {n for n in _FILE.findall(line) if "<" not in n}
    assert names, "the README's run-folder block names no file"
    written = {p.relative_to(smoke_run.run_dir).as_posix() for p in smoke_run.run_dir.rglob("*") if p.is_file()}
    assert names - written == set(), "named in the README but not written by a run"

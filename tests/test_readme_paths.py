"""The README is the way in (issue 48): short, its first screen runnable, every path it names there.

Every file and folder of the repository that README.md or a document under docs/ names exists; the
README stays within 250 lines and its first screen shows the two commands and the own-logs command,
whose command line is one `compaction-lab run` accepts and whose log locations are the profile's.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from compaction_lab.core.paths import REPO_ROOT

#: The repository's own top-level folders a named path starts with.
_TOP = ("data/", "docs/", "lib/", "notebooks/", "papermill_params/", "tests/", "benchmarks/", ".ci/")
README = REPO_ROOT / "README.md"
#: The README's length limit and what a reader sees without scrolling.
MAX_LINES, FIRST_SCREEN = 250, 40


def _made() -> tuple[str, ...]:
    """Folders a run or a set-up step makes (git-ignored, so never in a clone): ``data/results/``, ``.venv/`` ..."""
    lines = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip().endswith("/") and not line.startswith("#"))


def _named_paths(doc: Path) -> set[str]:
    """Repository paths `doc` names in code spans (from the root) and in links (from its own folder)."""
    text = doc.read_text(encoding="utf-8")
    links = [(doc.parent / t).resolve() for t in re.findall(r"\]\(([^)#\s:]+)(?:#[^)]*)?\)", text)]
    tokens = re.findall(r"`([^`\s]+)`", text) + [
        p.relative_to(REPO_ROOT).as_posix() for p in links if REPO_ROOT in p.parents
    ]
    paths, made = set(), _made()
    for t in tokens:
        t = t.strip().rstrip(".,;:")
        if t.startswith(_TOP) and not any(c in t for c in "<>*{}$|") and not (t.rstrip("/") + "/").startswith(made):
            paths.add(t)
    return paths


def test_every_repository_path_the_readme_names_exists():
    paths = _named_paths(README)
    assert len(paths) > 10  # the README does name paths: the parsing found them
    missing = sorted(p for p in paths if not (REPO_ROOT / p).exists())
    assert missing == [], f"named in README.md but not in the repository: {missing}"


@pytest.mark.parametrize("doc", sorted((REPO_ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_repository_path_a_document_names_exists(doc):
    missing = sorted(p for p in _named_paths(doc) if not (REPO_ROOT / p).exists())
    assert missing == [], f"named in docs/{doc.name} but not in the repository: {missing}"


def test_the_path_finder_finds_a_missing_path_and_skips_what_a_run_makes(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("see `lib/compaction_lab/nowhere.py`, `data/results/run-1/` and `docs/<name>.md`; `make run`\n")
    assert _named_paths(doc) == {"lib/compaction_lab/nowhere.py"}


def test_the_readme_is_short_and_its_first_screen_shows_the_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first = "\n".join(lines[:FIRST_SCREEN])
    for said in ("make run", "make test", "session_paths=", "FutureOS", "docs/img/report.png"):
        assert said in first, f"{said!r} is not in the README's first {FIRST_SCREEN} lines"
    assert (REPO_ROOT / "docs" / "img" / "report.png").stat().st_size < 300_000


def _own_logs_command() -> list[str]:
    text = README.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if "session_paths=" in ln and "compaction-lab run" in ln)
    return shlex.split(line.split("#", 1)[0])


def test_the_own_logs_command_is_one_the_cli_accepts():
    from compaction_lab.cli import build_parser

    argv = _own_logs_command()
    assert argv[0] == ".venv/bin/compaction-lab" and argv[1] == "run"
    args = build_parser().parse_args(argv[1:])
    assert args.profile == "my_sessions"
    key, value = args.set[0].split("=", 1)
    assert key == "session_paths" and isinstance(yaml.safe_load(value), list)
    # the key is one the profile runs with (a typo would be refused as an unknown parameter)
    profile = yaml.safe_load((REPO_ROOT / "papermill_params" / "my_sessions.yaml").read_text())
    assert "session_paths" in profile["parameters"]


def test_the_readme_lists_where_each_agent_keeps_its_logs_as_the_profile_does():
    profile = yaml.safe_load((REPO_ROOT / "papermill_params" / "my_sessions.yaml").read_text())
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    listed = re.findall(r"^\| [^|]+ \| `(~/[^`]+)`", first, re.MULTILINE)
    assert sorted(listed) == sorted(profile["parameters"]["session_paths"])

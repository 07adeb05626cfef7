"""Every file and folder of the repository the README names exists (issue 48): a reader can follow each one."""

from __future__ import annotations

import re

from compaction_lab.core.paths import REPO_ROOT

#: The repository's own top-level folders a README path starts with.
_TOP = ("data/", "docs/", "lib/", "notebooks/", "papermill_params/", "tests/", "benchmarks/", ".ci/")


def _made() -> tuple[str, ...]:
    """Folders a run or a set-up step makes (git-ignored, so never in a clone): ``data/results/``, ``.venv/`` ..."""
    lines = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip().endswith("/") and not line.startswith("#"))


def _named_paths() -> set[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    tokens = re.findall(r"`([^`\s]+)`", text) + re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    paths, made = set(), _made()
    for t in tokens:
        t = t.strip().rstrip(".,;:")
        if t.startswith(_TOP) and not any(c in t for c in "<>*{}$|") and not (t.rstrip("/") + "/").startswith(made):
            paths.add(t)
    return paths


def test_every_repository_path_the_readme_names_exists():
    paths = _named_paths()
    assert len(paths) > 10  # the README does name paths: the parsing found them
    missing = sorted(p for p in paths if not (REPO_ROOT / p).exists())
    assert missing == [], f"named in README.md but not in the repository: {missing}"

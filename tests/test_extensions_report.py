"""Issue 49, acceptance 1: an extension reaches the report from its own file, and leaves with it.

A copy of the library gets four new files and nothing else: a strategy in ``strategies/arms/``, an importer
in ``ingest/importers/``, an exam in ``exam/exams/`` and a figure in ``report/figures/``. A run of the chain
on that copy (``compaction-lab run``, the ``my_sessions`` profile on a folder holding a log in the new format
and an excerpt of pi's own test session, whose recorded compaction is where the exams cut) shows each in its
``report.html``: the strategy in the headline and in figure 8, the importer's sessions counted, the exam's
block, the figure in the gallery. Removing the four files and running again shows none of them. No file of
the library is edited: the copy is the library plus the four files, byte for byte otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab.core.paths import REPO_ROOT
from tests.helpers import LIGHTER
from tests.test_extensions import ARM as STRATEGY
from tests.test_extensions import FORMAT, IMPORTER_MODULE, STRATEGY_MODULE

EXAM_TITLE = "Throwaway exam"
FIGURE_TITLE = "Throwaway files"

#: Each new file, by its path under lib/compaction_lab/.
FILES: dict[str, str] = {
    "strategies/arms/zz_keep_last_two.py": STRATEGY_MODULE,
    "ingest/importers/zz_toy_log.py": IMPORTER_MODULE,
    "exam/exams/zz_throwaway.py": f'''"""A throwaway exam: one row per saved session file, and a block."""
from pathlib import Path

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.exam.exam import EXAMS, Exam, ExamBlock


@EXAMS.register("throwaway", rank=15, notebook="03_closed_book_exam")
class ThrowawayExam(Exam):
    writes = ("exam_throwaway",)

    def cases(self, source, params):
        return sorted(p.name for p in (Path(source) / "sessions").iterdir())

    def grade(self, cases, params, ctx, *, progress=False):
        return pd.DataFrame({{"file": cases, "size": range(1, len(cases) + 1)}})

    def tables(self, cases, result, params):
        return {{"exam_throwaway": result}}

    def block(self, run_dir):
        path = runfolder.table_path(run_dir, "exam_throwaway")
        if not path.exists():
            return None
        table = pd.read_parquet(path)
        lines = (f"{{len(table)}} session files seen",)
        return ExamBlock("{EXAM_TITLE}", "throwaway", lines, (("Files", table),), ("fig_throwaway",))
''',
    "report/figures/zz_throwaway.py": f'''"""A throwaway figure drawn from the throwaway exam's table."""
import altair as alt

from compaction_lab.report.figures import register


@register("fig_throwaway", rank=90, title="{FIGURE_TITLE}", reads=("exam_throwaway",))
def fig_throwaway(table):
    return alt.Chart(table).mark_bar().encode(x="file:N", y="size:Q").properties(title="{FIGURE_TITLE}")
''',
}


def _copy_repository(dst: Path) -> Path:
    """The parts of the repository a run reads (the library, notebooks, profiles, shipped data), copied.

    As set up: the library's bytecode (each file's own, valid for the copy: `copytree` keeps the sources'
    times; a new file is compiled) and Vega's bundle, which `make setup` builds into ``data/cache``; none
    of this process's results, caches or ledger.
    """
    skip = shutil.ignore_patterns("*.egg-info", "results", "cache", "ledger")
    for part in ("lib", "notebooks", "papermill_params", "data"):
        shutil.copytree(REPO_ROOT / part, dst / part, ignore=skip)
    (dst / "data" / "cache").mkdir()
    for bundle in (REPO_ROOT / "data" / "cache").glob("vega-bundle-*.js"):
        shutil.copy2(bundle, dst / "data" / "cache")
    return dst


def _sessions(folder: Path) -> Path:
    folder.mkdir()
    lines = [("user", "fix the flaky test in tests/test_orders.py"), ("agent", "looking at it"), ("user", "thanks")]
    text = "".join(json.dumps({"toy": r, "say": t}) + "\n" for r, t in lines)
    (folder / "chat.jsonl").write_text(text, encoding="utf-8")
    # pi's own test session, an excerpt holding a compaction pi recorded (the exams cut there; tests/fixtures/pi/)
    shutil.copy2(
        REPO_ROOT / "tests" / "fixtures" / "pi" / "upstream-compaction-before-compaction-excerpt.jsonl", folder
    )
    return folder


def _run(repo: Path, sessions: Path, results: Path, name: str) -> Path:
    """Run the chain of the copied library on `sessions`; return the run folder (its report, not its notebooks' pages)."""
    env = {**os.environ, "PYTHONPATH": str(repo / "lib")}
    cmd = [sys.executable, "-m", "compaction_lab.cli", "run", "--profile", "my_sessions"]
    cmd += ["--set", f"session_paths=[{sessions}]", "--results", str(results), "--name", name, "--no-html"]
    cmd += [arg for key, value in LIGHTER.items() for arg in ("--set", f"{key}={value}")]
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return results / name


def _seen(run_dir: Path) -> dict[str, bool]:
    """Where each extension shows in the run folder and its report."""
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    fig8 = (run_dir / "figures" / "fig8_trigger_budgets.svg").read_text(encoding="utf-8")
    audit = json.loads((run_dir / "import_audit.json").read_text(encoding="utf-8"))
    headline = pd.read_parquet(run_dir / "headline.parquet")
    return {
        "strategy in the headline": STRATEGY in set(headline["strategy"].astype(str)) and STRATEGY in page,
        "strategy in figure 8": STRATEGY in fig8,
        "importer's session imported": audit["formats"].get(FORMAT, 0) == 1,
        "exam's table": (run_dir / "exam_throwaway.parquet").exists(),
        "exam's block": EXAM_TITLE in page and 'id="throwaway"' in page,
        "figure in the gallery": (run_dir / "figures" / "fig_throwaway.svg").exists() and FIGURE_TITLE in page,
    }


@pytest.mark.slow
def test_each_extension_reaches_the_report_from_its_own_file_and_leaves_with_it(tmp_path: Path):
    repo = _copy_repository(tmp_path / "repo")
    package = repo / "lib" / "compaction_lab"
    for rel, text in FILES.items():
        assert not (package / rel).exists()
        (package / rel).write_text(text, encoding="utf-8")
    sessions = _sessions(tmp_path / "sessions")

    with_files = _seen(_run(repo, sessions, tmp_path / "results", "with"))
    assert with_files == dict.fromkeys(with_files, True), with_files

    for rel in FILES:
        (package / rel).unlink()
    without = _seen(_run(repo, sessions, tmp_path / "results", "without"))
    assert without == dict.fromkeys(without, False), without

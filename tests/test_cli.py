"""The console script end to end, as a user types it."""

import subprocess
import sys
from pathlib import Path

from compaction_lab import cli


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("compaction-lab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compaction_lab.cli"]


def test_run_smoke_prints_the_run_folder_last(tmp_path):
    r = subprocess.run(
        _script() + ["run", "--profile", "smoke", "--results", str(tmp_path), "--name", "cli-smoke"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    run_dir = Path(last)
    assert run_dir == (tmp_path / "cli-smoke").resolve()
    assert (run_dir / "report.html").exists() and (run_dir / "composition.parquet").exists()


def test_profiles_lists_shipped_profiles(capsys):
    assert cli.main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "smoke" in out and "default" in out


def test_help_names_the_commands(capsys):
    try:
        cli.main(["--help"])
    except SystemExit as e:
        assert e.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "profiles" in out

"""``make lab`` starts JupyterLab as root, on a port and without a browser, from LAB_ARGS (issue 48)."""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import time

import pytest

from compaction_lab.core.paths import REPO_ROOT
from tests.lab_browser import SERVER_START_S, _status_ok, free_port, lab_environment


def _lab_command(args: str) -> list[str]:
    """The command ``make lab LAB_ARGS=…`` runs (make's dry run: nothing is installed or started)."""
    out = subprocess.run(
        ["make", "-n", "-s", "lab", f"LAB_ARGS={args}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [line for line in out.splitlines() if " lab " in f"{line} " and "/jupyter" in line]
    return shlex.split(line)


def test_make_lab_passes_lab_args_and_allows_root_when_root(tmp_path):
    cmd = _lab_command("--no-browser --port=1")
    assert cmd[-2:] == ["--no-browser", "--port=1"]
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)


@pytest.mark.slow
def test_make_lab_starts_on_the_given_port_without_a_browser(tmp_path):
    """The command make runs really serves, as root too (jupyter refuses root without ``--allow-root``)."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = _lab_command(f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --IdentityProvider.token={token}")
    cmd[0] = str(REPO_ROOT / cmd[0])
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=lab_environment(tmp_path), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _status_ok(f"http://127.0.0.1:{port}", token):
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            time.sleep(0.2)  # polling the server's status
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

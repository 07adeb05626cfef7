"""The run lifecycle: pid and heartbeat, interrupted and dead runs, the `runs` listing (issue #12 item 6)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import psutil
import pytest
from jupyter_client import AsyncKernelManager

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.core.processes import pid_alive
from compaction_lab.run import lifecycle, runner, sweep

HOST = lifecycle.host_id()


def _exited_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    """The pids still alive after waiting up to `timeout` seconds for them to exit."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    return alive


# --------------------------------------------------------------------------- the liveness rule


def test_a_running_run_whose_process_is_gone_is_dead():
    pid = _exited_pid()
    verdict = lifecycle.liveness({"status": "running", "pid": pid, "host": HOST, "process_started": 1.0})
    assert verdict.state == "dead" and str(pid) in verdict.reason


def test_a_reused_pid_with_another_start_time_is_dead_the_same_one_alive():
    me = lifecycle.ProcessMark.current()
    assert me.started is not None  # psutil is there: the start marker is recorded
    same = {"pid": me.pid, "host": HOST, "process_started": me.started}
    reused = {**same, "process_started": me.started - 3600}  # what an earlier owner of this pid recorded
    assert lifecycle.liveness(same).state == "alive"
    verdict = lifecycle.liveness(reused)
    assert verdict.state == "dead" and "now belongs to a process started" in verdict.reason


def test_a_zombie_process_is_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid_alive(proc.pid)  # signal 0 still reaches it: the pid rule alone says "alive"
        assert lifecycle.liveness({"pid": proc.pid, "host": HOST}).state == "dead"
    finally:
        proc.wait()


def test_another_hosts_run_is_judged_by_its_heartbeat():
    now = datetime.now(timezone.utc)
    info = {"status": "running", "pid": os.getpid(), "host": "elsewhere.example", "process_started": 1.0}
    fresh = {**info, "heartbeat": (now - timedelta(seconds=20)).isoformat()}
    stale = {**info, "heartbeat": (now - timedelta(seconds=lifecycle.STALE_AFTER + 60)).isoformat()}
    # Our own pid is alive here, but it is not that host's process: only the heartbeat counts.
    assert lifecycle.liveness(fresh, now=now).state == "alive"
    verdict = lifecycle.liveness(stale, now=now)
    assert verdict.state == "dead" and "elsewhere.example" in verdict.reason
    assert lifecycle.liveness({**info, "heartbeat": None}, now=now).state == "dead"


def test_a_run_json_without_a_pid_is_not_called_dead():
    assert lifecycle.liveness({"status": "running", "started": "2020-01-01T00:00:00+00:00"}).state == "unknown"


# --------------------------------------------------------------------------- run.json, the listing


def _run_json(folder: Path, **info) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def _results(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    me = lifecycle.ProcessMark.current()
    _run_json(res / "a-ok", status="ok", profile="smoke", started="2026-01-01T10:00:00+00:00", seconds=21.5)
    _run_json(
        res / "b-failed",
        status="failed",
        profile="smoke",
        started="2026-01-01T11:00:00+00:00",
        seconds=3.0,
        error={"notebook": "03_closed_book_exam", "ename": "ValueError", "evalue": "bad"},
    )
    _run_json(
        res / "c-interrupted",
        status="interrupted",
        signal="SIGTERM",
        profile="default",
        started="2026-01-01T12:00:00+00:00",
        seconds=9.0,
        notebooks=[
            {"notebook": "01_context_composition", "status": "ok"},
            {"notebook": "02_projection_anatomy", "status": "interrupted"},
        ],
    )
    _run_json(
        res / "d-killed",
        status="running",
        profile="my_sessions",
        started="2026-01-01T13:00:00+00:00",
        heartbeat="2026-01-01T13:05:00+00:00",
        pid=_exited_pid(),
        host=HOST,
        process_started=1.0,
        notebook_running="04_cost_model",
    )
    _run_json(
        res / "e-live",
        status="running",
        profile="smoke",
        started=lifecycle.utc_now(),
        **me.fields(),
        notebook_running="01_context_composition",
    )
    (res / "f-garbled").mkdir()
    (res / "f-garbled" / "run.json").write_text('{"status": "runn', encoding="utf-8")
    (res / "sweep-smoke-20260101-000000").mkdir()
    (res / "sweep-smoke-20260101-000000" / "sweep.html").write_text("<html></html>", encoding="utf-8")
    (res / "interactive").mkdir()
    return res


def test_runs_are_listed_newest_first_with_their_effective_status(tmp_path):
    listing = lifecycle.list_runs(_results(tmp_path))
    rows = {r.name: r for r in listing.runs}
    dated = [r.name for r in listing.runs if r.started]  # an unreadable one sorts by its folder's time
    assert dated == ["e-live", "d-killed", "c-interrupted", "b-failed", "a-ok"]
    assert {n: r.status for n, r in rows.items()} == {
        "a-ok": "ok",
        "b-failed": "failed",
        "c-interrupted": "interrupted",
        "d-killed": "dead",
        "e-live": "running",
        "f-garbled": "unreadable",
    }
    assert rows["d-killed"].recorded_status == "running" and rows["d-killed"].notebook == "04_cost_model"
    assert rows["d-killed"].wall_seconds == 300.0  # start to the last heartbeat
    assert rows["c-interrupted"].notebook == "02_projection_anatomy" and "SIGTERM" in rows["c-interrupted"].detail
    assert rows["b-failed"].notebook == "03_closed_book_exam" and rows["b-failed"].wall_seconds == 3.0
    assert {s.name for s in listing.skipped} == {"sweep-smoke-20260101-000000", "interactive"}
    text = lifecycle.format_listing(listing)
    assert text.splitlines()[0].split() == ["RUN", "STATUS", "PROFILE", "STARTED", "WALL", "NOTEBOOK"]
    assert "d-killed: dead: process" in text and "21.5 s" in text


def test_record_dead_marks_only_runs_whose_process_is_gone(tmp_path):
    res = _results(tmp_path)
    found = lifecycle.record_dead(res)
    assert [r.name for r in found] == ["d-killed"]
    killed = json.loads((res / "d-killed" / "run.json").read_text())
    assert killed["status"] == "dead" and "is gone" in killed["dead"]["reason"]
    assert killed["notebook_running"] == "04_cost_model"  # what it was doing is kept
    assert json.loads((res / "e-live" / "run.json").read_text())["status"] == "running"
    assert lifecycle.record_dead(res) == []  # recorded once: the next run does not warn again
    assert {r.name: r.status for r in lifecycle.list_runs(res).runs}["d-killed"] == "dead"


def test_runs_command_lists_and_prints_json(tmp_path, capsys):
    res = _results(tmp_path)
    assert cli.main(["runs", "--results", str(res), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["status"] for r in data["runs"]}["d-killed"] == "dead"
    assert cli.main(["runs", "--results", str(res)]) == 0
    assert "c-interrupted" in capsys.readouterr().out
    assert cli.main(["runs", "--results", str(tmp_path / "none")]) == 0
    assert "no run folders" in capsys.readouterr().err


def test_heartbeat_rewrites_run_json_while_the_block_runs(tmp_path):
    writes = []
    record = lifecycle.RunRecord(
        tmp_path / "run.json", {"status": "running"}, view=lambda d: writes.append(dict(d)) or d
    )
    with lifecycle.heartbeat(record, every=0.02):
        time.sleep(0.3)
    n = len(writes)
    time.sleep(0.1)
    assert n >= 3 and len(writes) == n  # it beat while the block ran, and stopped with it
    assert json.loads((tmp_path / "run.json").read_text())["heartbeat"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_signals_raise_run_interrupted_once_and_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(lifecycle.RunInterrupted) as info:
        with lifecycle.stop_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except lifecycle.RunInterrupted:
                assert lifecycle.stopping()
                os.kill(os.getpid(), signal.SIGINT)  # a second signal while stopping is ignored
                time.sleep(0.1)
                raise
    assert info.value.signum == signal.SIGTERM and info.value.exit_code == 143
    assert not lifecycle.stopping() and signal.getsignal(signal.SIGTERM) is before


# --------------------------------------------------------------------------- a real kernel, in process


def _chain(tmp_path: Path, monkeypatch, *cells: str) -> Path:
    """A one-notebook chain (``01_probe``) whose cells are `cells`; the path of its profile."""
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# probe\npurpose inputs outputs parameters"),
        nbformat.v4.new_code_cell(
            'run_dir: str = ""  # run folder\nseed: int = 7  # swept by a test', metadata={"tags": ["parameters"]}
        ),
        *[nbformat.v4.new_code_cell(c) for c in cells],
    ]
    nbformat.write(nb, nbdir / "01_probe.ipynb")
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", nbdir)
    prof = tmp_path / "probe.yaml"
    prof.write_text("description: a probe\nnotebooks: [01_probe]\n")
    return prof


#: A cell that records the kernel's pid, then has the runner signalled while it is still executing.
SIGNAL_RUNNER = (
    "import os, pathlib, signal, time\n"
    "pathlib.Path(run_dir, 'kernel.pid').write_text(str(os.getpid()))\n"
    "os.kill(os.getppid(), signal.{sig})\n"
    "time.sleep(120)"
)


@pytest.fixture
def kernel_signals(monkeypatch):
    """Every signal a kernel manager sends to its kernel, recorded (SIGINT is the interrupt)."""
    sent: list[int] = []
    original = AsyncKernelManager._async_signal_kernel

    async def spy(self, signum):
        sent.append(int(signum))
        return await original(self, signum)

    monkeypatch.setattr(AsyncKernelManager, "_async_signal_kernel", spy)
    return sent


def test_a_finished_kernel_is_shut_down_without_an_interrupt(tmp_path, monkeypatch, kernel_signals):
    # The SIGINT jupyter_client sent before every shutdown is what made ipykernel log
    # "KeyboardInterrupt caught in kernel." after successful runs.
    prof = _chain(tmp_path, monkeypatch, "x = 1")
    result = runner.run_profile(prof, results=tmp_path / "r", progress=False, render=False)
    assert signal.SIGINT not in kernel_signals
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["status"] == "ok" and info["pid"] == os.getpid() and info["host"] == HOST
    assert info["process_started"] == lifecycle.ProcessMark.current().started and info["heartbeat"]
    assert info["notebook_running"] is None


#: A cell that records the transport and address its kernel bound (ipykernel's own application).
WHERE_BOUND = (
    "import json, pathlib\n"
    "from ipykernel.kernelapp import IPKernelApp\n"
    "app = IPKernelApp.instance()\n"
    "pathlib.Path(run_dir, 'bound.json').write_text(json.dumps([app.transport, app.ip, app.shell_port]))"
)


def test_a_runs_kernel_binds_unix_sockets_of_its_own_and_leaves_none(tmp_path, monkeypatch):
    # On TCP, jupyter_client picks a kernel's ports before the kernel binds them: kernels of two processes
    # started at once could share a port ("Address already in use", "Invalid Signature").
    prof = _chain(tmp_path, monkeypatch, WHERE_BOUND)
    result = runner.run_profile(prof, results=tmp_path / "r", progress=False, render=False)
    transport, prefix, shell = json.loads((result.run_dir / "bound.json").read_text())
    assert transport == "ipc" and os.path.isabs(prefix) and shell >= 1
    assert os.path.basename(prefix).startswith(f"cl-{HOST.removeprefix('host-')}-{os.getpid()}-")
    assert not list(Path(prefix).parent.glob(Path(prefix).name + "-*"))  # its sockets went with it
    assert lifecycle.socket_prefix() != lifecycle.socket_prefix()


def test_notebooks_that_wait_on_each_other_start_one_kernel(tmp_path, monkeypatch):
    """Two notebooks the chain does not describe (the second waits on the first): a second kernel would only
    start and import beside the first, taking a core from it (`chain.width`)."""
    prof = _chain(tmp_path, monkeypatch, "x = 1")
    nbdir = tmp_path / "notebooks"
    (nbdir / "02_probe.ipynb").write_bytes((nbdir / "01_probe.ipynb").read_bytes())
    prof.write_text("description: two probes\nnotebooks: [01_probe, 02_probe]\n")
    started = []
    real = lifecycle.IdleShutdownKernelManager.start_kernel
    monkeypatch.setattr(
        lifecycle.IdleShutdownKernelManager, "start_kernel", lambda self, **kw: started.append(self) or real(self, **kw)
    )
    result = runner.run_profile(prof, results=tmp_path / "r", progress=False, render=False, kernels=2)
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["status"] == "ok" and [n["notebook"] for n in info["notebooks"]] == ["01_probe", "02_probe"]
    assert info["kernels"] == 1 and len(started) == 1


def test_with_no_short_socket_path_a_kernel_speaks_tcp(tmp_path, monkeypatch):
    short = tempfile.mkdtemp(prefix="cl")  # tmp_path itself may be too long for a Unix socket
    deep = str(tmp_path / ("d" * 120))
    monkeypatch.setattr(lifecycle, "jupyter_runtime_dir", lambda: deep)
    monkeypatch.setattr(lifecycle.tempfile, "gettempdir", lambda: short)
    assert lifecycle.socket_prefix().startswith(os.path.join(short, "cl-"))
    km = lifecycle.IdleShutdownKernelManager(kernel_name="python3")
    assert km.transport == "ipc" and km.ip.startswith(short)
    assert lifecycle.IdleShutdownKernelManager(kernel_name="python3", transport="tcp").transport == "tcp"
    monkeypatch.setattr(lifecycle.tempfile, "gettempdir", lambda: deep)
    assert lifecycle.socket_prefix() is None
    km = lifecycle.IdleShutdownKernelManager(kernel_name="python3")
    assert km.transport == "tcp" and km.ip in ("127.0.0.1", "localhost", "::1")
    os.rmdir(short)


def test_sockets_of_a_kernel_whose_process_was_killed_go_at_the_next_start(tmp_path, monkeypatch):
    """A kernel cleans its sockets up as it ends; one whose runner was killed outright cannot. Its sockets go
    when a kernel next picks the folder; a live process's, another host's and files not ours stay."""
    folder = tempfile.mkdtemp(prefix="cl")  # tmp_path itself may be too long for a Unix socket
    monkeypatch.setattr(lifecycle, "jupyter_runtime_dir", lambda: folder)
    here, dead, live = HOST.removeprefix("host-"), _exited_pid(), os.getpid()
    names = [
        f"cl-{here}-{dead}-{'a' * 16}-1",  # the one to go
        f"cl-{here}-{live}-{'b' * 16}-1",
        f"cl-{'0' * len(here)}-{dead}-{'c' * 16}-1",  # another host's: its process ids are not this host's
        f"cl-{here}-{dead}-notours",
        "kernel-1.json",
    ]
    try:
        for n in names:
            Path(folder, n).touch()
        assert lifecycle.socket_prefix().startswith(os.path.join(folder, f"cl-{here}-{live}-"))
        assert sorted(os.listdir(folder)) == sorted(names[1:])
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_mid_cell_marks_the_run_interrupted_and_ends_the_kernel(tmp_path, monkeypatch, sig):
    prof = _chain(tmp_path, monkeypatch, SIGNAL_RUNNER.format(sig=sig))
    t0 = time.monotonic()
    with pytest.raises(lifecycle.RunInterrupted) as info:
        runner.run_profile(prof, results=tmp_path / "r", progress=False)
    exc = info.value
    assert time.monotonic() - t0 < 60  # the cell's sleep was cut short
    assert exc.signum == getattr(signal, sig) and exc.exit_code == 128 + getattr(signal, sig)
    assert exc.notebook == "01_probe" and exc.run_dir.parent == (tmp_path / "r").resolve()
    run = json.loads((exc.run_dir / "run.json").read_text())
    assert run["status"] == "interrupted" and run["signal"] == sig and run["finished"]
    assert run["notebooks"][-1]["notebook"] == "01_probe" and run["notebooks"][-1]["status"] == "interrupted"
    assert (exc.run_dir / run["notebooks"][-1]["output"]).exists()  # the partial notebook is kept
    kernel = int((exc.run_dir / "kernel.pid").read_text())
    assert _wait_gone([kernel]) == []
    assert not lifecycle.stopping()


def test_run_command_interrupted_prints_one_line_and_exits_130(tmp_path, monkeypatch, capsys):
    prof = _chain(tmp_path, monkeypatch, SIGNAL_RUNNER.format(sig="SIGINT"))
    code = cli.main(["run", "--profile", str(prof), "--results", str(tmp_path / "r"), "--name", "stopped", "--quiet"])
    err = capsys.readouterr().err
    assert code == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [
        f"interrupted by SIGINT while 01_probe was executing (partial notebook kept): "
        f"run folder {(tmp_path / 'r' / 'stopped').resolve()} marked interrupted"
    ]


def test_an_interrupted_sweep_stops_and_keeps_its_comparison(tmp_path, monkeypatch):
    prof = _chain(tmp_path, monkeypatch, SIGNAL_RUNNER.format(sig="SIGTERM"))
    with pytest.raises(lifecycle.RunInterrupted) as info:
        sweep.run_sweep(prof, {"seed": [1, 2]}, results=tmp_path / "r", progress=False)
    exc = info.value
    assert exc.sweep_dir is not None and exc.run_dir is not None
    runs = [p for p in (tmp_path / "r").iterdir() if (p / "run.json").exists()]
    # The runs in flight (one per lane: `test_sweep_lanes`) are interrupted; none starts after them.
    assert exc.run_dir in runs and all(lifecycle.read_run_json(p)["status"] == "interrupted" for p in runs)
    table = pd.read_parquet(exc.sweep_dir / "sweep.parquet")
    assert set(table["status"]) == {"interrupted"} and sorted(table["run"]) == sorted(p.name for p in runs)


def test_a_dead_kernel_fails_the_run_instead_of_leaving_it_running(tmp_path, monkeypatch):
    prof = _chain(tmp_path, monkeypatch, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(runner.NotebookFailed) as info:
        runner.run_profile(prof, results=tmp_path / "r", progress=False, render=False)
    run = json.loads((info.value.run_dir / "run.json").read_text())
    assert run["status"] == "failed" and run["error"]["notebook"] == "01_probe"
    assert run["error"]["ename"] == "DeadKernelError"


# --------------------------------------------------------------------------- the real command, killed


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("compaction-lab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compaction_lab.cli"]


def _runs_json(results: Path) -> dict[str, dict]:
    r = subprocess.run(
        _script() + ["runs", "--results", str(results), "--json"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return {row["name"]: row for row in json.loads(r.stdout)["runs"]}


def _kernels_of(pid: int) -> list[int]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if "ipykernel" in " ".join(k.cmdline()):
                out.append(k.pid)
        except psutil.Error:
            pass
    return out


def _start_victim(
    results: Path, until: Any = None, args: tuple[str, ...] = (), what: str = "notebook 01"
) -> tuple[subprocess.Popen, list[int], dict]:
    """`run --profile smoke` in its own session, returned once `until(kernels, run.json)` holds (default:
    notebook 01 executes in a live kernel), with its kernels and that run.json."""

    def at_01(kernels: list[int], info: dict) -> bool:
        return bool(kernels) and info.get("notebook_running") == "01_context_composition"

    until = until or at_01
    # Eight chains rather than the smoke's two: 01 in a kernel warmed before the run takes ~1 s with two,
    # short enough for the signal to miss it.
    slower = ("--set", "n_chains=8")
    proc = subprocess.Popen(
        _script()
        + ["run", "--profile", "smoke", "--results", str(results), "--name", "victim", "--quiet", *slower, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run_json = results / "victim" / "run.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        kernels = _kernels_of(proc.pid)
        try:
            info = json.loads(run_json.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            info = {}
        if until(kernels, info):
            return proc, kernels, info
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the run never reached {what}: {proc.communicate()[1][-2000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_the_run_command_stopped_by_a_signal(tmp_path, sig):
    """Acceptance 5: interrupted (SIGINT / SIGTERM) or dead (SIGKILL) in `runs` and at the next `run`."""
    results = tmp_path / "results"
    proc, kernels, _ = _start_victim(results)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=120)
    assert _wait_gone(kernels) == []  # no kernel outlives its run, however it ended
    victim = str((results / "victim").resolve())
    if sig == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
        row = _runs_json(results)["victim"]
        assert row["status"] == "dead" and row["recorded_status"] == "running"
        assert row["notebook"] == "01_context_composition"
        # The next run says so (and records it), then runs as usual.
        tiny = tmp_path / "tiny.yaml"
        tiny.write_text(
            "description: tiny\nnotebooks: [01_context_composition]\nparameters: {n_chains: 1, window_tokens: 1500}\n"
        )
        nxt = subprocess.run(
            _script() + ["run", "--profile", str(tiny), "--results", str(results), "--quiet"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert nxt.returncode == 0, nxt.stderr[-3000:]
        warned = [ln for ln in nxt.stderr.splitlines() if "victim" in ln]
        assert len(warned) == 1 and warned[0].startswith("warning: run victim") and "marked dead" in warned[0]
        rows = _runs_json(results)
        assert rows["victim"]["status"] == "dead" and rows["victim"]["recorded_status"] == "dead"
        assert [r["status"] for n, r in rows.items() if n != "victim"] == ["ok"]
        return
    assert proc.returncode == 128 + getattr(signal, sig), err[-3000:]
    assert "Traceback" not in err
    assert f"interrupted by {sig}" in err and f"run folder {victim} marked interrupted" in err
    assert out == ""  # no run folder path on stdout: scripts must not take it for a finished run
    row = _runs_json(results)["victim"]
    assert row["status"] == "interrupted" and row["notebook"] == "01_context_composition"
    info = json.loads((results / "victim" / "run.json").read_text())
    assert info["signal"] == sig and (results / "victim" / "01_context_composition.ipynb").exists()


@pytest.mark.slow
def test_a_run_stopped_while_two_notebooks_execute(tmp_path):
    """With two kernels, SIGINT while 02 and 03 execute side by side: both kernels gone, both notebooks listed
    as interrupted with their partial notebooks kept, and nothing after them started."""
    results = tmp_path / "results"

    def two_at_once(kernels: list[int], info: dict) -> bool:
        running = info.get("notebooks_running") or []
        # Each executing in papermill: its notebook saved once (it is listed as running just before).
        return (
            len(kernels) == 2
            and len(running) == 2
            and all((results / "victim" / f"{nb}.ipynb").exists() for nb in running)
        )

    proc, kernels, info = _start_victim(results, two_at_once, ("--kernels", "2"), "two notebooks at once")
    assert info["notebooks_running"] == ["02_projection_anatomy", "03_closed_book_exam"]
    assert info["notebook_running"] == "02_projection_anatomy"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert _wait_gone(kernels) == []
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "interrupted by SIGINT" in err
    info = json.loads((results / "victim" / "run.json").read_text())
    assert info["status"] == "interrupted" and info["notebooks_running"] == [] and info["notebook_running"] is None
    by_name = {n["notebook"]: n for n in info["notebooks"]}
    assert by_name["01_context_composition"]["status"] == "ok"
    for nb in ("02_projection_anatomy", "03_closed_book_exam"):
        # Unless it ended in the instant before the signal, each is listed as cut short, its notebook kept.
        assert by_name[nb]["status"] in ("interrupted", "ok"), by_name[nb]
        assert (results / "victim" / f"{nb}.ipynb").exists()
    assert "interrupted" in {by_name[nb]["status"] for nb in ("02_projection_anatomy", "03_closed_book_exam")}
    assert not {"04_cost_model", "05_open_book_exam", "07_share"} & set(by_name)


@pytest.mark.slow
def test_a_run_stopped_while_its_second_kernel_warms(tmp_path):
    """With two kernels, the second starts (and imports) while 01 runs in the first: SIGINT then ends both,
    01 is listed as interrupted and the warming kernel, which ran no notebook, is in no list."""
    results = tmp_path / "results"

    def warming(kernels: list[int], info: dict) -> bool:
        return len(kernels) == 2 and info.get("notebooks_running") == ["01_context_composition"]

    proc, kernels, _ = _start_victim(results, warming, ("--kernels", "2"), "01 beside a warming kernel")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert _wait_gone(kernels) == []  # the warming kernel too
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    info = json.loads((results / "victim" / "run.json").read_text())
    assert info["status"] == "interrupted" and info["notebooks_running"] == []
    assert [n["notebook"] for n in info["notebooks"]] == ["01_context_composition"]


def test_odd_run_json_values_never_break_the_listing_or_the_next_run(tmp_path):
    """A run.json whose `error` or `dead` is not a mapping (hand-edited, another tool's) raised
    AttributeError in `runs`, and so before every later `compaction-lab run` (record_dead lists runs)."""
    for name, info in {
        "a-failed": {"status": "failed", "error": "boom", "started": "2026-01-01T00:00:00+00:00"},
        "b-dead": {"status": "dead", "dead": ["x"], "started": "2026-01-02T00:00:00+00:00"},
        "c-odd": {"status": "ok", "started": ["not", "a", "time"], "seconds": "slow"},
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps(info))
    rows = {r.name: r for r in lifecycle.list_runs(tmp_path).runs}
    assert set(rows) == {"a-failed", "b-dead", "c-odd"}
    assert rows["a-failed"].status == "failed" and rows["b-dead"].status == "dead"
    assert lifecycle.record_dead(tmp_path) == []
    assert cli.main(["runs", "--results", str(tmp_path), "--json"]) == 0


# --------------------------------------------------------------------------- a kernel that never started


def test_a_kernel_that_died_before_its_first_reply_is_started_again(monkeypatch, capsys):
    """CI once saw a kernel die at start ("Address already in use": another process took a port
    jupyter_client had picked); no cell had run, so the run starts it again — once. Any other error, or
    a second death, is the notebook's failure."""
    from compaction_lab.run import runner as run

    calls: list[str] = []

    def flaky(src, out, **kwargs):
        calls.append(src)
        if len(calls) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "executed"

    monkeypatch.setattr(run.pm, "execute_notebook", flaky)
    assert run.execute_notebook("nb/03_closed_book_exam.ipynb", "out.ipynb", parameters={}) == "executed"
    assert len(calls) == 2 and "03_closed_book_exam: the kernel died" in capsys.readouterr().err

    def always(src, out, **kwargs):
        calls.append(src)
        raise RuntimeError("Kernel died before replying to kernel_info")

    calls.clear()
    monkeypatch.setattr(run.pm, "execute_notebook", always)
    with pytest.raises(RuntimeError, match="kernel_info"):
        run.execute_notebook("a.ipynb", "b.ipynb")
    assert len(calls) == run.KERNEL_START_ATTEMPTS

    def other(src, out, **kwargs):
        calls.append(src)
        raise RuntimeError("a cell raised")

    calls.clear()
    monkeypatch.setattr(run.pm, "execute_notebook", other)
    with pytest.raises(RuntimeError, match="a cell raised"):
        run.execute_notebook("a.ipynb", "b.ipynb")
    assert len(calls) == 1

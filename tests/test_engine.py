"""The engine on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on 127.0.0.1.

Tallies and sweeps run there give the same tables as in this process; a
worker killed (SIGKILL) in the middle of a sweep's run costs neither a run
folder nor a paid model call.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import dask
import pandas as pd
import pytest
import yaml

from compaction_lab import cli
from compaction_lab.engine import scheduler as engine
from compaction_lab.ingest import ImportAudit, load_sessions
from compaction_lab.run import lifecycle
from compaction_lab.tally import composition
from tests.fake_openai_server import FakeOpenAIServer
from tests.helpers import FIXTURES

BIN = Path(sys.executable).parent
FIXTURE_PATHS = [str(FIXTURES)]  # the real public sessions (tests/fixtures/public) included


# --------------------------------------------------------------------------- the cluster


def _wait(predicate, timeout: float, what: str, poll: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Cluster:
    """A scheduler and two workers started with the `distributed` command-line tools."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.folder = folder
        self.env = env
        self.scheduler_file = folder / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self.address = ""

    def start(self) -> Cluster:
        self.log = log = open(self.folder / "cluster.log", "ab")
        self.procs.append(
            subprocess.Popen(
                [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0"]
                + ["--scheduler-file", str(self.scheduler_file)],
                stdout=log,
                stderr=log,
                env=self.env,
            )
        )
        info = _wait(lambda: self._scheduler_info(), 60, "the scheduler file")
        self.address = info["address"]
        for _ in range(2):
            self.procs.append(
                subprocess.Popen(
                    [str(BIN / "dask"), "worker", self.address, "--nthreads", "1", "--nworkers", "1"]
                    + ["--host", "127.0.0.1", "--no-dashboard", "--local-directory", str(self.folder / "work")],
                    stdout=log,
                    stderr=log,
                    env=self.env,
                )
            )
        from distributed import Client

        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(2, timeout=90)
        return self

    def _scheduler_info(self) -> dict | None:
        try:
            return json.loads(self.scheduler_file.read_text())
        except (OSError, ValueError):
            return None

    def worker_pids(self) -> list[int]:
        from distributed import Client

        with Client(self.address, timeout="30s") as c:
            return sorted(c.run(os.getpid).values())

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.log.close()


@pytest.fixture(scope="module")
def server():
    # Slow enough answers that a worker can be killed between two calls of one notebook.
    with FakeOpenAIServer(default_delay=0.15) as s:
        yield s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, server):
    folder = tmp_path_factory.mktemp("dask")
    env = {**os.environ, "COMPACTION_LAB_CHECKPOINTS": str(folder / "checkpoints.sqlite")}
    c = Cluster(folder, env).start()
    yield c
    c.stop()


# --------------------------------------------------------------------------- tally


pytestmark = pytest.mark.slow


def test_tally_of_every_fixture_on_the_cluster_equals_this_process(cluster):
    here = composition.tally(FIXTURE_PATHS, scheduler="sync")
    there = composition.tally(FIXTURE_PATHS, scheduler=cluster.address)
    assert there.stats.engine == "cluster" and here.stats.engine == "sync"
    pd.testing.assert_frame_equal(there.table, here.table)
    assert there.audit == here.audit
    # ... and both equal the plain reading of the library (one session at a time, no engine).
    audit = ImportAudit()
    plain = composition.composition_table(list(load_sessions(FIXTURE_PATHS, audit)), scheduler="sync")
    pd.testing.assert_frame_equal(here.table, plain)
    assert here.audit == audit and audit.sessions > 30


def test_tally_command_prints_the_same_table_on_the_cluster(cluster, capsys):
    assert cli.main(["tally", "--json", "--scheduler", "sync", *FIXTURE_PATHS]) == 0
    here = json.loads(capsys.readouterr().out)
    assert cli.main(["tally", "--json", "--scheduler", cluster.address, *FIXTURE_PATHS]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == here
    assert f"cluster {cluster.address}" in out.err  # where the work ran is said, with the dashboard


def _multi_session_rollout(folder: Path) -> Path:
    """One Codex file holding every Codex fixture session back to back (several sessions, one file)."""
    files = sorted((FIXTURES / "codex").glob("*.jsonl"))
    ids = set()
    out = folder / "many.jsonl"
    with out.open("wb") as f:
        for p in files:
            data = p.read_bytes()
            first = json.loads(data.split(b"\n", 1)[0])
            if first.get("type") == "session_meta":
                sid = first["payload"].get("id")
                if sid in ids:
                    continue
                ids.add(sid)
            f.write(data if data.endswith(b"\n") else data + b"\n")
    assert len(ids) >= 2
    return out


def test_a_large_file_split_into_spans_on_the_cluster_equals_one_reading(cluster, tmp_path, monkeypatch):
    path = _multi_session_rollout(tmp_path)
    whole = composition.tally([path], scheduler="sync")
    # Spans of a few kilobytes: every session boundary becomes a cut.
    monkeypatch.setattr(composition, "SPAN_BYTES", 2048)
    split = composition.tally([path], scheduler=cluster.address)
    assert split.stats.units > 1 and whole.stats.units == 1
    pd.testing.assert_frame_equal(split.table, whole.table)
    assert split.audit == whole.audit


def test_sessions_read_in_pieces_by_both_workers_equal_one_reading(cluster, tmp_path, monkeypatch):
    """Each session its own span, cut into pieces of ~500 bytes read by both workers at once and stitched
    in order; the same sessions again in another file are still recognised (digests from one reading)."""
    path = _multi_session_rollout(tmp_path)
    (tmp_path / "again").mkdir()
    again = tmp_path / "again" / path.name
    again.write_bytes(path.read_bytes())
    whole = composition.tally([path, again], scheduler="sync")
    monkeypatch.setattr(composition, "SPAN_BYTES", 2048)
    split = composition.tally([path, again], scheduler=cluster.address, piece_bytes=500)
    assert split.stats.parts > 2 * split.stats.units > 4 and whole.audit.reasons["duplicate_session"] > 0
    pd.testing.assert_frame_equal(split.table, whole.table)
    assert split.audit == whole.audit


def test_a_task_on_every_worker_runs_once_on_each(cluster):
    with engine.open_engine(cluster.address, announce=False) as eng:
        handles = eng.on_every_worker(os.getpid)
        assert sorted(h.result() for h in handles) == cluster.worker_pids()
    with engine.open_engine("sync") as eng:
        assert eng.on_every_worker(os.getpid) == []


def test_import_reads_on_the_cluster_and_writes_one_archive(cluster, tmp_path, capsys):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    assert cli.main(["import", "--quiet", "--archive", str(a), "--scheduler", "sync", *FIXTURE_PATHS]) == 0
    assert cli.main(["import", "--quiet", "--archive", str(b), "--scheduler", cluster.address, *FIXTURE_PATHS]) == 0
    query = "SELECT session_id, entry_id, block_index, kind, text FROM records ORDER BY rowid"
    with sqlite3.connect(a) as ca, sqlite3.connect(b) as cb:
        assert ca.execute(query).fetchall() == cb.execute(query).fetchall()


# --------------------------------------------------------------------------- sweep


def _profile(folder: Path, server: FakeOpenAIServer, ledger: Path) -> Path:
    """The chain's model notebooks on a tiny bank, against the scripted endpoint, with its own ledger."""
    prof = {
        "description": "engine test: summaries and the closed-book reader from the scripted endpoint",
        "notebooks": ["01_context_composition", "03_closed_book_exam"],
        "parameters": {
            "seed": 7,
            "n_chains": 2,
            "window_tokens": 4000,
            "decoys_per_chain": 2,
            "window": 2000,
            "output_ceiling": 500,
            "summarizer": "model",
            "reader": "model",
            "model": {
                "base_url": server.base_url,
                "model": "fake-model",
                "api_key_env": "",
                "concurrency": 1,
                "timeout_s": 30,
                "max_retries": 0,
                "ledger": str(ledger),
            },
            "strategy_names": ["full", "codex"],
            "n_cases": 2,
            "n_questions": 6,
            "n_decoys": 2,
            "tail_tokens": 600,
            "n_boot": 50,
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "engine-test.yaml"
    path.write_text(yaml.safe_dump(prof))
    return path


def _sweep(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "compaction-lab"), "run", "--quiet", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _runs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith("sweep-"))


def _done_rows(ledger: Path) -> int:
    try:
        with sqlite3.connect(ledger, timeout=5) as c:
            return c.execute("SELECT count(*) FROM calls WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _sweep_tables(sweep_dir: Path) -> pd.DataFrame:
    table = pd.read_parquet(sweep_dir / "sweep.parquet").drop(columns=["run"])
    return table.sort_values(list(table.columns)).reset_index(drop=True)


def test_a_sweep_on_the_cluster_survives_a_killed_worker(cluster, server, tmp_path, monkeypatch, warm_kernels):
    """Two runs as tasks on two workers; the worker running one of them is SIGKILLed after it paid for
    some calls. Dask retries the run: it completes, exactly two complete run folders remain (the dead
    attempt moved aside), the ledger holds one answer per request and no finished call is asked again;
    the tables equal the same sweep run in this process (its own ledger, the workers' checkpoint store)."""
    from compaction_lab.run import sweep as sweep_mod
    from compaction_lab.store.checkpoints import CHECKPOINTS_ENV

    env = {**cluster.env}
    # In this process first (in the worker's warm kernels): the reference tables, with a ledger of its own.
    ref_ledger, ledger = tmp_path / "ref-ledger.sqlite", tmp_path / "ledger.sqlite"
    ref_prof, prof = _profile(tmp_path / "ref", server, ref_ledger), _profile(tmp_path, server, ledger)
    monkeypatch.setenv(CHECKPOINTS_ENV, env[CHECKPOINTS_ENV])
    ref = sweep_mod.run_sweep(
        str(ref_prof),
        {"window": [2000, 2400]},
        results=tmp_path / "ref-r",
        progress=False,
        notebook_html=False,
        launch=warm_kernels,
    )
    assert [st for _, _, st in ref.runs] == ["ok", "ok"], ref.runs
    first_requests = server.count()
    sweep = ["--sweep", "window=2000,2400", "--no-html"]  # tables and the ledger are read, no page

    results = tmp_path / "r"
    proc = _sweep(
        ["--profile", str(prof), *sweep, "--scheduler", cluster.address, "--results", str(results)], tmp_path, env
    )
    try:
        # A run past its first paid calls, in notebook 03 (the closed-book reader asks the model there).
        def victim() -> tuple[Path, dict] | None:
            if not results.exists() or _done_rows(ledger) < 3:
                return None
            for run in _runs(results):
                info = lifecycle.read_run_json(run)
                if info.get("status") == lifecycle.RUNNING and info.get("notebook_running") == "03_closed_book_exam":
                    return run, info
            return None

        killed, info = _wait(victim, 400, "a run in notebook 03 with paid calls")
        pid = info["pid"]
        assert pid in cluster.worker_pids()  # the run executes in a worker process
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err

    runs = _runs(results)
    assert len(runs) == 2, runs
    assert [lifecycle.read_run_json(r)["status"] for r in runs] == ["ok", "ok"]
    sweep_dir = Path(out.strip().splitlines()[-1])
    attempts = list((sweep_dir / "attempts").iterdir())
    assert [a.name for a in attempts] == [f"{killed.name}.attempt-1"]
    assert lifecycle.read_run_json(attempts[0])["status"] in (lifecycle.RUNNING, lifecycle.DEAD)

    # One answer per request in the ledger; no request whose answer was recorded was sent again.
    with sqlite3.connect(ledger) as c:
        done = Counter(fp for (fp,) in c.execute("SELECT request_fingerprint FROM calls WHERE status = 'done'"))
        statuses = Counter(s for (s,) in c.execute("SELECT status FROM calls"))
    assert done and max(done.values()) == 1
    assert statuses["started"] == 0  # the dead attempt's call in flight (if any) is marked failed
    sent = Counter(server.fingerprints()[first_requests:])
    repeated = [fp for fp, n in sent.items() if n > 1]
    # Only the call in flight at the kill may have gone out twice: it has no answer from the dead attempt.
    assert len(repeated) <= 1 and statuses["failed"] >= len(repeated)
    assert sum(sent.values()) <= len(done) + 1

    pd.testing.assert_frame_equal(_sweep_tables(sweep_dir), _sweep_tables(ref.folder))


# --------------------------------------------------------------------------- the scheduler setting


def test_scheduler_setting_order_and_errors(monkeypatch):
    monkeypatch.delenv(engine.SCHEDULER_ENV, raising=False)
    assert engine.scheduler_setting() == "auto"
    assert engine.scheduler_setting(None, "local") == "local"
    monkeypatch.setenv(engine.SCHEDULER_ENV, "tcp://127.0.0.1:8786")
    assert engine.scheduler_setting(None, "local") == "tcp://127.0.0.1:8786"
    assert engine.scheduler_setting("sync", "local") == "sync"
    with pytest.raises(engine.EngineError, match="--scheduler: 'fast'"):
        engine.scheduler_setting("fast")
    monkeypatch.setenv(engine.SCHEDULER_ENV, "everywhere")
    with pytest.raises(engine.EngineError, match=engine.SCHEDULER_ENV):
        engine.scheduler_setting()


def test_auto_runs_small_inputs_here():
    with engine.open_engine("auto", input_bytes=1000) as eng:
        assert eng.kind == "sync" and not eng.distributed and eng.dashboard is None
    with engine.open_engine("auto", input_bytes=None) as eng:
        assert eng.kind == "sync"


def _set_marker(value: str) -> int:
    os.environ["COMPACTION_LAB_TEST_POOL_MARKER"] = value
    return os.getpid()


def _marker() -> str | None:
    return os.environ.get("COMPACTION_LAB_TEST_POOL_MARKER")


def _fails_once(path: str) -> str:
    if not os.path.exists(path):
        Path(path).write_text("failed once")
        raise RuntimeError("first attempt")
    return "second attempt"


def test_a_pool_runs_tasks_in_forked_workers_that_have_what_was_prepared_here(monkeypatch, tmp_path):
    monkeypatch.delenv("COMPACTION_LAB_TEST_POOL_MARKER", raising=False)
    with engine.open_engine(engine.POOL, workers=2, announce=False) as eng:
        assert eng.kind == "pool" and eng.distributed and eng.dashboard is None and eng.workers == 2
        assert "2 worker process(es) forked" in eng.describe()
        (prepared,) = eng.on_every_worker(_set_marker, "loaded before the fork")
        assert prepared.result() == os.getpid()  # ran here, before the workers were forked
        pids = {eng.submit(os.getpid).result() for _ in range(8)}
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
        assert eng.submit(_marker).result() == "loaded before the fork"
        ordered = [h.result() for _, h in eng.ordered(range(6), lambda e, i: e.submit(pow, i, 2), window=1)]
        assert ordered == [0, 1, 4, 9, 16, 25]
        assert eng.submit(pow, eng.submit(pow, 2, 3), 2).result() == 64  # a handle as an argument: its value
        bad = eng.submit(int, "x")
        with pytest.raises(ValueError):
            bad.result()
        assert eng.submit(_fails_once, str(tmp_path / "once"), retries=1).result() == "second attempt"
        bad.release()
        with pytest.raises(RuntimeError, match="released"):
            bad.result()
        # Once the workers run, a set-up task runs on them (as tasks).
        assert [h.result() for h in eng.on_every_worker(_marker)] == ["loaded before the fork"] * 2


def test_an_import_and_a_composition_on_a_pool_equal_this_process():
    audit, pooled_audit = ImportAudit(), ImportAudit()
    here = list(load_sessions(FIXTURE_PATHS, audit))
    pooled = list(load_sessions(FIXTURE_PATHS, pooled_audit, engine=engine.POOL))
    assert pooled == here and pooled_audit == audit
    pd.testing.assert_frame_equal(
        composition.composition_table(here, scheduler=engine.POOL),
        composition.composition_table(here, scheduler="sync"),
    )


def test_a_ctrl_c_ends_a_pools_worker_quietly(capfd):
    from concurrent.futures.process import BrokenProcessPool

    with engine.open_engine(engine.POOL, workers=1, announce=False) as eng:
        pid = eng.submit(os.getpid).result()
        os.kill(pid, signal.SIGINT)
        with pytest.raises(BrokenProcessPool):
            for _ in range(100):
                eng.submit(time.sleep, 0.05).result()
    assert "Traceback" not in capfd.readouterr().err  # the client says the stop, in one line


_POOL_CLIENT = """
import os, sys, time
from compaction_lab.engine import scheduler


def nap(seconds):
    os.write(1, b"started\\n")  # one write: the two workers' lines never interleave
    time.sleep(seconds)


eng = scheduler.open_engine("pool", workers=2, announce=False)
try:
    handles = [eng.submit(nap, float(sys.argv[1])) for _ in range(2)]
    [h.result() for h in handles]
    print("done", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
finally:
    eng.close()
"""


@pytest.mark.parametrize("ignored", [False, True])
def test_ctrl_c_at_a_terminal_stops_a_pool_and_its_client_in_one_go(ignored):
    """Ctrl-C reaches the process group: the workers end quietly, the client is interrupted; a client
    started ignoring it (in the background) has workers that ignore it too."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [sys.executable, "-c", _POOL_CLIENT, "3" if ignored else "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=ignore if ignored else None,
    )
    assert proc.stdout is not None and [proc.stdout.readline() for _ in range(2)] == ["started\n"] * 2
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert out == ("done\n" if ignored else "interrupted\n") and "Traceback" not in err


def test_auto_picks_a_pool_only_for_jobs_that_accept_one(monkeypatch):
    monkeypatch.delenv(engine.SCHEDULER_ENV, raising=False)
    monkeypatch.setattr(engine, "fork_available", lambda: True)
    with engine.open_engine("auto", input_bytes=engine.POOL_FROM_BYTES, pool=True, announce=False) as eng:
        assert eng.kind == "pool"
    with engine.open_engine("auto", input_bytes=engine.POOL_FROM_BYTES - 1, pool=True) as eng:
        assert eng.kind == "sync"
    with engine.open_engine("auto", input_bytes=engine.POOL_FROM_BYTES) as eng:
        assert eng.kind == "sync"  # below SYNC_BELOW_BYTES: a job without pool=True keeps its cut-over
    monkeypatch.setattr(engine, "fork_available", lambda: False)
    with engine.open_engine("auto", input_bytes=engine.POOL_FROM_BYTES, pool=True) as eng:
        assert eng.kind == "sync"
    assert engine.POOL_FROM_BYTES < engine.SYNC_BELOW_BYTES


def test_an_unreachable_scheduler_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1.0)
    with pytest.raises(engine.EngineError, match="tcp://127.0.0.1:9"):
        engine.open_engine("tcp://127.0.0.1:9")
    assert cli.main(["tally", "--scheduler", "tcp://127.0.0.1:9", str(FIXTURES / "pi")]) == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_a_task_error_is_raised_where_its_result_is_asked(cluster):
    with engine.open_engine("sync") as eng:
        h = eng.submit(int, "x")
        with pytest.raises(ValueError):
            h.result()
    with engine.open_engine(cluster.address, announce=False) as eng:
        assert eng.kind == "cluster" and eng.workers == 2
        assert [h.result() for _, h in eng.ordered(range(5), lambda e, i: e.submit(pow, i, 2), window=1)] == [
            0,
            1,
            4,
            9,
            16,
        ]


# --------------------------------------------------------------------------- an address that is not a usable scheduler

#: What an SSH server says first, unasked (RFC 4253); Dask read its first 8 bytes as a frame length.
SSH_GREETING = b"SSH-2.0-OpenSSH_9.6\r\n"
#: Seconds the engine waits in these tests (monkeypatched), and what a test allows for it all.
PROBE_S, BOUND_S = 1.0, 8.0


@contextlib.contextmanager
def _listener(greeting: bytes | None) -> Iterator[str]:
    """A TCP service on 127.0.0.1 that accepts, sends `greeting` (None: nothing) and holds each connection."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            if greeting:
                conn.sendall(greeting)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _http_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 (it waits for a request line, as the suite's own web services do)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(5)


@contextlib.contextmanager
def _closed_port() -> Iterator[str]:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    yield f"tcp://127.0.0.1:{port}"


#: Each kind of wrong address, and what the error says was found there.
NOT_SCHEDULERS = {
    "http": (_http_server, "no Dask handshake"),
    "silent": (lambda: _listener(None), "no Dask handshake"),
    "ssh": (lambda: _listener(SSH_GREETING), "SSH-2.0-OpenSSH_9.6"),
    "closed": (_closed_port, "nothing listens"),
}


def _bounded(fn, *args, limit: float = BOUND_S, **kwargs):
    """``fn(*args, **kwargs)``'s value (or the exception it raised) and the seconds it took; fails, not hangs,
    past `limit`."""
    box: dict = {}

    def call() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the test, which asserts on it
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(limit)
    elapsed = time.monotonic() - start
    assert not t.is_alive(), f"still waiting after {limit:.0f} s"
    return box.get("value"), box.get("error"), elapsed


@pytest.fixture
def short_probe(monkeypatch):
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", PROBE_S)
    monkeypatch.delenv(engine.SCHEDULER_ENV, raising=False)


@pytest.mark.parametrize("kind", sorted(NOT_SCHEDULERS))
def test_a_service_that_is_not_a_dask_scheduler_is_a_clear_error_in_bounded_time(kind, short_probe):
    make, found = NOT_SCHEDULERS[kind]
    with make() as address:
        value, error, elapsed = _bounded(engine.open_engine, address, announce=False)
    if value is not None:
        value.close()
    assert isinstance(error, engine.EngineError), repr(error)
    assert address in str(error) and found in str(error)
    assert "\n" not in str(error)
    assert elapsed < PROBE_S + 3


@pytest.mark.parametrize("kind", sorted(NOT_SCHEDULERS))
def test_the_cli_says_one_line_for_a_wrong_scheduler_and_writes_no_archive(kind, short_probe, tmp_path, capsys):
    make, found = NOT_SCHEDULERS[kind]
    archive = tmp_path / "history.sqlite"
    with make() as address:
        for argv in (
            ["tally", "--scheduler", address, str(FIXTURES / "pi")],
            ["import", "--quiet", "--archive", str(archive), "--scheduler", address, str(FIXTURES / "pi")],
        ):
            code, error, elapsed = _bounded(cli.main, argv)
            err = capsys.readouterr().err
            assert error is None, repr(error)
            assert code == 2 and elapsed < PROBE_S + 3
            assert "Traceback" not in err
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and address in lines[0] and found in lines[0]
    # The engine is checked before the archive is opened: nothing is left behind.
    assert not archive.exists() and list(tmp_path.iterdir()) == []


def test_an_existing_archive_is_untouched_when_the_scheduler_cannot_be_reached(short_probe, tmp_path, capsys):
    archive = tmp_path / "history.sqlite"
    assert cli.main(["import", "--quiet", "--archive", str(archive), "--scheduler", "sync", str(FIXTURES / "pi")]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    with _closed_port() as address:
        assert cli.main(["import", "--quiet", "--archive", str(archive), "--scheduler", address, str(FIXTURES)]) == 2
    assert "nothing listens" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


# --------------------------------------------------------------------------- tls://


#: Dask's TLS settings for a client (docs/cluster.md; Dask's "TLS/SSL" docs).
TLS_KEYS = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert", "distributed.comm.tls.client.key")


@contextlib.contextmanager
def _tls_settings(ca: str | None, cert: str | None, key: str | None) -> Iterator[None]:
    """Dask's TLS settings (`TLS_KEYS`) for the block, with `distributed` imported first.

    ``dask.config.set`` removes on exit a section it found missing: entered before `distributed` was
    imported, it took distributed's defaults with it, and every later test of the process that asks
    Dask for one (``distributed.comm.timeouts.connect``) failed with ``KeyError('distributed')``.
    """
    import distributed  # noqa: F401  (its defaults in Dask's config before the settings are set)

    with dask.config.set(dict(zip(TLS_KEYS, (ca, cert, key), strict=True))):
        yield


def test_tls_without_dask_tls_settings_is_refused_clearly(short_probe, tmp_path, capsys):
    with _listener(None) as plain, _tls_settings(None, None, None):
        address = plain.replace("tcp://", "tls://")
        value, error, elapsed = _bounded(engine.open_engine, address, announce=False)
        assert isinstance(error, engine.EngineError), repr(error)
        assert "tls:// needs Dask's TLS settings" in str(error) and address in str(error)
        assert "distributed.comm.tls.ca-file" in str(error) and elapsed < 2
        archive = tmp_path / "h.sqlite"
        code, error, _ = _bounded(
            cli.main, ["import", "--quiet", "--archive", str(archive), "--scheduler", address, str(FIXTURES)]
        )
    err = capsys.readouterr().err
    assert error is None and code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: tls:// needs Dask's TLS settings") and address in lines[0]
    assert not archive.exists()


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key (the cluster's own CA, as Dask's TLS docs describe), made by openssl."""
    cert, key = folder / "dask.crt", folder / "dask.key"
    subprocess.run(
        [
            shutil.which("openssl") or "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ]
        + ["-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=compaction-lab-test"],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_with_dask_tls_settings_reaches_a_tls_scheduler_and_refuses_other_services(tmp_path, short_probe):
    cert, key = _self_signed(tmp_path)
    info = tmp_path / "scheduler.json"
    log = open(tmp_path / "scheduler.log", "ab")
    proc = subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0"]
        + ["--dashboard-address", ":0", "--scheduler-file", str(info)]
        + ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)],
        stdout=log,
        stderr=log,
    )
    try:
        address = _wait(lambda: json.loads(info.read_text())["address"] if info.exists() else None, 60, "the scheduler")
        assert address.startswith("tls://")
        with _tls_settings(str(cert), str(cert), str(key)):
            with engine.open_engine(address, announce=False) as eng:
                # Connected and registered over TLS (the scheduler has no workers: nothing is submitted).
                assert eng.kind == "cluster" and eng.client.scheduler.address == address
                assert eng.client.scheduler_info()["address"] == address
            # The same settings against services that are not a TLS Dask scheduler: a clear error, quickly.
            for make, found in ((lambda: _listener(None), "no TLS answer"), (lambda: _listener(SSH_GREETING), "TLS")):
                with make() as plain:
                    wrong = plain.replace("tcp://", "tls://")
                    _, error, elapsed = _bounded(engine.open_engine, wrong, announce=False)
                assert isinstance(error, engine.EngineError) and wrong in str(error) and found in str(error), error
                assert elapsed < PROBE_S + 3
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def test_an_engine_error_from_any_command_is_one_line_and_exit_2(monkeypatch, capsys):
    with _closed_port() as address:

        def reaches_a_wrong_scheduler(args):
            return engine.open_engine(address, announce=False)

        # A command that does not catch the engine's error itself (here: `history search`, stood in for).
        from compaction_lab.cli import history as cli_sessions

        monkeypatch.setattr(cli_sessions, "_cmd_history_search", reaches_a_wrong_scheduler)
        assert cli.main(["history", "search", "anything"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"error: cannot reach the Dask scheduler at {address}: nothing listens there (connection refused)"
    ]


def test_a_workers_address_is_not_taken_for_the_scheduler(cluster, short_probe):
    from distributed import Client

    with Client(cluster.address, timeout="30s") as c:
        worker = sorted(c.scheduler_info()["workers"])[0]
    _, error, elapsed = _bounded(engine.open_engine, worker, announce=False)
    assert isinstance(error, engine.EngineError), repr(error)
    assert worker in str(error) and "not a worker's" in str(error) and elapsed < PROBE_S + 3


def test_import_follows_the_scheduler_environment_variable(short_probe, monkeypatch, tmp_path, capsys):
    archive = tmp_path / "history.sqlite"
    with _closed_port() as address:
        monkeypatch.setenv(engine.SCHEDULER_ENV, address)
        assert cli.main(["import", "--quiet", "--archive", str(archive), str(FIXTURES / "pi")]) == 2
    assert address in capsys.readouterr().err and not archive.exists()
    # --scheduler wins over it.
    assert cli.main(["import", "--quiet", "--archive", str(archive), "--scheduler", "sync", str(FIXTURES / "pi")]) == 0


# --------------------------------------------------------------------------- a stop signal in the workers


def _sigint_handler_name() -> str:
    handler = signal.getsignal(signal.SIGINT)
    return getattr(handler, "__qualname__", str(handler))


def test_an_embedded_clusters_workers_wrap_their_sigint_handling():
    """Was: a terminal's Ctrl-C reached the worker processes too, and Dask printed the broken pipes of the
    cluster's teardown as ERROR tracebacks beside the command's one line (seen once in CI)."""
    with engine.open_engine(engine.LOCAL, workers=1, announce=False) as eng:
        assert set(eng.client.run(_sigint_handler_name).values()) == {"dask_setup.<locals>.stopping"}


def test_a_stop_signal_in_a_worker_quiets_dask_logs_and_still_stops_it(monkeypatch):
    import logging

    log = logging.getLogger("distributed")
    monkeypatch.setattr(log, "level", logging.INFO)
    for handler in log.handlers:  # restored after the test
        monkeypatch.setattr(handler, "level", handler.level)
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        engine.dask_setup(None)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of the main thread
        assert seen == [signal.SIGINT]  # the worker's own handling follows
        assert log.getEffectiveLevel() == logging.CRITICAL
        # With no handler of its own (the default), the signal still interrupts.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        engine.dask_setup(None)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- issue 44 item 18: credentials in an address


@pytest.mark.parametrize(
    "address",
    [
        "tcp://user:pa55word@127.0.0.1:1",
        "tcp://user:pa55word@127.0.0.1",
        "tls://user:pa55word@127.0.0.1:1",
        "ws://user:pa55word@127.0.0.1:1",
        "inproc://user:pa55word@127.0.0.1:1",
    ],
)
def test_a_scheduler_error_never_repeats_the_credentials_of_its_address(address, short_probe, capsys):
    """Was: ``tcp://user:pa55word@... is not a scheduler address: invalid address 'user:pa55word@...'``."""
    value, error, _ = _bounded(engine.open_engine, address, announce=False)
    if value is not None:
        value.close()
    assert isinstance(error, engine.EngineError), repr(error)
    assert "pa55word" not in str(error) and "user:" not in str(error) and "***@127.0.0.1" in str(error)
    assert cli.main(["tally", "--scheduler", address, str(FIXTURES / "pi")]) == 2
    err = capsys.readouterr().err
    assert "pa55word" not in err and "user:" not in err and "Traceback" not in err


def test_a_scheduler_setting_that_is_no_address_never_repeats_a_credential(monkeypatch):
    monkeypatch.delenv(engine.SCHEDULER_ENV, raising=False)
    with pytest.raises(engine.EngineError) as e:
        engine.scheduler_setting("user:pa55word@host:8786")
    assert "pa55word" not in str(e.value) and "***@host:8786" in str(e.value)

"""The ledger of model calls: schema, life cycle, reuse lookups, costs, several processes writing at once."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from compaction_lab.core import paths
from compaction_lab.endpoints import ChatClient, ModelConfig, Usage, prices
from compaction_lab.store.ledger import CALL_COLUMNS, SCHEMA_VERSION, Ledger, open_ledger
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}
RESPONSE = completion("hello", usage={"prompt_tokens": 10, "completion_tokens": 2})


def _start(ledger: Ledger, fp: str = "fp1", **kw) -> int:
    args = {
        "fingerprint": fp,
        "shape_fingerprint": "shape",
        "model": "m",
        "base_url": "http://x/v1",
        "purpose": "summary",
        "request": REQUEST,
        **kw,
    }
    return ledger.start(**args)


def test_schema_and_wal(tmp_path):
    path = tmp_path / "deep" / "er" / "ledger.sqlite"
    Ledger(path)
    Ledger(path)  # opening again keeps the schema
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        cols = {r[1] for r in conn.execute("PRAGMA table_info(calls)")}
    finally:
        conn.close()
    assert set(CALL_COLUMNS) <= cols and {"request_json", "response_json", "pid", "host"} <= cols


def test_start_finish_fail(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    a = _start(ledger, "fa")
    b = _start(ledger, "fb", purpose="exam")
    assert b > a
    ledger.finish(a, response=RESPONSE, usage=Usage(10, 4, 2), latency_s=0.25, cost=0.5, currency="CNY")
    ledger.fail(b, "ProviderTimeout: no answer")
    df = ledger.calls()
    assert list(df.columns) == list(CALL_COLUMNS)
    ra, rb = df.iloc[0], df.iloc[1]
    assert (ra["status"], ra["prompt_tokens"], ra["cached_tokens"], ra["completion_tokens"]) == ("done", 10, 4, 2)
    assert (ra["cost"], ra["currency"], ra["latency_s"], ra["purpose"]) == (0.5, "CNY", 0.25, "summary")
    assert ra["finished_at"] >= ra["started_at"] and ra["shape_fingerprint"] == "shape"
    assert (rb["status"], rb["error"], rb["purpose"]) == ("failed", "ProviderTimeout: no answer", "exam")
    assert ledger.request(a) == REQUEST
    with pytest.raises(KeyError):
        ledger.finish(999, response=RESPONSE, usage=Usage(), latency_s=0, cost=None, currency=None)
    with pytest.raises(KeyError):
        ledger.fail(999, "x")


def test_lookup_only_returns_done_calls(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    assert ledger.lookup("fp") is None
    started = _start(ledger, "fp")
    assert ledger.lookup("fp") is None
    ledger.fail(started, "boom")
    assert ledger.lookup("fp") is None
    done = _start(ledger, "fp")
    ledger.finish(done, response=RESPONSE, usage=Usage(10, 0, 2), latency_s=0.1, cost=None, currency=None)
    _start(ledger, "fp")  # a later attempt in flight doesn't hide the done one
    rec = ledger.lookup("fp")
    assert rec["id"] == done and rec["response"] == RESPONSE and rec["usage"] == Usage(10, 0, 2)
    assert rec["latency_s"] == 0.1 and rec["cost"] is None and rec["model"] == "m"
    assert ledger.lookup("other") is None


def test_calls_of_an_empty_ledger(tmp_path):
    df = Ledger(tmp_path / "l.sqlite").calls()
    assert df.empty and list(df.columns) == list(CALL_COLUMNS)


def test_open_ledger_default_path(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPACTION_LAB_LEDGER", raising=False)
    assert paths.ledger_path() == paths.DATA_DIR / "ledger" / "ledger.sqlite"
    monkeypatch.setenv("COMPACTION_LAB_LEDGER", str(tmp_path / "x" / "mine.sqlite"))
    assert paths.ledger_path() == (tmp_path / "x" / "mine.sqlite").resolve()
    ledger = open_ledger()
    assert ledger.path == paths.ledger_path() and ledger.path.exists()
    assert open_ledger(tmp_path / "y.sqlite").path == tmp_path / "y.sqlite"


def test_closed_ledger_refuses_use(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.close()
    with pytest.raises(RuntimeError, match="closed"):
        ledger.calls()


def test_mark_abandoned_only_touches_dead_processes(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    mine = _start(ledger, "alive")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    dead = _start(ledger, "dead")
    conn = sqlite3.connect(ledger.path)
    with conn:
        conn.execute("UPDATE calls SET pid=? WHERE id=?", (dead_pid, dead))
    conn.close()
    assert ledger.mark_abandoned() == 1
    df = ledger.calls().set_index("id")
    assert df.loc[mine, "status"] == "started"
    assert df.loc[dead, "status"] == "failed" and f"process {dead_pid}" in df.loc[dead, "error"]


def _claim(ledger: Ledger, fp: str = "fp1") -> tuple[str, int | None]:
    return ledger.claim(
        fingerprint=fp, shape_fingerprint="", model="m", base_url="u", purpose="t", request={"x": 1}, stale_after=60
    )


def test_claim_sends_a_request_once_across_processes(tmp_path):
    """The first claim sends; a claim while a live process has it started waits; a dead claimant's row is
    abandoned and the request claimed anew; a recorded answer is reused."""
    ledger = Ledger(tmp_path / "l.sqlite")
    state, first = _claim(ledger)
    assert state == "mine" and first is not None
    assert _claim(ledger) == ("busy", None)  # this (live) process has it in flight
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with sqlite3.connect(ledger.path) as conn:
        conn.execute("UPDATE calls SET pid=? WHERE id=?", (int(gone.stdout), first))
    state, second = _claim(ledger)
    assert state == "mine" and second != first
    df = ledger.calls().set_index("id")
    assert df.loc[first, "status"] == "failed" and "abandoned" in df.loc[first, "error"]
    ledger.finish(second, response={"choices": []}, usage=Usage(1, 0, 1), cost=None, currency=None, latency_s=0.1)
    assert _claim(ledger) == ("done", second)
    # Another host's started row is believed for `stale_after` seconds, then not.
    with sqlite3.connect(ledger.path) as conn:
        conn.execute(
            "INSERT INTO calls (request_fingerprint, model, base_url, purpose, status, started_at, pid, host, "
            "request_json) VALUES ('fp2', 'm', 'u', 't', 'started', ?, 1, 'elsewhere', '{}')",
            (time.time() - 120,),
        )
    assert _claim(ledger, "fp2")[0] == "mine"


@pytest.mark.slow
def test_two_clients_in_two_processes_send_an_identical_request_once(tmp_path):
    """Two processes asking the same thing at once (the runs of a sweep on two workers): one request."""
    script = textwrap.dedent(
        """
        import sys
        from compaction_lab.endpoints import ChatClient, ModelConfig
        from compaction_lab.store.ledger import Ledger
        c = ChatClient(ModelConfig(base_url=sys.argv[1], model="m", api_key_env=""), ledger=Ledger(sys.argv[2]))
        print(c.complete({"messages": [{"role": "user", "content": "same"}]}, purpose="t").content)
        """
    )
    with FakeOpenAIServer(default_delay=1.0) as server:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, server.base_url, str(tmp_path / "l.sqlite")],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=60)[0].strip() for p in procs]
        assert server.count() == 1
    assert outs == ["echo: same", "echo: same"]
    assert list(Ledger(tmp_path / "l.sqlite").calls()["status"]) == ["done"]


def test_cost_from_a_price_table(tmp_path):
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "prompt_cache_hit_tokens": 400_000}
    with FakeOpenAIServer() as server:
        server.script(Scripted(body=completion("a", usage=usage)), Scripted(body=completion("b", usage=usage)))
        ledger = Ledger(tmp_path / "l.sqlite")
        priced = ChatClient(
            ModelConfig(base_url=server.base_url, model="m", api_key_env="", price_table="deepseek-flash"),
            ledger=ledger,
        )
        unpriced = ChatClient(ModelConfig(base_url=server.base_url, model="m", api_key_env=""), ledger=ledger)
        priced.complete({"messages": [{"role": "user", "content": "a"}]}, purpose="t")
        unpriced.complete({"messages": [{"role": "user", "content": "b"}]}, purpose="t")
        priced.close()
        unpriced.close()
    df = ledger.calls()
    table = prices.load_price_table("deepseek-flash")
    # 600k misses x 1.0 + 400k hits x 0.02 + 1M output x 4.0, per 1M tokens, off-peak CNY.
    expected = prices.price(table, input_tokens=1_000_000, cached_tokens=400_000, output_tokens=1_000_000)
    assert math.isclose(expected, 0.6 + 0.008 + 4.0)
    assert math.isclose(df["cost"][0], expected) and df["currency"][0] == "CNY"
    assert df["cost"].isna()[1] and df["currency"].isna()[1]


def test_unknown_price_table_fails_at_construction(tmp_path):
    with pytest.raises(prices.UnknownPriceTable):
        ChatClient(
            ModelConfig(
                base_url="http://127.0.0.1:9/v1",
                model="m",
                api_key_env="",
                price_table="nope",
                ledger=str(tmp_path / "l.sqlite"),
            )
        )


_WRITER = textwrap.dedent("""
    import pathlib, sys, time
    from compaction_lab.store.ledger import Ledger
    from compaction_lab.endpoints import Usage
    ledger = Ledger(sys.argv[1])
    tag, n = sys.argv[2], int(sys.argv[3])
    folder = pathlib.Path(sys.argv[1]).parent
    (folder / f"{tag}.ready").touch()
    while not (folder / "go").exists():  # start together, so the writes really overlap
        time.sleep(0.005)
    for i in range(n):
        cid = ledger.start(fingerprint=f"{tag}-{i}", shape_fingerprint="", model="m", base_url="http://x/v1",
                           purpose=tag, request={"i": i})
        ledger.finish(cid, response={"choices": []}, usage=Usage(i, 0, 1), latency_s=0.0, cost=None, currency=None)
        # After its first row each writer waits for the other's, so a loaded machine that
        # schedules one writer to the end first still interleaves them.
        deadline = time.monotonic() + 30
        while i == 0 and ledger.calls()["purpose"].nunique() < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
""")


@pytest.mark.slow
def test_two_processes_writing_at_once_lose_no_rows(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path)
    n = 1000
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag, str(n)], stderr=subprocess.PIPE)
        for tag in ("p1", "p2")
    ]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"{tag}.ready").exists() for tag in ("p1", "p2")):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a writer did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    df = Ledger(path).calls()
    assert len(df) == 2 * n and df["id"].is_unique and set(df["status"]) == {"done"}
    for tag in ("p1", "p2"):
        assert sorted(df.loc[df["purpose"] == tag, "request_fingerprint"]) == sorted(f"{tag}-{i}" for i in range(n))
    # Both really ran at the same time: their rows interleave.
    order = list(df["purpose"])
    assert sum(a != b for a, b in zip(order, order[1:], strict=False)) > 1, "the writers did not overlap"


def test_draws_of_one_request_are_distinct_calls_and_each_is_reused(tmp_path):
    """An exam question asked three times: three requests, three rows (draws 0-2); a rerun sends nothing."""
    body = {"messages": [{"role": "user", "content": "which port?"}], "temperature": 0.7}
    path = tmp_path / "l.sqlite"
    with FakeOpenAIServer() as server:
        server.script(*(Scripted(body=completion(answer)) for answer in ("8080", "8081", "8080")))
        c = ChatClient(ModelConfig(base_url=server.base_url, model="m", api_key_env=""), ledger=Ledger(path))
        first = [c.complete(body, purpose="exam", draw=k).content for k in range(3)]
        assert server.count() == 3
        again = [c.complete(body, purpose="exam", draw=k).content for k in range(3)]
        assert server.count() == 3  # every draw read back from its own row
        c.close()
    assert first == ["8080", "8081", "8080"] and again == first
    df = Ledger(path).calls()
    assert list(df["draw"]) == [0, 1, 2] and set(df["status"]) == {"done"}
    assert df["request_fingerprint"].nunique() == 3
    # Draw 0 is the body alone: what a call recorded before draws existed was fingerprinted as.
    from compaction_lab.endpoints import request_fingerprint

    sent = {**body, "model": "m"}
    assert df["request_fingerprint"][0] == request_fingerprint(sent)
    assert request_fingerprint(sent, 1) != request_fingerprint(sent)
    with pytest.raises(ValueError, match="draw"):
        request_fingerprint(sent, -1)


def test_a_ledger_of_schema_1_gains_the_draw_column_and_keeps_its_calls(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE calls (id INTEGER PRIMARY KEY AUTOINCREMENT, request_fingerprint TEXT NOT NULL, "
        "shape_fingerprint TEXT NOT NULL DEFAULT '', model TEXT NOT NULL, base_url TEXT NOT NULL, "
        "purpose TEXT NOT NULL, status TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL, pid INTEGER, "
        "host TEXT, request_json TEXT NOT NULL, response_json TEXT, prompt_tokens INTEGER, cached_tokens INTEGER, "
        "completion_tokens INTEGER, cost REAL, currency TEXT, latency_s REAL, error TEXT)"
    )
    conn.execute(
        "INSERT INTO calls (request_fingerprint, model, base_url, purpose, status, started_at, request_json, "
        "response_json) VALUES ('fp-old', 'm', 'http://x/v1', 'exam', 'done', 1.0, '{}', '{\"choices\": []}')"
    )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    ledger = Ledger(path)
    df = ledger.calls()
    assert list(df["request_fingerprint"]) == ["fp-old"] and list(df["draw"]) == [0]
    assert ledger.lookup("fp-old") is not None
    _start(ledger, "fp-new", draw=2)
    assert list(ledger.calls()["draw"]) == [0, 2]
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    finally:
        check.close()
    Ledger(path)  # opening again migrates nothing twice


def test_a_ledger_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Ledger(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="schema version"):
        Ledger(path)

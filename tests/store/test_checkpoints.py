"""Idempotent compaction checkpoints: single-process rules and real multi-process races."""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from compaction_lab.core.projection import Projection, Segment, SummaryReceipt, SummaryRequest, projection_from_json
from compaction_lab.core.shapes import CallShape
from compaction_lab.store import checkpoints as cp
from compaction_lab.strategies.base import CompactionContext

STRATEGY = "fake-strategy"


def _ctx(**kw: Any) -> CompactionContext:
    base: dict[str, Any] = dict(
        window=100_000,
        output_ceiling=8_000,
        shape=CallShape("test", "You are a test agent."),
        params={"tail_tokens": 2_000},
    )
    base.update(kw)
    return CompactionContext(**base)


def _key(version: str = "v2", session_id: str = "sess-1", cut: int = 5, **kw) -> cp.CheckpointKey:
    return cp.checkpoint_key(session_id, cut, STRATEGY, version, _ctx(**kw))


def _projection(key: cp.CheckpointKey, text: str = "the summary") -> Projection:
    req = SummaryRequest(
        strategy=STRATEGY,
        shape="dedicated",
        system="sum up",
        tools=(),
        messages=({"role": "user", "content": "history..."},),
        template="t",
        max_output_tokens=100,
        source_entry_ids=("e0", "e1"),
    )
    rec = SummaryReceipt(
        summarizer="fake-summarizer",
        stand_in=True,
        text=text,
        request_fingerprint=req.fingerprint(),
        input_tokens=50,
        output_tokens=7,
    )
    return Projection(
        strategy=STRATEGY,
        algorithm_version=key.algorithm_version,
        session_id=key.session_id,
        cut=key.cut,
        segments=(Segment("summary", "user", text, ("e0", "e1"), tokens=7),),
        capacity=1_000,
        estimator="chars/4",
        summary_request=req,
        receipt=rec,
        notes={"n": 1},
    )


class Counter:
    """A compute() that counts its calls."""

    def __init__(self, key: cp.CheckpointKey, text: str = "the summary"):
        self.key, self.text, self.calls = key, text, 0

    def __call__(self) -> Projection:
        self.calls += 1
        return _projection(self.key, self.text)


@pytest.fixture
def store(tmp_path: Path) -> cp.CheckpointStore:
    return cp.CheckpointStore(tmp_path / "ck.sqlite")


# --------------------------------------------------------------------------- keys


def test_key_string_round_trip(store):
    key = _key(session_id="proj:abc:123")  # colons in session ids are fine (split from the right)
    text = str(key)
    assert text == f"proj:abc:123:5:v2:{key.params_hash[:12]}"
    ref = cp.parse_key(text)
    assert ref.matches(key) and str(ref) == text
    assert (ref.session_id, ref.cut, ref.algorithm_version) == ("proj:abc:123", 5, "v2")
    assert store.get(text) is None
    cp.compact_once(store, key, Counter(key))
    assert store.get(text).key == key  # the short form resolves by hash prefix
    assert cp.parse_key(f"proj:abc:123:5:v2:{key.params_hash}").matches(key)
    for bad in ("nope", "s:x:v2:abcdef123456", "s:5:v2:xyz", "s:5:v2:abc"):
        with pytest.raises(cp.CheckpointError):
            cp.parse_key(bad)
    with pytest.raises(ValueError):
        _key(version="v:2")


def test_params_hash_covers_result_parameters_not_version():
    k = _key()
    assert k == _key() and k.params_hash == _key(version="v1").params_hash  # version is not in params_hash
    assert k != _key(version="v1")
    assert k == _key(params={"tail_tokens": 2_000})
    for variant in (
        dict(window=64_000),
        dict(output_ceiling=4_000),
        dict(params={"tail_tokens": 1}),
        dict(shape=CallShape("test", "Another prompt.")),
        dict(encoding="o200k_base"),
        dict(input_limit=9),
    ):
        assert _key(**variant).params_hash != k.params_hash, variant

    class OtherSummarizer:
        name, stand_in = "extractive", True

    assert _key(summarizer=OtherSummarizer()).params_hash != k.params_hash
    assert cp.checkpoint_key("sess-1", 5, "other-strategy", "v2", _ctx()).params_hash != k.params_hash
    assert '"strategy":"fake-strategy"' in k.params_json
    ordered = cp.checkpoint_key("s", 1, STRATEGY, "v", _ctx(params={"a": 1, "b": [1, 2]}))
    assert ordered == cp.checkpoint_key("s", 1, STRATEGY, "v", _ctx(params={"b": [1, 2], "a": 1}))


# --------------------------------------------------------------------------- single-process rules


def test_a_receipt_stored_under_the_old_summarizer_key_is_read_under_the_new_one(store):
    """Rows written before the rename say ``summary_provider``: read back, the receipt says ``summarizer``."""
    key = _key()
    assert cp.compact_once(store, key, Counter(key)).status == "computed"
    with sqlite3.connect(store.path) as conn:
        (text,) = conn.execute("SELECT receipt_json FROM checkpoints").fetchone()
        assert '"summarizer":"fake-summarizer"' in text and "summary_provider" not in text
        conn.execute("UPDATE checkpoints SET receipt_json=?", (text.replace('"summarizer":', '"summary_provider":'),))
    row = store.get(key)
    assert row is not None and row.receipt is not None
    assert row.receipt["summarizer"] == "fake-summarizer" and "summary_provider" not in row.receipt
    again = cp.compact_once(store, key, Counter(key))
    assert again.status == "reused" and again.receipt is not None and again.receipt["summarizer"] == "fake-summarizer"


def test_same_key_success_reused_without_compute(store):
    key = _key()
    compute = Counter(key)
    first = cp.compact_once(store, key, compute)
    assert first.status == "computed" and compute.calls == 1
    assert isinstance(first.computed, Projection)
    rec = first.receipt
    assert rec["summarizer"] == "fake-summarizer" and rec["fallback"] is False and rec["stand_in"] is True
    assert rec["request_fingerprint"] == first.computed.summary_request.fingerprint()
    assert rec["tokens"] == 7 and rec["output_tokens"] == 7

    for _ in range(3):
        again = cp.compact_once(store, key, compute)
        assert again.status == "reused" and again.computed is None
        assert again.projection == first.projection and again.receipt == first.receipt
    assert compute.calls == 1
    rebuilt = projection_from_json(again.projection)
    assert rebuilt.segments == first.computed.segments and rebuilt.receipt == first.computed.receipt
    assert rebuilt.summary_request is None  # documented loss

    # a different parameter is a different key: computed anew
    other = _key(window=64_000)
    assert cp.compact_once(store, other, Counter(other)).status == "computed"
    assert [r.status for r in store.list()] == ["committed", "committed"]


def test_retired_version_recovered_once_then_reused(store):
    old = _key(version="v1")
    cp.compact_once(store, old, Counter(old, "old summary"))
    new = _key(version="v2")
    compute = Counter(new, "new summary")
    out = cp.compact_once(store, new, compute)
    assert out.status == "recovered" and out.superseded == ("v1",) and compute.calls == 1
    assert out.projection["segments"][0]["text"] == "new summary"
    old_row = store.get(old)
    assert old_row.status == "superseded" and old_row.superseded_by == "v2"
    for _ in range(2):
        assert cp.compact_once(store, new, compute).status == "reused"
    assert compute.calls == 1
    # a superseded row is never reused, even by its own version's worker: it is re-taken
    assert cp.compact_once(store, old, Counter(old)).status == "recovered"


def test_explicit_retired_versions_leave_other_versions_alone(store):
    newer = _key(version="v3")
    cp.compact_once(store, newer, Counter(newer))
    cur = _key(version="v2")
    out = cp.compact_once(store, cur, Counter(cur), retired_versions={"v1"})
    assert out.status == "computed"  # v3 is not retired for a v2 worker in a rollout
    assert store.get(newer).status == "committed"


def test_compute_failure_drops_fence_and_reraises(store):
    key = _key()

    def boom():
        raise RuntimeError("summarizer down")

    with pytest.raises(RuntimeError, match="summarizer down"):
        cp.compact_once(store, key, boom)
    assert store.get(key) is None
    assert cp.compact_once(store, key, Counter(key)).status == "computed"


def test_projection_for_another_key_is_refused(store):
    key = _key()
    with pytest.raises(ValueError, match="refusing to commit"):
        cp.compact_once(store, key, lambda: _projection(_key(cut=6)))
    assert store.get(key) is None


def test_unstorable_projection_drops_fence(store):
    key = _key()
    bad = Projection(**{**_projection(key).__dict__, "notes": {"obj": object()}})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        cp.compact_once(store, key, lambda: bad)
    assert store.get(key) is None


def test_foreign_started_row_fences_until_released(store):
    key = _key()
    assert store.claim(key, "crashed-worker", pid=999_999_999).kind == "claimed"
    compute = Counter(key)
    t0 = time.monotonic()
    out = cp.compact_once(store, key, compute)
    assert out.status == "in_progress" and out.projection is None and not out.ok
    assert out.row.owner == "crashed-worker" and time.monotonic() - t0 < 1
    assert cp.compact_once(store, key, compute, wait=0.2).status == "in_progress"
    assert compute.calls == 0
    assert store.list(status="started")[0].liveness() == "dead"
    assert cp.release_checkpoint(str(key), path=store.path) is True
    assert cp.release_checkpoint(str(key), path=store.path) is False  # nothing left to release
    assert cp.compact_once(store, key, compute).status == "computed" and compute.calls == 1


def test_same_owner_resumes_its_own_fence(store):
    key = _key()
    store.claim(key, "worker-7")
    out = cp.compact_once(store, key, Counter(key), owner="worker-7")
    assert out.status == "computed" and out.receipt["owner"] == "worker-7"


def test_release_refuses_committed_without_force(store):
    key = _key()
    cp.compact_once(store, key, Counter(key))
    with pytest.raises(cp.ReleaseRefused):
        store.release(str(key))
    assert store.get(key).status == "committed"
    assert store.release(str(key), force=True) is True
    assert store.get(key) is None


def test_fence_released_mid_compute_commits_nothing(store):
    key = _key()

    def compute():
        store.release(str(key))  # an operator releases while we work
        return _projection(key)

    with pytest.raises(cp.FenceLost) as info:
        cp.compact_once(store, key, compute)
    assert info.value.projection is not None and info.value.row is None
    assert store.get(key) is None


def test_list_and_cli_helpers(store):
    a, b = _key(cut=1), _key(cut=2)
    cp.compact_once(store, a, Counter(a))
    store.claim(b, "someone")
    rows = cp.list_checkpoints(path=store.path)
    assert [(r["cut"], r["status"]) for r in rows] == [(1, "committed"), (2, "started")]
    assert rows[1]["owner_liveness"] == "alive"  # the claim was made with this (live) pid
    assert [r.key for r in store.list(status="started")] == [b]
    shown = cp.show_checkpoint(str(a), path=store.path)
    assert shown["projection"]["segments"][0]["text"] == "the summary"
    with pytest.raises(ValueError):
        store.list(status="bogus")
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --------------------------------------------------------------------------- multi-process races


def _mp_ctx():
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def _race_worker(db, key, counter, barrier, queue, wait):
    try:
        store = cp.CheckpointStore(db)

        def compute():
            with open(counter, "a", encoding="utf-8") as fh:  # one line per summary request
                fh.write(f"{os.getpid()}\n")
            time.sleep(0.2)
            return _projection(key, f"computed by {os.getpid()}")

        barrier.wait(timeout=30)
        out = cp.compact_once(store, key, compute, wait=wait, poll=0.02)
        queue.put((out.status, None if out.projection is None else out.projection["segments"][0]["text"]))
    except BaseException as exc:  # report, don't hang the parent
        queue.put(("error", repr(exc)))


def _exit_now():
    pass


def _race(tmp_path: Path, key: cp.CheckpointKey, n: int, wait: float) -> tuple[list[tuple], int]:
    ctx = _mp_ctx()
    db, counter = tmp_path / "ck.sqlite", tmp_path / "requests.txt"
    counter.touch()
    before = len(counter.read_text().splitlines())
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_race_worker, args=(str(db), key, str(counter), barrier, queue, wait)) for _ in range(n)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert not [r for r in results if r[0] == "error"], results
    return results, len(counter.read_text().splitlines()) - before


def _statuses(results) -> list[str]:
    return sorted(r[0] for r in results)


def test_race_no_wait_exactly_one_compute(tmp_path):
    key = _key()
    results, requests = _race(tmp_path, key, n=6, wait=0.0)
    assert requests == 1
    statuses = _statuses(results)
    assert statuses.count("computed") == 1
    assert set(statuses) <= {"computed", "in_progress", "reused"}
    row = cp.CheckpointStore(tmp_path / "ck.sqlite").get(key)
    assert row.status == "committed"
    winner = next(text for status, text in results if status == "computed")
    assert row.projection["segments"][0]["text"] == winner


def test_race_waiting_workers_reuse_the_one_result(tmp_path):
    key = _key()
    results, requests = _race(tmp_path, key, n=6, wait=10.0)
    assert requests == 1
    assert _statuses(results) == ["computed"] + ["reused"] * 5
    assert len({text for _, text in results}) == 1  # everyone got the same projection


def test_race_retired_version_recovered_exactly_once(tmp_path):
    store = cp.CheckpointStore(tmp_path / "ck.sqlite")
    old = _key(version="v1")
    cp.compact_once(store, old, Counter(old, "old"))
    new = _key(version="v2")
    results, requests = _race(tmp_path, new, n=6, wait=10.0)
    assert requests == 1
    assert _statuses(results) == ["recovered"] + ["reused"] * 5
    assert store.get(old).status == "superseded"
    assert store.get(new).status == "committed"
    assert {r.status for r in store.list()} == {"committed", "superseded"} and len(store.list()) == 2


def test_race_crashed_started_row_fences_until_released(tmp_path):
    ctx = _mp_ctx()
    dead = ctx.Process(target=_exit_now)
    dead.start()
    dead.join()
    store = cp.CheckpointStore(tmp_path / "ck.sqlite")
    key = _key()
    store.claim(key, owner=f"crashed:{dead.pid}", pid=dead.pid)
    assert store.get(key).liveness() == "dead"

    results, requests = _race(tmp_path, key, n=4, wait=0.3)
    assert requests == 0 and _statuses(results) == ["in_progress"] * 4
    assert store.get(key).owner == f"crashed:{dead.pid}"  # nobody stole the fence

    assert store.release(str(key)) is True
    results, requests = _race(tmp_path, key, n=4, wait=10.0)
    assert requests == 1
    assert _statuses(results) == ["computed"] + ["reused"] * 3


# --------------------------------------------------------------------------- looking never creates (issue #12 item 10)


def test_looking_never_creates_a_database(tmp_path):
    typo = tmp_path / "chekpoints" / "ck.sqlite"
    with pytest.raises(cp.CheckpointError, match="no checkpoint database at"):
        cp.list_checkpoints(typo)
    with pytest.raises(cp.CheckpointError, match="no checkpoint database at"):
        cp.release_checkpoint("s:1:v1:abcdef12", typo)
    with pytest.raises(cp.CheckpointError, match="no checkpoint database at"):
        cp.show_checkpoint("s:1:v1:abcdef12", typo)
    assert list(tmp_path.iterdir()) == []
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # a database file with no tables is not a checkpoint store either
    with pytest.raises(cp.CheckpointError, match="no checkpoints table"):
        cp.list_checkpoints(empty)
    assert empty.stat().st_size == 0


def test_a_database_that_is_not_a_checkpoint_store_is_refused_untouched(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    other = tmp_path / "archive.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE records (id INTEGER)")
    before = other.read_bytes()
    for path, match in (
        (tmp_path, "is a folder"),
        (text, "is not an SQLite database"),
        (other, "not a checkpoint database"),
    ):
        with pytest.raises(cp.CheckpointError, match=match):
            cp.CheckpointStore(path)  # even where creating would be allowed
    assert text.read_text() == "not a database" and other.read_bytes() == before

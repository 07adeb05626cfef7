"""The memo: results kept by what they were computed from (`compaction_lab.store.memo`)."""

from __future__ import annotations

from compaction_lab import strategies
from compaction_lab.store import memo
from compaction_lab.strategies import CompactionContext
from compaction_lab.summarize.extractive import ExtractiveSummarizer
from tests.helpers import make_session


def test_a_key_depends_on_every_part_and_on_the_library_source():
    assert memo.key("projection", "a", 1) == memo.key("projection", "a", 1)
    assert memo.key("projection", "a", 1) != memo.key("projection", "a", 2)
    assert memo.key("projection", "a", 1) != memo.key("chains", "a", 1)
    assert len(memo.source_fingerprint()) == 64


def test_the_folder_layer_serves_another_process_and_survives_a_bad_entry(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.MEMO_ENV, str(tmp_path))
    calls = []
    compute = lambda: calls.append(1) or {"value": 42}
    k = memo.key("thing", "x")
    assert memo.remembered("thing", k, compute) == {"value": 42}
    assert len(calls) == 1
    # Another process: an empty process layer, the same folder.
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k, compute) == {"value": 42}
    assert len(calls) == 1
    assert memo.stats()["thing"] == {"hits": 1, "folder_hits": 1, "misses": 0}
    # A damaged entry is computed again, never an error.
    (tmp_path / "thing" / k[:2] / k).write_bytes(b"not a pickle")
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k, compute) == {"value": 42}
    assert len(calls) == 2


def test_stats_are_written_per_process_and_added_up(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.MEMO_STATS_ENV, str(tmp_path / "a"))
    memo.remembered("thing", "k1", lambda: 1)
    memo.remembered("thing", "k1", lambda: 1)
    assert not (tmp_path / "a").exists()  # written when asked (after each notebook), not at every lookup
    memo.write_stats()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "99.json").write_text('{"thing": {"hits": 2, "folder_hits": 2, "misses": 3}}')
    assert memo.read_stats([tmp_path / "a", tmp_path / "b", tmp_path / "none"]) == {
        "thing": {"hits": 3, "folder_hits": 2, "misses": 4}
    }


def _items(n):
    kinds = ("user", "assistant", "tool_call", "tool_output")
    return [(kinds[i % 4], f"step {i}: read src/mod_{i}.py and found value {i * 37} in it " * 8) for i in range(n)]


def test_an_offline_projection_is_computed_once_for_equal_sessions():
    session, twin = make_session(_items(60)), make_session(_items(60))  # equal content, two objects
    assert twin is not session
    ctx = CompactionContext(window=2000, output_ceiling=200, summarizer=ExtractiveSummarizer())
    first = strategies.compact(session, "codex", 40, ctx)
    assert strategies.compact(twin, "codex", 40, ctx) is first
    assert memo.stats()["projection"] == {"hits": 1, "folder_hits": 0, "misses": 1}
    # Any change of what the result depends on is another entry, computed as without the memo.
    assert strategies.compact(session, "codex", 41, ctx).cut == 41
    wider = CompactionContext(window=3000, output_ceiling=200, summarizer=ExtractiveSummarizer())
    got = strategies.compact(session, "codex", 40, wider)
    assert memo.stats()["projection"]["misses"] == 3
    memo._MEMOS.clear()
    assert strategies.compact(session, "codex", 40, wider).to_json() == got.to_json()

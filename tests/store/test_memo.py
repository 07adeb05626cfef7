"""The memo: results kept by what they were computed from (`compaction_lab.store.memo`)."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

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
    assert memo.stats()["thing"] == {"hits": 1, "folder_hits": 1, "misses": 0, "untrusted": 0}
    # A damaged entry is computed again, never an error.
    (tmp_path / "thing" / k[:2] / k).write_bytes(b"not a pickle")
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k, compute) == {"value": 42}
    assert len(calls) == 2
    assert memo.stats()["thing"] == {"hits": 0, "folder_hits": 0, "misses": 1, "untrusted": 1}


def test_stats_are_written_per_process_and_added_up(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.MEMO_STATS_ENV, str(tmp_path / "a"))
    memo.remembered("thing", "k1", lambda: 1)
    memo.remembered("thing", "k1", lambda: 1)
    assert not (tmp_path / "a").exists()  # written when asked (after each notebook), not at every lookup
    memo.write_stats()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "99.json").write_text('{"thing": {"hits": 2, "folder_hits": 2, "misses": 3, "untrusted": 5}}')
    assert memo.read_stats([tmp_path / "a", tmp_path / "b", tmp_path / "none"]) == {
        "thing": {"hits": 3, "folder_hits": 2, "misses": 4, "untrusted": 5}
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
    assert memo.stats()["projection"] == {"hits": 1, "folder_hits": 0, "misses": 1, "untrusted": 0}
    # Any change of what the result depends on is another entry, computed as without the memo.
    assert strategies.compact(session, "codex", 41, ctx).cut == 41
    wider = CompactionContext(window=3000, output_ceiling=200, summarizer=ExtractiveSummarizer())
    got = strategies.compact(session, "codex", 40, wider)
    assert memo.stats()["projection"]["misses"] == 3
    memo._MEMOS.clear()
    assert strategies.compact(session, "codex", 40, wider).to_json() == got.to_json()


# --------------------------------------------------------------------------- issue 44: a planted entry never runs


class Planted:
    """A pickle that runs code as it is loaded: it writes `marker` (as ``id > F`` did in the issue)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def _entry(root: Path, kind: str, k: str) -> Path:
    return root / kind / k[:2] / k


def test_a_planted_pickle_is_never_loaded_and_is_counted_untrusted(tmp_path, monkeypatch):
    """Was: `Memo.get` unpickled whatever file stood under the key: resuming a sweep ran planted code."""
    root, marker = tmp_path / "memo", tmp_path / "ran"
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    k = memo.key("thing", "x")
    path = _entry(root, "thing", k)
    path.parent.mkdir(parents=True)
    for planted in (
        lambda: pickle.dumps(Planted(str(marker))),  # a plain pickle, as the library wrote before
        lambda: memo.MAGIC + b"\0" * 32 + pickle.dumps(Planted(str(marker))),  # the format, a MAC forged blind
    ):
        path.write_bytes(planted())
        monkeypatch.setattr(memo, "_MEMOS", {})
        assert memo.remembered("thing", k, lambda: "computed") == "computed"
        assert not marker.exists(), "the planted pickle was loaded"
        assert memo.stats()["thing"] == {"hits": 0, "folder_hits": 0, "misses": 1, "untrusted": 1}
    # Computed again, the entry is this machine's own: the next process reads it.
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k, lambda: pytest.fail("computed again")) == "computed"
    assert memo.stats()["thing"]["folder_hits"] == 1


def test_even_a_signed_entry_builds_only_the_librarys_data(tmp_path, monkeypatch):
    """Defence in depth behind the MAC: an entry signed with this machine's key but naming a function or a
    class outside the library's dataclasses is refused, not run; the library's own objects still load."""
    from compaction_lab.core.session import Record

    root, marker = tmp_path / "memo", tmp_path / "ran"
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    folder_key = memo._folder_key(root)
    assert folder_key is not None
    k = memo.key("thing", "signed")
    path = _entry(root, "thing", k)
    path.parent.mkdir(parents=True)
    for payload in (pickle.dumps(Planted(str(marker))), pickle.dumps(Path(marker))):
        path.write_bytes(memo.MAGIC + memo._mac(folder_key, "thing", k, payload) + payload)
        monkeypatch.setattr(memo, "_MEMOS", {})
        assert memo.remembered("thing", k, lambda: "computed") == "computed"
        assert not marker.exists(), "a signed entry ran code"
        assert memo.stats()["thing"]["folder_hits"] == 0
    record = Record(session_id="s", entry_id="e1", block_index=0, source_order=0, kind="user", text="hello")
    monkeypatch.setattr(memo, "_MEMOS", {})
    memo.remembered("thing", memo.key("thing", "record"), lambda: (record, {"n": [1, 2.5]}))
    monkeypatch.setattr(memo, "_MEMOS", {})
    got = memo.remembered("thing", memo.key("thing", "record"), lambda: pytest.fail("computed again"))
    assert got == (record, {"n": [1, 2.5]})


def test_an_entry_is_trusted_only_for_its_key_its_folder_and_this_machines_secret(tmp_path, monkeypatch):
    root = tmp_path / "memo"
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    k1, k2 = memo.key("thing", 1), memo.key("thing", 2)
    memo.remembered("thing", k1, lambda: "one")
    _entry(root, "thing", k2).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(_entry(root, "thing", k1), _entry(root, "thing", k2))  # a signed entry moved to another key
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k2, lambda: "two") == "two"
    assert memo.stats()["thing"]["untrusted"] == 1
    # The same entries in another folder (a sweep copied or sent elsewhere) are not trusted there.
    shutil.copytree(root, tmp_path / "copy")
    monkeypatch.setenv(memo.MEMO_ENV, str(tmp_path / "copy"))
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k1, lambda: "again") == "again"
    assert memo.stats()["thing"]["untrusted"] == 1
    # Another user's (another machine's) secret signs entries this one does not trust, and the other way.
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    monkeypatch.setenv(memo.MEMO_KEY_FILE_ENV, str(tmp_path / "elsewhere" / "memo.key"))
    monkeypatch.setattr(memo, "_MEMOS", {})
    assert memo.remembered("thing", k1, lambda: "theirs") == "theirs"
    assert memo.stats()["thing"]["untrusted"] == 1
    key_file = tmp_path / "elsewhere" / "memo.key"
    assert key_file.stat().st_mode & 0o777 == 0o600 and len(key_file.read_bytes()) == memo.SECRET_BYTES


@pytest.mark.parametrize("how", ["group-readable", "short", "link", "folder"])
def test_a_secret_that_others_could_read_or_write_is_not_used(tmp_path, monkeypatch, how):
    """The secret is the proof: one another account could read (or replace) proves nothing."""
    key_file = tmp_path / "state" / "memo.key"
    key_file.parent.mkdir()
    if how == "group-readable":
        key_file.write_bytes(b"k" * memo.SECRET_BYTES)
        key_file.chmod(0o640)
    elif how == "short":
        key_file.write_bytes(b"k" * 5)
        key_file.chmod(0o600)
    elif how == "link":
        (tmp_path / "theirs").write_bytes(b"k" * memo.SECRET_BYTES)
        (tmp_path / "theirs").chmod(0o600)
        key_file.symlink_to(tmp_path / "theirs")
    else:
        key_file.mkdir()
    monkeypatch.setenv(memo.MEMO_KEY_FILE_ENV, str(key_file))
    monkeypatch.setenv(memo.MEMO_ENV, str(tmp_path / "memo"))
    k = memo.key("thing", "x")
    assert memo.remembered("thing", k, lambda: "v") == "v"
    assert not (tmp_path / "memo").exists(), "an entry was written under a secret that proves nothing"
    problem = memo.key_problem()
    assert problem is not None and str(key_file) in problem and "\n" not in problem


def test_an_entry_that_is_not_a_regular_file_is_not_read(tmp_path, monkeypatch):
    """A FIFO planted as an entry would block a reader for ever; a huge file would fill its memory."""
    import threading

    root = tmp_path / "memo"
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    k = memo.key("thing", "fifo")
    _entry(root, "thing", k).parent.mkdir(parents=True)
    os.mkfifo(_entry(root, "thing", k))
    got: list = []
    reader = threading.Thread(target=lambda: got.append(memo.remembered("thing", k, lambda: "v")), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        with open(_entry(root, "thing", k), "wb"):
            pass
        pytest.fail("reading a FIFO entry blocked")
    assert got == ["v"]
    big = memo.key("thing", "big")
    _entry(root, "thing", big).parent.mkdir(parents=True, exist_ok=True)
    with open(_entry(root, "thing", big), "wb") as f:
        f.truncate(memo.MAX_ENTRY_BYTES + 1)  # sparse: no disk, but past the bound
    assert memo.remembered("thing", big, lambda: "w") == "w"
    assert memo.stats()["thing"]["untrusted"] == 2


def test_check_folder_removes_what_is_not_trusted_and_keeps_the_rest(tmp_path, monkeypatch):
    root = tmp_path / "memo"
    monkeypatch.setenv(memo.MEMO_ENV, str(root))
    good = [memo.key("thing", i) for i in range(3)]
    for i, k in enumerate(good):
        memo.remembered("thing", k, lambda i=i: i)
    bad = memo.key("thing", "planted")
    _entry(root, "thing", bad).parent.mkdir(parents=True, exist_ok=True)
    _entry(root, "thing", bad).write_bytes(pickle.dumps(Planted(str(tmp_path / "ran"))))
    (root / "thing" / "notes.txt").write_text("not an entry: left alone")
    assert memo.check_folder(root) == memo.FolderCheck(trusted=3, untrusted=1)
    assert not _entry(root, "thing", bad).exists() and (root / "thing" / "notes.txt").exists()
    assert all(_entry(root, "thing", k).exists() for k in good) and not (tmp_path / "ran").exists()
    assert memo.check_folder(root) == memo.FolderCheck(trusted=3, untrusted=0)
    assert memo.check_folder(tmp_path / "none") == memo.FolderCheck(trusted=0, untrusted=0)

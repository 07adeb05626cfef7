"""SQLite plumbing shared by the stores: explicit transactions, WAL."""

from __future__ import annotations

import pytest

from compaction_lab.store.sqlite import connect, enable_wal, immediate


def test_immediate_commits_or_rolls_back(tmp_path):
    path = tmp_path / "t.sqlite"
    assert enable_wal(path, 1.0).lower() == "wal"
    conn = connect(path, 1.0)
    try:
        conn.execute("CREATE TABLE t (x INTEGER)")
        with immediate(conn):
            conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError), immediate(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("boom")
        assert [r["x"] for r in conn.execute("SELECT x FROM t")] == [1]
    finally:
        conn.close()

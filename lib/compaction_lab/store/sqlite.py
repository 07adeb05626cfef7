"""SQLite plumbing shared by the stores that several processes write at once (checkpoints, the model-call ledger).

Connections in autocommit mode with a ``busy_timeout``, the WAL journal, and
short ``BEGIN IMMEDIATE`` write transactions.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["connect", "enable_wal", "immediate"]


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run one ``BEGIN IMMEDIATE`` transaction: rolled back on any error, committed otherwise.

    The write lock is taken up front, so racing writers queue instead of failing mid-transaction.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """Connect in autocommit mode (transactions are explicit), rows by name, waiting `busy_timeout` s for locks."""
    conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
    return conn


def enable_wal(path: Path, busy_timeout: float) -> str:
    """Switch the database at `path` to the WAL journal, retrying up to `busy_timeout` s; the journal mode now in effect."""
    deadline = time.monotonic() + busy_timeout
    while True:  # switching to WAL needs a moment with no other connection writing
        try:
            conn = connect(path, busy_timeout)
            try:
                return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)

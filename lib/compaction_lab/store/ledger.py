"""The ledger: every model call the suite makes, recorded in SQLite.

One row per call (`Ledger`): fingerprints, model and endpoint, the request as
sent, usage, cost, latency and the response. A rerun with the same request
reuses the recorded ``done`` response (`lookup`); each deliberate ``draw`` is its
own call. Rows go ``started`` -> ``done`` / ``failed``; `Ledger.mark_abandoned`
fails the rows of dead processes. The API key is never written, and stored
text is masked (`mask_stored`).

Design (draws, row life cycle, what is never written, concurrency):
docs/architecture.md#the-ledger; usage and cost: docs/cost.md
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import paths
from compaction_lab.core.fingerprints import canonical_json  # the fingerprints' form: stored JSON re-hashes identically
from compaction_lab.core.processes import pid_alive
from compaction_lab.core.usage import Usage
from compaction_lab.privacy.secrets import mask_message, mask_stored, mask_url
from compaction_lab.store.sqlite import immediate  # one write transaction for both stores

SCHEMA_VERSION = 2

#: Statements that bring a ledger of an earlier schema version to `SCHEMA_VERSION`, by the version they start from.
#: 1 -> 2: ``draw``, the index of a repeated request (an exam question asked several times); earlier calls were draw 0.
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: ("ALTER TABLE calls ADD COLUMN draw INTEGER NOT NULL DEFAULT 0",)}

#: Row statuses.
STATUSES: tuple[str, ...] = ("started", "done", "failed")

#: Seconds a connection waits for another process's write lock.
DEFAULT_BUSY_TIMEOUT = 30.0

# Idle connections a ledger keeps open (more are opened, then closed, under heavier concurrency).
_POOL_SIZE = 8

#: Columns of `Ledger.calls`, in order.
CALL_COLUMNS: tuple[str, ...] = (
    "id",
    "started_at",
    "finished_at",
    "status",
    "purpose",
    "draw",
    "model",
    "base_url",
    "request_fingerprint",
    "shape_fingerprint",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "cost",
    "currency",
    "latency_s",
    "error",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    request_fingerprint TEXT    NOT NULL,
    shape_fingerprint   TEXT    NOT NULL DEFAULT '',
    model               TEXT    NOT NULL,
    base_url            TEXT    NOT NULL,
    purpose             TEXT    NOT NULL,
    draw                INTEGER NOT NULL DEFAULT 0,
    status              TEXT    NOT NULL CHECK (status IN ('started', 'done', 'failed')),
    started_at          REAL    NOT NULL,
    finished_at         REAL,
    pid                 INTEGER,
    host                TEXT,
    request_json        TEXT    NOT NULL,
    response_json       TEXT,
    prompt_tokens       INTEGER,
    cached_tokens       INTEGER,
    completion_tokens   INTEGER,
    cost                REAL,
    currency            TEXT,
    latency_s           REAL,
    error               TEXT
);
CREATE INDEX IF NOT EXISTS calls_fingerprint ON calls (request_fingerprint, status);
CREATE INDEX IF NOT EXISTS calls_status ON calls (status);
"""


class Ledger:
    """Model calls in one SQLite file (WAL; every write a short ``BEGIN IMMEDIATE`` transaction).

    Parameters
    ----------
    path : path
        Database file; it and its folder are created when missing.
    busy_timeout : float
        Seconds to wait for another process's write lock.

    Raises
    ------
    paths.StoragePathError
        `path` is a folder, a file that is not an SQLite database, or lies in
        a folder this process cannot write in (the message names it).
    """

    def __init__(self, path: str | Path, busy_timeout: float = DEFAULT_BUSY_TIMEOUT):
        self.path = Path(path).expanduser()
        self.busy_timeout = float(busy_timeout)
        self._reset_pool()
        # A folder, a file that is not a database or an unwritable folder is named before SQLite
        # fails on it mid-run (`paths.StoragePathError`); nothing is created or overwritten.
        paths.check_sqlite_file(self.path, "ledger", create=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._init()

    def _reset_pool(self) -> None:
        self._closed = False
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._pid = os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the ledger as its path and busy timeout (connections stay behind)."""
        return {"path": self.path, "busy_timeout": self.busy_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the ledger from its path and busy timeout, with a fresh connection pool."""
        self.path = state["path"]
        self.busy_timeout = state["busy_timeout"]
        self._reset_pool()

    def __repr__(self) -> str:
        """Show the ledger by its path."""
        return f"Ledger({str(self.path)!r})"

    def __enter__(self) -> Ledger:
        """Use the ledger as a context manager."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the ledger."""
        self.close()

    # ------------------------------------------------------------------ plumbing

    def _new_connection(self) -> sqlite3.Connection:
        # check_same_thread off: a pooled connection moves between threads, but only ever one holds it.
        conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        # In WAL mode NORMAL still survives a killed process (only a power cut can drop the
        # last commits, costing at worst a repeated call) and skips an fsync per commit.
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # Pooled, unlike checkpoints.py's connection per operation: closing the last connection
        # to a WAL database checkpoints and deletes the WAL, twice per call.
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            if self._pid != os.getpid():
                # A forked child must not touch its parent's connections; drop them unclosed.
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._new_connection()
        try:
            yield conn
        finally:
            with self._lock:
                keep = (
                    not self._closed
                    and self._pid == os.getpid()
                    and not conn.in_transaction
                    and len(self._idle) < _POOL_SIZE
                )
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn, immediate(conn):
            yield conn

    _read = _connection

    def _init(self) -> None:
        with self._connection() as conn:
            # WAL lets readers (a notebook showing calls()) proceed while a run writes; it persists in the file.
            conn.execute("PRAGMA journal_mode=WAL")
        with self._tx() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            existing = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='calls'").fetchone()
            if existing and version in _MIGRATIONS:  # an older ledger: brought up to date, its calls kept
                for v in range(version, SCHEMA_VERSION):
                    for stmt in _MIGRATIONS[v]:
                        conn.execute(stmt)
                version = SCHEMA_VERSION
            # Statement by statement: executescript would commit the transaction half-way.
            for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(stmt)
            if version not in (0, SCHEMA_VERSION):  # 0: a new file
                raise RuntimeError(f"{self.path}: ledger schema version {version}, this code reads {SCHEMA_VERSION}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # ------------------------------------------------------------------ writes

    def start(
        self,
        *,
        fingerprint: str,
        shape_fingerprint: str,
        model: str,
        base_url: str,
        purpose: str,
        request: Mapping,
        draw: int = 0,
    ) -> int:
        """Record a call about to be sent (status ``started``); returns its id. `draw`: see `claim`."""
        stored = _stored_request(request)  # masked before the write transaction, which stays short
        with self._tx() as conn:
            return _insert_started(
                conn, fingerprint, shape_fingerprint, model, base_url, purpose, stored, time.time(), draw=draw
            )

    def finish(
        self,
        call_id: int,
        *,
        response: Mapping,
        usage: Usage,
        latency_s: float,
        cost: float | None,
        currency: str | None,
    ) -> None:
        """Mark a started call ``done`` with its response (secrets masked, `mask_stored`), usage, latency and cost.

        Raises
        ------
        KeyError
            If no call has that id.
        """
        stored = canonical_json(mask_stored(dict(response)))
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE calls SET status='done', finished_at=?, response_json=?, prompt_tokens=?, cached_tokens=?, "
                "completion_tokens=?, cost=?, currency=?, latency_s=?, error=NULL WHERE id=?",
                (
                    time.time(),
                    stored,
                    int(usage.prompt_tokens),
                    int(usage.cached_tokens),
                    int(usage.completion_tokens),
                    None if cost is None else float(cost),
                    currency,
                    float(latency_s),
                    int(call_id),
                ),
            )
            if cur.rowcount != 1:
                raise KeyError(f"no ledger call with id {call_id}")

    def fail(self, call_id: int, error: str) -> None:
        """Mark a started call ``failed`` with the error text (never reused).

        Raises
        ------
        KeyError
            If no call has that id.
        """
        text = mask_message(str(error))
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE calls SET status='failed', finished_at=?, error=? WHERE id=?",
                (time.time(), text, int(call_id)),
            )
            if cur.rowcount != 1:
                raise KeyError(f"no ledger call with id {call_id}")

    def claim(
        self,
        *,
        fingerprint: str,
        shape_fingerprint: str,
        model: str,
        base_url: str,
        purpose: str,
        request: Mapping,
        stale_after: float,
        draw: int = 0,
    ) -> tuple[str, int | None]:
        """Claim a request for this process, unless its answer is recorded or another process is sending it.

        One transaction decides, so that processes sharing the ledger (the
        runs of a sweep on several workers, notebooks run side by side) send
        an identical request once: ``("done", id)`` when an answer is
        recorded; ``("busy", None)`` while a live process has it ``started``
        (on this host: its pid runs; elsewhere: started less than
        `stale_after` seconds ago) -- wait and ask again; otherwise
        ``("mine", id)`` with a new ``started`` row. ``started`` rows of dead
        processes met on the way are marked ``failed`` (abandoned). `draw` is
        recorded with the row: the index of a request asked several times (its
        fingerprint holds it too, `endpoints.client.request_fingerprint`).
        """
        host = socket.gethostname()
        now = time.time()
        stored = _stored_request(request)
        with self._tx() as conn:
            done = conn.execute(
                "SELECT id FROM calls WHERE request_fingerprint=? AND status='done' ORDER BY id DESC LIMIT 1",
                (fingerprint,),
            ).fetchone()
            if done is not None:
                return "done", int(done["id"])
            busy = False
            for r in conn.execute(
                "SELECT id, pid, host, started_at FROM calls WHERE request_fingerprint=? AND status='started'",
                (fingerprint,),
            ).fetchall():
                if r["host"] == host:
                    alive = r["pid"] is not None and pid_alive(int(r["pid"]))
                else:
                    alive = now - float(r["started_at"]) < stale_after
                if alive:
                    busy = True
                elif r["host"] == host:
                    conn.execute(
                        "UPDATE calls SET status='failed', finished_at=?, error=? WHERE id=? AND status='started'",
                        (now, f"abandoned: process {r['pid']} exited before the call finished", r["id"]),
                    )
            if busy:
                return "busy", None
            return "mine", _insert_started(
                conn, fingerprint, shape_fingerprint, model, base_url, purpose, stored, now, host, draw
            )

    def mark_abandoned(self) -> int:
        """Mark ``started`` calls of processes that no longer exist (this host only) ``failed``.

        A run killed mid-call leaves its in-flight row ``started``; after a
        restart this says what happened to it. Rows of live processes and of
        other hosts are left alone (their pid means nothing here). Returns the
        number of rows marked.
        """
        host = socket.gethostname()
        with self._tx() as conn:
            rows = conn.execute("SELECT id, pid FROM calls WHERE status='started' AND host=?", (host,)).fetchall()
            dead = [(r["id"], r["pid"]) for r in rows if r["pid"] is not None and not pid_alive(int(r["pid"]))]
            now = time.time()
            for call_id, pid in dead:
                conn.execute(
                    "UPDATE calls SET status='failed', finished_at=?, error=? WHERE id=? AND status='started'",
                    (now, f"abandoned: process {pid} exited before the call finished", call_id),
                )
            return len(dead)

    # ------------------------------------------------------------------ reads

    def lookup(self, fingerprint: str) -> dict | None:
        """Return the most recent ``done`` call with this request fingerprint, or None.

        Returns
        -------
        dict or None
            ``id``, ``request_fingerprint``, ``shape_fingerprint``, ``model``,
            ``base_url``, ``purpose``, ``started_at``, ``finished_at``,
            ``response`` (the parsed response JSON), ``usage`` (a `Usage`),
            ``latency_s``, ``cost``, ``currency``.
        """
        with self._read() as conn:
            r = conn.execute(
                "SELECT * FROM calls WHERE request_fingerprint=? AND status='done' ORDER BY id DESC LIMIT 1",
                (fingerprint,),
            ).fetchone()
        if r is None:
            return None
        return {
            "id": r["id"],
            "request_fingerprint": r["request_fingerprint"],
            "shape_fingerprint": r["shape_fingerprint"],
            "model": r["model"],
            "base_url": r["base_url"],
            "purpose": r["purpose"],
            "started_at": r["started_at"],
            "finished_at": r["finished_at"],
            "response": json.loads(r["response_json"]),
            "usage": Usage(
                prompt_tokens=r["prompt_tokens"] or 0,
                cached_tokens=r["cached_tokens"] or 0,
                completion_tokens=r["completion_tokens"] or 0,
            ),
            "latency_s": r["latency_s"],
            "cost": r["cost"],
            "currency": r["currency"],
        }

    def request(self, call_id: int) -> dict | None:
        """Return the request body recorded for a call (as sent), or None when there is no such call."""
        with self._read() as conn:
            r = conn.execute("SELECT request_json FROM calls WHERE id=?", (int(call_id),)).fetchone()
        return None if r is None else json.loads(r["request_json"])

    def calls(self) -> pd.DataFrame:
        """One row per call, oldest first, with the columns `CALL_COLUMNS` (no request or response text)."""
        with self._read() as conn:
            rows = conn.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM calls ORDER BY id").fetchall()
        return pd.DataFrame([tuple(r) for r in rows], columns=list(CALL_COLUMNS))

    def close(self) -> None:
        """Close the pooled connections and refuse further use."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        if self._pid == os.getpid():
            for conn in idle:
                conn.close()


def _stored_request(request: Mapping) -> str:
    """Serialise a request body as the ledger keeps it: canonical JSON, secrets masked (`mask_stored`)."""
    return canonical_json(mask_stored(dict(request)))


def _insert_started(
    conn: sqlite3.Connection,
    fingerprint: str,
    shape_fingerprint: str,
    model: str,
    base_url: str,
    purpose: str,
    request_json: str,
    started_at: float,
    host: str | None = None,
    draw: int = 0,
) -> int:
    """Insert a ``started`` row for this process (inside the caller's write transaction); its id.

    `request_json` is the body as `_stored_request` made it; the base URL is stored with its credentials masked.
    """
    cur = conn.execute(
        "INSERT INTO calls (request_fingerprint, shape_fingerprint, model, base_url, purpose, draw, status, "
        "started_at, pid, host, request_json) VALUES (?, ?, ?, ?, ?, ?, 'started', ?, ?, ?, ?)",
        (
            fingerprint,
            shape_fingerprint or "",
            model,
            mask_url(base_url),
            purpose,
            int(draw),
            started_at,
            os.getpid(),
            host or socket.gethostname(),
            request_json,
        ),
    )
    if cur.lastrowid is None:  # an INSERT always sets it; None would mean no row was written
        raise RuntimeError("ledger: the call row was not written")
    return int(cur.lastrowid)


def open_ledger(path: str | Path | None = None) -> Ledger:
    """Open the ledger at `path`, or at `compaction_lab.core.paths.ledger_path()` when None.

    In a dry run (`compaction_lab.run.plan`) every ledger is the dry run's copy, whatever the
    path: a stand-in answer must never be recorded where a real run would reuse it.
    """
    dry = paths.dry_run_folder()
    if dry is not None:
        return Ledger(dry / "ledger.sqlite")
    return Ledger(path if path is not None else paths.ledger_path())


__all__ = ["CALL_COLUMNS", "Ledger", "SCHEMA_VERSION", "STATUSES", "open_ledger"]

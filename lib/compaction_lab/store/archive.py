"""The archive of originals: every record of every imported session, searchable.

Compaction only changes what the next request sees; the originals stay here,
in SQLite with an FTS5 full-text index, so an "omitted — retrievable" marker
can be followed and the open-book exam can search. ``compaction-lab import``
fills it, ``compaction-lab history search / get`` reads it, and the same
functions back the open-book tools.

Re-importing a file is idempotent: a record is keyed by (session_id,
entry_id, block_index) and inserted at most once; records a live session has
appended since the last import are added.

Sessions hold what passed through an agent's terminal and its model's
answers, API keys included. Before a record is stored its text, tool and
target -- and the session's source path and metadata -- are masked
(`compaction_lab.privacy.secrets.store_masker`: values of secret environment
variables and the API key this process's model client read, credential-shaped
text such as ``sk-...`` / ``ghp_...``, URL credentials), whether or not the
run redacts; ids are kept as they are, so records still line up with the
sessions they came from.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compaction_lab.core import paths
from compaction_lab.core.session import Record, Session
from compaction_lab.privacy.redactor import Redactor
from compaction_lab.privacy.secrets import store_masker

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source_format TEXT NOT NULL,
    source_path TEXT,
    metadata TEXT NOT NULL,
    imported_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    entry_id TEXT NOT NULL,
    block_index INTEGER NOT NULL,
    source_order INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT,
    target TEXT,
    call_id TEXT,
    is_error INTEGER NOT NULL,
    injected INTEGER NOT NULL,
    timestamp TEXT,
    text TEXT NOT NULL,
    UNIQUE (session_id, entry_id, block_index)
);
CREATE INDEX IF NOT EXISTS records_entry ON records (entry_id);
CREATE INDEX IF NOT EXISTS records_order ON records (session_id, source_order);
-- External-content FTS5 index over the records' text, tool and target.
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(
    text, tool, target, content='records', content_rowid='id'
);
"""

_RECORD_COLUMNS = (
    "session_id",
    "entry_id",
    "block_index",
    "source_order",
    "kind",
    "tool",
    "target",
    "call_id",
    "is_error",
    "injected",
    "timestamp",
    "text",
)


class ArchiveError(RuntimeError):
    """The archive cannot be used (SQLite without FTS5, a newer schema, ...)."""


@dataclass(frozen=True)
class Hit:
    """One search result."""

    session_id: str
    entry_id: str
    block_index: int
    source_order: int
    kind: str
    tool: str | None
    target: str | None
    snippet: str
    score: float  # bm25: lower is better

    def to_dict(self) -> dict:
        """Return the hit's fields as a dict (for ``--json``)."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class AddResult:
    """What adding sessions changed."""

    sessions: int
    records_added: int
    records_seen: int


def default_path() -> Path:
    """Where the archive lives unless told otherwise (see `paths.archive_path`)."""
    return paths.archive_path()


def fts_query(text: str, any_term: bool = False) -> str:
    """Turn free text into a safe FTS5 query: every word a quoted phrase.

    ``ORD-58213-QX`` or ``tests/test_cart.py::test_total`` contain FTS5
    operators; quoting makes them phrases of their tokens, so they match
    literally. Terms are ANDed (or ORed with `any_term`).
    """
    terms = [t for t in text.split() if t.strip('"')]
    if not terms:
        raise ValueError("empty search query")
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    return (" OR " if any_term else " ").join(quoted)


class Archive:
    """SQLite + FTS5 store of original records.

    Parameters
    ----------
    path : path, optional
        Database file (created if missing); default `default_path()`.
    readonly : bool
        Open read-only (``history`` commands); the file must exist.

    Raises
    ------
    ArchiveError
        Naming the path, before anything is written: no archive there (read-only),
        a folder, a file that is not an SQLite database, another program's
        database, a folder this process cannot write in (`paths.check_sqlite_file`).
    """

    def __init__(self, path: str | Path | None = None, readonly: bool = False):
        self.path = Path(path) if path else default_path()
        self._owner = threading.get_ident()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._thread_conns: list[sqlite3.Connection] = []
        if readonly and not self.path.exists():
            raise ArchiveError(f"no archive at {self.path}: run `compaction-lab import PATH` first")
        try:
            # Before SQLite sees the path: a folder, a file that is not a database or a folder we
            # cannot write in is named plainly, and nothing is created or overwritten.
            paths.check_sqlite_file(self.path, "archive", create=not readonly)
        except paths.StoragePathError as exc:
            raise ArchiveError(str(exc)) from None
        try:
            self.conn = self._open(readonly)
        except sqlite3.DatabaseError as exc:
            raise ArchiveError(f"archive {self.path} cannot be used: {exc}") from None

    def _open(self, readonly: bool) -> sqlite3.Connection:
        """Connect, and (unless read-only) create the schema; refuse another program's database."""
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) if readonly else sqlite3.connect(self.path)
        try:
            if not readonly:
                _refuse_foreign(conn, self.path)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                try:
                    conn.executescript(_SCHEMA)
                except sqlite3.OperationalError as exc:
                    if "fts5" in str(exc).lower():
                        raise ArchiveError("this Python's SQLite was built without FTS5") from exc
                    raise
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                conn.commit()
            try:
                version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            except sqlite3.OperationalError:
                raise ArchiveError(f"{self.path} is an SQLite database but not an archive of originals") from None
            if version and int(version[0]) > SCHEMA_VERSION:
                raise ArchiveError(f"{self.path} has schema {version[0]}, newer than this version understands")
        except BaseException:
            conn.close()
            raise
        return conn

    # ------------------------------------------------------------------ context manager

    def close(self) -> None:
        """Close the archive's connection and every per-thread reader."""
        with self._lock:
            for c in self._thread_conns:
                c.close()
            self._thread_conns.clear()
        self.conn.close()

    def _reader(self) -> sqlite3.Connection:
        """Return the connection to read with: the archive's own in its thread, else one read-only one per thread.

        A model reader answers several questions at once; WAL lets readers run side by side.
        """
        if threading.get_ident() == self._owner:
            return self.conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.conn = conn
            with self._lock:
                self._thread_conns.append(conn)
        return conn

    def __enter__(self) -> Archive:
        """Use the archive as a context manager."""
        return self

    def __exit__(self, *exc) -> None:
        """Close the archive."""
        self.close()

    # ------------------------------------------------------------------ writing

    def add_session(self, session: Session) -> int:
        """Store one session's records, secrets masked (see the module docstring); returns how many were new.

        One transaction.
        """
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        masker = store_masker()
        with self.conn:
            self.conn.execute(
                "INSERT INTO sessions (id, source_format, source_path, metadata, imported_at) VALUES (?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET metadata=excluded.metadata, source_path=excluded.source_path, "
                "imported_at=excluded.imported_at",
                (
                    session.id,
                    session.source_format,
                    masker.text(session.source_path) if session.source_path else session.source_path,
                    json.dumps(masker.value(dict(session.metadata)), default=str),
                    now,
                ),
            )
            added = 0
            for rec in session.records:
                rec = _masked(rec, masker)
                cur = self.conn.execute(
                    f"INSERT OR IGNORE INTO records ({', '.join(_RECORD_COLUMNS)}) VALUES ({', '.join('?' * len(_RECORD_COLUMNS))})",
                    _row(rec),
                )
                if cur.rowcount == 1:
                    self.conn.execute(
                        "INSERT INTO records_fts (rowid, text, tool, target) VALUES (?,?,?,?)",
                        (cur.lastrowid, rec.text, rec.tool or "", rec.target or ""),
                    )
                    added += 1
        return added

    def add_sessions(self, sessions: Iterable[Session], progress: bool = False) -> AddResult:
        """Store sessions one at a time (streaming); returns totals."""
        n = added = seen = 0
        it: Iterable[Session] = sessions
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(sessions, desc="archive", unit="session")
        for s in it:
            added += self.add_session(s)
            seen += len(s.records)
            n += 1
        return AddResult(n, added, seen)

    # ------------------------------------------------------------------ reading

    def search(
        self, query: str, session: str | None = None, limit: int = 10, raw: bool = False, any_term: bool = False
    ) -> list[Hit]:
        """Full-text search over every original record, best matches first.

        Parameters
        ----------
        query : str
            Free text (each word matched literally) or, with `raw`, FTS5 syntax.
        session : str, optional
            Only this session.
        limit : int
        raw : bool
            Pass `query` to FTS5 unchanged.
        any_term : bool
            Match any word instead of all.
        """
        if raw:
            return self._search(query, query, session, limit)
        # Exact phrase hits first (what a person pasting a line expects), then
        # records that merely contain every word (or any word), best bm25 first.
        hits = (
            self._search('"' + " ".join(query.split()).replace('"', '""') + '"', query, session, limit)
            if len(query.split()) > 1
            else []
        )
        seen = {(h.session_id, h.entry_id, h.block_index) for h in hits}
        for h in self._search(fts_query(query, any_term=any_term), query, session, limit + len(hits)):
            if len(hits) >= limit:
                break
            if (h.session_id, h.entry_id, h.block_index) not in seen:
                hits.append(h)
        return hits[:limit]

    def _search(self, match: str, query: str, session: str | None, limit: int) -> list[Hit]:
        sql = (
            "SELECT r.session_id, r.entry_id, r.block_index, r.source_order, r.kind, r.tool, r.target, "
            "snippet(records_fts, 0, '[', ']', '…', 16), bm25(records_fts) AS score "
            "FROM records_fts JOIN records r ON r.id = records_fts.rowid "
            "WHERE records_fts MATCH ?"
        )
        args: list = [match]
        if session:
            sql += " AND r.session_id = ?"
            args.append(session)
        sql += " ORDER BY score, r.session_id, r.source_order LIMIT ?"
        args.append(int(limit))
        try:
            rows = self._reader().execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            raise ValueError(f"bad search query {query!r}: {exc}") from exc
        return [Hit(*row) for row in rows]

    def get(self, entry_id: str, session: str | None = None) -> list[Record]:
        """Return the original records of an entry (all its blocks), as imported (secrets masked)."""
        sql = f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE entry_id = ?"
        args: list = [entry_id]
        if session:
            sql += " AND session_id = ?"
            args.append(session)
        sql += " ORDER BY session_id, block_index"
        return [_record(row) for row in self._reader().execute(sql, args)]

    def session_records(self, session_id: str) -> Iterator[Record]:
        """All records of a session in source order."""
        sql = f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE session_id = ? ORDER BY source_order"
        for row in self._reader().execute(sql, (session_id,)):
            yield _record(row)

    def sessions(self) -> list[dict]:
        """Every archived session with its record count."""
        rows = (
            self._reader()
            .execute(
                "SELECT s.id, s.source_format, s.source_path, s.imported_at, COUNT(r.id) "
                "FROM sessions s LEFT JOIN records r ON r.session_id = s.id GROUP BY s.id ORDER BY s.id"
            )
            .fetchall()
        )
        keys = ("session_id", "source_format", "source_path", "imported_at", "records")
        return [dict(zip(keys, r, strict=False)) for r in rows]

    def count(self) -> int:
        """Count the archived records."""
        return int(self._reader().execute("SELECT COUNT(*) FROM records").fetchone()[0])


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Raise `ArchiveError` when `conn` holds tables but no archive.

    Importing would write our tables into another program's database (say, ``--archive`` pointed at the
    ledger by mistake).
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables and "records" not in tables:
        raise ArchiveError(
            f"{path} is an SQLite database but not an archive of originals "
            f"(it holds {', '.join(sorted(tables))}); left untouched"
        )


def _masked(rec: Record, masker: Redactor) -> Record:
    """`rec` with its free text (text, tool, target) masked; `rec` itself when nothing was."""
    upd: dict[str, Any] = {}  # field -> masked text; `replace` checks each key against its own field
    for name in ("text", "tool", "target"):
        value = getattr(rec, name)
        if isinstance(value, str) and (masked := masker.text(value)) != value:
            upd[name] = masked
    return dataclasses.replace(rec, **upd) if upd else rec


def _row(rec: Record) -> Sequence:
    return (
        rec.session_id,
        rec.entry_id,
        rec.block_index,
        rec.source_order,
        rec.kind,
        rec.tool,
        rec.target,
        rec.call_id,
        int(rec.is_error),
        int(rec.injected),
        rec.timestamp,
        rec.text,
    )


def _record(row: Sequence) -> Record:
    d = dict(zip(_RECORD_COLUMNS, row, strict=False))
    d["is_error"] = bool(d["is_error"])
    d["injected"] = bool(d["injected"])
    return Record(**d)

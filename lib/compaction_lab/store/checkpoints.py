"""Idempotent compaction checkpoints, kept in SQLite so several processes can race safely.

A checkpoint is one committed compaction: the `Projection` a strategy produced
for a session at a cut, committed atomically with its completion receipt.
`CheckpointStore` keys it by ``(session_id, cut, algorithm_version, params_hash)``
(short form ``SESSION:CUT:ALGO:HASH12``, read back by `parse_key` into a
`CheckpointRef`); a same-key success is reused, a retired version's row is
re-covered exactly once, and a ``started`` fence is never stolen (an operator
releases it: `CheckpointStore.release`, `release_checkpoint`). `Outcome.projection`
is the stored, masked JSON; `Outcome.computed` the live projection.

Design (key, row life cycle, retirement rule, concurrency, secrets):
docs/architecture.md#checkpoints
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from compaction_lab.core import paths
from compaction_lab.core.fingerprints import canonical_json, sha256_text, shape_fingerprint
from compaction_lab.core.processes import pid_alive
from compaction_lab.core.projection import Projection
from compaction_lab.privacy.secrets import mask_stored
from compaction_lab.store.sqlite import connect, enable_wal, immediate

SCHEMA_VERSION = 1

#: Row statuses.
STATUSES: tuple[str, ...] = ("started", "committed", "superseded")

#: Seconds a connection waits for another process's write lock.
DEFAULT_BUSY_TIMEOUT = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    session_id        TEXT    NOT NULL,
    cut               INTEGER NOT NULL,
    algorithm_version TEXT    NOT NULL,
    params_hash       TEXT    NOT NULL,
    strategy          TEXT    NOT NULL,
    params_json       TEXT    NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('started', 'committed', 'superseded')),
    owner             TEXT    NOT NULL,
    pid               INTEGER,
    host              TEXT,
    started_at        REAL    NOT NULL,
    committed_at      REAL,
    superseded_at     REAL,
    superseded_by     TEXT,
    receipt_json      TEXT,
    projection_json   TEXT,
    PRIMARY KEY (session_id, cut, algorithm_version, params_hash)
);
CREATE INDEX IF NOT EXISTS checkpoints_family ON checkpoints (session_id, cut, params_hash);
CREATE INDEX IF NOT EXISTS checkpoints_status ON checkpoints (status);
"""


class CheckpointError(RuntimeError):
    """Base class of checkpoint-store errors (bad key string, refused release, lost fence)."""


class ReleaseRefused(CheckpointError):
    """`release` was asked to delete a committed or superseded row without ``force``."""


class AmbiguousKey(CheckpointError):
    """A short key string's hash prefix matches more than one row."""


class FenceLost(CheckpointError):
    """Our ``started`` fence was gone (released by an operator) when we went to commit.

    Nothing was committed. ``projection`` is what ``compute`` produced (usable,
    but not a checkpoint); ``row`` is what the store holds for the key now.
    """

    def __init__(self, message: str, projection: Projection | None = None, row: CheckpointRow | None = None):
        super().__init__(message)
        self.projection = projection
        self.row = row


#: The environment variable that moves the checkpoint database (`default_path`).
CHECKPOINTS_ENV = "COMPACTION_LAB_CHECKPOINTS"


def default_path() -> Path:
    """Return the checkpoint database: ``$COMPACTION_LAB_CHECKPOINTS`` or ``data/checkpoints/checkpoints.sqlite``."""
    env = os.environ.get(CHECKPOINTS_ENV)
    return Path(env).expanduser().resolve() if env else paths.DATA_DIR / "checkpoints" / "checkpoints.sqlite"


# --------------------------------------------------------------------------- keys


def _canonical(obj: Any) -> str:
    """`canonical_json` with sets as sorted lists and mappings as dicts (checkpoint parameters)."""

    def default(o: Any) -> Any:
        if isinstance(o, (set, frozenset)):
            return sorted(o, key=lambda x: json.dumps(x, sort_keys=True, default=default))
        if isinstance(o, Mapping):
            return dict(o)
        raise TypeError(f"checkpoint parameter of type {type(o).__name__} is not JSON-serialisable: {o!r}")

    return canonical_json(obj, default=default)


def checkpoint_params(strategy_name: str, ctx: Any) -> dict[str, Any]:
    """Collect the parameters that determine a compaction's result, as hashed into ``params_hash``."""
    summarizer = ctx.summarizer
    out: dict[str, Any] = {
        "strategy": strategy_name,
        "window": ctx.window,
        "output_ceiling": ctx.output_ceiling,
        "input_limit": ctx.input_limit,
        "encoding": ctx.encoding,
        "params": dict(ctx.params),
        "summarizer": getattr(summarizer, "name", type(summarizer).__name__),
        "shape": shape_fingerprint(ctx.shape.system_prompt, ctx.shape.tools),
    }
    model = getattr(summarizer, "model", None)
    if model is not None:
        out["summarizer_model"] = str(model)
    factor = float(getattr(ctx, "calibration", 1.0) or 1.0)
    if factor != 1.0:  # a calibrated session (its log records usage); uncalibrated keys stay as they were
        out["calibration"] = factor
    return out


@dataclass(frozen=True)
class CheckpointKey:
    """Identity of one checkpoint: ``(session_id, cut, algorithm_version, params_hash)``.

    ``strategy`` and ``params_json`` ride along for the row (the strategy name
    is already inside ``params_hash``); they don't take part in equality.
    ``str(key)`` is the short command-line form ``SESSION:CUT:ALGO:HASH12``.
    """

    session_id: str
    cut: int
    algorithm_version: str
    params_hash: str
    strategy: str = field(default="", compare=False)
    params_json: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        """Refuse an algorithm version holding ``:`` and a cut that is not a non-negative int."""
        if ":" in self.algorithm_version:
            raise ValueError(f"algorithm_version may not contain ':' (got {self.algorithm_version!r})")
        if not isinstance(self.cut, int) or self.cut < 0:
            raise ValueError(f"cut must be a non-negative int (got {self.cut!r})")

    @property
    def short(self) -> str:
        """``SESSION:CUT:ALGO:HASH12``."""
        return f"{self.session_id}:{self.cut}:{self.algorithm_version}:{self.params_hash[:12]}"

    def __str__(self) -> str:
        """Return the short command-line form (`short`)."""
        return self.short

    def ref(self) -> CheckpointRef:
        """Return the key as a (full-hash) reference."""
        return CheckpointRef(self.session_id, self.cut, self.algorithm_version, self.params_hash)


@dataclass(frozen=True)
class CheckpointRef:
    """A key read back from its string form: the params hash may be only a prefix."""

    session_id: str
    cut: int
    algorithm_version: str
    hash_prefix: str

    def __str__(self) -> str:
        """Return the short command-line form ``SESSION:CUT:ALGO:HASH12``."""
        return f"{self.session_id}:{self.cut}:{self.algorithm_version}:{self.hash_prefix[:12]}"

    def matches(self, key: CheckpointKey) -> bool:
        """Whether `key` is one this reference can name."""
        return (key.session_id, key.cut, key.algorithm_version) == (
            self.session_id,
            self.cut,
            self.algorithm_version,
        ) and key.params_hash.startswith(self.hash_prefix)


def checkpoint_key(session_id: str, cut: int, strategy_name: str, algorithm_version: str, ctx: Any) -> CheckpointKey:
    """Build the checkpoint key of compacting `session_id` at `cut` with a strategy under `ctx`.

    Parameters
    ----------
    session_id, cut : the compaction point.
    strategy_name : str
        Strategy name (part of ``params_hash``).
    algorithm_version : str
        The strategy's *current* algorithm version (no ``:``).
    ctx : CompactionContext
        See `checkpoint_params` for what is hashed.
    """
    params = checkpoint_params(strategy_name, ctx)
    text = _canonical(params)
    return CheckpointKey(
        session_id=session_id,
        cut=int(cut),
        algorithm_version=algorithm_version,
        params_hash=sha256_text(text),
        strategy=strategy_name,
        params_json=text,
    )


def parse_key(text: str) -> CheckpointRef:
    """Read ``SESSION:CUT:ALGO:HASH`` (hash: 6..64 hex digits) back into a `CheckpointRef`."""
    parts = text.strip().rsplit(":", 3)
    if len(parts) != 4 or not parts[0]:
        raise CheckpointError(f"bad checkpoint key {text!r}: expected SESSION:CUT:ALGO:HASH")
    session_id, cut, algo, prefix = parts
    try:
        cut_n = int(cut)
    except ValueError:
        raise CheckpointError(f"bad checkpoint key {text!r}: cut {cut!r} is not an integer") from None
    prefix = prefix.lower()
    if not (6 <= len(prefix) <= 64) or any(c not in "0123456789abcdef" for c in prefix):
        raise CheckpointError(f"bad checkpoint key {text!r}: hash must be 6 to 64 hex digits")
    if not algo:
        raise CheckpointError(f"bad checkpoint key {text!r}: empty algorithm version")
    return CheckpointRef(session_id, cut_n, algo, prefix)


# --------------------------------------------------------------------------- rows and outcomes


@dataclass(frozen=True)
class CheckpointRow:
    """One row of the store."""

    key: CheckpointKey
    status: str
    owner: str
    pid: int | None
    host: str | None
    started_at: float
    committed_at: float | None = None
    superseded_at: float | None = None
    superseded_by: str | None = None
    receipt: Mapping[str, Any] | None = None
    projection: Mapping[str, Any] | None = None

    @property
    def strategy(self) -> str:
        """Return the strategy name the key carries."""
        return self.key.strategy

    def liveness(self) -> Literal["alive", "dead", "unknown"]:
        """Whether the owner process still exists: only knowable on the same host."""
        if self.pid is None or self.host != socket.gethostname():
            return "unknown"
        return "alive" if pid_alive(self.pid) else "dead"

    def to_dict(self, include_projection: bool = False) -> dict[str, Any]:
        """JSON-ready form (for the CLI)."""
        out = {
            "key": str(self.key),
            "session_id": self.key.session_id,
            "cut": self.key.cut,
            "algorithm_version": self.key.algorithm_version,
            "params_hash": self.key.params_hash,
            "strategy": self.key.strategy,
            "status": self.status,
            "owner": self.owner,
            "pid": self.pid,
            "host": self.host,
            "started_at": self.started_at,
            "committed_at": self.committed_at,
            "superseded_at": self.superseded_at,
            "superseded_by": self.superseded_by,
            "receipt": None if self.receipt is None else dict(self.receipt),
        }
        if self.status == "started":
            out["owner_liveness"] = self.liveness()
        if include_projection:
            out["projection"] = None if self.projection is None else dict(self.projection)
        return out


@dataclass(frozen=True)
class Outcome:
    """What `compact_once` did.

    Attributes
    ----------
    status : str
        ``computed`` (we claimed a fresh key and computed), ``reused`` (a
        committed same-key checkpoint was returned, no compute), ``recovered``
        (we superseded a retired-version checkpoint and computed anew) or
        ``in_progress`` (someone else holds the fence; nothing computed, no
        projection).
    key : CheckpointKey
    projection : dict or None
        The stored ``Projection.to_json()`` (same for computed and reused).
    receipt : dict or None
        The stored completion receipt.
    computed : Projection or None
        The live projection, when this call computed it.
    row : CheckpointRow or None
        The row as stored (for ``in_progress``: the foreign fence).
    superseded : tuple of str
        Algorithm versions this call superseded (``recovered`` only).
    """

    status: str
    key: CheckpointKey
    projection: Mapping[str, Any] | None = None
    receipt: Mapping[str, Any] | None = None
    computed: Projection | None = None
    row: CheckpointRow | None = None
    superseded: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether a committed projection is available."""
        return self.status != "in_progress"


@dataclass(frozen=True)
class Claim:
    """Result of `CheckpointStore.claim`: ``kind`` is ``claimed``, ``recovered``, ``resumed``, ``committed`` or ``held``."""

    kind: str
    row: CheckpointRow | None = None
    superseded: tuple[str, ...] = ()


def new_owner_id() -> str:
    """Make a fresh owner id: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- store


_COLUMNS = (
    "session_id, cut, algorithm_version, params_hash, strategy, params_json, status, owner, pid, host, "
    "started_at, committed_at, superseded_at, superseded_by, receipt_json"
)


class CheckpointStore:
    """Checkpoints in one SQLite file (WAL; every write a short ``BEGIN IMMEDIATE`` transaction).

    Each operation opens its own connection, so a store object is safe to pass
    to forked or spawned processes (only the path is kept).

    Parameters
    ----------
    path : path, optional
        Database file (created with its folder if missing, when `create`); default `default_path()`.
    busy_timeout : float
        Seconds to wait for another process's write lock.
    create : bool
        Create the database when it is missing. False for an operator's look
        (``checkpoints list / release``): a mistyped path must not leave an
        empty database and its folders behind.

    Raises
    ------
    CheckpointError
        Naming the path, before anything is written: a folder, a file that is
        not an SQLite database, another program's database, a folder this
        process cannot write in, or (without `create`) no database there.
    """

    def __init__(self, path: str | Path | None = None, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, create: bool = True):
        self.path = Path(path) if path else default_path()
        self.busy_timeout = float(busy_timeout)
        try:
            paths.check_sqlite_file(self.path, "checkpoint database", create=create)
        except paths.StoragePathError as exc:
            raise CheckpointError(str(exc)) from None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._refuse_foreign(create)
            self._init()
        except sqlite3.DatabaseError as exc:
            raise CheckpointError(f"checkpoint database {self.path} cannot be used: {exc}") from None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the store as its path and busy timeout."""
        return {"path": self.path, "busy_timeout": self.busy_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the store from its path and busy timeout."""
        self.path = state["path"]
        self.busy_timeout = state["busy_timeout"]

    def __repr__(self) -> str:
        """Show the store by its path."""
        return f"CheckpointStore({str(self.path)!r})"

    # ------------------------------------------------------------------ plumbing

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, self.busy_timeout)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            with immediate(conn):
                yield conn
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    def _refuse_foreign(self, create: bool) -> None:
        """Refuse a database holding other tables and no checkpoints (say, ``--db`` pointed at the archive).

        Creating our table in it would change another program's file. Without `create`, an empty database is
        refused too: it holds no checkpoints, and looking must not turn it into a store.
        """
        tables: set[str] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            with self._read() as conn:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not create and not tables:
            raise CheckpointError(f"no checkpoint database at {self.path} (the file holds no checkpoints table)")
        if tables and "checkpoints" not in tables:
            raise CheckpointError(
                f"{self.path} is an SQLite database but not a checkpoint database "
                f"(it holds {', '.join(sorted(tables))}); left untouched"
            )

    def _init(self) -> None:
        mode = enable_wal(self.path, self.busy_timeout)
        if mode.lower() != "wal":
            raise CheckpointError(f"could not switch {self.path} to WAL (journal_mode={mode})")
        with self._tx() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise CheckpointError(f"{self.path} has checkpoint schema {version}; this code knows {SCHEMA_VERSION}")
            # executescript would COMMIT mid-transaction: run the statements one by one
            for stmt in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(stmt)
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @staticmethod
    def _row(r: sqlite3.Row, with_projection: bool = True) -> CheckpointRow:
        key = CheckpointKey(
            session_id=r["session_id"],
            cut=r["cut"],
            algorithm_version=r["algorithm_version"],
            params_hash=r["params_hash"],
            strategy=r["strategy"],
            params_json=r["params_json"],
        )
        proj = None
        if with_projection and "projection_json" in r.keys() and r["projection_json"]:
            proj = json.loads(r["projection_json"])
        return CheckpointRow(
            key=key,
            status=r["status"],
            owner=r["owner"],
            pid=r["pid"],
            host=r["host"],
            started_at=r["started_at"],
            committed_at=r["committed_at"],
            superseded_at=r["superseded_at"],
            superseded_by=r["superseded_by"],
            receipt=_stored_receipt(r["receipt_json"]),
            projection=proj,
        )

    @staticmethod
    def _select_key(conn: sqlite3.Connection, key: CheckpointKey) -> sqlite3.Row | None:
        return conn.execute(
            f"SELECT {_COLUMNS}, projection_json FROM checkpoints "
            "WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=?",
            (key.session_id, key.cut, key.algorithm_version, key.params_hash),
        ).fetchone()

    @classmethod
    def _written(cls, conn: sqlite3.Connection, key: CheckpointKey) -> sqlite3.Row:
        """Read the row of `key` this transaction has just written (so it exists)."""
        row = cls._select_key(conn, key)
        if row is None:  # the same transaction inserted or updated it: unreachable unless SQLite lost a write
            raise RuntimeError(f"checkpoint {key} vanished inside its own write transaction")
        return row

    def _resolve(self, conn: sqlite3.Connection, key: CheckpointKey | CheckpointRef | str) -> CheckpointKey | None:
        if isinstance(key, CheckpointKey):
            return key
        ref = parse_key(key) if isinstance(key, str) else key
        rows = conn.execute(
            "SELECT session_id, cut, algorithm_version, params_hash, strategy, params_json FROM checkpoints "
            "WHERE session_id=? AND cut=? AND algorithm_version=? AND substr(params_hash, 1, ?)=?",
            (ref.session_id, ref.cut, ref.algorithm_version, len(ref.hash_prefix), ref.hash_prefix),
        ).fetchall()
        if len(rows) > 1:
            raise AmbiguousKey(f"checkpoint key {str(ref)!r} matches {len(rows)} rows; give more hash digits")
        if not rows:
            return None
        r = rows[0]
        return CheckpointKey(
            r["session_id"],
            r["cut"],
            r["algorithm_version"],
            r["params_hash"],
            strategy=r["strategy"],
            params_json=r["params_json"],
        )

    # ------------------------------------------------------------------ reads

    def get(self, key: CheckpointKey | CheckpointRef | str) -> CheckpointRow | None:
        """Return the row for a key (or its string form), with its projection; None if absent."""
        with self._read() as conn:
            full = self._resolve(conn, key)
            if full is None:
                return None
            r = self._select_key(conn, full)
            return None if r is None else self._row(r)

    def list(
        self, status: str | None = None, session_id: str | None = None, with_projection: bool = False
    ) -> list[CheckpointRow]:
        """Rows, oldest claim first, optionally filtered by status and session (projections omitted by default)."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; expected one of {STATUSES}")
        where, args = [], []
        if status is not None:
            where.append("status=?")
            args.append(status)
        if session_id is not None:
            where.append("session_id=?")
            args.append(session_id)
        cols = _COLUMNS + (", projection_json" if with_projection else "")
        sql = f"SELECT {cols} FROM checkpoints" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY started_at, session_id, cut"
        with self._read() as conn:
            return [self._row(r, with_projection) for r in conn.execute(sql, args).fetchall()]

    # ------------------------------------------------------------------ writes

    def claim(
        self,
        key: CheckpointKey,
        owner: str,
        *,
        retired_versions: Collection[str] | None = None,
        pid: int | None = None,
        host: str | None = None,
    ) -> Claim:
        """Try to take the fence for `key` in one ``BEGIN IMMEDIATE`` transaction.

        Returns a `Claim` whose ``kind`` is:

        ``committed``
            a current-version checkpoint exists (``row`` holds it, with projection);
        ``held``
            someone else's ``started`` fence exists (``row``); nothing changed;
        ``resumed``
            our own ``started`` row (same owner id) exists; it is refreshed;
        ``recovered``
            retired-version checkpoint(s) were marked ``superseded`` (or this
            key's own row was ``superseded``) and our fence inserted;
        ``claimed``
            nothing was there; our fence was inserted.
        """
        pid = os.getpid() if pid is None else pid
        host = socket.gethostname() if host is None else host
        now = time.time()
        with self._tx() as conn:
            r = self._select_key(conn, key)
            if r is not None:
                if r["status"] == "committed":
                    return Claim("committed", self._row(r))
                if r["status"] == "started":
                    if r["owner"] != owner:
                        return Claim("held", self._row(r, with_projection=False))
                    conn.execute(
                        "UPDATE checkpoints SET pid=?, host=?, started_at=? WHERE session_id=? AND cut=? "
                        "AND algorithm_version=? AND params_hash=? AND status='started' AND owner=?",
                        (pid, host, now, key.session_id, key.cut, key.algorithm_version, key.params_hash, owner),
                    )
                    return Claim("resumed", self._row(self._written(conn, key), with_projection=False))
                # superseded: this exact key was retired by another version's worker; re-take the slot
                conn.execute(
                    "UPDATE checkpoints SET status='started', owner=?, pid=?, host=?, started_at=?, committed_at=NULL,"
                    " superseded_at=NULL, superseded_by=NULL, receipt_json=NULL, projection_json=NULL,"
                    " strategy=?, params_json=? WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=?",
                    (
                        owner,
                        pid,
                        host,
                        now,
                        key.strategy,
                        key.params_json,
                        key.session_id,
                        key.cut,
                        key.algorithm_version,
                        key.params_hash,
                    ),
                )
                return Claim(
                    "recovered",
                    self._row(self._written(conn, key), with_projection=False),
                    superseded=(key.algorithm_version,),
                )

            others = conn.execute(
                "SELECT algorithm_version FROM checkpoints WHERE session_id=? AND cut=? AND params_hash=? "
                "AND algorithm_version<>? AND status='committed'",
                (key.session_id, key.cut, key.params_hash, key.algorithm_version),
            ).fetchall()
            allowed = (
                None
                if retired_versions is None
                else ({retired_versions} if isinstance(retired_versions, str) else set(retired_versions))
            )
            retired = sorted(o[0] for o in others if allowed is None or o[0] in allowed)
            for version in retired:
                conn.execute(
                    "UPDATE checkpoints SET status='superseded', superseded_at=?, superseded_by=? "
                    "WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=? AND status='committed'",
                    (now, key.algorithm_version, key.session_id, key.cut, version, key.params_hash),
                )
            conn.execute(
                "INSERT INTO checkpoints (session_id, cut, algorithm_version, params_hash, strategy, params_json, "
                "status, owner, pid, host, started_at) VALUES (?, ?, ?, ?, ?, ?, 'started', ?, ?, ?, ?)",
                (
                    key.session_id,
                    key.cut,
                    key.algorithm_version,
                    key.params_hash,
                    key.strategy,
                    key.params_json,
                    owner,
                    pid,
                    host,
                    now,
                ),
            )
            row = self._row(self._written(conn, key), with_projection=False)
            return Claim("recovered" if retired else "claimed", row, superseded=tuple(retired))

    def commit(
        self, key: CheckpointKey, owner: str, projection: Projection, *, extra: Mapping[str, Any] | None = None
    ) -> CheckpointRow:
        """Flip our ``started`` fence to ``committed`` with projection + receipt, in one transaction.

        Both are stored with secrets masked (`mask_stored`). Raises `FenceLost`
        (and writes nothing) when the row is no longer a ``started`` row owned
        by `owner`.
        """
        proj_json = mask_stored(projection.to_json())
        receipt = build_receipt(projection)
        receipt["owner"] = owner
        if extra:
            receipt.update(extra)
        now = time.time()
        receipt["committed_at"] = now
        receipt = mask_stored(receipt)
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE checkpoints SET status='committed', committed_at=?, receipt_json=?, projection_json=? "
                "WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=? "
                "AND status='started' AND owner=?",
                (
                    now,
                    _canonical(receipt),
                    _canonical(proj_json),
                    key.session_id,
                    key.cut,
                    key.algorithm_version,
                    key.params_hash,
                    owner,
                ),
            )
            if cur.rowcount != 1:
                r = self._select_key(conn, key)
                now_row = None if r is None else self._row(r, with_projection=False)
                state = "absent" if now_row is None else f"{now_row.status} (owner {now_row.owner})"
                raise FenceLost(
                    f"fence for {key} no longer ours (row is {state}); nothing committed",
                    projection=projection,
                    row=now_row,
                )
            return self._row(self._written(conn, key))

    def abandon(self, key: CheckpointKey, owner: str) -> bool:
        """Delete our own ``started`` fence (after a failed compute). False if it wasn't ours any more."""
        with self._tx() as conn:
            cur = conn.execute(
                "DELETE FROM checkpoints WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=? "
                "AND status='started' AND owner=?",
                (key.session_id, key.cut, key.algorithm_version, key.params_hash, owner),
            )
            return cur.rowcount == 1

    def release(self, key: CheckpointKey | CheckpointRef | str, force: bool = False) -> bool:
        """Operator action: delete a stuck ``started`` row.

        Returns True when a row was deleted, False when no row matches.
        Committed and superseded rows are refused (`ReleaseRefused`) unless
        ``force=True``. A worker whose fence is released mid-compute gets
        `FenceLost` at commit and commits nothing.
        """
        with self._tx() as conn:
            full = self._resolve(conn, key)
            if full is None:
                return False
            r = self._select_key(conn, full)
            if r is None:
                return False
            if r["status"] != "started" and not force:
                raise ReleaseRefused(f"checkpoint {full} is {r['status']}; refusing to delete it without force")
            cur = conn.execute(
                "DELETE FROM checkpoints WHERE session_id=? AND cut=? AND algorithm_version=? AND params_hash=? "
                "AND status=?",
                (full.session_id, full.cut, full.algorithm_version, full.params_hash, r["status"]),
            )
            return cur.rowcount == 1


# --------------------------------------------------------------------------- receipts


def build_receipt(projection: Projection) -> dict[str, Any]:
    """Build the completion receipt stored with a checkpoint."""
    req, rec = projection.summary_request, projection.receipt
    fingerprint = req.fingerprint() if req is not None else (rec.request_fingerprint if rec is not None else None)
    return {
        "strategy": projection.strategy,
        "algorithm_version": projection.algorithm_version,
        "tokens": projection.tokens,
        "segments": len(projection.segments),
        "summary_requested": req is not None,
        "request_fingerprint": fingerprint,
        "shape_fingerprint": req.shape_fingerprint() if req is not None else None,
        "summarizer": rec.summarizer if rec is not None else None,
        "stand_in": rec.stand_in if rec is not None else False,
        "fallback": rec.fallback if rec is not None else False,
        "error": rec.error if rec is not None else None,
        "input_tokens": rec.input_tokens if rec is not None else 0,
        "cached_tokens": rec.cached_tokens if rec is not None else 0,
        "output_tokens": rec.output_tokens if rec is not None else 0,
    }


#: Receipt keys renamed since rows were first written: old -> new. A row that has the old key and not the
#: new one is read with the new one (the stored bytes are not rewritten).
_RENAMED_RECEIPT_KEYS = {"summary_provider": "summarizer"}


def _stored_receipt(text: str | None) -> dict[str, Any] | None:
    """Read a stored receipt, an older row's renamed keys (`_RENAMED_RECEIPT_KEYS`) under their new names."""
    if not text:
        return None
    receipt = json.loads(text)
    for old, new in _RENAMED_RECEIPT_KEYS.items():
        if old in receipt and new not in receipt:
            receipt[new] = receipt.pop(old)
    return receipt


def _check_projection(key: CheckpointKey, projection: Any) -> Projection:
    if not isinstance(projection, Projection):
        raise TypeError(f"compute() must return a Projection, got {type(projection).__name__}")
    got = (projection.session_id, projection.cut, projection.algorithm_version)
    want = (key.session_id, key.cut, key.algorithm_version)
    if got != want or (key.strategy and projection.strategy != key.strategy):
        raise ValueError(
            f"compute() returned a projection for {got + (projection.strategy,)}, "
            f"not for the key {want + (key.strategy,)}; refusing to commit it"
        )
    return projection


# --------------------------------------------------------------------------- the core


def compact_once(
    store: CheckpointStore,
    key: CheckpointKey,
    compute: Callable[[], Projection],
    *,
    retired_versions: Collection[str] | None = None,
    owner: str | None = None,
    wait: float = 0.0,
    poll: float = 0.05,
) -> Outcome:
    """Compute the checkpoint for `key` at most once across every process sharing `store`.

    (a) A committed same-key row is returned as ``reused`` without calling
    `compute`. (b) Committed rows of a retired algorithm version (see the
    module docstring; `retired_versions=None` means every other version) are
    marked ``superseded`` and the key computed anew: ``recovered``. (c) With no
    row, our ``started`` fence is inserted, `compute` runs outside any
    transaction, and the projection + receipt are committed in one transaction
    that succeeds only while the fence is ours (`FenceLost` otherwise); if
    `compute` raises (or returns a projection for another key, or one that
    cannot be stored as JSON), the fence is
    deleted and the error re-raised. (d) Someone else's ``started`` fence is
    never stolen: ``in_progress`` is returned — immediately with ``wait=0``,
    else after polling up to `wait` seconds for it to commit (``reused``) or
    disappear (then we try to claim it ourselves).
    """
    owner = owner or new_owner_id()
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        claim = store.claim(key, owner, retired_versions=retired_versions)
        if claim.kind == "committed" and claim.row is not None:  # a committed claim always carries its row
            row = claim.row
            return Outcome("reused", key, projection=row.projection, receipt=row.receipt, row=row)
        if claim.kind in ("claimed", "recovered", "resumed"):
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome("in_progress", key, row=claim.row)
        time.sleep(min(poll, remaining))

    t0 = time.monotonic()
    try:
        projection = _check_projection(key, compute())
        row = store.commit(key, owner, projection, extra={"compute_seconds": round(time.monotonic() - t0, 6)})
    except FenceLost:
        raise  # the row isn't ours: leave it alone
    except BaseException:
        try:  # compute failed, or its projection couldn't be stored (not JSON): don't leave a stuck fence
            store.abandon(key, owner)
        except sqlite3.Error:
            pass  # the original error matters more; the fence is then released by an operator
        raise
    return Outcome(
        "recovered" if claim.kind == "recovered" else "computed",
        key,
        projection=row.projection,
        receipt=row.receipt,
        computed=projection,
        row=row,
        superseded=claim.superseded,
    )


# --------------------------------------------------------------------------- plain functions for the CLI


def list_checkpoints(
    path: str | Path | None = None, status: str | None = None, session_id: str | None = None
) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts (no projections), oldest claim first.

    Raises `CheckpointError` when there is no checkpoint database at `path`:
    looking never creates one (nor do `show_checkpoint` and `release_checkpoint`).
    """
    return [r.to_dict() for r in CheckpointStore(path, create=False).list(status=status, session_id=session_id)]


def show_checkpoint(key: str, path: str | Path | None = None, include_projection: bool = True) -> dict[str, Any] | None:
    """One row (by ``SESSION:CUT:ALGO:HASH``) as a dict, or None."""
    row = CheckpointStore(path, create=False).get(key)
    return None if row is None else row.to_dict(include_projection=include_projection)


def release_checkpoint(key: str, path: str | Path | None = None, force: bool = False) -> bool:
    """Delete a stuck ``started`` row (committed ones only with ``force``); see `CheckpointStore.release`."""
    return CheckpointStore(path, create=False).release(key, force=force)


__all__ = [
    "AmbiguousKey",
    "CHECKPOINTS_ENV",
    "CheckpointError",
    "CheckpointKey",
    "CheckpointRef",
    "CheckpointRow",
    "CheckpointStore",
    "Claim",
    "FenceLost",
    "Outcome",
    "ReleaseRefused",
    "STATUSES",
    "build_receipt",
    "checkpoint_key",
    "checkpoint_params",
    "compact_once",
    "default_path",
    "list_checkpoints",
    "new_owner_id",
    "parse_key",
    "release_checkpoint",
    "shape_fingerprint",
    "show_checkpoint",
]

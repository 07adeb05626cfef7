"""OpenCode sessions -> `Session`: the 1.x SQLite database, the older JSON storage tree, and exports.

OpenCode keeps a session as *messages* (user or assistant, with model, tokens and cost) that each
own ordered *parts* (text, reasoning, tool, compaction, step bookkeeping, ...). Three on-disk forms
hold the same objects: ``opencode.db`` (1.x, opened read-only), the older storage tree (`load`
receives the folder holding ``session/``, ``message/``, ``part/``) and ``opencode export`` JSON.
Each form is reduced to the same stream of ``(message info, parts)`` pairs and mapped by one
function (`_build`), so the same logical session imports to identical records from any form.

Every file is read through the shared path (``base.load_json``) and every ``data`` column is parsed
by ``base.parse_json``; an unreadable file, folder or row is a counted skip, never an exception.
A record's ``entry_id`` is its part id (a tool part yields its call at block 0 and its output at
block 1). A session present both in a database and in a migrated storage tree is yielded once per
source; de-duplicating across sources is the caller's concern.

Design: docs/session-formats.md#opencode.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.text import is_injected, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, tool_target
from compaction_lab.ingest.files import SQLITE_MAGIC, Head, load_json, read_magic
from compaction_lab.ingest.import_audit import ImportAudit, os_reason
from compaction_lab.ingest.json_repair import parse_json
from compaction_lab.ingest.registry import IMPORTERS

FORMAT = "opencode"

#: An export is printed as ``{"info": {...}, "messages": [...]}`` (info first).
_EXPORT_START = re.compile(rb'^\s*\{\s*"info"\s*:\s*\{')
_EXPORT_MESSAGES = re.compile(rb'"messages"\s*:\s*\[')
_TRAJECTORY_KEY = re.compile(rb'"trajectory"\s*:\s*\[')


# --------------------------------------------------------------------------- sniffing


def sniff(head: Head) -> bool:
    """Tell whether the input is an OpenCode database, storage tree or export (by content; never raises)."""
    try:
        if head.is_dir:
            return (head.path / "session").is_dir() and (head.path / "message").is_dir()
        if head.is_sqlite:
            return _db_has_tables(head.path, ("message", "part"))
        return _looks_like_export(head)
    except Exception:  # a sniffer must never fail detection of other formats
        return False


def _looks_like_export(head: Head) -> bool:
    raw = head.raw.lstrip()
    if not raw.startswith(b"{"):
        return False
    objs = head.objects
    if len(objs) > 1:  # several JSON objects on separate lines: a JSONL log, not an export
        return False
    if len(objs) == 1 and ("info" in objs[0] or "messages" in objs[0]):
        # The whole document (or its single line) parsed: decide on its top-level keys.
        obj = objs[0]
        return (
            isinstance(obj.get("info"), Mapping) and isinstance(obj.get("messages"), list) and "trajectory" not in obj
        )
    # Pretty-printed or longer than the head: the export prints "info" first.
    return bool(_EXPORT_START.match(raw) and _EXPORT_MESSAGES.search(raw) and not _TRAJECTORY_KEY.search(raw))


def _connect(path: Path) -> sqlite3.Connection:
    # Read-only URI: importing must never modify (or create) the user's database.
    uri = "file:" + str(Path(path).resolve()).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    # A text value that is not UTF-8 comes back as bytes (counted per row by `_parse_row`)
    # instead of an OperationalError that would end the whole database.
    conn.text_factory = _text_or_bytes
    return conn


def _text_or_bytes(value: bytes) -> str | bytes:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def _as_id(value: Any) -> str:
    """Return a row id as text (an id column that is not UTF-8 is decoded with replacement)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _db_has_tables(path: Path, tables: Iterable[str]) -> bool:
    conn = _connect(path)
    try:
        return all(name in _tables(conn) for name in tables)
    finally:
        conn.close()


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


# --------------------------------------------------------------------------- loading


def load(path: Path, audit: ImportAudit) -> Iterator[Session]:
    """Stream the sessions of an OpenCode database, storage tree or export file.

    Parameters
    ----------
    path : Path
        ``opencode.db``, a storage root directory, or an export JSON file.
    audit : ImportAudit
        Receives every skipped row, file or part.

    Yields
    ------
    Session
        One per OpenCode session, in the source's order.
    """
    path = Path(path)
    if path.is_dir():
        yield from _load_storage(path, audit)
        return
    try:
        magic = read_magic(path, len(SQLITE_MAGIC))
    except OSError as exc:
        audit.skip(path, None, "unreadable", os_reason(exc))
        return
    if magic == SQLITE_MAGIC:
        yield from _load_db(path, audit)
    else:
        yield from _load_export(path, audit)


# ----- SQLite (1.x)


def _load_db(path: Path, audit: ImportAudit) -> Iterator[Session]:
    try:
        conn = _connect(path)
        tables = _tables(conn)
    except sqlite3.Error as exc:
        audit.skip(path, None, "unreadable", f"{type(exc).__name__}: {exc}")
        return
    try:
        for table in ("session", "message", "part"):
            if table not in tables:
                audit.skip(path, None, "missing_field", f"no table {table}")
                return
        cols = {t: _columns(conn, t) for t in ("session", "message", "part")}
        for table, need in (
            ("session", ("id",)),
            ("message", ("id", "session_id", "data")),
            ("part", ("id", "message_id", "data")),
        ):
            missing = [c for c in need if c not in cols[table]]
            if missing:
                audit.skip(path, None, "missing_field", f"table {table} has no column {', '.join(missing)}")
                return
        order = "time_created, id" if "time_created" in cols["session"] else "id"
        # Iterate the session table with its own cursor; each session's messages and
        # parts are queried separately, so memory holds one session at a time.
        sessions = conn.execute(f'SELECT * FROM "session" ORDER BY {order}')
        names = [d[0] for d in sessions.description]
        for row in sessions:
            info = _db_session_info(dict(zip(names, row, strict=False)), path, audit)
            messages = _db_messages(conn, cols, info["id"], path, audit)
            yield _build(info, messages, path, audit)
    except sqlite3.Error as exc:
        audit.skip(path, None, "unreadable", f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def _db_session_info(row: dict[str, Any], path: Path, audit: ImportAudit) -> dict[str, Any]:
    """Session info in the JSON (storage/export) shape, from a session row."""
    info: dict[str, Any] = {}
    if isinstance(row.get("data"), (str, bytes)):  # some versions keep the rest of the info as JSON
        data = _parse_row(row["data"], "session", row.get("id"), path, audit)
        if data is not None:
            info.update(data)
    info["id"] = _as_id(row["id"])
    for col, key in (("title", "title"), ("directory", "directory"), ("parent_id", "parentID"), ("version", "version")):
        if row.get(col) is not None:
            info[key] = row[col]
    return info


def _db_messages(
    conn: sqlite3.Connection, cols: Mapping[str, list[str]], session_id: str, path: Path, audit: ImportAudit
) -> Iterator[tuple[dict[str, Any] | None, str, list[dict[str, Any]]]]:
    """(message info or None, message id, parts) of one session, in OpenCode's order."""
    order = "time_created, id" if "time_created" in cols["message"] else "id"
    rows = conn.execute(f'SELECT id, data FROM "message" WHERE session_id = ? ORDER BY {order}', (session_id,))
    for msg_id, data in rows:
        info = _parse_row(data, "message", msg_id, path, audit)
        if info is not None:
            info = {**info, "id": _as_id(msg_id), "sessionID": session_id}
        parts: list[dict[str, Any]] = []
        for part_id, pdata in conn.execute('SELECT id, data FROM "part" WHERE message_id = ? ORDER BY id', (msg_id,)):
            part = _parse_row(pdata, "part", part_id, path, audit)
            if part is not None:
                parts.append({**part, "id": _as_id(part_id), "messageID": _as_id(msg_id), "sessionID": session_id})
        yield info, _as_id(msg_id), parts


def _parse_row(data: Any, table: str, row_id: Any, path: Path, audit: ImportAudit) -> dict[str, Any] | None:
    """Parse the JSON object of a ``data`` column, or return None (counted)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            audit.skip(path, None, "invalid_utf8", f"{table} {row_id}: {exc}")
            return None
    if not isinstance(data, str):
        audit.skip(path, None, "missing_field", f"{table} {row_id}: data is {type(data).__name__}")
        return None
    try:
        obj, replaced = parse_json(data)
    except (ValueError, RecursionError) as exc:
        audit.skip(path, None, "malformed_json", f"{table} {row_id}: {exc}")
        return None
    if not isinstance(obj, dict):
        audit.skip(path, None, "not_an_object", f"{table} {row_id}: {type(obj).__name__}")
        return None
    if replaced:
        audit.note("lone_surrogates_replaced")
    return obj


# ----- JSON storage tree (pre-1.x)


def _listing(folder: Path, audit: ImportAudit, keep) -> list[Path]:
    """List the entries of one storage folder that `keep` accepts, sorted.

    A missing folder has none, an unreadable one is counted.
    """
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if keep(e)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        audit.skip(folder, None, "unreadable", os_reason(exc))
        return []
    return [folder / n for n in sorted(names)]


def _json_files(folder: Path, audit: ImportAudit) -> list[Path]:
    """List the ``*.json`` files of one storage folder."""
    return _listing(folder, audit, lambda e: e.name.endswith(".json"))


def _subfolders(folder: Path, audit: ImportAudit) -> list[Path]:
    """List the folders inside one storage folder."""
    return _listing(folder, audit, lambda e: e.is_dir())


def _load_storage(root: Path, audit: ImportAudit) -> Iterator[Session]:
    session_files = [f for project in _subfolders(root / "session", audit) for f in _json_files(project, audit)]
    if not session_files:
        audit.skip(root, None, "empty_file", "storage tree holds no session/<project>/<ses>.json")
        return
    for sfile in session_files:
        info = load_json(sfile, audit)
        if info is None:
            continue
        if not isinstance(info, dict):
            audit.skip(sfile, None, "not_an_object", type(info).__name__)
            continue
        info = {**info, "id": str(info.get("id") or sfile.stem)}
        yield _build(info, _storage_messages(root, info["id"], audit), sfile, audit)


def _storage_messages(
    root: Path, session_id: str, audit: ImportAudit
) -> Iterator[tuple[dict[str, Any] | None, str, list[dict[str, Any]]]]:
    loaded: list[tuple[Any, str, dict[str, Any]]] = []
    for mfile in _json_files(root / "message" / session_id, audit):
        info = load_json(mfile, audit)
        if info is None:
            # Unreadable message file: its parts can no longer be placed (counted below).
            loaded.append(((0, 0, mfile.stem), mfile.stem, {}))
            continue
        if not isinstance(info, dict):
            audit.skip(mfile, None, "not_an_object", type(info).__name__)
            loaded.append(((0, 0, mfile.stem), mfile.stem, {}))
            continue
        msg_id = str(info.get("id") or mfile.stem)
        created = (info.get("time") or {}).get("created") if isinstance(info.get("time"), dict) else None
        key = (1, created if isinstance(created, (int, float)) else 0, msg_id)
        loaded.append((key, msg_id, {**info, "id": msg_id}))
    # OpenCode's own order: time.created, then id (unreadable messages first; they yield nothing).
    loaded.sort(key=lambda t: t[0])
    for _key, msg_id, info in loaded:
        parts: list[dict[str, Any]] = []
        for pfile in _json_files(root / "part" / msg_id, audit):
            part = load_json(pfile, audit)
            if part is None:
                continue
            if not isinstance(part, dict):
                audit.skip(pfile, None, "not_an_object", type(part).__name__)
                continue
            parts.append({**part, "id": str(part.get("id") or pfile.stem)})
        parts.sort(key=lambda p: p["id"])
        yield (info or None), msg_id, parts


# ----- export JSON


def _load_export(path: Path, audit: ImportAudit) -> Iterator[Session]:
    doc = load_json(path, audit)
    if doc is None:
        return
    if not isinstance(doc, dict):
        audit.skip(path, None, "not_an_object", type(doc).__name__)
        return
    info = doc.get("info")
    messages = doc.get("messages")
    if not isinstance(info, dict) or not isinstance(messages, list):
        audit.skip(path, None, "missing_field", "export needs an 'info' object and a 'messages' list")
        return
    info = {**info, "id": str(info.get("id") or path.stem)}
    yield _build(info, _export_messages(messages, path, audit), path, audit)


def _export_messages(
    messages: list[Any], path: Path, audit: ImportAudit
) -> Iterator[tuple[dict[str, Any] | None, str, list[dict[str, Any]]]]:
    # The export is already in OpenCode's order (messages by time, parts by id): keep it.
    for i, item in enumerate(messages):
        if not isinstance(item, dict):
            audit.skip(path, None, "not_an_object", f"messages[{i}]: {type(item).__name__}")
            continue
        info = item.get("info")
        raw_parts = parts_field if isinstance(parts_field := item.get("parts"), list) else []
        msg_id = str(info.get("id")) if isinstance(info, dict) and info.get("id") else f"m{i}"
        if not isinstance(info, dict):
            audit.skip(path, None, "missing_field", f"messages[{i}]: no info object")
            info = None
        parts = []
        for k, part in enumerate(raw_parts):
            if not isinstance(part, dict):
                audit.skip(path, None, "not_an_object", f"messages[{i}].parts[{k}]: {type(part).__name__}")
                continue
            parts.append({**part, "id": str(part.get("id") or f"{msg_id}.p{k}")})
        yield info, msg_id, parts


# --------------------------------------------------------------------------- mapping


def _build(
    info: Mapping[str, Any],
    messages: Iterable[tuple[dict[str, Any] | None, str, list[dict[str, Any]]]],
    source: Path,
    audit: ImportAudit,
) -> Session:
    """Map one session's info and (message, parts) stream to a `Session`."""
    b = SessionBuilder(str(info["id"]), FORMAT, source)
    meta = b.metadata
    for key, src in (
        ("title", "title"),
        ("cwd", "directory"),
        ("parent_session", "parentID"),
        ("opencode_version", "version"),
    ):
        val = info.get(src)
        if isinstance(val, str) and val:
            meta[key] = val
    models: list[str] = []
    pruned = 0
    first_record: dict[str, Any] = {}  # message id -> its first record (records are keyed by part id)
    for msg, msg_id, parts in messages:
        if msg is None:
            # The message row/file was unreadable (already counted): without its role its
            # parts cannot be classified, so each is counted rather than guessed at.
            for part in parts:
                audit.skip(source, None, "missing_field", f"part {part['id']}: message {msg_id} could not be read")
            continue
        role = msg.get("role")
        if role not in ("user", "assistant"):
            audit.skip(
                source,
                None,
                "missing_field" if role is None else "unknown_type",
                f"message {msg_id}: role {role!r} ({len(parts)} parts dropped)",
            )
            continue
        ts = _iso((msg.get("time") or {}).get("created") if isinstance(msg.get("time"), dict) else None)
        _message_meta(b, msg, msg_id, role, models)
        if (
            role == "assistant"
            and msg.get("summary") is True
            and meta.get("compactions")
            and isinstance(msg.get("modelID"), str)
            and msg["modelID"]
        ):
            meta["compactions"][-1].setdefault("model", msg["modelID"])  # the model that wrote the summary
        first = len(b.records)
        for part in parts:
            pruned += _add_part(b, part, msg, role, ts, source, audit)
        if len(b.records) > first:
            first_record.setdefault(msg_id, b.records[first])
    _resolve_tail_starts(meta, first_record)
    if models:
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = models
    if pruned:
        meta["pruned_outputs"] = pruned
    return b.build()


def _message_meta(b: SessionBuilder, msg: Mapping[str, Any], msg_id: str, role: str, models: list[str]) -> None:
    """Session-level facts a message carries: system prompt, model, usage, cwd."""
    system = msg.get("system")
    if "system_prompt" not in b.metadata:
        first = system[0] if isinstance(system, list) and system else system
        if isinstance(first, str) and first.strip():
            b.metadata["system_prompt"] = first
    if role != "assistant":
        return
    model = msg.get("modelID")
    if isinstance(model, str) and model and model not in models:
        models.append(model)
    cwd = (msg.get("path") or {}).get("cwd") if isinstance(msg.get("path"), dict) else None
    if isinstance(cwd, str) and cwd and "cwd" not in b.metadata:
        b.metadata["cwd"] = cwd
    tokens = msg.get("tokens")
    if isinstance(tokens, dict):
        cache = cache_field if isinstance(cache_field := tokens.get("cache"), dict) else {}
        b.add_usage(
            msg_id,
            model=model if isinstance(model, str) else None,
            input_tokens=tokens.get("input"),
            cached_tokens=cache.get("read"),
            cache_write_tokens=cache.get("write"),
            output_tokens=tokens.get("output"),
            reasoning_tokens=tokens.get("reasoning"),
            cost=msg.get("cost"),
        )


def _resolve_tail_starts(meta: dict[str, Any], first_record: Mapping[str, Any]) -> None:
    """Resolve each recorded compaction's kept tail (``tail_start_id``, a message id) to a record.

    The tail is given as the entry id and source order of that message's first record, where strategies read
    it (`strategies.arms.opencode`).
    """
    for c in meta.get("compactions", ()):
        rec = first_record.get(c.get("tail_start_message_id"))
        if rec is not None:
            c["tail_start_entry_id"], c["tail_start_source_order"] = rec.entry_id, rec.source_order


def _add_part(
    b: SessionBuilder,
    part: Mapping[str, Any],
    msg: Mapping[str, Any],
    role: str,
    ts: str | None,
    source: Path,
    audit: ImportAudit,
) -> int:
    """Add the records of one part; returns 1 when it was a pruned tool output, else 0."""
    pid = part["id"]
    ptype = part.get("type")
    if not isinstance(ptype, str):
        audit.skip(source, None, "missing_field", f"part {pid}: no type")
        return 0
    if ptype == "text":
        text = part.get("text")
        if not isinstance(text, str):
            audit.skip(source, None, "missing_field", f"part {pid}: text part without text")
            return 0
        if role == "user":
            if part.get("ignored"):
                b.add("meta", text, pid, timestamp=ts)  # shown in the UI, never sent to the model
            else:
                b.add("user", text, pid, injected=bool(part.get("synthetic")) or is_injected(text), timestamp=ts)
        else:
            b.add("summary" if msg.get("summary") is True else "assistant", text, pid, timestamp=ts)
        return 0
    if ptype == "reasoning":
        text = part.get("text")
        if not isinstance(text, str):
            audit.skip(source, None, "missing_field", f"part {pid}: reasoning part without text")
            return 0
        b.add("reasoning", text, pid, timestamp=ts)
        return 0
    if ptype == "tool":
        return _add_tool(b, part, ts, source, audit)
    if ptype == "compaction":
        rec = b.add("meta", "compaction" + (" (auto)" if part.get("auto") else ""), pid, timestamp=ts)
        boundary: dict[str, Any] = {"entry_id": pid, "source_order": rec.source_order}
        if isinstance(part.get("tail_start_id"), str) and part["tail_start_id"]:
            # The first message OpenCode kept verbatim (a message id; resolved to a record by `_build`).
            boundary["tail_start_message_id"] = part["tail_start_id"]
        b.metadata.setdefault("compactions", []).append(boundary)
        return 0
    # step-start, step-finish, snapshot, patch, file, agent, retry, subtask and types
    # added later: bookkeeping the spec tolerates, kept as meta (never context).
    b.add("meta", _meta_text(ptype, part), pid, timestamp=ts)
    return 0


def _add_tool(b: SessionBuilder, part: Mapping[str, Any], ts: str | None, source: Path, audit: ImportAudit) -> int:
    pid = part["id"]
    tool = part.get("tool")
    state = part.get("state")
    if not isinstance(tool, str) or not isinstance(state, dict):
        audit.skip(source, None, "missing_field", f"part {pid}: tool part needs 'tool' and 'state'")
        return 0
    args = state.get("input") if state.get("input") is not None else {}
    call_id = part.get("callID") if isinstance(part.get("callID"), str) else pid
    target = tool_target(args)
    b.add("tool_call", tool_call_text(tool, args), pid, 0, tool=tool, target=target, call_id=call_id, timestamp=ts)
    status = state.get("status")
    if isinstance(state.get("output"), str):
        # A pruned ("compacted") output still holds its original text in the log; the model
        # later saw a placeholder instead. Keep the text, count the pruning in metadata.
        b.add("tool_output", state["output"], pid, 1, tool=tool, target=target, call_id=call_id, timestamp=ts)
        time = time_field if isinstance(time_field := state.get("time"), dict) else {}
        return 1 if time.get("compacted") else 0
    if status == "error" or isinstance(state.get("error"), str):
        err = state.get("error")
        b.add(
            "tool_output",
            err if isinstance(err, str) else "",
            pid,
            1,
            tool=tool,
            target=target,
            call_id=call_id,
            is_error=True,
            timestamp=ts,
        )
    elif status == "completed":
        audit.skip(source, None, "missing_field", f"part {pid}: completed tool part without output")
    # pending / running: the call was made but no output was recorded yet.
    return 0


def _meta_text(ptype: str, part: Mapping[str, Any]) -> str:
    """Describe a bookkeeping part in short (no payloads such as data URLs)."""
    bits = [ptype]
    if ptype == "step-finish":
        tokens = tokens_field if isinstance(tokens_field := part.get("tokens"), dict) else {}
        cache = cache_field if isinstance(cache_field := tokens.get("cache"), dict) else {}
        for key, val in (
            ("reason", part.get("reason")),
            ("input", tokens.get("input")),
            ("output", tokens.get("output")),
            ("reasoning", tokens.get("reasoning")),
            ("cache_read", cache.get("read")),
            ("cache_write", cache.get("write")),
            ("cost", part.get("cost")),
        ):
            if val is not None:
                bits.append(f"{key}={val}")
    elif ptype == "file":
        bits += [str(v) for v in (part.get("filename"), part.get("mime")) if v]
    elif ptype in ("agent", "subtask"):
        bits += [str(v) for v in (part.get("name") or part.get("agent"), part.get("description")) if v]
    elif ptype == "patch":
        files = part.get("files")
        if isinstance(files, list):
            bits += [str(f) for f in files]
    elif ptype == "retry":
        bits.append(f"attempt={part.get('attempt')}")
    return " ".join(bits)


def _iso(ms: Any) -> str | None:
    """ISO-8601 UTC timestamp from OpenCode's epoch milliseconds."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return None
    try:
        return (
            datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    except (OverflowError, OSError, ValueError):
        return None


# The rank is this importer's place in the sniffing order, most specific first (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=10, agent="opencode")

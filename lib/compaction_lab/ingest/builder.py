"""Building a `Session`: records in source order, usage as the log reports it, and naming helpers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Record, Session
from compaction_lab.ingest.json_repair import loads


def file_stem(path: str | Path) -> str:
    """File name without ``.zst`` and the log suffix (``rollout-x.jsonl.zst`` -> ``rollout-x``).

    The fallback session id of formats whose files do not record one.
    """
    name = Path(path).name
    for suffix in (".zst", ".jsonl", ".ndjson", ".json", ".traj"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


#: Keys of tool arguments that name what the tool acted on, in priority order.
_TARGET_KEYS = (
    "file_path",
    "filePath",
    "path",
    "notebook_path",
    "command",
    "cmd",
    "url",
    "pattern",
    "query",
    "description",
)


def tool_target(args: Any) -> str | None:
    """Return what a tool call acted on (file path, command, URL, pattern), from its arguments."""
    if isinstance(args, str):
        try:
            args = loads(args)
        except (ValueError, RecursionError):
            return args[:500] or None
    if not isinstance(args, Mapping):
        return None
    for key in _TARGET_KEYS:
        val = args.get(key)
        if isinstance(val, list) and val and all(isinstance(v, str) for v in val):
            val = " ".join(val)
        if isinstance(val, str) and val.strip():
            if key == "pattern" and isinstance(args.get("path"), str):
                return f"{val} {args['path']}"[:500]
            return val[:500]
    return None


def _path_text(path: str | Path) -> str:
    r"""Return a path as text that can be written.

    A file name's bytes that are not UTF-8 (which Python reads as lone surrogates, ``surrogateescape``)
    are shown as ``\x80``; kept raw, they stopped the run folder's save.
    """
    try:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system name gives: a path made up in code
        return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


class SessionBuilder:
    """Accumulates records in source order and builds a `Session`.

    Parameters
    ----------
    session_id, source_format : str
    source_path : str or Path, optional
    """

    def __init__(self, session_id: str, source_format: str, source_path: str | Path | None = None):
        self.session_id = session_id
        self.source_format = source_format
        self.source_path = _path_text(source_path) if source_path is not None else None
        self.records: list[Record] = []
        self.metadata: dict[str, Any] = {}

    def add(self, kind: str, text: str, entry_id: str, block_index: int = 0, **fields: Any) -> Record:
        """Append a record; `source_order` is its position."""
        rec = Record(
            session_id=self.session_id,
            entry_id=str(entry_id),
            block_index=block_index,
            source_order=len(self.records),
            kind=kind,
            text=text if isinstance(text, str) else str(text),
            **fields,
        )
        self.records.append(rec)
        return rec

    def add_usage(self, entry_id: str, model: str | None = None, **counts: Any) -> None:
        """Record one model call's usage as the log reports it (normalised key names).

        Keys: input_tokens, cached_tokens, cache_write_tokens, output_tokens,
        reasoning_tokens, cost; missing ones are omitted, never invented.
        """
        row: dict[str, Any] = {"entry_id": str(entry_id)}
        if model:
            row["model"] = model
        for k, v in counts.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = v
        self.metadata.setdefault("usage", []).append(row)

    def build(self) -> Session:
        """Return the session of the records added so far."""
        return Session(
            id=self.session_id,
            source_format=self.source_format,
            source_path=self.source_path,
            metadata=self.metadata,
            records=tuple(self.records),
        )

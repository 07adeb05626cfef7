"""Claude Code transcripts -> `Session`.

Reads both variants: ``~/.claude/projects/<project>/<session>.jsonl`` (and
subagent ``agent-<id>.jsonl`` files) and the stdout of
``claude -p --output-format stream-json``. One `Session` per ``sessionId``;
sidechains become ``<sessionId>:sidechain[:<agent>]``. Records keep file order
(never before their ``parentUuid`` parent); usage is recorded once per
``message.id``.

Design (line and block mapping, usage, order, sessions): docs/session-formats.md#claude-code
"""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from compaction_lab.core.session import Session
from compaction_lab.core.text import content_text, is_injected, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, file_stem, tool_target
from compaction_lab.ingest.files import Head, iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.registry import IMPORTERS, safely

FORMAT = "claude_code"

#: Line types of a projects transcript (for sniffing; `load` tolerates any type).
PROJECT_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "queue-operation",
        "file-history-snapshot",
        "custom-title",
        "attachment",
        "progress",
    }
)
#: Line types of a stream-json transcript.
STREAM_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event"})
#: Keys whose presence (with a string value) marks a projects line.
_LINK_KEYS = ("sessionId", "uuid", "leafUuid", "messageId")

#: Assistant blocks that call a tool (client-side, server-side, MCP connector).
_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
#: Blocks that are attachments rather than text (kept as meta: no chars to count).
_ATTACHMENT_BLOCKS = frozenset({"image", "document"})
#: Model name Claude Code gives to locally generated (non-API) assistant messages.
SYNTHETIC_MODEL = "<synthetic>"


# --------------------------------------------------------------------------- sniffing


def _is_project_line(obj: Mapping[str, Any]) -> bool:
    if obj.get("type") not in PROJECT_TYPES or "payload" in obj:
        return False
    return "parentUuid" in obj or any(isinstance(obj.get(k), str) for k in _LINK_KEYS)


def _is_stream_line(obj: Mapping[str, Any]) -> bool:
    return obj.get("type") in STREAM_TYPES and isinstance(obj.get("session_id"), str) and "payload" not in obj


def sniff(head: Head) -> bool:
    """Tell whether the head lines look like a Claude Code projects or stream-json transcript.

    A projects line has a Claude Code line type and one of the link keys
    (``sessionId``, ``uuid``, ``parentUuid``, ``leafUuid``); a stream-json line
    has ``session_id`` and a stream type. pi lines (types ``session`` /
    ``message``, no such keys) and Codex lines (``payload``) never match.
    A first line longer than the head is judged by its outline (`files.read_head`), like any line.
    """
    try:
        if head.is_dir or head.is_sqlite:
            return False
        return any(safely(_is_project_line, o) or safely(_is_stream_line, o) for o in head.objects)
    except Exception:  # a sniffer never raises
        return False


# --------------------------------------------------------------------------- parsing


#: One pending record: kind, text, Record fields (plus private ``_``-keys for the builder).
_Item = tuple[str, str, dict]


@dataclass
class _Entry:
    """One parsed line, reduced to what building a session needs."""

    lineno: int
    entry_id: str
    uuid: str | None
    parent: str | None
    sid: str | None
    side: str | None  # None for the main conversation, else "sidechain[:agent]"
    variant: str
    timestamp: str | None
    items: list[_Item] = field(default_factory=list)
    usage: tuple[str, str | None, dict] | None = None  # (message key, model, counts)
    model: str | None = None
    info: dict = field(default_factory=dict)


def _str(val: Any) -> str | None:
    return val if isinstance(val, str) and val else None


def _entry_of(lineno: int, obj: Mapping[str, Any], used_ids: set[str]) -> _Entry:
    """Read the bare entry of a line: ids, links, session and side; no items yet."""
    stream = "sessionId" not in obj and isinstance(obj.get("session_id"), str)
    uuid = _str(obj.get("uuid"))
    entry_id = uuid or f"L{lineno}"
    if entry_id in used_ids:  # a repeated uuid must not merge two entries
        entry_id = f"{entry_id}#L{lineno}"
    used_ids.add(entry_id)
    if stream:
        sid = _str(obj.get("session_id"))
        agent = _str(obj.get("parent_tool_use_id"))
        side = f"sidechain:{agent}" if agent else None
    else:
        sid = _str(obj.get("sessionId"))
        side = None
        if obj.get("isSidechain") is True:
            agent = _str(obj.get("agentId"))
            side = f"sidechain:{agent}" if agent else "sidechain"
    return _Entry(
        lineno=lineno,
        entry_id=entry_id,
        uuid=uuid,
        parent=_str(obj.get("parentUuid")),
        sid=sid,
        side=side,
        variant="stream_json" if stream else "projects",
        timestamp=_str(obj.get("timestamp")),
    )


def _user_text_item(text: str, obj: Mapping[str, Any]) -> _Item:
    if obj.get("isCompactSummary") is True:
        return ("summary", text, {"_summary_boundary": True})
    return ("user", text, {"injected": obj.get("isMeta") is True or is_injected(text)})


def _tool_output_item(block: Mapping[str, Any], server: bool = False) -> _Item:
    content = block.get("content")
    text = content_text(content)
    if server and not text and content:
        # Server-side results (web search hits) are structured, with no text field.
        text = json.dumps(content, ensure_ascii=False)
    call_id = _str(block.get("tool_use_id"))
    return ("tool_output", text, {"call_id": call_id, "is_error": block.get("is_error") is True})


def _attachment_item(block: Mapping[str, Any]) -> _Item:
    source = source_field if isinstance(source_field := block.get("source"), Mapping) else {}
    media = source.get("media_type") or source.get("type") or ""
    return ("meta", f"{block.get('type')} {media}".strip(), {})


def _user_items(obj: Mapping[str, Any], msg: Mapping[str, Any], skip) -> list[_Item]:
    content = msg.get("content")
    if isinstance(content, str):
        return [_user_text_item(content, obj)]
    if not isinstance(content, list):
        skip("missing_field", "user message.content is neither a string nor a list")
        return []
    items: list[_Item] = []
    for i, block in enumerate(content):
        if isinstance(block, str):
            items.append(_user_text_item(block, obj))
            continue
        btype = block.get("type") if isinstance(block, Mapping) else None
        btype = btype if isinstance(btype, str) else None  # a list/object "type" is no type
        if btype == "text" and isinstance(block.get("text"), str):
            items.append(_user_text_item(block["text"], obj))
        elif btype == "tool_result":
            items.append(_tool_output_item(block))
        elif btype in _ATTACHMENT_BLOCKS:
            items.append(_attachment_item(block))
        elif btype == "text" or not isinstance(btype, str):
            skip("missing_field", f"user content[{i}] has no usable type/text")
        else:
            skip("unknown_type", f"user content[{i}] block type {btype!r}")
    return items


def _assistant_items(msg: Mapping[str, Any], entry: _Entry, calls: dict, skip) -> list[_Item]:
    content = msg.get("content")
    if isinstance(content, str):
        return [("assistant", content, {})]
    if not isinstance(content, list):
        skip("missing_field", "assistant message.content is neither a string nor a list")
        return []
    items: list[_Item] = []
    for i, block in enumerate(content):
        btype = block.get("type") if isinstance(block, Mapping) else None
        btype = btype if isinstance(btype, str) else None  # a list/object "type" is no type
        if btype == "text" and isinstance(block.get("text"), str):
            items.append(("assistant", block["text"], {}))
        elif btype == "thinking" and isinstance(block.get("thinking"), str):
            items.append(("reasoning", block["thinking"], {}))
        elif btype == "redacted_thinking":
            # Encrypted reasoning: opaque, count nothing, note its size.
            size = len(block.get("data") or "") if isinstance(block.get("data"), str) else 0
            entry.info["redacted_thinking_bytes"] = entry.info.get("redacted_thinking_bytes", 0) + size
            items.append(("meta", f"redacted_thinking ({size} bytes)", {}))
        elif btype in _CALL_BLOCKS and isinstance(block.get("name"), str):
            name, args = block["name"], block.get("input")
            args = {} if args is None else args
            call_id = _str(block.get("id"))
            target = tool_target(args)
            if call_id:
                calls[call_id] = (name, target)
            items.append(
                ("tool_call", tool_call_text(name, args), {"tool": name, "target": target, "call_id": call_id})
            )
        elif isinstance(btype, str) and btype.endswith("_tool_result"):
            items.append(_tool_output_item(block, server=True))  # server-side tool results arrive in the assistant turn
        elif btype in _ATTACHMENT_BLOCKS:
            items.append(_attachment_item(block))
        elif btype in ("text", "thinking") or btype in _CALL_BLOCKS or not isinstance(btype, str):
            skip("missing_field", f"assistant content[{i}] ({btype!r}) lacks its text/name")
        else:
            skip("unknown_type", f"assistant content[{i}] block type {btype!r}")
    return items


def _usage_of(msg: Mapping[str, Any], entry: _Entry) -> None:
    """Model and usage of an assistant message (the ``<synthetic>`` pseudo-model is neither)."""
    model = _str(msg.get("model"))
    if model == SYNTHETIC_MODEL:
        return
    entry.model = model
    usage = msg.get("usage")
    if not isinstance(usage, Mapping):
        return
    counts = {
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cache_write_tokens": usage.get("cache_creation_input_tokens"),
        "cached_tokens": usage.get("cache_read_input_tokens"),
    }
    key = _str(msg.get("id")) or f"entry:{entry.entry_id}"
    entry.usage = (key, model, counts)


def _system_items(obj: Mapping[str, Any], entry: _Entry) -> list[_Item]:
    subtype = _str(obj.get("subtype"))
    if subtype == "init":
        info: dict[str, Any] = {}
        for src, dst in (
            ("cwd", "cwd"),
            ("tools", "tools"),
            ("permissionMode", "permission_mode"),
            ("claude_code_version", "claude_code_version"),
        ):
            if obj.get(src) is not None:
                info[dst] = obj[src]
        for key in ("system_prompt", "systemPrompt"):
            if isinstance(obj.get(key), str):
                info["system_prompt"] = obj[key]
        if isinstance(obj.get("context_window"), int):
            info["window"] = obj["context_window"]
        entry.info["init"] = info
        entry.model = _str(obj.get("model"))
        return [("meta", "system init", {})]
    if subtype == "compact_boundary":
        cm = obj.get("compactMetadata") or obj.get("compact_metadata") or {}
        boundary: dict[str, Any] = {}
        if isinstance(cm, Mapping):
            trigger = cm.get("trigger")
            pre = cm.get("preTokens", cm.get("pre_tokens"))
            if isinstance(trigger, str):
                boundary["trigger"] = trigger
            if isinstance(pre, int):
                boundary["pre_tokens"] = pre
        return [("meta", "system compact_boundary", {"_boundary": boundary})]
    content = obj.get("content")
    text = content if isinstance(content, str) else content_text(content)
    if text:
        return [("system", text, {})]
    return [("meta", f"system {subtype or ''}".strip(), {})]


def _result_items(obj: Mapping[str, Any], entry: _Entry) -> list[_Item]:
    keys = ("subtype", "is_error", "num_turns", "duration_ms", "duration_api_ms", "total_cost_usd", "usage")
    result = {k: obj[k] for k in keys if obj.get(k) is not None}
    windows = {}
    mu = obj.get("modelUsage")
    if isinstance(mu, Mapping):
        for model, row in mu.items():
            if isinstance(row, Mapping) and isinstance(row.get("contextWindow"), int):
                windows[model] = row["contextWindow"]
        result["model_usage"] = dict(mu)
    entry.info["result"] = result
    entry.info["windows"] = windows
    return [("meta", f"result {obj.get('subtype') or ''}".strip(), {})]


def _meta_text(obj: Mapping[str, Any], ltype: Any) -> str:
    parts = [str(ltype) if ltype is not None else "untyped"]
    for key in ("subtype", "operation"):
        if isinstance(obj.get(key), str):
            parts.append(obj[key])
    return " ".join(parts)


def _parse(lineno: int, obj: Mapping[str, Any], used_ids: set[str], calls: dict, skip) -> _Entry:
    """Turn one line into an entry with its pending records (bad parts are counted, never raised)."""
    entry = _entry_of(lineno, obj, used_ids)
    ltype = obj.get("type")
    if ltype in ("user", "assistant"):
        msg = obj.get("message")
        if not isinstance(msg, Mapping):
            skip("missing_field", f"{ltype} line without a message object")
        elif ltype == "user":
            entry.items = _user_items(obj, msg, skip)
        else:
            entry.items = _assistant_items(msg, entry, calls, skip)
            _usage_of(msg, entry)
    elif ltype == "system":
        entry.items = _system_items(obj, entry)
    elif ltype == "result":
        entry.items = _result_items(obj, entry)
    elif ltype == "summary":
        text = summary_field if isinstance(summary_field := obj.get("summary"), str) else ""
        entry.info["summary"] = (text, _str(obj.get("leafUuid")))
        entry.items = [("meta", text, {})]
    elif ltype == "custom-title":
        title = _str(obj.get("customTitle")) or _str(obj.get("title"))
        if title:
            entry.info["title"] = title
        entry.items = [("meta", f"custom-title {title or ''}".strip(), {})]
    else:  # queue-operation, file-history-snapshot, progress, stream_event, unknown: bookkeeping
        entry.items = [("meta", _meta_text(obj, ltype), {})]
    if entry.variant == "projects":
        for src, dst in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "claude_code_version")):
            if _str(obj.get(src)):
                entry.info.setdefault("line", {})[dst] = obj[src]
    return entry


# --------------------------------------------------------------------------- ordering


def _order(entries: list[_Entry], known: set[str], path: Path, audit: ImportAudit) -> list[_Entry]:
    """Entries in file order, but never before their parent; bad links counted, entries kept.

    A stable topological sort (Kahn's algorithm, ready entries taken by file
    position): for a well-formed file it is exactly file order. A parent
    outside the file is ``dangling_parent``; a parent in another session of
    the file imposes no order; a cycle is broken at its earliest line
    (``cyclic_parent``).
    """
    n = len(entries)
    local: dict[str, int] = {}
    for i, e in enumerate(entries):
        if e.uuid is not None:
            local.setdefault(e.uuid, i)
    parent_of: list[int | None] = [None] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for i, e in enumerate(entries):
        if e.parent is None:
            continue
        if e.parent not in known:
            audit.skip(path, e.lineno, "dangling_parent", f"parentUuid {e.parent} is no uuid of the file")
            continue
        j = local.get(e.parent)
        if j is not None:
            parent_of[i] = j
            children[j].append(i)
    heap = [i for i in range(n) if parent_of[i] is None]
    heapq.heapify(heap)
    done = [False] * n
    out: list[_Entry] = []
    scan = 0
    while len(out) < n:
        while heap:
            i = heapq.heappop(heap)
            done[i] = True
            out.append(entries[i])
            for c in children[i]:
                if parent_of[c] == i:
                    heapq.heappush(heap, c)
        if len(out) == n:
            break
        # Every entry left waits on a parent that is itself waiting: walk up to the cycle.
        while done[scan]:
            scan += 1
        seen: dict[int, int] = {}
        chain: list[int] = []
        x = scan
        while x not in seen:
            seen[x] = len(chain)
            chain.append(x)
            # Never None here: every entry left waits on a parent (the roots were all popped above).
            x = cast(int, parent_of[x])
        cut = min(chain[seen[x] :])
        audit.skip(
            path, entries[cut].lineno, "cyclic_parent", f"parentUuid links of {entries[cut].entry_id} form a cycle"
        )
        parent_of[cut] = None
        heapq.heappush(heap, cut)
    return out


# --------------------------------------------------------------------------- building


def _session_key(sid: str, side: str | None) -> str:
    return sid if side is None else f"{sid}:{side}"


def _assign_sessions(entries: list[_Entry], stem: str) -> dict[str, list[_Entry]]:
    """Group entries by output session, in order of first appearance.

    Lines without a session id (``summary``, ``file-history-snapshot``)
    belong to the session of the closest earlier line, or of the first later
    one at the top of the file, or to the file stem when no line has an id.
    """
    first_sid = next((e.sid for e in entries if e.sid), None) or stem
    current = first_sid
    groups: dict[str, list[_Entry]] = {}
    for e in entries:
        if e.sid:
            current = e.sid
        else:
            e.sid = current
        groups.setdefault(_session_key(e.sid, e.side), []).append(e)
    return groups


def _merge_info(meta: dict[str, Any], e: _Entry, state: dict[str, Any]) -> None:
    info = e.info
    for key, val in (info.get("line") or {}).items():
        meta.setdefault(key, val)
    if "init" in info:
        for key, val in info["init"].items():
            meta.setdefault(key, val)
    if "result" in info:
        meta["result"] = info["result"]
        if isinstance(info["result"].get("total_cost_usd"), (int, float)):
            meta["total_cost_usd"] = info["result"]["total_cost_usd"]
        state["windows"].update(info.get("windows") or {})
    if "title" in info:
        state["custom_title"] = info["title"]
    if "summary" in info:
        state["summaries"].append(info["summary"])
    if "redacted_thinking_bytes" in info:
        meta["redacted_thinking_bytes"] = meta.get("redacted_thinking_bytes", 0) + info["redacted_thinking_bytes"]


def _finish_metadata(meta: dict[str, Any], state: dict[str, Any]) -> None:
    models = state["models"]
    if models:
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = list(models)
    if "window" not in meta and state["windows"]:
        windows = state["windows"]
        main = meta.get("model")
        win = windows.get(main) if main in windows else (next(iter(windows.values())) if len(windows) == 1 else None)
        if isinstance(win, int):
            meta["window"] = win
    if state["custom_title"]:
        meta["title"] = state["custom_title"]
    elif state["summaries"]:
        # Prefer the label whose leaf is in this session; else the first one.
        own = [t for t, leaf in state["summaries"] if leaf in state["uuids"] and t]
        meta["title"] = own[-1] if own else state["summaries"][0][0]


def _build(key: str, entries: list[_Entry], path: Path, known: set[str], calls: dict, audit: ImportAudit) -> Session:
    b = SessionBuilder(key, FORMAT, path)
    first = entries[0]
    b.metadata["variant"] = "stream_json" if any(e.variant == "stream_json" for e in entries) else "projects"
    if first.side is not None:
        b.metadata["sidechain"] = True
        b.metadata["parent_session"] = first.sid
        if ":" in first.side:
            b.metadata["agent_id"] = first.side.split(":", 1)[1]
    state: dict[str, Any] = {
        "models": [],
        "windows": {},
        "custom_title": None,
        "summaries": [],
        "uuids": {e.uuid for e in entries if e.uuid},
    }
    usage: dict[str, tuple[str, str | None, dict]] = {}
    after_boundary = False  # the previous record was a compact_boundary marker
    for e in _order(entries, known, path, audit):
        summary_seen = False
        for block_index, (kind, text, fields) in enumerate(e.items):
            fields = dict(fields)
            boundary = fields.pop("_boundary", None)
            add_boundary = boundary is not None
            if fields.pop("_summary_boundary", False) and not summary_seen:
                # A compact summary marks a boundary only when no marker line precedes it.
                summary_seen = True
                add_boundary = not after_boundary
            if kind == "tool_output" and fields.get("call_id") in calls:
                fields["tool"], fields["target"] = calls[fields["call_id"]]
            rec = b.add(kind, text, e.entry_id, block_index, timestamp=e.timestamp, **fields)
            if add_boundary:
                found = {"entry_id": e.entry_id, "source_order": rec.source_order, **(boundary or {})}
                if state["models"]:
                    found.setdefault("model", state["last_model"])  # the main model, which writes the summary
                b.metadata.setdefault("compactions", []).append(found)
            after_boundary = boundary is not None
        if e.model:
            state["last_model"] = e.model
            if e.model not in state["models"]:
                state["models"].append(e.model)
        if e.usage is not None:
            # Same message.id on several lines: the row keeps its first position, the last numbers win.
            usage[e.usage[0]] = (e.entry_id, e.usage[1], e.usage[2])
        _merge_info(b.metadata, e, state)
    for entry_id, model, counts in usage.values():
        b.add_usage(entry_id, model, **counts)
    _finish_metadata(b.metadata, state)
    return b.build()


def load(path: Path, audit: ImportAudit) -> Iterator[Session]:
    """Stream the sessions of one Claude Code transcript file.

    Parameters
    ----------
    path : Path
        A projects ``.jsonl`` (or ``.jsonl.zst``) or a stream-json transcript.
    audit : ImportAudit
        Receives skips: bad lines (from `iter_jsonl`), ``missing_field`` /
        ``unknown_type`` for unusable message content, ``dangling_parent`` /
        ``cyclic_parent`` for bad links (those records are kept).

    Yields
    ------
    Session
        Main conversations first-seen first, each sidechain as its own session.
    """
    path = Path(path)
    entries: list[_Entry] = []
    used_ids: set[str] = set()
    calls: dict[str, tuple[str, str | None]] = {}
    for lineno, obj, _raw in iter_jsonl(path, audit):

        def skip(reason: str, detail: str, _lineno: int = lineno) -> None:
            audit.skip(path, _lineno, reason, detail)

        entries.append(_parse(lineno, obj, used_ids, calls, skip))
    if not entries:
        return
    known = {e.uuid for e in entries if e.uuid}
    stem = file_stem(path)
    for key, group in _assign_sessions(entries, stem).items():
        yield _build(key, group, path, known, calls, audit)


# The rank is this importer's place in the sniffing order, most specific first (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=40, agent="claude-code")

"""pi (badlogic/pi-mono coding agent) session JSONL -> `Session`.

A pi session file holds one session: a ``session`` header line (session id and
metadata), then ``message``, ``compaction``, ``model_change``, ... entries,
mapped to records in file order. Entry ids are the line's ``id`` (version 2+)
or ``L<line number>``; dangling and cyclic ``parentId`` links are counted as
skips and the records kept. The file is streamed line by line.

Design (entry mapping, usage, compactions): docs/session-formats.md#pi
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.text import content_text, is_injected, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, file_stem, tool_target
from compaction_lab.ingest.files import Head, iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.registry import IMPORTERS, safely

FORMAT = "pi"

#: ``message.role`` values pi writes.
ROLES = frozenset(
    {
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "hookMessage",
        "branchSummary",
        "compactionSummary",
    }
)
#: Keys of other formats' lines that pi never writes.
_FOREIGN_KEYS = ("sessionId", "session_id", "uuid", "parentUuid", "payload")


# --------------------------------------------------------------------------- sniffing


def _is_pi_line(obj: Mapping[str, Any]) -> bool:
    if any(k in obj for k in _FOREIGN_KEYS):
        return False
    ltype = obj.get("type")
    if ltype == "session":
        return isinstance(obj.get("id"), str) and ("cwd" in obj or "timestamp" in obj)
    if ltype == "message":
        msg = obj.get("message")
        return isinstance(msg, Mapping) and msg.get("role") in ROLES
    return False


def sniff(head: Head) -> bool:
    """Tell whether a head line is a pi ``session`` header or a pi ``message`` entry.

    Claude Code lines carry ``sessionId`` / ``uuid`` / ``parentUuid`` and
    Codex lines a ``payload``; pi lines have none of them.
    """
    try:
        if head.is_dir or head.is_sqlite:
            return False
        return any(safely(_is_pi_line, o) for o in head.objects)
    except Exception:  # a sniffer never raises
        return False


# --------------------------------------------------------------------------- loading


def _str(val: Any) -> str | None:
    return val if isinstance(val, str) and val else None


class _PiSession:
    """Builds the one session of a pi file from its lines, in order."""

    def __init__(self, path: Path, audit: ImportAudit):
        self.path, self.audit = path, audit
        self.builder: SessionBuilder | None = None
        self.calls: dict[str, tuple[str, str | None]] = {}
        self.models: list[str] = []
        self.current_model: str | None = None
        self.empty: Counter = Counter()
        self.ids: set[str] = set()
        self.links: list[tuple[int, str, str]] = []  # (lineno, entry id, parent id)

    # ---- helpers

    def skip(self, lineno: int, reason: str, detail: str) -> None:
        self.audit.skip(self.path, lineno, reason, detail)

    def _ensure(self, session_id: str) -> SessionBuilder:
        if self.builder is None:
            self.builder = SessionBuilder(session_id, FORMAT, self.path)
        return self.builder

    def _model(self, model: Any) -> None:
        if isinstance(model, str) and model:
            self.current_model = model  # the model in use: pi compacts with it
            if model not in self.models:
                self.models.append(model)

    # ---- lines

    def header(self, obj: Mapping[str, Any], lineno: int, stem: str) -> None:
        late = self.builder is not None
        if self.builder is not None:
            # Records exist already (the first line was unusable), so the id is fixed:
            # keep the header as bookkeeping and fill only metadata still missing.
            self.builder.add(
                "meta", f"session {obj.get('id') or ''}".strip(), f"L{lineno}", timestamp=_str(obj.get("timestamp"))
            )
        elif not _str(obj.get("id")):
            self.skip(lineno, "missing_field", "session header without an id")
        b = self._ensure(_str(obj.get("id")) or stem)
        for src, dst in (
            ("cwd", "cwd"),
            ("provider", "provider"),
            ("thinkingLevel", "thinking_level"),
            ("version", "pi_session_version"),
            ("parentSession", "parent_session"),
        ):
            if obj.get(src) is not None and not (late and dst in b.metadata):
                b.metadata[dst] = obj[src]
        self._model(obj.get("modelId"))

    def line(self, obj: Mapping[str, Any], lineno: int, stem: str) -> None:
        b = self._ensure(stem)
        eid = _str(obj.get("id")) or f"L{lineno}"
        if _str(obj.get("id")):
            self.ids.add(eid)
            parent = _str(obj.get("parentId"))
            if parent:
                self.links.append((lineno, eid, parent))
        ts = _str(obj.get("timestamp"))
        ltype = obj.get("type")
        if ltype == "message":
            msg = obj.get("message")
            if not isinstance(msg, Mapping):
                self.skip(lineno, "missing_field", "message line without a message object")
                return
            self.message(b, msg, eid, ts, lineno)
        elif ltype in ("compaction", "branch_summary"):
            summary = obj.get("summary")
            if not isinstance(summary, str):
                self.skip(lineno, "missing_field", f"{ltype} without a summary")
                return
            rec = b.add("summary", summary, eid, timestamp=ts)
            if ltype == "compaction":
                boundary: dict[str, Any] = {"entry_id": eid, "source_order": rec.source_order}
                if obj.get("firstKeptEntryId") is not None:
                    boundary["first_kept_entry_id"] = obj["firstKeptEntryId"]
                if isinstance(obj.get("firstKeptEntryIndex"), int):  # version-1 files
                    boundary["first_kept_entry_index"] = obj["firstKeptEntryIndex"]
                if isinstance(obj.get("tokensBefore"), int):
                    boundary["tokens_before"] = obj["tokensBefore"]
                if self.current_model:
                    boundary["model"] = self.current_model  # the session's model when it compacted
                b.metadata.setdefault("compactions", []).append(boundary)
        elif ltype == "custom_message":
            self.user_content(b, obj.get("content"), eid, ts, lineno, injected=True)
        else:
            if ltype == "model_change":
                self._model(obj.get("modelId"))
            if ltype == "session_info" and _str(obj.get("name")):
                b.metadata["title"] = obj["name"]
            b.add("meta", self._meta_text(obj), eid, timestamp=ts)

    @staticmethod
    def _meta_text(obj: Mapping[str, Any]) -> str:
        ltype = obj.get("type")
        parts = [str(ltype) if ltype is not None else "untyped"]
        if ltype == "model_change":
            parts.append("/".join(str(obj[k]) for k in ("provider", "modelId") if obj.get(k)))
        for key in ("thinkingLevel", "customType", "label", "name"):
            if isinstance(obj.get(key), str):
                parts.append(obj[key])
        return " ".join(p for p in parts if p)

    # ---- messages

    def message(self, b: SessionBuilder, msg: Mapping[str, Any], eid: str, ts: str | None, lineno: int) -> None:
        role = msg.get("role")
        if role == "user":
            self.user_content(b, msg.get("content"), eid, ts, lineno, injected=False)
        elif role in ("custom", "hookMessage"):
            self.user_content(b, msg.get("content"), eid, ts, lineno, injected=True)
        elif role == "assistant":
            self.assistant(b, msg, eid, ts, lineno)
        elif role == "toolResult":
            call_id = _str(msg.get("toolCallId"))
            tool, target = self.calls.get(call_id, (None, None)) if call_id else (None, None)
            b.add(
                "tool_output",
                content_text(msg.get("content")),
                eid,
                tool=_str(msg.get("toolName")) or tool,
                target=target,
                call_id=call_id,
                is_error=msg.get("isError") is True,
                timestamp=ts,
            )
        elif role == "bashExecution":
            self.bash(b, msg, eid, ts, lineno)
        elif role in ("compactionSummary", "branchSummary"):
            if isinstance(msg.get("summary"), str):
                b.add("summary", msg["summary"], eid, timestamp=ts)
            else:
                self.skip(lineno, "missing_field", f"{role} message without a summary")
        else:
            self.skip(lineno, "unknown_type", f"message role {role!r}")

    def user_content(
        self, b: SessionBuilder, content: Any, eid: str, ts: str | None, lineno: int, injected: bool
    ) -> None:
        if isinstance(content, str):
            b.add("user", content, eid, injected=injected or is_injected(content), timestamp=ts)
            return
        if not isinstance(content, list):
            self.skip(lineno, "missing_field", "user content is neither a string nor a list")
            return
        index = 0
        for i, block in enumerate(content):
            btype = block.get("type") if isinstance(block, Mapping) else None
            if btype == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                b.add("user", text, eid, index, injected=injected or is_injected(text), timestamp=ts)
            elif btype == "image":
                b.add("meta", f"image {block.get('mimeType') or ''}".strip(), eid, index, timestamp=ts)
            else:
                self.skip(
                    lineno,
                    "unknown_type" if isinstance(btype, str) and btype != "text" else "missing_field",
                    f"user content[{i}] block {btype!r}",
                )
                continue
            index += 1

    def assistant(self, b: SessionBuilder, msg: Mapping[str, Any], eid: str, ts: str | None, lineno: int) -> None:
        model = _str(msg.get("model"))
        self._model(model)
        usage = msg.get("usage")
        if isinstance(usage, Mapping):
            cost = usage.get("cost")
            b.add_usage(
                eid,
                model,
                input_tokens=usage.get("input"),
                output_tokens=usage.get("output"),
                cached_tokens=usage.get("cacheRead"),
                cache_write_tokens=usage.get("cacheWrite"),
                cost=cost.get("total") if isinstance(cost, Mapping) else cost,
            )
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            self.skip(lineno, "missing_field", "assistant content is neither a string nor a list")
            return
        if not content:
            # An aborted / failed request: nothing reached the context.
            self.empty[str(msg.get("stopReason") or "none")] += 1
            return
        index = 0
        for i, block in enumerate(content):
            btype = block.get("type") if isinstance(block, Mapping) else None
            if btype == "text" and isinstance(block.get("text"), str):
                b.add("assistant", block["text"], eid, index, timestamp=ts)
            elif btype == "thinking" and isinstance(block.get("thinking"), str):
                b.add("reasoning", block["thinking"], eid, index, timestamp=ts)
            elif btype == "toolCall" and isinstance(block.get("name"), str):
                name, args = block["name"], block.get("arguments")
                args = {} if args is None else args
                call_id, target = _str(block.get("id")), tool_target(args)
                if call_id:
                    self.calls[call_id] = (name, target)
                b.add(
                    "tool_call",
                    tool_call_text(name, args),
                    eid,
                    index,
                    tool=name,
                    target=target,
                    call_id=call_id,
                    timestamp=ts,
                )
            else:
                known = btype in ("text", "thinking", "toolCall") or not isinstance(btype, str)
                self.skip(
                    lineno, "missing_field" if known else "unknown_type", f"assistant content[{i}] block {btype!r}"
                )
                continue
            index += 1

    def bash(self, b: SessionBuilder, msg: Mapping[str, Any], eid: str, ts: str | None, lineno: int) -> None:
        command = msg.get("command")
        if not isinstance(command, str):
            self.skip(lineno, "missing_field", "bashExecution without a command")
            return
        if msg.get("excludeFromContext") is True:
            b.add("meta", f"bashExecution (excluded from context) {command}", eid, timestamp=ts)
            return
        args = {"command": command}
        b.add("tool_call", tool_call_text("bash", args), eid, 0, tool="bash", target=command, call_id=eid, timestamp=ts)
        output = out_field if isinstance(out_field := msg.get("output"), str) else ""
        exit_code = msg.get("exitCode")
        failed = msg.get("cancelled") is True or (isinstance(exit_code, int) and exit_code != 0)
        b.add("tool_output", output, eid, 1, tool="bash", target=command, call_id=eid, is_error=failed, timestamp=ts)

    # ---- end

    def check_links(self) -> None:
        """Count parent links that name no entry (dangling) or loop (cyclic)."""
        parent_of = {eid: parent for _, eid, parent in self.links}
        line_of = {eid: lineno for lineno, eid, _ in self.links}
        for lineno, _eid, parent in self.links:
            if parent not in self.ids:
                self.skip(lineno, "dangling_parent", f"parentId {parent} is no entry id of the file")
        state: dict[str, int] = {}  # 1 = on the current walk, 2 = settled
        for start in parent_of:
            walk, x = [], start
            while x in parent_of and x not in state:
                state[x] = 1
                walk.append(x)
                x = parent_of[x]
            if x in state and state[x] == 1:  # closed a loop on this walk
                cycle = walk[walk.index(x) :]
                first = min(cycle, key=lambda e: line_of[e])
                self.skip(line_of[first], "cyclic_parent", f"parentId links of {first} form a cycle")
            for w in walk:
                state[w] = 2

    def build(self) -> Session | None:
        if self.builder is None:
            return None
        self.check_links()
        meta = self.builder.metadata
        if self.models:
            meta["model"] = self.models[0]
            if len(self.models) > 1:
                meta["models"] = list(self.models)
        if self.empty:
            meta["empty_responses"] = dict(sorted(self.empty.items()))
        return self.builder.build()


def load(path: Path, audit: ImportAudit) -> Iterator[Session]:
    """Stream the session of one pi session file.

    Parameters
    ----------
    path : Path
        A pi ``.jsonl`` (or ``.jsonl.zst``) session file.
    audit : ImportAudit
        Receives skips: bad lines (from `iter_jsonl`), ``missing_field`` /
        ``unknown_type`` for unusable content, ``dangling_parent`` /
        ``cyclic_parent`` for bad ``parentId`` links (records kept).

    Yields
    ------
    Session
        The file's one session (none for a file without a usable line).
    """
    path = Path(path)
    stem = file_stem(path)
    sess = _PiSession(path, audit)
    for lineno, obj, _raw in iter_jsonl(path, audit):
        if obj.get("type") == "session":
            sess.header(obj, lineno, stem)
        else:
            sess.line(obj, lineno, stem)
    session = sess.build()
    if session is not None:
        yield session


# The rank is this importer's place in the sniffing order, most specific first (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=50, agent="pi")

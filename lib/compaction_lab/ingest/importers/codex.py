"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``, also ``.jsonl.zst``).

Every line is ``{"timestamp", "type", "payload"}``. ``response_item`` lines are the source of truth
for what the model saw (``event_msg`` lines repeat the same text for the UI, so they never become
records); ``session_meta``, ``turn_context`` and ``event_msg`` ``token_count`` lines feed the
session metadata (system prompt, model, context window, recorded usage). Each payload type maps to
one record kind (a ``compacted`` line to a summary plus a compaction boundary).

A ``compacted`` line's ``replacement_history`` is kept on its boundary
(``metadata["compactions"][i]["replacement_history"]``): messages as role + text, and the encrypted
summary of a *remote* compaction as its type and the byte length of its ``encrypted_content``.

A file normally holds one session; a second ``session_meta`` with a new id starts another one.

Design: docs/session-formats.md#codex (the mapping); recorded compactions:
docs/session-formats.md#recorded-compactions.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.text import content_text, is_injected, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, file_stem, tool_target
from compaction_lab.ingest.files import Head, Span, iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.json_repair import loads
from compaction_lab.ingest.registry import IMPORTERS

FORMAT = "codex"

#: Top-level line types a rollout holds (plus any ``inter_agent_*``).
ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg", "world_state"})

#: Message roles and the record kind each becomes.
ROLE_KINDS: Mapping[str, str] = {
    "user": "user",
    "assistant": "assistant",
    "developer": "system",
    "system": "system",
}

#: File names apply_patch edits (``*** Update File: path``), used as the call's target.
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)

#: Opening of newer Codex shell output text ("Exit code: 1\nWall time: ...").
_EXIT_CODE_LINE = re.compile(r"\AExit code: (-?\d+)\s*$", re.MULTILINE)

#: Shells whose ``[shell, -c, script]`` argv is reduced to the script for the target.
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "/usr/bin/zsh"})


# --------------------------------------------------------------------------- sniffing


def _is_rollout_type(value: Any) -> bool:
    """Tell whether a value is a top-level rollout line type."""
    return isinstance(value, str) and (value in ROLLOUT_TYPES or value.startswith("inter_agent_"))


def _is_rollout_line(obj: Mapping[str, Any]) -> bool:
    """Tell whether a parsed line has the rollout envelope."""
    return "timestamp" in obj and _is_rollout_type(obj.get("type")) and isinstance(obj.get("payload"), dict)


def sniff(head: Head) -> bool:
    """Recognise a rollout: most head lines are ``{timestamp, type, payload}`` envelopes.

    Claude Code and pi lines also carry ``type`` and ``timestamp`` but never a
    ``payload`` object with a rollout type, so they are not claimed.
    """
    try:
        if head.is_dir or head.is_sqlite:
            return False
        objects = head.objects  # a first line longer than the head is there as its outline
        hits = sum(1 for o in objects if _is_rollout_line(o))
        return hits > 0 and 2 * hits > len(objects)
    except Exception:  # a sniffer never raises
        return False


# --------------------------------------------------------------------------- small pure helpers


def _parse_json_object(text: str) -> dict[str, Any] | None:
    """Parse the JSON object a string holds, or return None."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = loads(text)  # lone surrogates replaced, like every JSON the import decodes
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _exit_failed(meta: Any) -> bool:
    """Tell whether a metadata mapping records a non-zero exit code."""
    if not isinstance(meta, Mapping):
        return False
    code = meta.get("exit_code")
    return isinstance(code, int) and not isinstance(code, bool) and code != 0


def output_text(output: Any) -> tuple[str, bool] | None:
    """Text and error flag of a tool output as Codex records it; None when unusable.

    ``output`` is a plain string, a list of typed items (``input_text`` /
    ``output_text`` / images), an object ``{content, success}``, or — in some
    Codex versions — a string holding JSON ``{"output": ..., "metadata":
    {"exit_code": ...}}``, whose inner text is what the tool printed. Newer
    versions prefix shell output with ``Exit code: N``.
    """
    if isinstance(output, str):
        wrapped = _parse_json_object(output)
        if wrapped is not None and isinstance(wrapped.get("output"), str):
            failed = _exit_failed(wrapped.get("metadata")) or wrapped.get("success") is False
            return wrapped["output"], failed
        if wrapped is not None and wrapped.get("success") is False:
            return output, True
        match = _EXIT_CODE_LINE.match(output)
        return output, bool(match and int(match.group(1)) != 0)
    if isinstance(output, list):
        return content_text(output), False
    if isinstance(output, Mapping):
        body = output.get("content", output.get("output"))
        if body is None:
            return None
        failed = output.get("success") is False or _exit_failed(output.get("metadata"))
        return content_text(body), failed
    return None


def shell_target(command: Any) -> str | None:
    """Target of a shell argv: the script of ``bash -lc SCRIPT``, else the joined argv."""
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        if len(command) == 3 and command[0] in _SHELLS and command[1] in ("-c", "-lc"):
            return command[2][:500] or None
        return " ".join(command)[:500] or None
    return None


def patch_files(text: str) -> str | None:
    """List the files an apply_patch text edits, space-separated, or None."""
    files = _PATCH_FILE.findall(text)
    return " ".join(dict.fromkeys(files))[:500] if files else None


def call_target(args: Any) -> str | None:
    """Name what a tool call acted on; shell argv and apply_patch file headers get special care.

    Codex runs commands as ``["bash", "-lc", script]`` and edits files with
    patches (``*** Update File: path``); the script and the patched paths say
    more than the joined argv or the patch's first 500 characters would.
    """
    if isinstance(args, str):
        parsed = _parse_json_object(args)
        if parsed is None:
            return patch_files(args) or tool_target(args)
        args = parsed
    if isinstance(args, Mapping):
        command = args.get("command")
        if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            return patch_files("\n".join(command)) or shell_target(command)
        if isinstance(command, str):
            return patch_files(command) or tool_target(args)
    return tool_target(args)


def utf8_length(text: str) -> int:
    """Bytes of `text` in UTF-8 (lone surrogates 3 each); an ASCII text's length, without encoding it.

    Encrypted content is base64, so ASCII: `str.isascii` answers from the
    string's header, where encoding would copy the whole text.
    """
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def reasoning_text(payload: Mapping[str, Any]) -> str:
    """Readable text of a reasoning item: its summaries, else plain reasoning content."""
    parts: list[str] = []
    for source in ("summary", "content"):
        items = payload.get(source)
        if isinstance(items, list):
            parts = [i["text"] for i in items if isinstance(i, Mapping) and isinstance(i.get("text"), str)]
        if parts:
            break
    return "\n\n".join(p for p in parts if p)


# --------------------------------------------------------------------------- loading


class _Rollout:
    """Import state of one rollout file: the session being built and its tool calls."""

    def __init__(self, path: Path, audit: ImportAudit):
        self.path = path
        self.audit = audit
        self.builder: SessionBuilder | None = None
        self._reset()

    def _reset(self) -> None:
        self.meta_id: str | None = None  # id from this session's session_meta
        self.calls: dict[str, tuple[str, str | None]] = {}  # call_id -> (tool, target)
        self.model: str | None = None
        self.last_total: Any = None  # cumulative usage of the previous token_count

    # ----------------------------------------------------------------- sessions

    def _session(self) -> SessionBuilder:
        if self.builder is None:
            self.builder = SessionBuilder(self.meta_id or file_stem(self.path), FORMAT, self.path)
        return self.builder

    def finish(self) -> Session | None:
        """Return the session built so far (None if nothing was read) and start afresh."""
        builder, self.builder = self.builder, None
        self._reset()
        return builder.build() if builder is not None else None

    def _adopt_id(self, session_id: str) -> Session | None:
        """Apply a session_meta id; returns the previous session when this one is new."""
        finished = None
        if self.builder is not None and self.meta_id is not None and self.meta_id != session_id:
            finished = self.finish()
        if self.builder is not None and self.meta_id is None and self.builder.session_id != session_id:
            # Lines before the first session_meta were filed under the file stem; rename them.
            self.builder.session_id = session_id
            self.builder.records = [dataclasses.replace(r, session_id=session_id) for r in self.builder.records]
        self.meta_id = session_id
        self._session()
        return finished

    # ----------------------------------------------------------------- lines

    def line(self, lineno: int, obj: dict[str, Any]) -> Session | None:
        """Handle one parsed line; returns a finished session when a new one starts."""
        kind, payload = obj.get("type"), obj.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            self.skip(lineno, "missing_field", "line needs a string 'type' and an object 'payload'")
            return None
        ts = obj.get("timestamp")
        if not isinstance(ts, str):
            ts = None
        if kind == "session_meta":
            return self._session_meta(payload)
        if kind == "response_item":
            self._response_item(lineno, payload, ts)
        elif kind == "event_msg":
            self._event_msg(lineno, payload)
        elif kind == "turn_context":
            self._turn_context(payload)
        elif kind == "compacted":
            self._compacted(lineno, payload, ts)
        else:  # world_state, inter_agent_*, and types newer than this importer: tolerated
            self._meta(lineno, kind, payload, ts)
        return None

    def skip(self, lineno: int, reason: str, detail: str = "") -> None:
        self.audit.skip(self.path, lineno, reason, detail)

    def _meta(self, lineno: int, kind: str, payload: Mapping[str, Any], ts: str | None) -> None:
        ptype = payload.get("type")
        text = f"{kind}/{ptype}" if isinstance(ptype, str) and ptype != kind else kind
        self._session().add("meta", text, f"L{lineno}", timestamp=ts)

    def _session_meta(self, payload: Mapping[str, Any]) -> Session | None:
        sid = payload.get("id")
        finished = self._adopt_id(sid) if isinstance(sid, str) and sid else None
        md = self._session().metadata
        for key in ("cwd", "model_provider", "cli_version", "originator"):
            if isinstance(payload.get(key), str) and key not in md:
                md[key] = payload[key]
        base = payload.get("base_instructions")
        prompt = base.get("text") if isinstance(base, Mapping) else base
        if isinstance(prompt, str) and prompt and "system_prompt" not in md:
            md["system_prompt"] = prompt
        if isinstance(payload.get("instructions"), str) and payload["instructions"] and "instructions" not in md:
            md["instructions"] = payload["instructions"]
        return finished

    def _turn_context(self, payload: Mapping[str, Any]) -> None:
        md = self._session().metadata
        model = payload.get("model")
        if isinstance(model, str) and model:
            self.model = model
            md.setdefault("model", model)
            seen = md.get("models") or [md["model"]]
            if model not in seen:
                md["models"] = [*seen, model]  # listed only once the model changes
        if isinstance(payload.get("cwd"), str):
            md.setdefault("cwd", payload["cwd"])

    def _event_msg(self, lineno: int, payload: Mapping[str, Any]) -> None:
        # Only token_count carries anything new; the other events repeat response_item text.
        if payload.get("type") != "token_count":
            return
        info = payload.get("info")
        if info is None:  # emitted before the first response of a turn
            return
        last = info.get("last_token_usage") if isinstance(info, Mapping) else None
        if not isinstance(last, Mapping):
            self.skip(lineno, "missing_field", "token_count without info.last_token_usage")
            return
        builder = self._session()
        window = info.get("model_context_window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            builder.metadata.setdefault("window", window)
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            return  # re-emitted event (e.g. a rate-limit update): no new model call
        self.last_total = total
        builder.add_usage(
            f"L{lineno}",
            model=self.model,
            input_tokens=last.get("input_tokens"),
            cached_tokens=last.get("cached_input_tokens"),
            output_tokens=last.get("output_tokens"),
            reasoning_tokens=last.get("reasoning_output_tokens"),
        )
        # OpenAI convention: input_tokens already include the cached ones.
        builder.metadata["usage_input_includes_cached"] = True

    def _compacted(self, lineno: int, payload: Mapping[str, Any], ts: str | None) -> None:
        message = payload.get("message")
        if not isinstance(message, str) and not isinstance(payload.get("replacement_history"), list):
            self.skip(lineno, "missing_field", "compacted without message")
            return
        builder = self._session()
        rec = builder.add("summary", message if isinstance(message, str) else "", f"L{lineno}", timestamp=ts)
        boundary: dict[str, Any] = {"entry_id": rec.entry_id, "source_order": rec.source_order}
        if self.model:
            boundary["model"] = self.model  # the turn's model: Codex compacts with it
        history = payload.get("replacement_history")
        if isinstance(history, list):
            # What Codex put in place of its history (`CompactedItem.replacement_history`): the live
            # history a later compaction of this session summarises, so strategies can rebuild it.
            boundary["replacement_history"] = [_replacement_item(item) for item in history]
        builder.metadata.setdefault("compactions", []).append(boundary)

    # ----------------------------------------------------------------- response items

    def _response_item(self, lineno: int, p: Mapping[str, Any], ts: str | None) -> None:
        ptype = p.get("type")
        handler = _ITEM_HANDLERS.get(ptype) if isinstance(ptype, str) else None
        if handler is None:  # ghost_snapshot, newer item types: tolerated as meta
            self._meta(lineno, "response_item", p, ts)
            return
        problem = handler(self, f"L{lineno}", p, ts)
        if problem:
            self.skip(lineno, *problem)

    def _message(self, entry: str, p: Mapping[str, Any], ts: str | None) -> tuple[str, str] | None:
        role, content = p.get("role"), p.get("content")
        if not isinstance(role, str) or not isinstance(content, (list, str)):
            return "missing_field", "message needs 'role' and 'content'"
        kind = ROLE_KINDS.get(role)
        if kind is None:
            return "unknown_type", f"message role {role!r}"
        text = content_text(content)
        self._session().add(kind, text, entry, injected=kind == "user" and is_injected(text), timestamp=ts)
        return None

    def _reasoning(self, entry: str, p: Mapping[str, Any], ts: str | None) -> None:
        builder = self._session()
        encrypted = p.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted:
            # Opaque to us: its size is noted, nothing of it is counted as text.
            md = builder.metadata
            md["encrypted_reasoning_bytes"] = md.get("encrypted_reasoning_bytes", 0) + utf8_length(encrypted)
        builder.add("reasoning", reasoning_text(p), entry, timestamp=ts)
        return None

    def _call(self, entry: str, name: str, args: Any, call_id: Any, ts: str | None) -> None:
        call_id = call_id if isinstance(call_id, str) and call_id else None
        target = call_target(args)
        if call_id:
            self.calls[call_id] = (name, target)
        self._session().add(
            "tool_call", tool_call_text(name, args), entry, tool=name, target=target, call_id=call_id, timestamp=ts
        )

    def _function_call(self, entry: str, p: Mapping[str, Any], ts: str | None) -> tuple[str, str] | None:
        name, args = p.get("name"), p.get("arguments")
        if not isinstance(name, str) or not name:
            return "missing_field", "function_call without name"
        self._call(entry, name, args if args is not None else "", p.get("call_id"), ts)
        return None

    def _custom_tool_call(self, entry: str, p: Mapping[str, Any], ts: str | None) -> tuple[str, str] | None:
        name, tool_input = p.get("name"), p.get("input")
        if not isinstance(name, str) or not name or not isinstance(tool_input, str):
            return "missing_field", "custom_tool_call needs 'name' and 'input'"
        self._call(entry, name, tool_input, p.get("call_id"), ts)
        return None

    def _local_shell_call(self, entry: str, p: Mapping[str, Any], ts: str | None) -> tuple[str, str] | None:
        action = p.get("action")
        if not isinstance(action, Mapping):
            return "missing_field", "local_shell_call without action"
        self._call(entry, "local_shell", dict(action), p.get("call_id") or p.get("id"), ts)
        return None

    def _web_search_call(self, entry: str, p: Mapping[str, Any], ts: str | None) -> None:
        action = p.get("action")
        self._call(entry, "web_search", dict(action) if isinstance(action, Mapping) else {}, None, ts)
        return None

    def _tool_search_call(self, entry: str, p: Mapping[str, Any], ts: str | None) -> None:
        args = p.get("arguments")
        self._call(entry, "tool_search", args if args is not None else {}, p.get("call_id"), ts)
        return None

    def _output(self, entry: str, p: Mapping[str, Any], ts: str | None) -> tuple[str, str] | None:
        out = p.get("output")
        if out is None and isinstance(p.get("tools"), list):  # tool_search_output lists tool specs
            parsed: tuple[str, bool] | None = (json.dumps(p["tools"], ensure_ascii=False), False)
        else:
            parsed = output_text(out)
        if parsed is None:
            return "missing_field", f"{p.get('type')} without a usable 'output'"
        text, failed = parsed
        call_id = p.get("call_id") if isinstance(p.get("call_id"), str) and p.get("call_id") else None
        tool, target = self.calls.get(call_id, (None, None)) if call_id else (None, None)
        if tool is None and p.get("type") == "tool_search_output":
            tool = "tool_search"
        self._session().add(
            "tool_output",
            text,
            entry,
            tool=tool,
            target=target,
            call_id=call_id,
            is_error=failed or p.get("success") is False,
            timestamp=ts,
        )
        return None


#: response_item payload types this importer reads; the rest become meta records.
_ITEM_HANDLERS: Mapping[str, Callable[..., tuple[str, str] | None]] = {
    "message": _Rollout._message,
    "reasoning": _Rollout._reasoning,
    "function_call": _Rollout._function_call,
    "custom_tool_call": _Rollout._custom_tool_call,
    "local_shell_call": _Rollout._local_shell_call,
    "web_search_call": _Rollout._web_search_call,
    "tool_search_call": _Rollout._tool_search_call,
    "function_call_output": _Rollout._output,
    "custom_tool_call_output": _Rollout._output,
    "tool_search_output": _Rollout._output,
}


#: Bytes every line that may open a session holds (`compaction_lab.ingest.units` splits
#: large rollouts at such lines without parsing the others).
SESSION_MARKER = b'"session_meta"'


def session_key(obj: Mapping[str, Any]) -> str | None:
    """Return the session a rollout line names, if it is a ``session_meta`` line with an id.

    A rollout starts a new session where this changes from one id to another
    (`_Rollout._adopt_id`); the same id again continues the session.
    """
    payload = obj.get("payload")
    if obj.get("type") != "session_meta" or not isinstance(payload, Mapping):
        return None
    sid = payload.get("id")
    return sid if isinstance(sid, str) and sid else None


def load(path: str | Path, audit: ImportAudit, span: Span | None = None) -> Iterator[Session]:
    """Stream the sessions of one rollout file (plain or ``.zst``), or of a span of whole sessions.

    Never raises on bad content: unusable lines are counted in `audit`.
    """
    path = Path(path)
    rollout = _Rollout(path, audit)
    for lineno, obj, _raw in iter_jsonl(path, audit, span):
        finished = rollout.line(lineno, obj)
        if finished is not None:
            yield finished
    last = rollout.finish()
    if last is not None:
        yield last


#: Item types of a remote compaction's encrypted summary (``ResponseItem::Compaction``, serde tag
#: ``compaction``, alias ``compaction_summary``; later versions also ``context_compaction``).
COMPACTION_ITEM_TYPES = frozenset({"compaction", "compaction_summary", "context_compaction"})


def _replacement_item(item: Any) -> dict[str, Any]:
    """One item of a ``compacted`` line's ``replacement_history``, kept as role + text.

    Messages keep their role, their text and whether the harness injected
    them. A remote compaction's encrypted summary becomes ``{"type":
    "compaction", "encrypted_bytes": n}``: the model reads it (the server
    decrypts it), we cannot, and its size is all we keep. Any other item (a
    tool call, a ghost snapshot) keeps its type only.
    """
    if not isinstance(item, Mapping):
        return {"type": type(item).__name__}
    ptype = item.get("type")
    role = item.get("role")
    if ptype == "message" and isinstance(role, str):
        text = content_text(item.get("content"))
        return {"type": "message", "role": role, "text": text, "injected": role == "user" and is_injected(text)}
    encrypted = item.get("encrypted_content")
    if ptype in COMPACTION_ITEM_TYPES and isinstance(encrypted, str):
        return {"type": "compaction", "encrypted_bytes": utf8_length(encrypted)}
    return {"type": str(ptype)}


# The rank is this importer's place in the sniffing order, most specific first (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=30, agent="codex")

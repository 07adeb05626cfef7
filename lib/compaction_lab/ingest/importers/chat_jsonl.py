"""Plain JSONL of OpenAI-style chat messages — the lowest common denominator.

Two layouts are read:

* one message per line, ``{"role", "content", "tool_calls", "tool_call_id"}``:
  the whole file is one session, named after the file;
* one conversation per line, ``{"messages": [...]}`` (the common dataset form):
  each line is its own session, ``f"{stem}-{lineno}"``.

Mapping (role -> record kind)::

    system, developer            -> system
    user                         -> user (injected when it opens with an injected-context block)
    assistant content            -> assistant (``reasoning_content`` -> reasoning first)
    assistant tool_calls[i]      -> tool_call (call_id = id; legacy ``function_call`` too)
    tool, function               -> tool_output (tool and target from the matching call)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.text import content_text, is_injected, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, file_stem, tool_target
from compaction_lab.ingest.files import Head, iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.registry import IMPORTERS, safely

FORMAT = "chat_jsonl"

#: Roles of the OpenAI chat format (``developer`` and the legacy ``function`` included).
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

#: Keys of an assistant message that hold visible reasoning (DeepSeek / vLLM style).
_REASONING_KEYS = ("reasoning_content", "reasoning")


# --------------------------------------------------------------------------- sniffing


def is_chat_message(obj: Any) -> bool:
    """Tell whether `obj` is a chat message object: a chat role and content or tool calls, and no ``type``.

    Codex, Claude Code and pi lines all carry a top-level ``type``; a chat
    message never does, which keeps this sniffer off their files.
    """
    return (
        isinstance(obj, Mapping)
        and "type" not in obj
        and obj.get("role") in CHAT_ROLES
        and any(k in obj for k in ("content", "tool_calls", "function_call"))
    )


def is_conversation(obj: Any) -> bool:
    """Tell whether `obj` is ``{"messages": [chat messages]}`` with at least one message."""
    if not isinstance(obj, Mapping) or "type" in obj:
        return False
    messages = obj.get("messages")
    return isinstance(messages, list) and bool(messages) and all(is_chat_message(m) for m in messages[:20])


def sniff(head: Head) -> bool:
    """Recognise chat JSONL: most head lines are chat messages or conversations."""
    try:
        if head.is_dir or head.is_sqlite:
            return False
        objects = head.objects
        hits = sum(1 for o in objects if safely(is_chat_message, o) or safely(is_conversation, o))
        return hits > 0 and 2 * hits > len(objects)
    except Exception:  # a sniffer never raises
        return False


# --------------------------------------------------------------------------- loading


class _Conversation:
    """One session being built, with its call_id -> (tool, target) map."""

    def __init__(self, session_id: str, path: Path):
        self.builder = SessionBuilder(session_id, FORMAT, path)
        self.calls: dict[str, tuple[str, str | None]] = {}

    def add_message(self, msg: Mapping[str, Any], entry: str) -> tuple[str, str] | None:
        """Add the records of one message; returns (reason, detail) when it is unusable."""
        role = msg.get("role")
        if not isinstance(role, str):
            return "missing_field", "message without 'role'"
        if role not in CHAT_ROLES:
            return "unknown_type", f"role {role!r}"
        content = msg.get("content")
        if content is not None and not isinstance(content, (str, list, Mapping)):
            return "missing_field", f"content of type {type(content).__name__}"
        text = content_text(content)
        b = self.builder
        if role in ("system", "developer"):
            b.add("system", text, entry)
        elif role == "user":
            b.add("user", text, entry, injected=is_injected(text))
        elif role == "assistant":
            return self._assistant(msg, text, entry)
        else:  # tool, function: a tool result
            call_id = msg.get("tool_call_id") if isinstance(msg.get("tool_call_id"), str) else None
            name = msg.get("name") if isinstance(msg.get("name"), str) else None
            tool, target = self.calls.get(call_id, (name, None)) if call_id else (name, None)
            b.add("tool_output", text, entry, tool=tool, target=target, call_id=call_id)
        return None

    def _assistant(self, msg: Mapping[str, Any], text: str, entry: str) -> tuple[str, str] | None:
        b = self.builder
        block = 0
        for key in _REASONING_KEYS:
            if isinstance(msg.get(key), str) and msg[key]:
                b.add("reasoning", msg[key], entry, block)
                block += 1
                break
        calls = msg.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return "missing_field", "tool_calls is not a list"
        calls = list(calls or [])
        if isinstance(msg.get("function_call"), Mapping):  # legacy single-call form
            calls.append({"function": msg["function_call"]})
        # An assistant turn that only calls tools has no prose worth a record.
        if text or not calls:
            b.add("assistant", text, entry, block)
            block += 1
        problem = None
        for call in calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            name = fn.get("name") if isinstance(fn, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(name, str) or not name:
                problem = ("missing_field", "tool call without function.name")
                continue
            args = fn.get("arguments", "")
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            target = tool_target(args)
            if call_id:
                self.calls[call_id] = (name, target)
            b.add("tool_call", tool_call_text(name, args), entry, block, tool=name, target=target, call_id=call_id)
            block += 1
        return problem


def load(path: str | Path, audit: ImportAudit) -> Iterator[Session]:
    """Stream the sessions of one chat JSONL file.

    Conversation lines are yielded as they are read; the per-line messages of
    the file form one session yielded at the end (if there were any).
    """
    path = Path(path)
    stem = file_stem(path)
    plain: _Conversation | None = None
    for lineno, obj, _raw in iter_jsonl(path, audit):
        if "messages" in obj and "role" not in obj:
            session = _load_conversation(path, stem, lineno, obj, audit)
            if session is not None:
                yield session
            continue
        if plain is None:
            plain = _Conversation(stem, path)
        problem = plain.add_message(obj, f"L{lineno}")
        if problem:
            audit.skip(path, lineno, *problem)
    if plain is not None and plain.builder.records:
        yield plain.builder.build()


def _load_conversation(
    path: Path, stem: str, lineno: int, obj: Mapping[str, Any], audit: ImportAudit
) -> Session | None:
    """Build the session of one ``{"messages": [...]}`` line (None, counted, when unusable)."""
    messages = obj["messages"]
    if not isinstance(messages, list):
        audit.skip(path, lineno, "missing_field", "'messages' is not a list")
        return None
    conv = _Conversation(f"{stem}-{lineno}", path)
    if isinstance(obj.get("model"), str) and obj["model"]:
        conv.builder.metadata["model"] = obj["model"]
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            audit.skip(path, lineno, "not_an_object", f"messages[{i}] is {type(msg).__name__}")
            continue
        problem = conv.add_message(msg, f"m{i}")
        if problem:
            audit.skip(path, lineno, problem[0], f"messages[{i}]: {problem[1]}")
    return conv.builder.build()


# The rank is this importer's place in the sniffing order: last, as the most permissive (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=60)  # written by many tools: no one agent

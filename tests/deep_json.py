"""Hostile nesting for the tests: JSON nested far deeper than any real session, and a Codex rollout carrying it.

Python's JSON parser recurses once per level, so text like ``"[" * 100_000 + "]" * 100_000`` raised
`RecursionError` wherever a stage parsed embedded JSON (issue 25, item 14). The rollout puts such text
where Codex keeps JSON inside strings: a call's ``arguments``, a tool's ``output``, a custom tool's
``input``.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Far past Python's recursion limit (1000): what the issue's report used.
HOSTILE_DEPTH = 100_000


def deep_array(depth: int = HOSTILE_DEPTH) -> str:
    """``[[[…]]]``: valid JSON nested `depth` levels."""
    return "[" * depth + "]" * depth


def deep_object(depth: int = HOSTILE_DEPTH) -> str:
    """``{"a":{"a":…1…}}``: valid JSON nested `depth` levels."""
    return '{"a":' * depth + "1" + "}" * depth


def _item(ts: int, payload: dict) -> dict:
    return {"timestamp": f"2025-01-01T00:00:{ts:02d}Z", "type": "response_item", "payload": payload}


def rollout_lines(session_id: str, depth: int = HOSTILE_DEPTH) -> list[dict]:
    """A small Codex session whose tool calls carry JSON nested `depth` levels inside strings."""
    arr, obj = deep_array(depth), deep_object(depth)
    return [
        {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": session_id, "cwd": "/w"}},
        _item(1, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]}),
        _item(2, {"type": "function_call", "name": "shell", "arguments": arr, "call_id": "c1"}),
        _item(3, {"type": "function_call_output", "call_id": "c1", "output": arr}),
        _item(4, {"type": "function_call", "name": "shell", "arguments": obj, "call_id": "c2"}),
        _item(5, {"type": "function_call_output", "call_id": "c2", "output": obj}),
        _item(6, {"type": "custom_tool_call", "name": "apply_patch", "input": obj, "call_id": "c3"}),
        _item(7, {"type": "custom_tool_call_output", "call_id": "c3", "output": "done"}),
        _item(8, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "all done"}]}),
        _item(9, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}),
    ]


def write_rollout(path: Path, session_id: str = "deep-args", depth: int = HOSTILE_DEPTH) -> Path:
    """Write `rollout_lines` as a ``rollout-*.jsonl`` file at `path` (a folder or a file name)."""
    target = path / f"rollout-2025-01-01T00-00-00-{session_id}.jsonl" if path.is_dir() else path
    target.write_text("".join(json.dumps(o) + "\n" for o in rollout_lines(session_id, depth)), "utf-8")
    return target

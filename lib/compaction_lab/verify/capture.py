"""Capture a call shape (system prompt + tool definitions) from what an agent really sent.

Two sources:

* an OpenAI-style request body (Chat Completions or Responses API), saved as
  JSON: `shape_from_request` / `shape_from_request_file`;
* a Codex CLI rollout, whose ``session_meta`` line records the session's base
  instructions: `shape_from_codex_session`.

`write_shape` stores the result under ``data/shapes/<name>.json`` in the same
layout as the shipped shapes, and `shape_fingerprint` gives the sha256 that
``compaction-lab verify`` pins.

Only the system prompt and the tool definitions are ever taken from a source
file. Whatever else it holds -- API keys, ``Authorization`` headers, model
settings, the conversation itself -- is never read into the shape, so it
cannot end up in ``data/shapes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from compaction_lab.core import bounded_json
from compaction_lab.core.shapes import (
    LOCK_NAME,
    CallShape,
    ShapeError,
    check_name,
    plain_json,
    shape_document,
    shape_files,
    write_shape,
)
from compaction_lab.core.text import content_text
from compaction_lab.ingest.files import iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit

#: Roles whose messages make up the system prompt of a request.
SYSTEM_ROLES = frozenset({"system", "developer"})

#: Keys a request file may wrap the body in (a logged HTTP request, a proxy dump).
BODY_KEYS = ("body", "json", "request", "data", "payload")

#: Keys that mark a mapping as a request body.
_BODY_MARKERS = ("messages", "input", "instructions", "tools", "functions")

#: Keys dropped from non-function tools: hosted tools (``mcp``, connectors) carry
#: credentials and server addresses next to their definition.
_SECRET_KEY = re.compile(
    r"(?i)^(headers|authorization|server_url|connector_id|.*(api[-_]?key|token|secret|password).*)$"
)

#: A source a call shape cannot be captured from, or a shape that cannot be written (with the reason).
CaptureError = ShapeError


# --------------------------------------------------------------------------- fingerprints


def tool_name(tool: Mapping[str, Any]) -> str:
    """Return a tool definition's name (chat form, flat Responses form, or its type for hosted tools)."""
    fn = tool.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        return fn["name"]
    return str(tool.get("name") or tool.get("type") or "?")


# --------------------------------------------------------------------------- request bodies


def _is_body(obj: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(obj, Mapping) and any(k in obj for k in _BODY_MARKERS)


def request_body(data: Any) -> Mapping[str, Any]:
    """Find the request body inside `data`: `data` itself, or the body a wrapper holds.

    A wrapper is a logged HTTP request such as ``{"headers": {...}, "body":
    {...}}``; its body may also be a JSON string. Nothing outside the body is
    looked at, so headers never reach the shape.
    """
    if _is_body(data):
        return data
    if isinstance(data, Mapping):
        for key in BODY_KEYS:
            inner = data.get(key)
            if isinstance(inner, str):
                try:
                    inner = bounded_json.loads(inner)
                except ValueError:
                    continue
            if _is_body(inner):
                return inner
    raise CaptureError(
        "not an OpenAI-style request body: expected an object with 'messages' (Chat Completions) "
        "or 'input' / 'instructions' (Responses API), or a wrapper holding one under "
        f"{' / '.join(repr(k) for k in BODY_KEYS)}"
    )


def _leading_system_texts(items: Any) -> list[str]:
    """Texts of the system / developer messages that open a conversation.

    Only the opening block counts: a system message later in a conversation
    is part of that conversation, not of the shape sent with every request.
    """
    if not isinstance(items, list):
        return []
    texts = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("role") not in SYSTEM_ROLES:
            break
        text = content_text(item.get("content"))
        if text:
            texts.append(text)
    return texts


def _normalise_tool(tool: Any, index: int) -> dict[str, Any]:
    """One tool definition in chat form ``{"type": "function", "function": {...}}``.

    Responses-API function tools are flat (``{"type": "function", "name",
    "description", "parameters", "strict"}``): everything but ``type`` moves
    under ``function``. Hosted tools (web search, MCP, ...) are kept as they
    are, minus credential-like keys (`_SECRET_KEY`).
    """
    if not isinstance(tool, Mapping):
        raise CaptureError(f"tools[{index}] is not an object")
    tool = plain_json(tool)
    if tool.get("type") == "function":
        if isinstance(tool.get("function"), Mapping):
            return tool
        if isinstance(tool.get("name"), str):
            return {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
        raise CaptureError(f"tools[{index}] is a function tool without a name")
    return {k: v for k, v in tool.items() if not _SECRET_KEY.match(k)}


def _tools_of(body: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    tools = body.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise CaptureError("'tools' must be a list of tool definitions")
    out = [_normalise_tool(t, i) for i, t in enumerate(tools)]
    legacy = body.get("functions")  # the deprecated Chat Completions form
    if isinstance(legacy, list):
        for i, fn in enumerate(legacy):
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise CaptureError(f"functions[{i}] is not a function definition with a name")
            out.append({"type": "function", "function": plain_json(fn)})
    return tuple(out)


def shape_from_request(body: Mapping[str, Any], name: str) -> CallShape:
    """Capture the call shape of an OpenAI-style request body.

    Parameters
    ----------
    body : mapping
        A Chat Completions body (``messages``, ``tools``), a Responses-API body
        (``instructions``, ``input``, ``tools``), or a wrapper holding one
        (`request_body`).
    name : str
        The shape's name (and file stem when written).

    Returns
    -------
    CallShape
        System prompt: the Responses ``instructions``, then the system /
        developer messages that open ``messages`` or ``input``, joined by a
        blank line. Tools: the ``tools`` list (plus legacy ``functions``) in
        chat form. Nothing else of the body is kept.

    Raises
    ------
    CaptureError
        Not a request body, no system prompt in it, or malformed tools.
    """
    check_name(name)
    body = request_body(body)
    parts: list[str] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions.strip():
        parts.append(instructions)
    for key in ("messages", "input"):
        parts += _leading_system_texts(body.get(key))
    if not parts:
        raise CaptureError(
            "no system prompt found: the request has no 'instructions' string and no system / "
            "developer message opening its 'messages' or 'input'"
        )
    return CallShape(name=name, system_prompt="\n\n".join(parts), tools=_tools_of(body))


def load_json_file(path: str | Path) -> Any:
    """Load a JSON file's content, with a clear error when it is missing or not JSON."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaptureError(f"{p.name}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaptureError(f"{p.name}: cannot read it ({exc})") from None
    try:
        return bounded_json.loads(text)
    except ValueError as exc:  # not JSON, or nested past bounded_json.MAX_DEPTH
        raise CaptureError(f"{p.name}: not JSON ({exc})") from None


def shape_from_request_file(path: str | Path, name: str) -> CallShape:
    """`shape_from_request` on a JSON file holding a request body (or a logged request)."""
    data = load_json_file(path)
    try:
        return shape_from_request(data, name)
    except CaptureError as exc:
        raise CaptureError(f"{Path(path).name}: {exc}") from None


# --------------------------------------------------------------------------- Codex rollouts


def codex_instructions(path: str | Path) -> tuple[str, str]:
    """Read the instructions a Codex rollout recorded, and the ``session_meta`` field they came from.

    ``base_instructions.text`` (or a plain ``base_instructions`` string) is
    the system prompt Codex sent. Rollouts older than that field recorded only
    ``instructions``, used as a fallback; in those versions it held the
    user's instructions (AGENTS.md) rather than Codex's built-in prompt, which
    is why the field is reported. The first ``session_meta`` line with either
    wins; the file is streamed, never loaded whole.

    Raises
    ------
    CaptureError
        Unreadable file, no ``session_meta`` line, or none recording instructions.
    """
    p = Path(path)
    if not p.is_file():
        raise CaptureError(f"{p.name}: no such file")
    audit = ImportAudit()
    metas = 0
    fallback: str | None = None
    for _lineno, obj, _raw in iter_jsonl(p, audit):
        payload = obj.get("payload")
        if obj.get("type") != "session_meta" or not isinstance(payload, Mapping):
            continue
        metas += 1
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, Mapping) else base
        if isinstance(text, str) and text.strip():
            return text, "base_instructions"
        instr = payload.get("instructions")
        if fallback is None and isinstance(instr, str) and instr.strip():
            fallback = instr
    if fallback is not None:
        return fallback, "instructions"
    if metas == 0:
        why = "; ".join(f"line {s.line}: {s.reason}" for s in audit.skipped[:3])
        raise CaptureError(f"{p.name}: not a Codex rollout (no session_meta line)" + (f"; {why}" if why else ""))
    raise CaptureError(f"{p.name}: its session_meta records no base_instructions or instructions")


def shape_from_codex_session(path: str | Path, name: str) -> CallShape:
    """Capture the call shape of a Codex CLI rollout (``rollout-*.jsonl``, also ``.jsonl.zst``).

    The system prompt is the session's recorded base instructions
    (`codex_instructions`). The tools are **empty**: Codex does not record
    the tool definitions it sends (at most the client-supplied
    ``dynamic_tools``, never the built-in shell / apply_patch tools), so any
    list read from a rollout would misstate the shape. Capture the tools from
    a request body instead, or add them by hand.
    """
    check_name(name)
    text, _field = codex_instructions(path)
    return CallShape(name=name, system_prompt=text, tools=())


# --------------------------------------------------------------------------- writing


def tool_names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of tool definitions, in order."""
    return [tool_name(t) for t in tools]


__all__ = [
    "BODY_KEYS",
    "CaptureError",
    "LOCK_NAME",
    "SYSTEM_ROLES",
    "check_name",
    "codex_instructions",
    "load_json_file",
    "request_body",
    "shape_document",
    "shape_files",
    "shape_from_codex_session",
    "shape_from_request",
    "shape_from_request_file",
    "tool_name",
    "tool_names",
    "write_shape",
]

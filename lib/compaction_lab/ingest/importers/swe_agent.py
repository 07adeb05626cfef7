"""SWE-agent trajectories (``.traj`` JSON) -> `Session`.

A ``.traj`` file is one JSON document::

    {"environment": ..., "trajectory": [{"action", "observation", "response", "thought", "state"}],
     "history": [{"role", "content", "agent", "thought", "action", "is_demo", ...}], "info": {...}}

``history`` is what the model saw, so it is preferred; without it the ``trajectory`` steps are used
(thought -> assistant, action -> tool_call, observation -> tool_output). In ``history`` a user
message that follows an assistant action not yet answered is that action's tool_output (the task
text is also a user message, so ``message_type`` alone cannot tell them apart; position can).

An action string such as ``open pydicom/x.py 293`` becomes tool ``open`` and target
``pydicom/x.py`` (`parse_action`): SWE-agent's own file commands take their first argument
(``edit``/``goto``/``scroll_*`` act on the open file); any other command is a shell command whose
target is the rest of its first line. ``info.model_stats`` totals go to metadata ``usage_totals``.

Design: docs/session-formats.md#swe-agent.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.text import content_text, tool_call_text
from compaction_lab.ingest.builder import SessionBuilder, file_stem, tool_target
from compaction_lab.ingest.files import Head, load_json
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.json_repair import loads
from compaction_lab.ingest.registry import IMPORTERS

FORMAT = "swe_agent"


def _as_list(val):
    """Return a list field, or nothing when the file has something else there."""
    return val if isinstance(val, list) else []


#: Top-level keys of a ``.traj`` document (0.x starts with environment, 1.x with trajectory).
_TOP_KEYS = ("environment", "trajectory", "history", "info", "replay_config", "attempts")
_FIRST_KEY = re.compile(rb'^\s*\{\s*"(' + b"|".join(k.encode() for k in _TOP_KEYS) + rb')"\s*:')
_TRAJECTORY_KEY = re.compile(rb'"trajectory"\s*:\s*\[')
_HISTORY_KEY = re.compile(rb'"history"\s*:\s*\[')

#: SWE-agent commands whose first argument is the file or name they act on.
_FIRST_ARG_COMMANDS = frozenset({"open", "create", "find_file", "search_file", "search_dir", "view", "cat"})
#: Commands that act on the currently open file (their arguments are line numbers).
_OPEN_FILE_COMMANDS = frozenset({"edit", "goto", "scroll_up", "scroll_down", "insert"})
_OPEN_FILE = re.compile(r"\(Open file: ([^)\n]+)\)")


# --------------------------------------------------------------------------- sniffing


def sniff(head: Head) -> bool:
    """Tell whether the input is a SWE-agent ``.traj`` document (by content; never raises)."""
    try:
        if head.is_dir or head.is_sqlite:
            return False
        raw = head.raw.lstrip()
        if not raw.startswith(b"{"):
            return False
        objs = head.objects
        if len(objs) > 1:  # several objects on separate lines: JSONL, not one document
            return False
        if len(objs) == 1 and any(k in objs[0] for k in _TOP_KEYS):
            obj = objs[0]  # the whole document fitted in the head: decide on its keys
            return isinstance(obj.get("trajectory"), list) or (
                isinstance(obj.get("history"), list) and isinstance(obj.get("info"), Mapping)
            )
        if not _FIRST_KEY.match(raw):
            return False
        if _TRAJECTORY_KEY.search(raw) or (_HISTORY_KEY.search(raw) and b'"info"' in raw):
            return True
        # A long first value (e.g. a huge first trajectory step) can push the other keys
        # past the head: the suffix is then the tie-breaker.
        return head.path.suffix == ".traj"
    except Exception:
        return False


# --------------------------------------------------------------------------- loading


def load(path: Path, audit: ImportAudit) -> Iterator[Session]:
    """Import one ``.traj`` file as one session (id = file stem).

    Parameters
    ----------
    path : Path
    audit : ImportAudit
        Receives the failure when the file is not valid JSON, and every
        history item or step that cannot be used.

    Yields
    ------
    Session
        At most one.
    """
    path = Path(path)
    doc = load_json(path, audit)
    if doc is None:
        return
    if not isinstance(doc, dict):
        audit.skip(path, None, "not_an_object", type(doc).__name__)
        return
    sid = file_stem(path)
    b = SessionBuilder(sid, FORMAT, path)
    history, trajectory = doc.get("history"), doc.get("trajectory")
    if isinstance(history, list) and history:
        _from_history(b, history, path, audit)
    elif isinstance(trajectory, list):
        _from_trajectory(b, trajectory, path, audit)
    else:
        audit.skip(path, None, "missing_field", "neither a 'history' nor a 'trajectory' list")
        return
    _info_metadata(b, doc)
    yield b.build()


def _from_history(b: SessionBuilder, history: list[Any], path: Path, audit: ImportAudit) -> None:
    """Map ``history`` messages, pairing each action with the observation that follows it."""
    pending: list[tuple[str, str, str | None]] = []  # (call_id, tool, target) awaiting output
    calls: dict[str, tuple[str, str | None]] = {}
    open_file: str | None = None
    for i, item in enumerate(history):
        eid = f"h{i}"
        if not isinstance(item, dict):
            audit.skip(path, None, "not_an_object", f"history[{i}]: {type(item).__name__}")
            continue
        role = item.get("role")
        injected = bool(item.get("is_demo"))
        text = content_text(item.get("content"))
        if role == "system":
            b.add("system", text, eid, injected=injected)
            if not injected and "system_prompt" not in b.metadata and text:
                b.metadata["system_prompt"] = text
        elif role == "assistant":
            new, _ = _add_assistant(b, item, eid, open_file, injected)
            pending = new
            calls.update({c: (t, g) for c, t, g in new})
        elif role == "tool" or (role == "user" and pending):
            ids = item.get("tool_call_ids")
            want = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else None
            match = next((p for p in pending if p[0] == want), None) if want else None
            if match is None and want in calls:
                match = (want, *calls[want])
            if match is None and pending:
                match = pending[0]
            if match is not None and match in pending:
                pending.remove(match)
            call_id, tool, target = match if match is not None else (want, None, None)
            b.add("tool_output", text, eid, tool=tool, target=target, call_id=call_id, injected=injected)
            open_file = _open_file(text) or open_file
        elif role == "user":
            b.add("user", text, eid, injected=injected)
            open_file = _open_file(text) or open_file
        else:
            audit.skip(path, None, "missing_field" if role is None else "unknown_type", f"history[{i}]: role {role!r}")


def _add_assistant(
    b: SessionBuilder, item: Mapping[str, Any], eid: str, open_file: str | None, injected: bool
) -> tuple[list[tuple[str, str, str | None]], int]:
    """Add the records of one assistant message.

    Returns
    -------
    issued : list of (call_id, tool, target)
        The tool calls it made, awaiting their observations.
    next_block : int
        The block index the entry's next record would take.
    """
    block = 0
    for tb in _as_list(item.get("thinking_blocks")):
        thinking = tb.get("thinking") if isinstance(tb, dict) else None
        if isinstance(thinking, str) and thinking.strip():
            b.add("reasoning", thinking, eid, block, injected=injected)
            block += 1
    action = item.get("action")
    tool_calls = [tc for tc in _as_list(item.get("tool_calls")) if isinstance(tc, dict)]
    has_action = (isinstance(action, str) and action.strip()) or tool_calls
    thought = item.get("thought")
    prose = thought if has_action and isinstance(thought, str) else content_text(item.get("content"))
    if not has_action and not prose.strip() and isinstance(thought, str):
        prose = thought
    if prose.strip() or not has_action:
        b.add("assistant", prose, eid, block, injected=injected)
        block += 1
    issued: list[tuple[str, str, str | None]] = []
    if tool_calls:
        for k, tc in enumerate(tool_calls):
            fn = fn_field if isinstance(fn_field := tc.get("function"), dict) else {}
            name = name_field if isinstance(name_field := fn.get("name"), str) else "unknown"
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = loads(args)  # lone surrogates replaced, like every JSON the import decodes
                except (ValueError, RecursionError):
                    pass
            call_id = id_field if isinstance(id_field := tc.get("id"), str) else f"{eid}.{k}"
            target = tool_target(args)
            b.add(
                "tool_call",
                tool_call_text(name, args if args is not None else {}),
                eid,
                block,
                tool=name,
                target=target,
                call_id=call_id,
                injected=injected,
            )
            block += 1
            issued.append((call_id, name, target))
    elif isinstance(action, str) and action.strip():  # what `has_action` means without tool calls
        tool, rest, target = parse_action(action, open_file)
        b.add(
            "tool_call",
            tool_call_text(tool, rest) if rest else tool,
            eid,
            block,
            tool=tool,
            target=target,
            call_id=eid,
            injected=injected,
        )
        block += 1
        issued.append((eid, tool, target))
    return issued, block


def _from_trajectory(b: SessionBuilder, steps: list[Any], path: Path, audit: ImportAudit) -> None:
    """Map ``trajectory`` steps: thought, action, observation."""
    for i, step in enumerate(steps):
        eid = f"t{i}"
        if not isinstance(step, dict):
            audit.skip(path, None, "not_an_object", f"trajectory[{i}]: {type(step).__name__}")
            continue
        action = step.get("action")
        if (
            not isinstance(action, str)
            and not isinstance(step.get("thought"), str)
            and not isinstance(step.get("response"), str)
        ):
            audit.skip(path, None, "missing_field", f"trajectory[{i}]: no thought, action or response")
            continue
        state = _state(step.get("state"))
        item = {
            "role": "assistant",
            "thought": step.get("thought"),
            "action": action,
            "content": step.get("response"),
            "tool_calls": step.get("tool_calls"),
        }
        issued, block = _add_assistant(b, item, eid, state.get("open_file"), False)
        obs = step.get("observation")
        if issued and obs is not None:
            call_id, tool, target = issued[0]
            b.add("tool_output", content_text(obs), eid, block, tool=tool, target=target, call_id=call_id)


def _state(state: Any) -> dict[str, Any]:
    """Read a step's ``state`` (a JSON string in 0.x, a dict in 1.x)."""
    if isinstance(state, str):
        try:
            state = loads(state)
        except (ValueError, RecursionError):
            return {}
    if not isinstance(state, dict):
        return {}
    return {k: v for k, v in state.items() if isinstance(v, str) and v and v != "n/a"}


def _open_file(text: str) -> str | None:
    """Return the file named in an observation's ``(Open file: ...)`` footer, if any."""
    m = _OPEN_FILE.search(text)
    return m.group(1).strip() if m and m.group(1).strip() != "n/a" else None


def parse_action(action: str, open_file: str | None = None) -> tuple[str, str, str | None]:
    r"""Parse a SWE-agent action string into tool name, argument text and target.

    Parameters
    ----------
    action : str
        E.g. ``"open pydicom/x.py 293\n"`` or ``"edit 1:1\nimport numpy\nend_of_edit"``.
    open_file : str, optional
        The file open in the editor, for commands that act on it.

    Returns
    -------
    (tool, rest, target)
        ``tool`` is the first word; ``rest`` everything after it (trailing
        newline removed); ``target`` the first argument for file commands,
        the open file for editor commands, else the rest of the first line.
    """
    action = action.strip("\n").strip()
    first_line = action.split("\n", 1)[0]
    tool, _, args = first_line.strip().partition(" ")
    rest = action[len(tool) :].lstrip(" ")
    args = args.strip()
    if tool in _OPEN_FILE_COMMANDS:
        return tool, rest, open_file
    if tool in _FIRST_ARG_COMMANDS and args:
        try:
            words = shlex.split(args)
        except ValueError:
            words = args.split()
        return tool, rest, (words[0] if words else None)
    return tool, rest, (args or None)


def _info_metadata(b: SessionBuilder, doc: Mapping[str, Any]) -> None:
    """Totals, exit status, submission and (1.x) model name from the document."""
    info = info_field if isinstance(info_field := doc.get("info"), dict) else {}
    stats = stats_field if isinstance(stats_field := info.get("model_stats"), dict) else {}
    totals = {}
    for src, key in (
        ("tokens_sent", "input_tokens"),
        ("tokens_received", "output_tokens"),
        ("instance_cost", "cost"),
        ("api_calls", "api_calls"),
    ):
        val = stats.get(src)
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            totals[key] = val
    if totals:
        b.metadata["usage_totals"] = totals
    for key in ("exit_status", "submission", "swe_agent_version"):
        if isinstance(info.get(key), str):
            b.metadata[key] = info[key]
    if isinstance(doc.get("environment"), str):
        b.metadata["environment"] = doc["environment"]
    model = _replay_model(doc.get("replay_config"))
    if model:
        b.metadata["model"] = model


def _replay_model(cfg: Any) -> str | None:
    """Return the model name recorded in a 1.x ``replay_config`` (a JSON string or object)."""
    if isinstance(cfg, str):
        try:
            cfg = loads(cfg)
        except (ValueError, RecursionError):
            return None
    try:
        name = cfg["agent"]["model"]["name"]
    except (TypeError, KeyError):
        return None
    return name if isinstance(name, str) and name else None


# The rank is this importer's place in the sniffing order, most specific first (`ingest.registry`).
IMPORTERS.add(FORMAT, sys.modules[__name__], rank=20, agent="swe-agent")

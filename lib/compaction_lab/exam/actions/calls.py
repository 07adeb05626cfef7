"""A recorded tool call read back from its record: its arguments, and the key two calls are compared by.

Every importer writes a tool call's record text as the model saw it, the tool's name then its JSON
arguments (`core.text.tool_call_text`). The continuation exam and the rediscovery measure need the
arguments back, and a key under which two calls are *the same call*: the same tool name and identical
arguments after canonical JSON (sorted keys, no whitespace), so a harness's key order or spacing does not
make a repeat look new.
"""

from __future__ import annotations

from typing import Any

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import canonical_json
from compaction_lab.core.session import Record, Session


def call_arguments(record: Record) -> Any:
    """Return the arguments of a ``tool_call`` record as the model sent them.

    Parameters
    ----------
    record : Record
        A ``tool_call`` record (its text is ``"<tool> <arguments>"``).

    Returns
    -------
    object
        The decoded JSON arguments; the raw argument text when it is not JSON (a harness that sends a
        command line, or a damaged log) or nests deeper than `bounded_json.MAX_DEPTH`; ``""`` when the
        call has none.
    """
    text = record.text
    tool = record.tool or ""
    rest = text[len(tool) + 1 :] if tool and text.startswith(tool + " ") else ("" if text == tool else text)
    if not rest.strip():
        return ""
    return bounded_json.parse_or_text(rest)


def canonical_arguments(record: Record) -> str:
    """Return a call's arguments as canonical JSON (`core.fingerprints.canonical_json`), the raw text if not JSON."""
    args = call_arguments(record)
    return args if isinstance(args, str) else canonical_json(args)


def call_key(record: Record) -> tuple[str, str]:
    """Return what makes two calls the same call: the tool name and the canonical arguments."""
    return (record.tool or "", canonical_arguments(record))


def user_ran(session: Session, record: Record) -> bool:
    """Tell whether a ``tool_call`` record is a shell command the user ran, not a call the agent made.

    pi records a user's ``!`` command as a ``bashExecution`` entry, which its importer turns into a
    ``tool_call`` whose ``call_id`` is the entry's own id (`ingest.importers.pi`); a model's call carries the id
    the model's API gave it. Other formats record user commands as user text, never as calls.
    """
    return session.source_format == "pi" and record.call_id is not None and record.call_id == record.entry_id


def agent_calls(session: Session) -> list[Record]:
    """Return the session's ``tool_call`` records the agent made, in order (`user_ran` ones left out)."""
    return [r for r in session.records if r.kind == "tool_call" and not user_ran(session, r)]


__all__ = ["agent_calls", "call_arguments", "call_key", "canonical_arguments", "user_ran"]

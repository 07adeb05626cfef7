"""What a tool call acts on: its targets, and a session normalised once to look them up.

The continuation exam keys a case by the agent's recorded next calls and the *targets* in them; the
model grade asks the same of a call a model predicts, and whether it names an object the session never
held. Both read a call through these: the values a call passes (`leaves`), the command line a shell
call runs (`command_line`), the spellings that count as one value (`forms`: normalised with
`grading.normalise`, a path also in its relative, absolute and ``@``-mention forms,
`probes.forms.path_forms`), the targets of one call (`targets_of`) and a session normalised once
(`SessionHay`, `session_hay`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from compaction_lab.core.session import POINTER_OF_KIND, Record, Session
from compaction_lab.exam.calls import call_arguments
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.probes import candidates
from compaction_lab.exam.probes.forms import path_forms

#: Target categories, in the order tables list them.
CATEGORIES: tuple[str, ...] = (
    "path",
    "identifier",
    "tool_returned_id",
    "number",
    "url",
    "command",
    "argument",
    "error_string",
    "quoted",
)

#: A literal argument longer than this is content (a file body, an edit), not a value.
ARG_MAX = 120

#: Categories of the objects a call acts on (what an invented look-alike is sought among).
OBJECT_CATEGORIES: tuple[str, ...] = ("path", "identifier", "tool_returned_id")

_URL = re.compile(r"https?://[^\s\"'<>`]+")


def leaves(args: Any) -> list[str]:
    """Return the string values of decoded arguments, depth first (keys are the tool's words, not the agent's)."""
    if isinstance(args, str):
        return [args]
    if isinstance(args, Mapping):
        return [v for val in args.values() for v in leaves(val)]
    if isinstance(args, list):
        return [v for val in args for v in leaves(val)]
    return []


def command_line(args: Any) -> str | None:
    """Return the command line a shell call runs (the ``command`` / ``cmd`` argument), None for other calls."""
    if isinstance(args, Mapping):
        for key in ("command", "cmd"):
            val = args.get(key)
            if isinstance(val, str) and val.strip():
                return val
            if isinstance(val, list) and val and all(isinstance(v, str) for v in val):
                # Codex's shell passes argv; `bash -lc "<line>"` carries the line last
                return val[-1] if val[0] in ("bash", "sh", "zsh") and len(val) >= 3 else " ".join(val)
    return None


def forms(value: str, cwd: str | None, *, path: bool | None = None) -> tuple[str, ...]:
    """Return a value's normalised spellings: itself, and for a path its relative, absolute and ``@`` forms.

    Parameters
    ----------
    value : str
    cwd : str or None
        The session's working directory.
    path : bool, optional
        Whether the value is a path; default: it holds a ``/``.
    """
    out = [value, value.lstrip("@")]
    if path if path is not None else "/" in value:
        rel, others = path_forms(value.lstrip("@"), cwd)
        if rel is not None:
            out += [rel, *others]
    return tuple(dict.fromkeys(f for f in (normalise(x) for x in out) if f))


@dataclass(frozen=True)
class Target:
    """One value a call acts on or passes.

    Attributes
    ----------
    value : str
        As the call wrote it.
    category : str
        One of `CATEGORIES`.
    forms : tuple of str
        The normalised spellings that count as holding it (`forms`).
    status : str
        Where it occurred before the cut (`continuation.STATUSES`); ``new`` until classified.
    first_seen : int
        The source_order of its first covered occurrence (-1 unless ``needed``).
    pointer : str
        The kind of record it was first seen in (``user``, ``assistant``, ``tool``; "" unless ``needed``).
    """

    value: str
    category: str
    forms: tuple[str, ...]
    status: str = "new"
    first_seen: int = -1
    pointer: str = ""

    @property
    def needed(self) -> bool:
        """Tell whether the target is scored: seen before the cut, outside what every arm keeps verbatim."""
        return self.status == "needed"


def targets_of(record: Record, cwd: str | None = None) -> list[Target]:
    """Return the targets of one tool call (unclassified: status ``new``), each value once.

    The probes' exact-value extractors over the call's text, then its URLs, its command's head (the first
    word of a shell command) and the short one-line string arguments it passes. A value too easy to
    guess (`candidates.guessable`) is not a target.

    Parameters
    ----------
    record : Record
        A ``tool_call`` record.
    cwd : str, optional
        The session's working directory (a path's absolute and relative forms are one target).
    """
    args = call_arguments(record)
    found: list[tuple[str, str]] = [(c.value, c.category) for c in candidates.extract(record)]
    found += [(m.group(0).rstrip(".,;:)"), "url") for m in _URL.finditer(record.text)]
    line = command_line(args)
    if line:
        head = line.strip().split()[0]
        found.append((head, "path" if "/" in head else "command"))
    for leaf in leaves(args):
        v = leaf.strip()
        if v and "\n" not in v and len(v) <= ARG_MAX and v != (line or "").strip():
            found.append((v, "argument"))
    out: list[Target] = []
    seen: set[str] = set()
    for value, category in found:
        spellings = forms(value, cwd, path=category == "path")
        if not spellings or candidates.guessable(value) or spellings[0] in seen:
            continue
        # a literal argument that only repeats a value already found (a bare path argument) adds nothing
        if category == "argument" and any(spellings[0] == t.forms[0] for t in out):
            continue
        seen.add(spellings[0])
        out.append(Target(value, category, spellings))
    return out


def objects_of(record: Record, args: Any) -> list[str]:
    """Return the objects a record names: the probes' paths and identifiers, and its one-word string arguments."""
    found = [c.value for c in candidates.extract(record) if c.category in OBJECT_CATEGORIES]
    for leaf in leaves(args):
        v = leaf.strip()
        if v and len(v) <= ARG_MAX and not any(c.isspace() for c in v):
            found.append(v)
    return [v for v in dict.fromkeys(found) if not candidates.guessable(v)]


@dataclass(frozen=True, eq=False)
class SessionHay:
    """A session normalised once (`grading.normalise`): every case, action and arm of it looks things up here.

    Attributes
    ----------
    session : Session
    records : tuple of (int, str, str)
        Per record that is neither bookkeeping nor system prompt: source_order, pointer, normalised text
        (and target).
    system : str
        The system prompt (metadata and ``system`` records), normalised.
    cwd : str or None
        The session's working directory (a path's absolute and relative forms are one object).
    """

    session: Session
    records: tuple[tuple[int, str, str], ...]
    system: str
    cwd: str | None = None

    @cached_property
    def text(self) -> str:
        """Return the whole session normalised, records then system prompt (where an object must be absent)."""
        return "\n".join(t for _, _, t in self.records) + "\n" + self.system

    @cached_property
    def objects(self) -> tuple[str, ...]:
        """The normalised paths and identifiers the session holds (read only when a call names a new object)."""
        out: dict[str, None] = {}
        for r in self.session.records:
            if r.kind in ("meta", "system"):
                continue
            for v in objects_of(r, call_arguments(r) if r.kind == "tool_call" else ""):
                out.setdefault(normalise(v.lstrip("@")))
        return tuple(k for k in out if k)

    def first(self, spellings: Sequence[str], lo: int, hi: int) -> tuple[int, str] | None:
        """Return the first record in ``[lo, hi)`` holding one of `spellings`: (source_order, pointer)."""
        for order, pointer, text in self.records:
            if lo <= order < hi and any(f in text for f in spellings):
                return order, pointer
        return None


_HAYS: dict[int, SessionHay] = {}
_HAYS_LOCK = threading.Lock()
_HAYS_MAX = 4  # sessions kept normalised: a run grades a session's cases one after another


def session_hay(session: Session) -> SessionHay:
    """Return the session normalised, made once per session object (the last few are kept)."""
    with _HAYS_LOCK:
        hay = _HAYS.get(id(session))
        if hay is not None and hay.session is session:
            return hay
    system = [str(session.metadata.get("system_prompt") or "")]
    records = []
    for r in session.records:
        text = normalise(r.text + ("\n" + r.target if r.target else ""))
        if r.kind == "system":
            system.append(text)
        elif r.kind != "meta":
            records.append((r.source_order, POINTER_OF_KIND.get(r.kind, ""), text))
    cwd = session.metadata.get("cwd")
    hay = SessionHay(session, tuple(records), normalise("\n".join(system)), cwd if isinstance(cwd, str) else None)
    with _HAYS_LOCK:
        if len(_HAYS) >= _HAYS_MAX:
            _HAYS.pop(next(iter(_HAYS)))
        _HAYS[id(session)] = hay
    return hay


__all__ = [
    "ARG_MAX",
    "CATEGORIES",
    "OBJECT_CATEGORIES",
    "SessionHay",
    "Target",
    "command_line",
    "forms",
    "leaves",
    "objects_of",
    "session_hay",
    "targets_of",
]

"""What a tool call acts on: its targets, and a session normalised once to look them up.

The continuation exam keys a case by the agent's recorded next calls and the *targets* in them; the
model grade asks the same of a call a model predicts, and whether it names an object the session never
held. Both read a call through these: the values a call passes (`leaves`), the command line a shell
call runs (`command_line`), the spellings searched for one value (`forms`: normalised with
`grading.normalise`, a path also in its relative, absolute and ``@``-mention forms,
`probes.forms.path_forms`), the targets of one call (`targets_of`: each value once, its forms collapsed
by their compared key, `probes.forms.value_key` and `probes.forms.collapse`; a command's heads and its
flags are not values) and a session normalised once (`SessionHay`, `session_hay`).

Design: docs/exams.md#8a-continuation-notebook-06 ("The key").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from compaction_lab.core.session import POINTER_OF_KIND, Record, Session
from compaction_lab.exam.actions.calls import call_arguments
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.probes import candidates
from compaction_lab.exam.questions.probes.forms import collapse, path_forms, value_key

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

#: What separates the commands of one shell line (each begins with a head, `command_heads`).
_COMMAND_SEP = re.compile(r"&&|\|\||[|;&\n()]|\$\(|`")

#: Words that run the next word as the command (its head too): ``sudo npm``, ``env X=1 node``.
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "exec", "xargs", "command", "nice", "timeout"})


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


def command_heads(args: Any) -> frozenset[str]:
    """Return the command heads a shell call runs: the first word of each command of its line.

    ``cd /repo && npm run check | tail -5`` runs ``cd``, ``npm`` and ``tail``; a prefix that runs the
    next word (``sudo``, ``env``, ``timeout``, `_PREFIXES`) is a head and so is that word; Codex's argv
    form adds its first element. Empty for a call that runs no shell line.
    """
    line = command_line(args)
    heads: set[str] = set()
    if isinstance(args, Mapping):
        for key in ("command", "cmd"):
            val = args.get(key)
            if isinstance(val, list) and val and isinstance(val[0], str):
                heads.add(val[0])
    for part in _COMMAND_SEP.split(line or ""):
        for word in part.split():
            if "=" in word and not word.startswith(("-", "/", ".")):
                continue  # a variable assignment before the command (`X=1 node app.js`)
            if is_flag(word) or word.isdigit():
                continue  # `timeout 30 npm`, `xargs -n 1 rm`
            heads.add(word)
            if word not in _PREFIXES:
                break
    return frozenset(heads)


def is_flag(value: str) -> bool:
    """Tell whether a value is a command-line flag (``-la``, ``--force``, ``--limit=5``): never a target."""
    return len(value) > 1 and value.startswith("-") and (value[1].isalnum() or value[1] == "-")


def forms(value: str, cwd: str | None, *, path: bool | None = None) -> tuple[str, ...]:
    """Return a value's normalised spellings: itself, and for a path its relative, absolute and ``@`` forms.

    These are the spellings *searched for* (in a session, in a projection); the key one value is
    compared by is `probes.forms.value_key`.

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
        Where it occurred (`continuation.STATUSES`); ``new`` until classified.
    first_seen : int
        The source_order of its first covered occurrence (-1 unless ``needed``).
    pointer : str
        The kind of record it was first seen in (``user``, ``assistant``, ``tool``; "" unless ``needed``).
    key : str
        The compared key of its value (`probes.forms.value_key`): forms of one value share it.
    """

    value: str
    category: str
    forms: tuple[str, ...]
    status: str = "new"
    first_seen: int = -1
    pointer: str = ""
    key: str = ""

    @property
    def needed(self) -> bool:
        """Tell whether the target is scored: seen before the cut, only in what memory must hold."""
        return self.status == "needed"

    def classified(self, status: str, first_seen: int = -1, pointer: str = "") -> Target:
        """Return the target with a status (and, for ``needed``, its first covered occurrence)."""
        return replace(self, status=status, first_seen=first_seen, pointer=pointer)


def one_per_value(targets: Sequence[Target]) -> list[Target]:
    """Keep one target per value: forms of one value (`probes.forms.collapse` of their keys) are one.

    The target kept is the one whose key is the value's representative (its longest form), else the
    first; it takes the place of the value's first form. A key ambiguous between two values stays a
    value of its own.
    """
    pool = collapse(t.key for t in targets)
    groups: dict[str, list[Target]] = {}
    for t in targets:
        groups.setdefault(pool.of(t.key) or t.key, []).append(t)
    return [next((t for t in members if t.key == rep), members[0]) for rep, members in groups.items()]


def targets_of(record: Record, cwd: str | None = None) -> list[Target]:
    """Return the targets of one tool call (unclassified: status ``new``), each value once.

    The probes' exact-value extractors over the call's text, then its URLs and the short one-line string
    arguments it passes. A value too easy to guess (`candidates.guessable`), a command's head (`mkdir`,
    `npm`: `command_heads`) and a flag (``-la``, ``--force``: `is_flag`) are not targets; forms of one
    value (a path absolute, relative, as a ``/``-bounded suffix, ``@``-mentioned) are one target
    (`one_per_value`).

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
    heads = command_heads(args)
    for leaf in leaves(args):
        v = leaf.strip()
        if v and "\n" not in v and len(v) <= ARG_MAX and v != (line or "").strip():
            found.append((v, "argument"))
    out: list[Target] = []
    for value, category in found:
        if value in heads or is_flag(value) or candidates.guessable(value):
            continue
        # a path is a path; a literal argument is one when it holds a "/" (the forms module's default)
        path = True if category == "path" else None if category == "argument" else False
        spellings = forms(value, cwd, path=path)
        if spellings:
            out.append(Target(value, category, spellings, key=value_key(value, cwd, path=path) or spellings[0]))
    return one_per_value(out)


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
    kinds : tuple of str
        Each of `records`' kind (`core.session.KINDS`), in the same order.
    """

    session: Session
    records: tuple[tuple[int, str, str], ...]
    system: str
    cwd: str | None = None
    kinds: tuple[str, ...] = ()

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

    def first(
        self, spellings: Sequence[str], lo: int, hi: int, kinds: Collection[str] | None = None
    ) -> tuple[int, str] | None:
        """Return the first record in ``[lo, hi)`` holding one of `spellings`: (source_order, pointer).

        With `kinds`, only records of those kinds are searched.
        """
        for i, (order, pointer, text) in enumerate(self.records):
            if kinds is not None and self.kinds[i] not in kinds:
                continue
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
    records, kinds = [], []
    for r in session.records:
        text = normalise(r.text + ("\n" + r.target if r.target else ""))
        if r.kind == "system":
            system.append(text)
        elif r.kind != "meta":
            records.append((r.source_order, POINTER_OF_KIND.get(r.kind, ""), text))
            kinds.append(r.kind)
    cwd = session.metadata.get("cwd")
    hay = SessionHay(
        session,
        tuple(records),
        normalise("\n".join(system)),
        cwd if isinstance(cwd, str) else None,
        tuple(kinds),
    )
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
    "command_heads",
    "command_line",
    "forms",
    "is_flag",
    "leaves",
    "objects_of",
    "one_per_value",
    "session_hay",
    "targets_of",
]

"""Forms of one value: the spellings that name the same thing, and a pool collapsed to distinct values.

A path appears in a session as ``/home/u/repo/src/core/a.ts``, ``src/core/a.ts``, ``core/a.ts``,
``@src/core/a.ts`` and ``a.ts``: five strings, one file. The exams count one value once: the pool of
usable values, the values eligible for a question, the values a summary holds, the questions asked and
the continuation exam's targets all collapse forms first. `value_key` gives one spelling's compared key
(normalised, without the ``@`` mention, a path relative to the session's working directory);
`collapse` groups keys of one pool, a path joining every longer path it is a ``/``-bounded suffix of.
A suffix of two different paths (``index.ts`` of ``a/index.ts`` and ``b/index.ts``) names neither for
sure: it is `Collapsed.ambiguous`, and never a value of its own.

See docs/exams.md ("One value once").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compaction_lab.exam.grading import normalise

__all__ = ["Collapsed", "collapse", "path_forms", "value_key"]


def path_forms(value: str, cwd: str | None) -> tuple[str | None, tuple[str, ...]]:
    """Return a path value's relative form and its other spellings.

    The relative form is the path relative to `cwd` (an absolute path under
    it, or ``./x``), or the value itself when it is relative; None for a path
    outside `cwd` (absolute, ``~/``, ``../``). The other spellings are the
    relative form, the absolute one (``cwd`` joined with a relative path
    that has a directory) and the ``@``-mention form, without the value.

    Examples
    --------
    >>> path_forms("/repo/src/a.py", "/repo")
    ('src/a.py', ('src/a.py', '@src/a.py'))
    >>> path_forms("src/a.py", "/repo")
    ('src/a.py', ('/repo/src/a.py', '@src/a.py'))
    >>> path_forms("/etc/hosts", "/repo")
    (None, ())
    """
    root = cwd.rstrip("/") + "/" if cwd and cwd.startswith("/") else None
    if root and value.startswith(root) and len(value) > len(root):
        rel = value[len(root) :]
    elif value.startswith("./"):
        rel = value[2:]
    elif value.startswith(("/", "~", "../")):
        return None, ()
    else:
        rel = value
    forms = [rel] + ([root + rel] if root and "/" in rel else []) + ["@" + rel]
    return rel, tuple(dict.fromkeys(f for f in forms if f and f != value))


def value_key(value: str, cwd: str | None = None, *, path: bool | None = None) -> str:
    """Return the compared key of one spelling: normalised, no ``@`` mention, a path relative to `cwd`.

    A path also loses ``/./``, a trailing ``/`` and leading ``../`` parts (``../core/a.ts``, written
    from a sibling directory, is a form of ``packages/core/a.ts``).

    Parameters
    ----------
    value : str
    cwd : str or None
        The session's working directory.
    path : bool, optional
        Whether the value is a path; default: it holds a ``/``.

    Examples
    --------
    >>> value_key("@/repo/src/A.py", "/repo")
    'src/a.py'
    >>> value_key("./src/a.py", None)
    'src/a.py'
    >>> value_key("/repo/src/./x.py", "/repo"), value_key("../core/src/", "/repo")
    ('src/x.py', 'core/src')
    >>> value_key("ORD-58213")
    'ord-58213'
    """
    v = value.strip().lstrip("@")
    if path if path is not None else "/" in v:
        v = re.sub(r"(?<=/)(?:\./)+", "", v)  # "src/./x.py" is "src/x.py"
        rel, _ = path_forms(v, cwd)
        if rel is None and v.startswith("../"):  # relative to another directory: its tail is the form
            rel = re.sub(r"\A(?:\.\./)+", "", v)
        v = rel if rel is not None else v
        v = v.rstrip("/") or v  # a directory with or without its trailing slash
    return normalise(v)


def _is_path_key(key: str) -> bool:
    """Whether a key may be a form of a longer path: it holds a ``/``, or is a file name with an extension."""
    if "/" in key:
        return True
    stem, dot, ext = key.rpartition(".")
    return bool(dot and stem and ext) and not any(c.isspace() for c in key) and not ext.isdigit()


@dataclass(frozen=True)
class Collapsed:
    """A pool of keys grouped into distinct values.

    Attributes
    ----------
    representative : mapping of str to str
        Each key (but the ambiguous ones) to its value's representative: the longest key of its group
        (ties: the first in sort order).
    ambiguous : frozenset of str
        Keys that are a ``/``-bounded suffix of two or more different values: a form of one of them, which
        one unknown. Not a value of their own.
    """

    representative: Mapping[str, str]
    ambiguous: frozenset[str] = field(default_factory=frozenset)

    @property
    def values(self) -> frozenset[str]:
        """The distinct values (their representatives)."""
        return frozenset(self.representative.values())

    def __len__(self) -> int:
        """Count the distinct values."""
        return len(self.values)

    def of(self, key: str) -> str | None:
        """Return the representative of `key`'s value; None for an ambiguous key or one not in the pool."""
        return self.representative.get(key)

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Return each representative and the keys of its group, sorted."""
        out: dict[str, list[str]] = {}
        for k, rep in sorted(self.representative.items()):
            out.setdefault(rep, []).append(k)
        return {rep: tuple(ks) for rep, ks in sorted(out.items())}


def collapse(keys: Iterable[str]) -> Collapsed:
    """Group compared keys (`value_key`) into distinct values.

    A path key that is a ``/``-bounded suffix of longer path keys (``a.ts`` of ``core/a.ts`` of
    ``src/core/a.ts``) is a form of theirs when they all name one value — that is, when its longest
    extensions are suffix-chained, one inside the next; a suffix of two unrelated paths is ambiguous.
    Every other key is a value of its own.

    Examples
    --------
    >>> c = collapse(["a.ts", "core/a.ts", "packages/x/src/core/a.ts", "b/index.ts", "c/index.ts", "index.ts"])
    >>> c.of("a.ts"), c.of("core/a.ts")
    ('packages/x/src/core/a.ts', 'packages/x/src/core/a.ts')
    >>> sorted(c.ambiguous), len(c)
    (['index.ts'], 3)
    """
    pool = sorted({k for k in keys if k})
    paths = [k for k in pool if _is_path_key(k)]
    # Longest first: a key's extensions are decided before the key itself.
    by_length = sorted(paths, key=lambda k: (-len(k), k))
    rep: dict[str, str] = {k: k for k in pool}
    ambiguous: set[str] = set()
    for i, k in enumerate(by_length):
        longer = [o for o in by_length[:i] if len(o) > len(k) and o.endswith("/" + k) and o not in ambiguous]
        if not longer:
            continue
        reps = {rep[o] for o in longer}
        if len(reps) == 1:
            rep[k] = reps.pop()
        else:
            ambiguous.add(k)
    return Collapsed({k: r for k, r in rep.items() if k not in ambiguous}, frozenset(ambiguous))

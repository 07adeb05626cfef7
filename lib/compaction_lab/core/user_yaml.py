"""YAML that people hand the lab, read with one loader that such a file cannot turn against the machine.

Such YAML: run profiles, ``--set`` values, sweep values, endpoint presets, price tables, redaction patterns.

* **No aliases.** An alias (``*name``) is refused; an anchor alone (``&name``) is harmless. A few
  hundred bytes of nested aliases (the "billion laughs") build a value that expands to gigabytes as
  soon as it is printed, checked or handed to a notebook, and none of the lab's files needs them.
* **Bounded nesting.** Nesting deeper than `bounded_json.MAX_DEPTH` is refused — the parser's own
  recursion gives out on ``[[[…]]]`` 100,000 deep, and a shallower value that still loads would break
  a later walk of it.
* **Text of a sane size.** A file that cannot be read, is not UTF-8 text (binary bytes) or is larger
  than `MAX_BYTES` is refused before YAML sees it.

Every refusal is a `UserYamlError` (a `ValueError`) whose message names the file (or ``--set key``,
``sweep key``) and what is wrong, in at most `MAX_MESSAGE` characters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from compaction_lab.core import bounded_json

#: Largest file read: the lab's own profiles, presets, price tables and pattern files are a few KB.
MAX_BYTES = 4 * 1024 * 1024
#: Longest refusal message; longer ones (a YAML error quoting a long line) are cut with "…".
MAX_MESSAGE = 500


class UserYamlError(ValueError):
    """A user's YAML file or value cannot be read; the message names it and says why."""


class _TooDeep(Exception):
    """The scanner met more nesting than any value may have (see `_NoAliasLoader`)."""


class _Alias(Exception):
    """An alias (``*name``) where the loader refuses them; carries its name and where it stands."""

    def __init__(self, anchor: str, line: int, column: int) -> None:
        super().__init__(anchor)
        self.anchor, self.line, self.column = anchor, line, column


#: Scanner nesting at which reading stops; a little above the bound, which the value is checked against.
_SCAN_LIMIT = bounded_json.MAX_DEPTH + 8


class _NoAliasLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses every alias and stops scanning at absurd nesting.

    It refuses every alias (``*name``), so no value can expand past its text, and stops scanning at absurd
    nesting: PyYAML's scanner is quadratic in flow nesting (``[[[…`` 100,000 deep takes minutes) before its
    composer runs out of recursion.
    """

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= _SCAN_LIMIT:
            raise _TooDeep
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if len(self.indents) >= _SCAN_LIMIT:  # block nesting (``- - - - x``)
            raise _TooDeep
        return super().add_indent(column)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Alias(str(event.anchor), event.start_mark.line + 1, event.start_mark.column + 1)
        return super().compose_node(parent, index)


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _problem(exc: yaml.YAMLError) -> str:
    """Say what the parser objects to and where — without the quoted line, which may hold a secret."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{exc.problem or exc.context or type(exc).__name__}{where}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def loads(text: str, where: str) -> Any:
    """Read the value of YAML text by the rules of this module.

    Parameters
    ----------
    text : str
        The YAML.
    where : str
        What the text is, for the message (a path, ``--set window``, ``sweep seed``).

    Raises
    ------
    UserYamlError
        Not valid YAML, an alias, or nesting deeper than `bounded_json.MAX_DEPTH`.
    """
    try:
        value = yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader, minus aliases
    except (_TooDeep, RecursionError):
        value = None
        too_deep = True
    except _Alias as alias:
        raise UserYamlError(
            _short(
                f"{where}: YAML aliases are not allowed (found *{alias.anchor} at line {alias.line}, "
                f"column {alias.column}); write the value out"
            )
        ) from None
    except yaml.YAMLError as exc:
        raise UserYamlError(_short(f"{where}: not valid YAML: {_problem(exc)}")) from None
    else:
        too_deep = bounded_json.nests_deeper(value)
    if too_deep:
        raise UserYamlError(_short(f"{where}: nests deeper than {bounded_json.MAX_DEPTH} levels"))
    return value


def load(path: str | Path, what: str = "") -> Any:
    """Read the value of a user's YAML file (None for an empty one) by the rules of this module.

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        What the file is, put before its path in messages (``endpoint preset``); empty: the path alone.

    Raises
    ------
    UserYamlError
        The file cannot be read, is larger than `MAX_BYTES`, is not UTF-8 text, is not valid YAML,
        holds an alias, or nests deeper than `bounded_json.MAX_DEPTH`; the message names the file.
    """
    path = Path(path)
    where = f"{what} {path}" if what else str(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserYamlError(_short(f"{where}: cannot read it ({exc.strerror or type(exc).__name__})")) from None
    if len(raw) > MAX_BYTES:
        raise UserYamlError(f"{where}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserYamlError(
            f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "is it a binary file? A YAML file is text"
        ) from None
    return loads(text, where)


__all__ = ["MAX_BYTES", "MAX_MESSAGE", "UserYamlError", "load", "loads"]

"""YAML that people hand the lab, read with one loader that such a file cannot turn against the machine.

Such YAML: run profiles, ``--set`` values, sweep values, providers, price tables, redaction patterns.

* **No aliases.** An alias (``*name``) is refused; an anchor alone (``&name``) is harmless. A few
  hundred bytes of nested aliases (the "billion laughs") build a value that expands to gigabytes as
  soon as it is printed, checked or handed to a notebook, and none of the lab's files needs them.
* **Bounded nesting.** Nesting deeper than `bounded_json.MAX_DEPTH` is refused — the parser's own
  recursion gives out on ``[[[…]]]`` 100,000 deep, and a shallower value that still loads would break
  a later walk of it.
* **Each key once.** A mapping that gives a key twice (``seed: 1`` ... ``seed: 2``, or ``1`` and ``1.0``)
  is refused, naming the key and its line: plain YAML keeps the last value silently. A merge key
  (``<<``) still overrides what it merges.
* **Numbers Python can read.** An integer too long for Python to convert (more than
  ``sys.get_int_max_str_digits()`` digits), or any other scalar its constructor refuses (a date
  ``2024-13-45``), is an error naming where it stands (``parameters.seed``), not a traceback.
* **Text of a sane size, from a regular file.** A file that is not a regular file (a FIFO, a device,
  a socket: judged before it is opened, and opened without blocking), cannot be read, is not UTF-8
  text (binary bytes) or is larger than `MAX_BYTES` is refused before YAML sees it.

Every refusal is a `UserYamlError` (a `ValueError`) whose message names the file (or ``--set key``,
``sweep key``) and what is wrong, in at most `MAX_MESSAGE` characters.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from compaction_lab.core import bounded_json, regular_file

#: Largest file read: the lab's own profiles, providers, price tables and pattern files are a few KB.
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


class _Duplicate(Exception):
    """A mapping gives one key twice; carries the key and the lines of both."""

    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(repr(key))
        self.key, self.first, self.again = key, first, again


class _Unconstructible(Exception):
    """A scalar YAML parses but Python cannot build (an integer of too many digits); carries its node."""

    def __init__(self, node: yaml.Node, reason: str) -> None:
        super().__init__(reason)
        self.node, self.reason = node, reason


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

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:  # from int(), datetime(), ...: not a YAMLError
            raise _Unconstructible(node, _unconstructible(node, exc)) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Before the merge keys are flattened into the node: a merge key overrides what it merges.
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                k = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if k in seen:
                        raise _Duplicate(k, seen[k], line)
                    seen[k] = line
                except TypeError:
                    continue  # an unhashable key: the constructor refuses it below
        return super().construct_mapping(node, deep=deep)


def _unconstructible(node: yaml.Node, exc: Exception) -> str:
    """Say why a scalar cannot be built -- for an over-long integer, its length, never its digits."""
    if node.tag == "tag:yaml.org,2002:int" and isinstance(node.value, str):
        digits = sum(ch.isdigit() for ch in node.value)
        limit = sys.get_int_max_str_digits()
        if limit and digits > limit:
            return f"an integer of {digits:,} digits, more than Python reads ({limit:,}); quote it if it is text"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'cannot be read'}"


def _place(root: yaml.Node | None, target: yaml.Node) -> str:
    """Return where `target` stands under `root`: ``parameters.seed``, ``mix[1]``; ``""`` for the root itself."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((value_node, f"{path}.{name}" if path else str(name)))
                stack.append((key_node, f"{path}.{name}" if path else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return ""


def _key_shown(key: Any) -> str:
    """Return a key as a message shows it: its ``repr``, cut short."""
    text = repr(key)
    return text if len(text) <= 80 else text[:79] + "…"


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
        Not valid YAML, an alias, a key given twice in one mapping, a scalar Python cannot build (an
        integer of too many digits: named by where it stands), or nesting deeper than
        `bounded_json.MAX_DEPTH`.
    """
    loader: _NoAliasLoader | None = None
    root: yaml.Node | None = None
    try:
        loader = _NoAliasLoader(text)  # a SafeLoader, minus aliases
        root = loader.get_single_node()
        value = loader.construct_document(root) if root is not None else None
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
    except _Duplicate as dup:
        raise UserYamlError(
            _short(
                f"{where}: key {_key_shown(dup.key)} is given twice (line {dup.first} and line {dup.again}); "
                "give each key once"
            )
        ) from None
    except _Unconstructible as bad:
        place = _place(root, bad.node)
        mark = bad.node.start_mark
        raise UserYamlError(
            _short(
                f"{where}: {place + ': ' if place else ''}{bad.reason} (line {mark.line + 1}, column {mark.column + 1})"
            )
        ) from None
    except yaml.YAMLError as exc:
        raise UserYamlError(_short(f"{where}: not valid YAML: {_problem(exc)}")) from None
    else:
        too_deep = bounded_json.nests_deeper(value)
    finally:
        if loader is not None:
            loader.dispose()
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
        What the file is, put before its path in messages (``provider``); empty: the path alone.

    Raises
    ------
    UserYamlError
        The file is not a regular file (a FIFO, a device: refused before it is opened, so reading
        never blocks), cannot be read, is larger than `MAX_BYTES`, is not UTF-8 text, or its text
        is refused by `loads`; the message names the file.
    """
    path = Path(path)
    where = f"{what} {path}" if what else str(path)
    try:
        raw = regular_file.read(path, MAX_BYTES)
    except regular_file.NotRegular as exc:
        if exc.kind == regular_file.KINDS[stat.S_IFDIR]:  # as reading a folder says
            raise UserYamlError(_short(f"{where}: cannot read it (Is a directory)")) from None
        raise UserYamlError(_short(f"{where}: not a regular file ({exc.kind}); give a YAML file")) from None
    except regular_file.TooLarge:
        raise UserYamlError(f"{where}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not read") from None
    except OSError as exc:
        raise UserYamlError(_short(f"{where}: cannot read it ({exc.strerror or type(exc).__name__})")) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserYamlError(
            f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "is it a binary file? A YAML file is text"
        ) from None
    return loads(text, where)


__all__ = ["MAX_BYTES", "MAX_MESSAGE", "UserYamlError", "load", "loads"]

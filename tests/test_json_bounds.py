"""Every JSON parse of text from outside the suite goes through the bounded reader (issue 44).

Python's JSON parser recurses once per level (msgspec's too, up to the recursion limit), so JSON nested a
few thousand levels deep raises `RecursionError` wherever it is parsed with a bare ``json.loads``: a tool
call's arguments in notebook 06 (issue 44 item 2), a session line read back, a bank line. The rule is that
such text is parsed by `core.bounded_json` (or `ingest.json_repair`, built on it), never by a bare parser.

`test_no_bare_json_parse_of_outside_text` walks the library's syntax trees for every bare JSON parser call
(``json.loads``, ``json.load``, ``json.JSONDecoder``, msgspec's JSON decoder, ``pandas.read_json``) and
fails on any that is not in `ALLOWED`: the sites that parse only what the suite wrote itself, each named by
file and enclosing function with the reason it is safe. A new site must go through the bounded reader or
be added there with its reason.
"""

from __future__ import annotations

import ast

import msgspec
import pytest

from compaction_lab.core import bounded_json
from compaction_lab.core.paths import REPO_ROOT
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.exam.types import Case, bank_from_jsonl, bank_to_jsonl
from tests.deep_json import HOSTILE_DEPTH, deep_array, deep_object

LIB = REPO_ROOT / "lib" / "compaction_lab"

#: The bare parsers, by the dotted name they are reached by once imports are resolved.
PARSERS = frozenset(
    {
        "json.loads",
        "json.load",
        "json.JSONDecoder",
        "json.decoder.JSONDecoder",
        "msgspec.json.decode",
        "msgspec.json.Decoder",
        "pandas.read_json",
    }
)

#: (file under lib/compaction_lab, enclosing function) -> why a bare parser is safe there.
ALLOWED: dict[tuple[str, str], str] = {
    # The bounded reader itself: its parse runs only after the depth check.
    ("core/bounded_json.py", "loads"): "the bounded reader: parses only text checked by too_deep",
    # msgspec decoders: msgspec refuses nesting past the recursion limit (RecursionError, tested below);
    # every use catches that and re-reads the text with the bounded reader.
    ("ingest/json_repair.py", "<module>"): "fast_decode: any msgspec refusal goes to bounded_json.loads",
    ("core/session.py", "<module>"): "_decode_line: a msgspec refusal goes to bounded_json.loads",
    # Files and rows the suite wrote itself, from values it built.
    ("core/shapes.py", "plain_json"): "json.loads(json.dumps(obj)): a round trip of a value already in memory",
    ("verify/requests.py", "verify"): "the shapes lock file the repository ships (data/shapes)",
    ("ingest/synthetic/_manifest.py", "read_manifest"): "the manifest the synthetic generator wrote",
    ("ingest/synthetic/_manifest.py", "read_chains"): "facts.jsonl the synthetic generator wrote",
    ("endpoints/standin.py", "stand_in_client"): "the stand-in endpoint reads the request the suite's client sent",
    ("store/ledger.py", "Ledger.lookup"): "ledger rows the suite wrote (responses stored after a bounded parse)",
    ("store/ledger.py", "Ledger.request"): "ledger rows the suite wrote (requests it built)",
    ("store/checkpoints.py", "CheckpointStore._row"): "checkpoint rows the suite wrote (projections, receipts)",
    ("store/checkpoints.py", "_stored_receipt"): "checkpoint receipts the suite wrote (an older row's keys renamed)",
    ("run/plan.py", "Plan.as_dict"): "DataFrame.to_json output read straight back",
    ("run/kernel.py", "warm_code"): "a notebook the package ships",
}


class _ParserCalls(ast.NodeVisitor):
    """Collect the bare JSON parser calls of one module: ``(enclosing function, line, dotted name)``."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> the module or function it is
        self.scope: list[str] = []
        self.found: list[tuple[str, int, str]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _dotted(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func)
        if name in PARSERS:
            # Methods are named Class.method; a nested function by its outermost function.
            scope = ".".join(self.scope[:2]) if self.scope and self.scope[0][:1].isupper() else "".join(self.scope[:1])
            self.found.append((scope or "<module>", node.lineno, name))
        self.generic_visit(node)


def parser_calls(source: str) -> list[tuple[str, int, str]]:
    """The bare JSON parser calls of a module's source."""
    visitor = _ParserCalls()
    visitor.visit(ast.parse(source))
    return visitor.found


def test_the_walk_finds_every_spelling_of_a_bare_parse():
    source = """
import json
import json as j
from json import loads as L
import msgspec
from msgspec import json as mj
from compaction_lab.core import bounded_json

def f(text):
    return json.loads(text), j.load(text), L(text), bounded_json.loads(text)

class C:
    def m(self, text):
        decode = msgspec.json.Decoder().decode
        return mj.decode(text), json.JSONDecoder().decode(text)
"""
    assert sorted(parser_calls(source)) == sorted(
        [
            ("f", 10, "json.loads"),
            ("f", 10, "json.load"),
            ("f", 10, "json.loads"),
            ("C.m", 14, "msgspec.json.Decoder"),
            ("C.m", 15, "msgspec.json.decode"),
            ("C.m", 15, "json.JSONDecoder"),
        ]
    )


def test_no_bare_json_parse_of_outside_text():
    bare = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).as_posix()
        for scope, line, name in parser_calls(path.read_text(encoding="utf-8")):
            if (rel, scope) not in ALLOWED:
                bare.append(f"{rel}:{line} {name} in {scope}")
    assert not bare, "JSON parsed without the bound (use core.bounded_json, or add to ALLOWED with why):\n" + "\n".join(
        bare
    )


def test_every_allowed_site_still_exists():
    """An allow-list entry whose call went away is removed, so the list stays the list of real exceptions."""
    seen = {
        (path.relative_to(LIB).as_posix(), scope)
        for path in LIB.rglob("*.py")
        for scope, _, _ in parser_calls(path.read_text(encoding="utf-8"))
    }
    assert sorted(set(ALLOWED) - seen) == []


# --------------------------------------------------------------------------- the readers routed through it


@pytest.mark.parametrize("depth", [1000, HOSTILE_DEPTH])
def test_msgspec_refuses_deep_nesting_with_a_recursion_error(depth):
    """What the msgspec sites rely on: msgspec bounds its own recursion (Python's limit) and says so with
    `RecursionError`, not a crash; the callers catch it and let the bounded reader decide."""
    with pytest.raises(RecursionError):
        msgspec.json.Decoder().decode(deep_array(depth).encode())


@pytest.mark.parametrize("deep", [deep_array(), deep_object(2000)])
def test_a_session_line_nested_too_deep_is_a_value_error(deep):
    """A saved session's line nested too deep (a run folder edited by hand or sent by someone) was a
    `RecursionError` out of msgspec; now the bounded reader refuses it as JSON nested too deep."""
    header = '{"session": {"id": "s", "source_format": "test", "metadata": {}}}'
    with pytest.raises(bounded_json.TooDeep):
        Session.from_jsonl(header + "\n" + deep + "\n")


def test_a_bank_line_nested_too_deep_is_a_value_error():
    good = bank_to_jsonl([Case("c1", "s1", cut=3, tail_start=1)])
    assert [c.id for c in bank_from_jsonl(good)] == ["c1"]
    with pytest.raises(bounded_json.TooDeep):
        bank_from_jsonl(good + deep_object(2000).encode() + b"\n")


def test_a_shape_file_nested_too_deep_is_a_value_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"name": "x", "system_prompt": "", "tools": ' + deep_array(2000) + "}", "utf-8")
    with pytest.raises(bounded_json.TooDeep):
        CallShape.load(path)


def test_the_suites_json_files_are_the_only_allowed_reasons():
    """Each allowed site says why: a non-empty reason, one line."""
    assert all(reason and "\n" not in reason for reason in ALLOWED.values())
    assert all((LIB / rel).is_file() for rel, _ in ALLOWED)

"""The package's import graph: stages import downward only, no cycles, no private names borrowed.

Every ``import`` / ``from … import`` of the library is read with `ast` — at module level and
inside functions (a lazy import still ties two modules together) — and resolved to the module it
names. Three rules:

* **Downward only.** Every module belongs to a stage (`compaction_lab.STAGES`, the one place the order
  is declared: its package, or itself for a top-level module) and imports only from its own stage or
  an earlier one — at module level, inside a function or under ``if TYPE_CHECKING:`` (a type named from a
  later stage ties the two as much as a call does). So nothing imports the renderer (`report`) but the
  runner (`run`) and the command line.
* **No cycle.** A module never reaches itself through the imports of the modules it imports.
  Imports under ``if TYPE_CHECKING:`` are for the type checker only (never executed): they are not
  followed for cycles, but they are checked for private names like any other.
* **No private import across modules.** A name starting with ``_`` is imported only from a
  *private sibling module* (``_name.py`` in the same package): those modules are the package's own
  internals (e.g. `ingest.synthetic._random`), private as a whole by their file name.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from compaction_lab import STAGES
from compaction_lab.core.paths import REPO_ROOT

LIB = REPO_ROOT / "lib"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in sorted((LIB / "compaction_lab").rglob("*.py")):
        parts = list(p.relative_to(LIB).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A library file's syntax tree, parsed once per test process: every check below reads every file."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _absolute(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: None if is_pkg else -1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    """An ``if TYPE_CHECKING:`` block."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def import_graph(
    planted: dict[str, str] | None = None, *, typing: bool = False
) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Module -> modules it imports (library only); and every private name imported from another module.

    `planted` replaces the source of named modules (a negative control reads a planted import exactly as it
    reads the library's own). With `typing`, imports under ``if TYPE_CHECKING:`` are edges too (for the
    direction check; the cycle check leaves them out: they are never executed).
    """
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    private: list[tuple[str, str, str]] = []
    for mod, (path, is_pkg) in mods.items():
        source = (planted or {}).get(mod)
        tree = ast.parse(source) if source is not None else _parsed(path)
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                if typing or id(node) not in typing_only:
                    graph[mod] |= {a.name for a in node.names if a.name in mods and a.name != mod}
            elif isinstance(node, ast.ImportFrom):
                src = _absolute(node, mod, is_pkg)
                if not src.startswith("compaction_lab"):
                    continue
                for alias in node.names:
                    sub = f"{src}.{alias.name}"
                    target = sub if sub in mods else src
                    if target in mods and target != mod and (typing or id(node) not in typing_only):
                        graph[mod].add(target)
                    if sub not in mods and alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((mod, src, alias.name))
    return graph, private


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _allowed(importer: str, source: str) -> bool:
    """A private sibling module: same package, its file name starts with an underscore."""
    pkg, _, leaf = source.rpartition(".")
    importer_pkg = importer if _modules()[importer][1] else importer.rpartition(".")[0]
    return leaf.startswith("_") and pkg == importer_pkg


def stage(module: str) -> int:
    """The index in `STAGES` of the stage `module` belongs to (-1: the package root)."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return STAGES.index(parts[1])


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (importer, imported) pair where the imported module sits in a later stage."""
    return sorted((m, t) for m, targets in graph.items() for t in targets if stage(t) > stage(m))


def test_every_module_belongs_to_a_declared_stage():
    unplaced = sorted({m.split(".")[1] for m in _modules() if "." in m} - set(STAGES))
    assert unplaced == [], f"declare these in compaction_lab.STAGES: {unplaced}"


@pytest.mark.slow
def test_stages_import_downward_only():
    assert upward_imports(import_graph(typing=True)[0]) == []


@pytest.mark.slow
def test_only_the_runner_and_the_command_line_import_the_report():
    importers = {
        m.split(".")[1]
        for m, targets in import_graph(typing=True)[0].items()
        for t in targets
        if t.split(".")[1:2] == ["report"]
    }
    assert importers <= {"report", "run", "cli"}, importers


@pytest.mark.slow
def test_the_direction_check_catches_a_planted_upward_import():
    """Negative control: an import of the renderer inside a function of `core` (lazy, so no cycle at import
    time) is flagged, and so is the same import under ``if TYPE_CHECKING:``."""
    target = "compaction_lab.core.paths"
    original = (LIB / "compaction_lab" / "core" / "paths.py").read_text(encoding="utf-8")
    lazy = original + "\n\ndef _planted():\n    from compaction_lab.report import charts\n\n    return charts\n"
    assert ("compaction_lab.core.paths", "compaction_lab.report.charts") in upward_imports(
        import_graph({target: lazy})[0]
    )
    typing_only = original + "\n\nif TYPE_CHECKING:\n    from compaction_lab.report import charts\n"
    assert ("compaction_lab.core.paths", "compaction_lab.report.charts") in upward_imports(
        import_graph({target: typing_only}, typing=True)[0]
    )
    assert upward_imports(import_graph({target: typing_only})[0]) == []  # never executed: no cycle edge
    assert stage("compaction_lab") < stage("compaction_lab.core.paths") < stage("compaction_lab.run.runner")


@pytest.mark.slow
def test_no_import_cycles():
    assert cycles(import_graph()[0]) == []


@pytest.mark.slow
def test_no_private_names_borrowed_from_another_module():
    _, private = import_graph()
    assert [(m, s, n) for m, s, n in private if not _allowed(m, s)] == []


def test_the_checks_catch_what_they_guard_against(tmp_path):
    """Negative controls: a two-module cycle is a cycle; a private name from a public module is flagged."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert not _allowed("compaction_lab.exam.questions.probes", "compaction_lab.exam.questions.bank")
    assert _allowed("compaction_lab.ingest.synthetic._builder", "compaction_lab.ingest.synthetic._random")
    assert _allowed("compaction_lab.ingest.synthetic", "compaction_lab.ingest.synthetic._generate")
    assert not _allowed("compaction_lab.exam.questions.bank", "compaction_lab.ingest.synthetic._random")
    tree = ast.parse("from ..bank import _mix\nfrom . import _private_mod\n")
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert _absolute(nodes[0], "compaction_lab.exam.questions.probes", False) == "compaction_lab.exam.bank"
    assert _absolute(nodes[1], "compaction_lab.exam", True) == "compaction_lab.exam"

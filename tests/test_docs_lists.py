"""The docs' lists of registered things keep up with the code (issue 49, "generated or tested lists").

A registered name, command, stage or notebook missing from the place the docs list them fails here: the
glossary's stages, architecture.md's registry table (one row per registry), the strategies, importers,
figures and notebooks in the documents that describe them.
"""

from __future__ import annotations

import re

import pytest

import compaction_lab
from compaction_lab.cli._common import COMMANDS
from compaction_lab.core import paths
from compaction_lab.exam.exam import EXAMS
from compaction_lab.exam.readers import READERS
from compaction_lab.ingest.registry import IMPORTERS
from compaction_lab.report.figures import run_figures
from compaction_lab.strategies.base import STRATEGIES
from compaction_lab.summarize.base import SUMMARIZERS
from tests.helpers import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _row(registry: str) -> str:
    """architecture.md's registry-table row of `registry` (``| `NAME` | … |``)."""
    rows = [line for line in _doc("architecture.md").splitlines() if line.startswith(f"| `{registry}` |")]
    assert len(rows) == 1, f"architecture.md has no one row for {registry}"
    return rows[0]


def test_the_glossary_lists_every_stage_in_order():
    entry = _doc("glossary.md").split("**stage**", 1)[1].split("\n\n", 1)[0]
    listed = [s for s in re.findall(r"`(\w+)`", entry) if s in compaction_lab.STAGES]
    assert listed == list(compaction_lab.STAGES)


@pytest.mark.parametrize(
    ("registry", "names"),
    [
        ("EXAMS", lambda: EXAMS.names()),
        ("COMMANDS", lambda: COMMANDS.names()),
        ("SUMMARIZERS", lambda: SUMMARIZERS.names()),
        ("READERS", lambda: READERS.names()),
    ],
)
def test_architecture_names_every_registered_entry_in_its_registry_row(registry, names):
    row = _row(registry)
    missing = [n for n in names() if f"`{n}`" not in row and f'"{n}"' not in row]
    assert not missing, f"architecture.md's {registry} row does not name {missing}"


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        ("strategies.md", lambda: STRATEGIES.names()),
        ("session-formats.md", lambda: IMPORTERS.names()),
        ("run-folder.md", lambda: [f.stem for f in run_figures()]),
        ("architecture.md", lambda: sorted(p.stem for p in paths.NOTEBOOKS_DIR.glob("*.ipynb"))),
    ],
)
def test_each_document_names_everything_it_describes(doc, names):
    text = _doc(doc)
    missing = [n for n in names() if f"`{n}`" not in text]
    assert not missing, f"docs/{doc} does not name {missing}"


#: Every word the issue-49 review found with several meanings, or missing from the glossary: each has an entry
#: of its own (a headword of docs/glossary.md, ``**word**`` or one of ``**a / b**``), so the code's one word
#: per concept is written down where a reader looks it up.
REVIEWED_TERMS = (
    "agent key",
    "arm",
    "audit",
    "block",
    "cache shape",
    "call shape",
    "engine",
    "entry",
    "extension",
    "format",
    "headline",
    "memo",
    "outcome",
    "provider",
    "registry",
    "report",
    "request shape",
    "round",
    "rule",
    "runner",
    "stage",
    "step",
    "strategy",
    "summarizer",
    "tally",
    "unit",
)


def glossary_headwords(text: str) -> set[str]:
    """The words the glossary defines: each entry's bold head, split at " / " and ", "."""
    heads = re.findall(r"(?m)^\*\*([^*]+)\*\* —", text)
    return {w.strip().lower() for h in heads for w in re.split(r" / |, ", h)}


def test_the_glossary_defines_every_reviewed_term():
    words = glossary_headwords(_doc("glossary.md"))
    assert [t for t in REVIEWED_TERMS if t not in words] == []


def test_the_headword_reader_finds_entries_and_only_entries():
    text = "**arm / strategy** — a rule.\n\n**call shape** — x\n**not a head**: y\nin **prose** — z\n"
    assert glossary_headwords(text) == {"arm", "strategy", "call shape"}

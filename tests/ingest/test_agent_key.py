"""One agent key: each importer declares the agent that writes its format, and `agent_of_format` reads it back.

The agent key is the hyphenated name the strategies registry uses (``claude-code``); the format name
(``claude_code``) is a different concept, a session's ``source_format``. See docs/glossary.md, **agent key**.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction_lab import ingest, strategies
from compaction_lab.ingest import IMPORTERS, load_sessions
from compaction_lab.ingest.registry import AGENTS_WITHOUT_STRATEGY, agent_of_format
from tests.helpers import PUBLIC_FIXTURES, forget_package, plugin_package

TOY_FORMAT = "toy_agent_log"
TOY_AGENT = "toy"

TOY_MODULE = f'''"""A throwaway importer that declares its agent."""
import sys

from compaction_lab.ingest.builder import SessionBuilder, file_stem
from compaction_lab.ingest.files import iter_jsonl
from compaction_lab.ingest.registry import IMPORTERS
from tests.helpers import forget_package, plugin_package

FORMAT = "{TOY_FORMAT}"


def sniff(head):
    return bool(head.objects) and all(set(o) == {{"toy_agent"}} for o in head.objects)


def load(path, audit):
    b = SessionBuilder(file_stem(path), FORMAT, path)
    for lineno, obj, _ in iter_jsonl(path, audit):
        b.add("user", str(obj["toy_agent"]), f"l{{lineno}}")
    yield b.build()


IMPORTERS.add(FORMAT, sys.modules[__name__], rank=7, agent="{TOY_AGENT}")
'''


def declared() -> dict[str, str | None]:
    """The ``agent`` each registered importer declared, read from its registry entry (None: declared none)."""
    return {e.name: e.meta.get("agent") for e in IMPORTERS.entries()}


def test_every_declared_agent_is_a_strategy_or_a_listed_agent_without_one():
    known = set(strategies.names()) | AGENTS_WITHOUT_STRATEGY
    with_agent = {fmt: agent for fmt, agent in declared().items() if agent is not None}
    assert with_agent, "no importer declares its agent"
    for fmt, agent in with_agent.items():
        assert agent in known, (fmt, agent)
        assert agent_of_format(fmt) == agent
        # A format may share its agent's spelling (pi, codex); never another format's name (swe_agent).
        assert agent == fmt or agent not in IMPORTERS, f"{fmt}: declares the format name {agent!r} as its agent"
        assert "_" not in agent, f"{fmt}: agent key {agent!r} is not hyphenated"


def test_agents_without_strategy_are_declared_and_have_no_strategy():
    """The documented list names real agents of the importers, none of which is (yet) a strategy."""
    agents = {a for a in declared().values() if a is not None}
    assert AGENTS_WITHOUT_STRATEGY <= agents
    assert not AGENTS_WITHOUT_STRATEGY & set(strategies.names())


def test_a_format_no_agent_writes_and_an_unknown_format_have_no_agent():
    no_agent = [fmt for fmt, agent in declared().items() if agent is None]
    assert no_agent, "every importer declares an agent: chat_jsonl is written by many tools"
    assert all(agent_of_format(fmt) is None for fmt in no_agent)
    assert "chat_jsonl" in no_agent
    assert agent_of_format("no_such_format") is None
    assert agent_of_format("") is None


def test_the_public_fixtures_folders_are_named_by_the_agent_key_of_their_sessions():
    """tests/fixtures/public/<agent key>/: every session imported from a folder has that agent."""
    folders = [d for d in sorted(PUBLIC_FIXTURES.iterdir()) if d.is_dir()]
    assert folders
    for folder in folders:
        sessions = list(load_sessions(folder))
        assert sessions, folder
        assert {agent_of_format(s.source_format) for s in sessions} == {folder.name}, folder


def test_agent_of_format_is_the_ingest_packages_own():
    assert ingest.agent_of_format is agent_of_format


@pytest.fixture
def toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway package holding one importer; the registry sees it for this test only."""
    name = plugin_package(tmp_path, monkeypatch, {"toy_agent_log": TOY_MODULE}, IMPORTERS)
    yield name
    IMPORTERS.remove(TOY_FORMAT)
    forget_package(name)
    assert TOY_FORMAT not in ingest.formats()


def test_a_new_importer_declares_its_agent_in_its_own_module(toy_package: str, tmp_path: Path):
    assert agent_of_format(TOY_FORMAT) is None  # before: not registered
    IMPORTERS.add_package(toy_package)
    assert agent_of_format(TOY_FORMAT) == TOY_AGENT
    f = tmp_path / "log.jsonl"
    f.write_text('{"toy_agent": "hello"}\n', encoding="utf-8")
    (session,) = load_sessions(f)
    assert session.source_format == TOY_FORMAT and agent_of_format(session.source_format) == TOY_AGENT

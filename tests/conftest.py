"""Shared fixtures: hand-made sessions and paths to the real fixture sessions."""

from __future__ import annotations

import builtins
import errno
import os
import stat

import pytest

from compaction_lab.core.paths import REPO_ROOT
from compaction_lab.core.session import Record, Session

#: The local llama.cpp server fixture (`llm_server`) for the tests that need a real model; the
#: ``--strict-skips`` policy (``make test``); pytester, for the tests of that policy.
pytest_plugins = ["llm_server", "skip_policy", "pytester"]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The smoke profile (every notebook, the report), run once per test session; tests only read it."""
    from compaction_lab.run import runner as report

    return report.run_profile("smoke", results=tmp_path_factory.mktemp("smoke-results"), progress=False)


#: Session fixtures that are costly to build (a whole chain run, a model server): under pytest-xdist
#: (`make test` runs ``-n auto --dist loadgroup``) every test using one goes to the same worker, so
#: each is built once per test run rather than once per worker.
SHARED_SESSION_FIXTURES = {"smoke_run": "smoke-run", "llm_server": "llama-server"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, group in SHARED_SESSION_FIXTURES.items():
            if fixture in item.fixturenames:
                item.add_marker(pytest.mark.xdist_group(group))
                break
    # The check of the built llama.cpp library runs before any test starts the server on it.
    items.sort(key=lambda item: item.path.name != "test_llama_build.py")


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def chromium():
    """The system Chromium and the playwright driver for the browser tests, or skip (fail under CI).

    ``make test`` installs chromium first (``make browser``); outside CI a machine without it
    skips these tests, under CI it fails.
    """
    import importlib.util

    from browser import chromium_path

    missing = []
    if chromium_path() is None:
        missing.append("chromium is not installed (/usr/bin/chromium); `make browser` installs it")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package is not installed; `make setup` installs the dev extras")
    if missing:
        reason = "; ".join(missing)
        if _on_ci():
            pytest.fail(f"CI is set but {reason}", pytrace=False)
        pytest.skip(reason)
    return chromium_path()


#: The suite's own fixtures (tests/fixtures/), wherever a test file sits in the tree.
FIXTURES = REPO_ROOT / "tests" / "fixtures"
#: Real public agent sessions of other projects (pi, Claude Code, SWE-agent), copied into the repository;
#: where each comes from is in tests/fixtures/SOURCES.md.
PUBLIC_FIXTURES = FIXTURES / "public"


def question_of(fact, case_id: str):
    """A synthetic chain's planted fact (or decoy) as the exam's `Question` in case `case_id`."""
    from compaction_lab.exam.types import Question

    return Question(
        id=fact.fact_id,
        case_id=case_id,
        pointer=fact.pointer,
        category=fact.category,
        prompt=fact.question,
        answer=fact.value,
        aliases=fact.aliases,
        source_entry_id=fact.entry_id,
        source_order=fact.source_order,
        decoy=fact.is_decoy,
    )


def make_session(items: list[tuple], session_id: str = "s1", source_format: str = "test") -> Session:
    """Build a session from (kind, text[, extra-fields dict]) tuples, one record per item."""
    recs = []
    for i, item in enumerate(items):
        kind, text = item[0], item[1]
        extra = item[2] if len(item) > 2 else {}
        recs.append(
            Record(
                session_id=session_id, entry_id=f"e{i}", block_index=0, source_order=i, kind=kind, text=text, **extra
            )
        )
    return Session(id=session_id, source_format=source_format, records=tuple(recs))


@pytest.fixture
def small_session() -> Session:
    return make_session(
        [
            ("system", "You are a coding agent."),
            ("user", "Add a retry to the payments client."),
            ("assistant", "I will read payments/client.py first."),
            (
                "tool_call",
                'read_file {"path": "payments/client.py"}',
                {"tool": "read_file", "target": "payments/client.py", "call_id": "c1"},
            ),
            (
                "tool_output",
                "import httpx\n\nclass PaymentsClient:\n    pass\n" * 20,
                {"tool": "read_file", "target": "payments/client.py", "call_id": "c1"},
            ),
            ("meta", "model_change gpt-x"),
        ]
    )


class FakeProvider:
    """A summary provider for strategy tests: records every request, answers a fixed text or raises.

    Parameters
    ----------
    text : str
        The summary it answers.
    name, stand_in : provider identity as receipts and labels show it.
    error : Exception, optional
        Raised instead of answering (an unreachable or failing endpoint).
    usage : (input, cached, output) tokens it reports.
    """

    def __init__(
        self,
        text: str = "SUMMARY TEXT",
        name: str = "fake",
        stand_in: bool = False,
        error: Exception | None = None,
        usage: tuple[int, int, int] = (1000, 0, 10),
    ):
        self.text, self.name, self.stand_in, self.error, self.usage = text, name, stand_in, error, usage
        self.requests: list = []

    def summarize(self, request):
        from compaction_lab.summarize import SummaryResult

        self.requests.append(request)
        if self.error is not None:
            raise self.error
        inp, cached, out = self.usage
        return SummaryResult(self.text, input_tokens=inp, cached_tokens=cached, output_tokens=out)


# --------------------------------------------------------------------------- permission bits, even as root


def _owner_denied(path, bit: int) -> bool:
    try:
        return not os.stat(path).st_mode & bit
    except (OSError, TypeError, ValueError):
        return False


@pytest.fixture
def permission_bits(monkeypatch):
    """Make the owner's read permission bite even for root.

    The suite may run as root, for whom ``chmod 000`` denies nothing: this fixture makes the owner's read
    bit bite in the library's one ``open`` (`ingest.base`) and in ``os.scandir``, as the kernel does for
    everyone else. As a normal user it does nothing and the kernel denies for real.
    """
    from compaction_lab.ingest import base

    if os.geteuid() != 0:
        return
    real_open, real_scandir = builtins.open, os.scandir

    def guarded_open(file, mode="r", *args, **kwargs):
        if not isinstance(file, int) and "r" in mode and _owner_denied(file, stat.S_IRUSR):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real_open(file, mode, *args, **kwargs)

    def guarded_scandir(path="."):
        if not isinstance(path, int) and _owner_denied(path, stat.S_IRUSR):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(base, "open", guarded_open, raising=False)
    monkeypatch.setattr(os, "scandir", guarded_scandir)

"""Shared fixtures: hand-made sessions and paths to the real fixture sessions."""

from __future__ import annotations

import builtins
import errno
import os
import stat

import pytest

from compaction_lab.core.session import Session
from tests.helpers import make_session

#: The local llama.cpp server fixture (`llm_server`) for the tests that need a real model; the redaction
#: pair (`redaction_pair`); a real sweep (`smoke_sweep`); `my_sessions` on hostile sessions
#: (`hostile_sweep`); the ``--strict-skips`` policy (``make test``);
#: pytester, for the tests of that policy.
pytest_plugins = [
    "tests.llm_server",
    "tests.redaction_pair",
    "tests.smoke_sweep",
    "tests.hostile_sweep",
    "tests.skip_policy",
    "pytester",
]


@pytest.fixture(autouse=True, scope="session")
def _memo_secret(tmp_path_factory):
    """The memo's secret (`compaction_lab.store.memo.secret_path`) in the test run's folder, not the user's state.

    Session-wide and set first, so the session fixtures' runs (`smoke_run`) and their kernels use it too.
    """
    from compaction_lab.store import memo

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(memo.MEMO_KEY_FILE_ENV, str(tmp_path_factory.getbasetemp() / "memo.key"))
        yield


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    """Each test starts with an empty memo (`compaction_lab.store.memo`) and no shared memo folder.

    A test that patches a strategy's rule would otherwise be served a projection an earlier test
    computed under the unpatched rule (the memo's key holds the library's source, not patches).
    """
    from compaction_lab.store import memo

    monkeypatch.setattr(memo, "_MEMOS", {})
    monkeypatch.delenv(memo.MEMO_ENV, raising=False)
    monkeypatch.delenv(memo.MEMO_STATS_ENV, raising=False)


@pytest.fixture(scope="session")
def warm_kernels():
    """Kernels this worker's chain runs share, as a sweep's runs do (`kernel.Launch.shared`): started once.

    A run moves them into its folder with the environment a kernel of its own would have (`kernel.adopt_code`:
    the worker's as the test left it, the run's variables) and resets them before each notebook, so no run
    pays for a kernel's start and imports but the first.
    """
    from dataclasses import replace

    from compaction_lab.core import paths
    from compaction_lab.run import chain, kernel

    notebooks = [paths.notebook_path(nb) for nb in chain.names()]
    with kernel.launched(kernel.default_kernels(), notebooks) as launch:
        yield replace(launch, shared=True)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, warm_kernels):
    """The smoke profile (every notebook, the report), run once per test session; tests only read it.

    In two kernels whatever the machine (the default on 2 cores): notebooks execute side by side.
    """
    from compaction_lab.run import runner

    results = tmp_path_factory.mktemp("smoke-results")
    return runner.run_profile("smoke", results=results, progress=False, kernels=2, launch=warm_kernels)


#: Session fixtures that are costly to build (a whole chain run, a model server): under pytest-xdist
#: (`make test` runs ``-n TEST_WORKERS --dist loadgroup``) every test using one goes to the same worker, so
#: each is built once per test run rather than once per worker.
SHARED_SESSION_FIXTURES = {
    # One group: a test reads the smoke run through Inspect against the local model (tests/inspect_tasks/),
    # and in two groups on two workers one of the two would be built twice.
    "smoke_run": "smoke-run+llama-server",
    "llm_server": "smoke-run+llama-server",
    # tests/report/test_figure_text.py: a light `default` run whose figures are measured.
    "default_figures": "figure-text-default",
    # tests/redaction_pair.py: a `my_sessions` run redacted and not; the figure-text test measures the
    # redacted run's figures (`my_sessions_figures`), on the same worker.
    "redaction_pair": "redaction-pair",
    "my_sessions_figures": "redaction-pair",
    # tests/smoke_sweep.py: a 2 x 2 sweep, its page checked in Chromium and its ranking read.
    "smoke_sweep": "smoke-sweep",
    # tests/hostile_sweep.py: `my_sessions` on hostile sessions, its pages opened in Chromium and its
    # tables read by the figures drawn with any identifier.
    "hostile_sweep": "hostile-sweep",
}


#: Fixtures whose tests are ``slow`` whatever they do (a chain run, a model server, a browser): `make
#: test-fast` leaves them out; `make test` runs them.
SLOW_FIXTURES = frozenset({*SHARED_SESSION_FIXTURES, "chromium", "warm_kernels"})


def _module_fixture_group(item) -> str | None:
    """The test module that defines a module- or session-scoped fixture `item` uses, if any (its xdist group).

    Such a fixture is built once per worker its tests reach, and again whenever a worker runs another
    module's tests between them (a module fixture is torn down as its module ends): grouped, its tests
    run on one worker, one after another, and it is built once.
    """
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope in ("module", "session") and defs[-1].baseid.endswith(".py"):
            return defs[-1].baseid
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into each test's id
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = next((g for f, g in SHARED_SESSION_FIXTURES.items() if f in item.fixturenames), None)
        if group is None and item.get_closest_marker("xdist_group") is None:
            group = _module_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if SLOW_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    # The check of the built llama.cpp library runs before any test starts the server on it. Then the slow
    # tests (and the groups they lead), each worker taking the next as it frees: the many short tests
    # come last and fill the workers' ends evenly, where a chain run taken last kept one worker going alone.
    items.sort(key=lambda item: (item.path.name != "test_llama_build.py", item.get_closest_marker("slow") is None))


#: The tests whose xdist group did not reach their id on this worker (`pytest_collection_finish`).
_LOST_GROUP = pytest.StashKey[frozenset]()


def pytest_collection_finish(session):
    """On an xdist worker under ``--dist loadgroup``: note each test whose group did not reach its id.

    xdist carries a test's group to the scheduler in its node id (``…@group``); where pytest and xdist
    disagree on node ids (pytest-dev/pytest-xdist#1386) the groups are silently dropped and every worker
    builds each shared session fixture: twice the chain runs, two model servers. Such a test fails
    (`pytest_runtest_setup`) rather than pass at twice the cost.
    """
    if getattr(session.config.option, "loadgroup", False):  # set on xdist workers only
        lost = (i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid)
        session.config.stash[_LOST_GROUP] = frozenset(lost)


def pytest_runtest_setup(item):
    if item.nodeid in item.config.stash.get(_LOST_GROUP, frozenset()):
        pytest.fail(
            "--dist loadgroup lost this test's xdist_group (pytest-dev/pytest-xdist#1386): see pyproject's pytest pin",
            pytrace=False,
        )


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def chromium():
    """The system Chromium and the playwright driver for the browser tests, or skip (fail under CI).

    ``make test`` installs chromium first (``make browser``); outside CI a machine without it
    skips these tests, under CI it fails.
    """
    import importlib.util

    from tests.browser import chromium_path

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
    bit bite in the library's one ``open`` (`ingest.files`) and in ``os.scandir``, as the kernel does for
    everyone else. As a normal user it does nothing and the kernel denies for real.
    """
    from compaction_lab.ingest import files

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

    monkeypatch.setattr(files, "open", guarded_open, raising=False)
    monkeypatch.setattr(os, "scandir", guarded_scandir)

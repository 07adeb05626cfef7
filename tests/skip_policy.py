"""``--strict-skips``: a skip must name a reason nothing in this repository can fix, or the run fails.

``make test`` (so CI) passes the option. A fresh clone then runs every test: a skip for a missing
fixture, package or browser is a failure with the test and reason listed, not a silent gap. The
reasons a machine can legitimately need are listed in :data:`UNAVOIDABLE_SKIPS`, each with why.
"""

from __future__ import annotations

import pytest

#: A skip whose reason contains one of these keys is accepted under ``--strict-skips``; the value says
#: why it cannot be fixed here.
UNAVOIDABLE_SKIPS: dict[str, str] = {
    "needs root, to drop to another account": (
        "a root-owned read-only folder can only be tested by root dropping to another account; CI runs as root"
    ),
    "this machine cannot drop privileges": (
        "the kernel or container refuses setuid to another account, so no folder can be made unreadable to the test"
    ),
}


def pytest_addoption(parser):
    parser.addoption(
        "--strict-skips",
        action="store_true",
        help="fail the run when a test is skipped for a reason not in tests/skip_policy.UNAVOIDABLE_SKIPS",
    )


def pytest_configure(config):
    if config.getoption("--strict-skips"):
        config.pluginmanager.register(SkipPolicy(), "strict-skips")


def skip_reason(report) -> str:
    """The reason a skipped test report gives (``longrepr`` is ``(path, line, "Skipped: why")``)."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


class SkipPolicy:
    """Collects the skips no listed reason covers; fails the session and lists them at the end."""

    def __init__(self) -> None:
        self.unexpected: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report):
        # Under pytest-xdist the controller receives every worker's reports here: this counts them all.
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = skip_reason(report)
            if not any(known in reason for known in UNAVOIDABLE_SKIPS):
                self.unexpected.append((report.nodeid, reason))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.unexpected and not hasattr(session.config, "workerinput"):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if not self.unexpected:
            return
        terminalreporter.section("unexpected skips (--strict-skips)", sep="=", red=True, bold=True)
        for nodeid, reason in self.unexpected:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(
            f"{len(self.unexpected)} test(s) skipped for a reason not in tests/skip_policy.UNAVOIDABLE_SKIPS, so "
            "the run fails: fix the cause, or list the reason there with why it cannot be fixed."
        )

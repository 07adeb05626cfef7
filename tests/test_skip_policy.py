"""``--strict-skips`` (tests/skip_policy.py): an unexplained skip fails the run; a listed one does not."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = """
import pytest

def test_runs():
    assert True

def test_skips_for_a_fixable_reason():
    pytest.skip("fixture not present")
"""

LISTED = """
import pytest

def test_skips_for_a_listed_reason():
    pytest.skip("needs root, to drop to another account (not root here)")

@pytest.mark.xfail(strict=True, reason="a known bug")
def test_known_bug():
    assert False
"""


def _run(pytester, monkeypatch, source, *args):
    # The child pytest loads the plugin the way this suite does (conftest: ``tests.skip_policy``).
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))
    pytester.makepyfile(test_inner=source)
    return pytester.runpytest_subprocess("-p", "tests.skip_policy", "-p", "no:cacheprovider", *args)


@pytest.mark.slow
def test_an_unexplained_skip_fails_the_run_and_is_named(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, TESTS, "--strict-skips")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*unexpected skips*", "SKIPPED test_inner.py::test_skips_for_a_fixable_reason: fixture not present"]
    )


def test_without_the_option_a_skip_is_only_reported(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, TESTS)
    assert result.ret == pytest.ExitCode.OK
    assert "unexpected skips" not in result.stdout.str()


@pytest.mark.slow
def test_a_listed_reason_and_an_xfail_pass(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, LISTED, "--strict-skips")
    result.assert_outcomes(skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.slow
def test_under_xdist_the_workers_skips_are_counted(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, TESTS, "--strict-skips", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SKIPPED test_inner.py::test_skips_for_a_fixable_reason: fixture not present"])

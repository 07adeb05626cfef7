"""The hostile sweep: `my_sessions` on sessions whose every identifier is a payload, as a one-run sweep.

A session fixture (`hostile_sweep`), built once per test run on one xdist worker
(`tests.conftest.SHARED_SESSION_FIXTURES`), in that worker's warm kernels. Read by the hostile-pages tests
(`tests/report/test_hostile_pages.py`: the sessions import, and neither the run's pages nor sweep.html
run a payload) and, its run's tables, by the test that draws every figure with any identifier
(`tests/report/test_figures_unicode.py`: Codex, pi and Claude Code sessions with recorded compactions give
every run figure rows, figure 11 and the recorded compactions included; it replaces the identifiers).
"""

from __future__ import annotations

import pytest

from tests.helpers import LIGHTER


@pytest.fixture(scope="session")
def hostile_sweep(warm_kernels, tmp_path_factory):
    """The sweep's result (`sweep.SweepResult`): `my_sessions` on `hostile_folder`'s sessions, one run."""
    from compaction_lab.run import sweep
    from tests.report.test_hostile_pages import SHORT_TAIL, hostile_folder

    root = tmp_path_factory.mktemp("hostile")
    folder = hostile_folder(root / "sessions")
    return sweep.run_sweep(
        "my_sessions",
        {"stats_seed": [7]},
        results=root / "results",
        overrides={"session_paths": [str(folder)], **LIGHTER, **SHORT_TAIL},
        progress=False,
        launch=warm_kernels,
    )

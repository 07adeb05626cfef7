"""A real two-parameter sweep shared by the tests that read one: `smoke_sweep`, built once per test run.

The smoke profile's notebooks a sweep page needs (sessions, the closed-book exam, the cost model), swept
over window 1,500 and 3,000 by seed 7 and 8 in the worker's warm kernels (`tests.conftest.warm_kernels`),
grouped for xdist (`tests.conftest.SHARED_SESSION_FIXTURES`). At W = 1,500 arms go over the window. Read
by the sweep page's browser check (`tests/report/test_report_browser.py`) and by the ranking test
(`tests/report/test_sweep_ranked.py`).
"""

from __future__ import annotations

import pytest

from tests.helpers import only_notebooks

#: The notebooks each run of the sweep executes.
SWEEP_NOTEBOOKS = ("01_context_composition", "03_closed_book_exam", "04_cost_model")
#: The swept values: window first, then the seed.
SWEPT = {"window": [1500, 3000], "seed": [7, 8]}


@pytest.fixture(scope="session")
def smoke_sweep(warm_kernels, tmp_path_factory):
    """The sweep's result (`sweep.SweepResult`): its folder, its comparison page, each run."""
    from compaction_lab.run import runner, sweep

    prof = only_notebooks(runner.load_profile("smoke"), SWEEP_NOTEBOOKS)
    return sweep.run_sweep(
        prof,
        SWEPT,
        results=tmp_path_factory.mktemp("sweep"),
        overrides={"n_boot": 50},  # the intervals are not what is read
        progress=False,
        launch=warm_kernels,
    )

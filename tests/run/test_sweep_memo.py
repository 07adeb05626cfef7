"""A sweep's runs share what does not depend on the swept value (`store.memo`), and their tables do not change."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from compaction_lab.run import runner, sweep


def _profile(tmp_path: Path) -> Path:
    smoke = runner.load_profile("smoke")
    doc = {
        "description": "memo sweep test",
        "notebooks": ["01_context_composition", "02_projection_anatomy", "03_closed_book_exam"],
        "parameters": {**{k: v for k, v in smoke.parameters.items() if k not in ("turns", "cost_cases")}},
    }
    path = tmp_path / "memo.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _memo(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["memo"]


def _same_outputs(a: Path, b: Path) -> None:
    tables = sorted(p.name for p in a.glob("*.parquet"))
    assert tables and tables == sorted(p.name for p in b.glob("*.parquet"))
    for name in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(a / name), pd.read_parquet(b / name))
    figures = sorted(p.name for p in (a / "figures").glob("*.svg"))
    assert figures and figures == sorted(p.name for p in (b / "figures").glob("*.svg"))
    for name in figures:
        assert (a / "figures" / name).read_bytes() == (b / "figures" / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["sync", "local"])
def test_runs_after_the_first_reuse_its_chains_and_projections_and_match_runs_made_alone(tmp_path, scheduler):
    path = _profile(tmp_path)
    # n_boot changes only the intervals: the chains and every projection are the same in both runs.
    res = sweep.run_sweep(
        str(path),
        {"n_boot": [50, 60]},
        results=tmp_path / "sweep",
        progress=False,
        scheduler=scheduler,
        notebook_html=False,
    )
    (first, *_), (second, *_) = [(r.run_dir,) for _, r, _ in res.runs if r is not None]
    one, two = _memo(first), _memo(second)
    if scheduler == "sync":  # on Dask both runs may start together: only their sum is fixed
        # Run one's two kernels (02 beside 03) share through the same folder: what one computed, the other
        # may read from it; run two computes nothing.
        assert one["chains"] == {"hits": 0, "folder_hits": 0, "misses": 1}
        assert one["projection"]["misses"] > 0
        assert two["chains"]["misses"] == 0 and two["chains"]["folder_hits"] >= 1
        assert two["projection"]["misses"] == 0
        assert two["projection"]["folder_hits"] >= one["projection"]["misses"] - one["projection"]["folder_hits"]
    computed = {kind: one[kind]["misses"] + two[kind]["misses"] for kind in ("chains", "projection")}
    kept = {kind: len(list((res.folder / sweep.MEMO_DIR / kind).rglob("*"))) for kind in ("chains", "projection")}
    # Every entry in the shared folder was computed by one run: each only once, unless both runs raced for it.
    assert computed["chains"] >= 1 and kept["chains"] == 2  # one entry (+ its two-character folder)
    # Alone (no shared folder, one kernel: nothing executes beside anything), the second run's tables and
    # figures are the same.
    alone = runner.run_profile(
        str(path),
        results=tmp_path / "alone",
        run_name="alone",
        progress=False,
        overrides={"n_boot": 60},
        notebook_html=False,
        kernels=1,
    )
    assert "folder_hits" in _memo(alone.run_dir)["projection"]
    assert _memo(alone.run_dir)["projection"]["folder_hits"] == 0
    _same_outputs(second, alone.run_dir)

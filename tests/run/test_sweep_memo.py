"""A sweep's runs share what does not depend on the swept value (`store.memo`), and their tables do not change."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from compaction_lab.run import kernel, runner, sweep


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


@pytest.fixture(scope="module")
def alone(tmp_path_factory, warm_kernels) -> Path:
    """The memo sweep's second run made alone (no shared folder, one kernel: nothing executes beside anything)."""
    folder = tmp_path_factory.mktemp("memo-alone")
    res = runner.run_profile(
        str(_profile(folder)),
        results=folder / "alone",
        run_name="alone",
        progress=False,
        overrides={"n_boot": 60},
        notebook_html=False,
        kernels=1,
        launch=warm_kernels,
    )
    return res.run_dir


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["sync", "local"])
def test_runs_after_the_first_reuse_its_chains_and_projections_and_match_runs_made_alone(
    tmp_path, scheduler, warm_kernels, alone
):
    path = _profile(tmp_path)
    # Here (sync) the runs take one warm kernel, one lane: run two starts once run one has ended, so what it
    # reads from the memo is fixed (two lanes start both at once). A sweep on Dask keeps its own kernels.
    lane = kernel.Launch(warm_kernels.kernels[:1], warm_kernels.warming[:1], shared=True)
    # n_boot changes only the intervals: the chains and every projection are the same in both runs.
    res = sweep.run_sweep(
        str(path),
        {"n_boot": [50, 60]},
        results=tmp_path / "sweep",
        progress=False,
        scheduler=scheduler,
        notebook_html=False,
        launch=lane if scheduler == "sync" else None,
    )
    (first, *_), (second, *_) = [(r.run_dir,) for _, r, _ in res.runs if r is not None]
    one, two = _memo(first), _memo(second)
    if scheduler == "sync":  # on Dask both runs may start together: only their sum is fixed
        # Run one computes the chains once; run two computes nothing.
        assert one["chains"] == {"hits": 0, "folder_hits": 0, "misses": 1, "untrusted": 0}
        assert one["projection"]["misses"] > 0
        assert two["chains"]["misses"] == 0 and two["chains"]["folder_hits"] >= 1
        assert two["projection"]["misses"] == 0
        assert two["projection"]["folder_hits"] >= one["projection"]["misses"] - one["projection"]["folder_hits"]
    computed = {kind: one[kind]["misses"] + two[kind]["misses"] for kind in ("chains", "projection")}
    kept = {kind: len(list((res.folder / sweep.MEMO_DIR / kind).rglob("*"))) for kind in ("chains", "projection")}
    # Every entry any run read was signed for this sweep (by its kernels, or by the Dask workers).
    assert all(one[kind]["untrusted"] == two[kind]["untrusted"] == 0 for kind in ("chains", "projection"))
    # Every entry in the shared folder was computed by one run: each only once, unless both runs raced for it.
    assert computed["chains"] >= 1 and kept["chains"] == 2  # one entry (+ its two-character folder)
    # Alone, the second run's tables and figures are the same.
    assert "folder_hits" in _memo(alone)["projection"]
    assert _memo(alone)["projection"]["folder_hits"] == 0
    _same_outputs(second, alone)


# --------------------------------------------------------------------------- issue 44: a planted memo never runs


@pytest.mark.slow
def test_a_resumed_sweep_never_runs_a_planted_memo_entry_and_says_it_was_not_trusted(tmp_path, capsys, warm_kernels):
    """Acceptance 3 of issue 44. Was: replace the memo's entries with a pickle that runs ``id > F``, mark a
    run failed, ``--resume``: F held ``uid=0(root)`` -- the resume unpickled whatever stood in ``memo/``."""
    import pickle

    from compaction_lab import cli
    from compaction_lab.run import lifecycle

    smoke = runner.load_profile("smoke")
    doc = {
        "description": "planted memo test",
        "notebooks": ["01_context_composition", "03_closed_book_exam"],
        "parameters": {
            **{k: v for k, v in smoke.parameters.items() if k not in ("turns", "cost_cases")},
            # Three arms: the memo's entries are what is planted, not the arms.
            "strategy_names": ["full", "codex", "futureos-deterministic"],
        },
    }
    path = tmp_path / "planted.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = sweep.run_sweep(
        str(path),
        {"seed": [1, 2]},
        results=tmp_path / "results",
        progress=False,
        notebook_html=False,
        launch=warm_kernels,
    )
    first, second = (r.run_dir for _, r, _ in res.runs if r is not None)
    entries = sorted(p for p in (res.folder / sweep.MEMO_DIR).rglob("*") if p.is_file())
    assert len(entries) >= 2  # the chains of each seed, the closed book's projections
    marker = tmp_path / "F"

    class Planted:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('ran')",))

    for entry in entries:
        entry.write_bytes(pickle.dumps(Planted()))
    info = lifecycle.read_run_json(second)
    lifecycle.write_json_atomic(second / "run.json", {**info, "status": "failed"})
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(res.folder), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert not marker.exists(), "the planted pickle ran"
    said = [line for line in err.splitlines() if "not trusted" in line]
    assert said == [
        f"warning: memo: {len(entries)} entries not trusted (not signed by this machine's key for this sweep); "
        "removed, computed again"
    ], err
    plan = json.loads((res.folder / sweep.SWEEP_PLAN).read_text())
    assert plan["resumed"][-1]["memo_untrusted"] == len(entries)
    assert lifecycle.read_run_json(second)["status"] == "ok"
    assert _memo(second)["chains"]["misses"] == 1  # computed again, not read from the planted entry
    # What the resumed run computed is this machine's own: a later resume reads it, and says nothing.
    info = lifecycle.read_run_json(second)
    lifecycle.write_json_atomic(second / "run.json", {**info, "status": "failed"})
    assert cli.main(["run", "--resume", str(res.folder), "--quiet"]) == 0
    assert "not trusted" not in capsys.readouterr().err
    assert _memo(second)["chains"] == {"hits": 1, "folder_hits": 1, "misses": 0, "untrusted": 0}
    assert json.loads((res.folder / sweep.SWEEP_PLAN).read_text())["resumed"][-1]["memo_untrusted"] == 0
    assert lifecycle.read_run_json(first)["status"] == "ok" and not marker.exists()

"""A sweep in this process runs its runs in shared warm kernels, in lanes (`compaction_lab.run.sweep`).

Each run still runs as if its kernel were its own: its folder, its environment, its memo counts.
"""

from __future__ import annotations

import json
import os

import pytest

from compaction_lab.run import kernel, sweep
from compaction_lab.store import memo
from tests.run.test_lifecycle import _chain

#: A cell that writes what its kernel is and where it runs into the run folder.
PROBE = (
    "import json, os, pathlib\n"
    "pathlib.Path('probe.json').write_text(json.dumps({'pid': os.getpid(), 'cwd': os.getcwd(), "
    "'stats': os.environ.get('COMPACTION_LAB_MEMO_STATS'), 'memo': os.environ.get('COMPACTION_LAB_MEMO'), "
    "'tokenizer': os.environ.get('COMPACTION_LAB_TOKENIZER'), 'seed': seed}))"
)


def _pid(k: kernel.ChainKernel) -> int:
    return k.km.provisioner.pid


@pytest.mark.slow
def test_every_run_of_a_sweep_runs_in_its_warm_kernels_in_its_own_folder_and_environment(tmp_path, monkeypatch):
    prof = _chain(tmp_path, monkeypatch, PROBE)
    with kernel.launched(2, [tmp_path / "notebooks" / "01_probe.ipynb"]) as launch:
        assert all(f.result(timeout=120) for f in launch.warming)
        pids = {_pid(k) for k in launch.kernels}
        res = sweep.run_sweep(
            prof,
            {"seed": [1, 2, 3], "tokenizer": ["tiktoken", "bpe-openai"]},
            results=tmp_path / "r",
            progress=False,
            notebook_html=False,
            launch=launch,
        )
        # The launched processes ran every notebook, and still run: no run started or ended a kernel.
        assert {_pid(k) for k in launch.kernels} == pids
        assert sum(k.notebooks for k in launch.kernels) == 6
    assert [st for _, _, st in res.runs] == ["ok"] * 6
    for combo, run, _ in res.runs:
        seen = json.loads((run.run_dir / "probe.json").read_text())
        assert seen["pid"] in pids
        assert seen["cwd"] == str(run.run_dir)
        assert seen["stats"] == str(run.run_dir / ".memo-stats")
        assert seen["memo"] == str((res.folder / sweep.MEMO_DIR).resolve())
        assert (seen["seed"], seen["tokenizer"]) == (combo["seed"], combo["tokenizer"])


def test_with_more_runs_than_kernels_each_kernel_is_a_lane_and_one_run_takes_them_all():
    ks = tuple(kernel.ChainKernel() for _ in range(2))
    assert sweep._lanes(ks, 5) == [(ks[0],), (ks[1],)]
    assert sweep._lanes(ks, 1) == [ks]
    assert sweep._lanes((), 3) == [()]


def test_the_code_that_moves_a_kernel_into_a_run_sets_removes_and_forgets(tmp_path, monkeypatch):
    """What a kernel an earlier run used keeps of it: nothing (folder, variables, memo layer and counts, model
    clients made with its ledger)."""
    from compaction_lab.endpoints import shared

    closed = []

    class Client:
        def close(self):
            closed.append(self)

    monkeypatch.setitem(shared._CLIENTS, "an earlier run's model", Client())
    monkeypatch.setenv("CL_TEST_GONE", "earlier run")
    monkeypatch.setenv("CL_TEST_KEPT", "old")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    memo.remembered("projection", "k", lambda: 1)
    assert memo.stats()["projection"]["misses"] == 1
    code = kernel.adopt_code(tmp_path / "run", {"CL_TEST_KEPT": "new", "CL_TEST_GONE": None})
    exec(code, {})  # what the kernel runs, silently
    assert os.getcwd() == str(tmp_path / "run")
    assert os.environ["CL_TEST_KEPT"] == "new" and "CL_TEST_GONE" not in os.environ
    assert memo.stats() == {}
    found, _ = memo.memo("projection").get("k")
    assert not found
    assert not shared._CLIENTS and len(closed) == 1


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stopped_sweep_marks_every_run_in_flight_interrupted_and_starts_no_other(tmp_path, monkeypatch, sig):
    import pandas as pd

    from compaction_lab.run import lifecycle
    from tests.run.test_lifecycle import SIGNAL_RUNNER

    prof = _chain(tmp_path, monkeypatch, SIGNAL_RUNNER.format(sig=sig))
    with pytest.raises(lifecycle.RunInterrupted) as info:
        sweep.run_sweep(prof, {"seed": [1, 2, 3, 4]}, results=tmp_path / "r", progress=False, notebook_html=False)
    exc = info.value
    assert exc.signal_name == sig and exc.sweep_dir is not None
    started = sorted(p for p in (tmp_path / "r").iterdir() if (p / "run.json").exists())
    assert 1 <= len(started) <= kernel.default_kernels() < 4  # the lanes' runs in flight; none after them
    assert all(lifecycle.read_run_json(p)["status"] == "interrupted" for p in started)
    assert exc.run_dir in started
    assert sorted(exc.runs) == (started if len(started) > 1 else [])  # one run cut short is told as a run alone
    table = pd.read_parquet(exc.sweep_dir / "sweep.parquet")
    assert sorted(table["run"]) == [p.name for p in started]
    assert set(table["status"]) == {"interrupted"}

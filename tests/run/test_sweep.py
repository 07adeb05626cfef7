"""Sweeps as batches you can keep: ranges, a profile's ``sweeps:`` block, and ``run --resume`` after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.core.errors import ProfileError
from compaction_lab.run import chain, kernel, lifecycle, runner, sweep
from compaction_lab.run.params import layout_problems


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("compaction-lab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compaction_lab.cli"]


def _mini_profile(tmp_path: Path, sweeps: dict | None = None) -> Path:
    """The smoke profile's parameters on notebooks 01 and 03: a run of seconds with a headline.

    Three arms (the full history, Codex's summary, FutureOS's deterministic projection), not every one:
    what these tests check is how a sweep's runs start, stop and resume, not the arms.
    """
    smoke = runner.load_profile("smoke")
    doc: dict = {
        "description": "sweep test",
        "notebooks": ["01_context_composition", "03_closed_book_exam"],
        "parameters": {
            **{k: v for k, v in smoke.parameters.items() if k not in ("turns", "cost_cases")},
            "n_boot": 50,
            "strategy_names": ["full", "codex", "futureos-deterministic"],
        },
    }
    if sweeps is not None:
        doc["sweeps"] = sweeps
    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_range_values_from_the_command_line():
    assert sweep.parse_sweep("seed=range(1,11)") == ("seed", list(range(1, 11)))
    assert sweep.parse_sweep("window=range(8000, 32001, 8000)") == ("window", [8000, 16000, 24000, 32000])
    assert sweep.parse_sweep("seed=range(3)") == ("seed", [0, 1, 2])
    assert sweep.parse_sweep("window=16000,24000") == ("window", [16000, 24000])
    for bad, said in [("seed=range(5,5)", "no values"), ("seed=range(1,9,0)", "step 0"), ("seed=range(x)", "range(")]:
        with pytest.raises(ProfileError, match=r"sweep seed: .*" + said.replace("(", r"\(")):
            sweep.parse_sweep(bad)


def test_a_profiles_sweeps_block_is_read_and_checked(tmp_path):
    prof = runner.load_profile(_mini_profile(tmp_path, {"seed": "range(1,4)", "window": [2500, 3000]}))
    assert prof.sweeps == {"seed": [1, 2, 3], "window": [2500, 3000]}
    problems = layout_problems({"sweeps": {"seed": "range(1,1)", "window": 3000, "run_dir": [1]}}, [])
    assert any("sweeps.seed" in p and "no values" in p for p in problems)
    assert any("sweeps.window" in p for p in problems) and any("run_dir" in p for p in problems)
    assert layout_problems({"sweeps": ["seed"]}, []) == [
        "sweeps: expected a mapping of parameter: values, got a list ['seed']"
    ]


def test_run_sweeps_what_the_profile_says_with_command_line_sweeps_on_top(tmp_path, monkeypatch, capsys):
    path = _mini_profile(tmp_path, {"seed": "range(1,3)", "window": [2500]})
    seen: list[dict] = []

    def fake_sweep(prof, sweeps, **kw):
        seen.append(dict(sweeps))
        raise ProfileError("stop here")

    monkeypatch.setattr(sweep, "run_sweep", fake_sweep)
    monkeypatch.setattr(runner, "run_profile", lambda *a, **k: pytest.fail("the profile's sweep was not run"))
    assert cli.main(["run", "--profile", str(path)]) == 2
    assert cli.main(["run", "--profile", str(path), "--sweep", "window=2000,3000"]) == 2
    assert seen == [{"seed": [1, 2], "window": [2500]}, {"seed": [1, 2], "window": [2000, 3000]}]
    ran: list = []
    monkeypatch.setattr(runner, "run_profile", lambda *a, **k: ran.append(k) or pytest.fail("ran once"))
    with pytest.raises(pytest.fail.Exception):
        cli.main(["run", "--profile", str(path), "--no-sweep"])
    assert len(ran) == 1 and len(seen) == 2


def test_resume_refuses_what_it_cannot_honour(tmp_path, capsys):
    assert cli.main(["run", "--resume", str(tmp_path)]) == 2
    assert "not a sweep folder: no sweep.json" in capsys.readouterr().err
    (tmp_path / "sweep.json").write_text("{not json")
    assert cli.main(["run", "--resume", str(tmp_path)]) == 2
    assert "not a readable sweep plan" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(tmp_path), "--set", "seed=3", "--profile", "smoke"]) == 2
    assert "--profile, --set cannot change it" in capsys.readouterr().err


def _statuses(results: Path, names: list[str]) -> dict[str, str | None]:
    # A run's folder exists a moment before its run.json: poll the file, not the folder.
    return {
        n: lifecycle.read_run_json(results / n).get("status") if (results / n / "run.json").exists() else None
        for n in names
    }


@pytest.mark.slow
def test_a_sweep_killed_after_its_first_run_resumes_only_the_rest(tmp_path):
    """Acceptance 2 of issue 18: SIGKILL the sweep once run 1 is complete and run 2 has started; ``--resume``
    runs runs 2 and 3 only (run 1's folder untouched, run 2's dead attempt set aside, the command line's
    ``--set`` kept from the plan) and the comparison covers all three."""
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    cmd = _script() + ["run", "--profile", str(path), "--results", str(results), "--quiet", "--sweep", "seed=7,8,9"]
    cmd += ["--set", "n_boot=40"]  # an override the plan must carry into the resumed runs
    cmd += ["--no-html"]  # the runs' tables, reports and the comparison page are read, no notebook's page
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        plan = names = None
        while time.monotonic() < deadline and proc.poll() is None:
            plans = list(results.glob("sweep-*/sweep.json"))
            if plans and names is None:
                plan = plans[0]
                names = [r["run"] for r in json.loads(plan.read_text())["runs"]]
            if names and _statuses(results, names)[names[0]] == "ok" and _statuses(results, names)[names[1]]:
                break
            time.sleep(0.2)
        assert names is not None and proc.poll() is None, "the sweep ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert plan is not None
    folder = plan.parent
    first = (results / names[0] / "run.json").read_text()
    killed = _statuses(results, names)
    assert killed[names[0]] == "ok" and killed[names[1]] == lifecycle.RUNNING and killed[names[2]] is None

    r = subprocess.run(_script() + ["run", "--resume", str(folder), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ran 2 of 3 planned runs" in r.stderr
    assert Path(r.stdout.strip().splitlines()[-1]) == folder
    assert (results / names[0] / "run.json").read_text() == first, "a completed run was run again"
    assert _statuses(results, names) == dict.fromkeys(names, "ok")
    assert [p.name for p in (folder / "attempts").iterdir()] == [f"{names[1]}.attempt-1"]
    table = pd.read_parquet(folder / "sweep.parquet")
    assert sorted(set(table["run"])) == sorted(names) and set(table["status"]) == {"ok"}
    assert set(table["seed"]) == {"7", "8", "9"}
    assert json.loads(plan.read_text())["resumed"][0]["runs"] == names[1:]
    for name in names:
        info = json.loads((results / name / "run.json").read_text())
        assert info["parameters"]["n_boot"] == 40 and info["overrides"]["seed"] == info["parameters"]["seed"]
    # The same strategies in every run, each with its own recall; the page links every run's report.
    assert table.groupby("run")["strategy"].apply(frozenset).nunique() == 1
    html = (folder / "sweep.html").read_text(encoding="utf-8")
    assert all(f"../{name}/report.html" in html for name in names)

    # Resumed again, there is nothing left to run: the comparison is only rebuilt, and the kernels launched
    # for the runs are shut down at once, not left to warm.
    with kernel.launched(2, [paths.notebook_path(nb) for nb in chain.names()]) as launch:
        again = sweep.resume_sweep(folder, progress=False, launch=launch)
        assert all(k.closed and k.km is None for k in launch.kernels)
    assert again.executed == () and [st for _, _, st in again.runs] == [sweep.COMPLETED_EARLIER] * 3
    assert (results / names[0] / "run.json").read_text() == first


def test_every_shipped_sweep_profile_passes_the_checks_in_every_combination():
    import itertools

    swept = [runner.load_profile(n) for n in runner.list_profiles()]
    swept = [p for p in swept if p.sweeps]
    assert swept, "no shipped profile has a sweeps: block"
    for prof in swept:
        keys = list(prof.sweeps)
        combos = [dict(zip(keys, v, strict=True)) for v in itertools.product(*prof.sweeps.values())]
        sweep._check_sweep(prof, combos, None, None, None, False)


# --------------------------------------------------------------------------- issue 25: plans, resumes and limits


def _planned_sweep(tmp_path: Path, seeds: tuple[int, ...] = (7, 8)) -> tuple[Path, list[str]]:
    """A sweep folder holding its plan (``sweep.json``) and no run yet, as a sweep killed before its first run."""
    prof = runner.load_profile(_mini_profile(tmp_path))
    results = tmp_path / "results"
    folder = results / "sweep-mini-20260101-000000"
    folder.mkdir(parents=True)
    combos = tuple({"seed": s} for s in seeds)
    names = tuple(f"mini-seed-{s}-20260101-000000" for s in seeds)
    plan = sweep.SweepPlan(profile=prof, sweeps={"seed": list(seeds)}, combos=combos, names=names)
    lifecycle.write_json_atomic(folder / sweep.SWEEP_PLAN, plan.to_json("auto"))
    return folder, list(names)


def _failing_runs(monkeypatch, calls: list[str], hold=None):
    """Stand in for `run_profile`: make the run folder, then fail its one notebook (no notebook executes).

    `hold`, a pair of events, parks the first call between making the folder and writing its run.json.
    """

    def fake(prof, *, results, run_name, **kw):
        calls.append(run_name)
        run_dir = Path(results) / run_name
        run_dir.mkdir()
        if hold is not None and len(calls) == 1:
            hold[0].set()
            assert hold[1].wait(60), "the test never let the first run go on"
        lifecycle.write_json_atomic(run_dir / "run.json", {"status": "failed"})
        raise runner.NotebookFailed("01_context_composition", 0, "RuntimeError", "stand-in", "", run_dir)

    monkeypatch.setattr(sweep, "run_profile", fake)


def _edit_plan(folder: Path, **changes) -> None:
    doc = json.loads((folder / "sweep.json").read_text())
    doc.update(changes)
    (folder / "sweep.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "bad",
    ["../elsewhere/victim", "{abs}", "..", ".", "", "a/b", "a\\b", "sweep-mini-20260101-000000", "link"],
)
def test_resume_refuses_planned_run_names_that_leave_the_results_folder(tmp_path, monkeypatch, capsys, bad):
    """Was: a planned name ``../elsewhere/victim`` hand-edited into sweep.json made ``--resume`` move a folder
    outside the sweep into ``attempts/`` and write a run there."""
    folder, names = _planned_sweep(tmp_path)
    victim = tmp_path / "elsewhere" / "victim"
    victim.mkdir(parents=True)
    (victim / "run.json").write_text('{"status": "failed"}')
    (folder.parent / "link").symlink_to(victim)  # a plain name whose folder is elsewhere
    bad = bad.replace("{abs}", str(victim))
    doc = json.loads((folder / "sweep.json").read_text())
    doc["runs"][1]["run"] = bad
    (folder / "sweep.json").write_text(json.dumps(doc))
    calls: list[str] = []
    _failing_runs(monkeypatch, calls)
    assert cli.main(["run", "--resume", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "sweep.json" in err and repr(bad) in err, err
    assert calls == [] and not (folder / "attempts").exists()
    assert (victim / "run.json").read_text() == '{"status": "failed"}' and folder.is_dir()
    assert not json.loads((folder / "sweep.json").read_text()).get("resumed"), "a refused resume was recorded"


def test_resume_refuses_a_plan_naming_one_run_folder_twice(tmp_path, monkeypatch, capsys):
    folder, names = _planned_sweep(tmp_path)
    doc = json.loads((folder / "sweep.json").read_text())
    doc["runs"][1]["run"] = names[0]
    (folder / "sweep.json").write_text(json.dumps(doc))
    _failing_runs(monkeypatch, calls := [])
    assert cli.main(["run", "--resume", str(folder), "--quiet"]) == 2
    assert f"{names[0]!r}" in capsys.readouterr().err and calls == []


@pytest.mark.parametrize(
    "content", [None, "{not json", "[1, 2]", '"ok"', '{"pid": 1}', '{"status": ["ok"]}', b"\xff\xfe"]
)
def test_resume_reruns_a_planned_folder_whose_run_json_is_missing_or_corrupt(tmp_path, monkeypatch, content):
    """Was: a traceback (exit 1) on a planned run folder without a readable run.json."""
    folder, names = _planned_sweep(tmp_path)
    left = folder.parent / names[0]
    left.mkdir()
    (left / "partial.ipynb").write_text("kept")
    if isinstance(content, bytes):
        (left / "run.json").write_bytes(content)
    elif content is not None:
        (left / "run.json").write_text(content)
    calls: list[str] = []
    _failing_runs(monkeypatch, calls)
    sw = sweep.resume_sweep(folder, progress=False)
    assert calls == names and sw.executed == tuple(names)
    assert (folder / "attempts" / f"{names[0]}.attempt-1" / "partial.ipynb").read_text() == "kept"
    assert _statuses(folder.parent, names) == dict.fromkeys(names, "failed")


def test_resume_treats_a_file_where_a_run_folder_is_planned_as_an_earlier_attempt(tmp_path, monkeypatch):
    folder, names = _planned_sweep(tmp_path)
    (folder.parent / names[1]).write_text("not a folder")
    _failing_runs(monkeypatch, [])
    assert sweep.resume_sweep(folder, progress=False).executed == tuple(names)
    assert (folder / "attempts" / f"{names[1]}.attempt-1").read_text() == "not a folder"


def test_two_resumes_of_one_sweep_never_race(tmp_path, monkeypatch, capsys):
    """Was: the second resume met the run folder the first had just made (no run.json yet) and crashed."""
    import threading

    from compaction_lab.run import kernel

    folder, names = _planned_sweep(tmp_path)
    calls: list[str] = []
    hold = (threading.Event(), threading.Event())
    _failing_runs(monkeypatch, calls, hold)
    # One kernel, so one lane: the first resume runs one run at a time, and any other call is the second's.
    monkeypatch.setattr(kernel, "default_kernels", lambda: 1)
    first: dict = {}

    def resume() -> None:
        try:
            first["result"] = sweep.resume_sweep(folder, progress=False)
        except BaseException as exc:  # reported by the assertion below
            first["error"] = exc

    worker = threading.Thread(target=resume)
    worker.start()
    try:
        assert hold[0].wait(60), "the first resume never started its first run"
        assert (folder.parent / names[0]).is_dir() and not (folder.parent / names[0] / "run.json").exists()
        assert cli.main(["run", "--resume", str(folder), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "another resume" in err and str(folder) in err, err
        assert calls == [names[0]], "the second resume ran a run"
    finally:
        hold[1].set()
        worker.join(60)
    assert "error" not in first, first.get("error")
    assert first["result"].executed == tuple(names) and not (folder / "attempts").exists()
    # The lock goes with the process that held it: a later resume runs.
    assert sweep.resume_sweep(folder, progress=False).executed == tuple(names)


def test_resume_of_a_file_says_it_is_not_a_sweep_folder(tmp_path, monkeypatch, capsys):
    """Was: ``run --resume FILE`` showed a raw NotADirectoryError."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    assert cli.main(["run", "--resume", str(afile)]) == 2
    err = capsys.readouterr().err
    assert "NotADirectoryError" not in err and f"{afile} is a file, not a sweep folder" in err, err
    # The plan file itself names its folder.
    folder, names = _planned_sweep(tmp_path)
    _failing_runs(monkeypatch, [])
    assert sweep.resume_sweep(folder / "sweep.json", progress=False).folder == folder.resolve()


def test_an_unreachable_scheduler_leaves_no_sweep_folder_behind(tmp_path, monkeypatch, capsys):
    """Was: ``run --sweep ... --scheduler tcp://127.0.0.1:1`` left a sweep folder holding sweep.json."""
    from compaction_lab.engine.scheduler import EngineError

    def unreachable(where, **kw):
        raise EngineError(f"cannot reach the Dask scheduler at {where}: refused")

    monkeypatch.setattr(sweep, "open_engine", unreachable)
    _failing_runs(monkeypatch, calls := [])
    results = tmp_path / "fresh"
    path = _mini_profile(tmp_path)
    cmd = ["run", "--profile", str(path), "--results", str(results), "--sweep", "seed=7,8"]
    assert cli.main([*cmd, "--scheduler", "tcp://127.0.0.1:1", "--quiet"]) == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1" in capsys.readouterr().err
    assert not list(results.glob("sweep-*")) and calls == []
    # Resumed on an unreachable scheduler, a sweep is left as it was: nothing set aside, no resume recorded.
    folder, names = _planned_sweep(tmp_path)
    (folder.parent / names[0]).mkdir()
    before = (folder / "sweep.json").read_text()
    assert cli.main(["run", "--resume", str(folder), "--scheduler", "tcp://127.0.0.1:1", "--quiet"]) == 2
    assert (folder / "sweep.json").read_text() == before and (folder.parent / names[0]).is_dir()
    assert not (folder / "attempts").exists() and calls == []


def _peak_mib(fn) -> tuple[float, float]:
    """Seconds and peak traced MiB of calling `fn`."""
    import tracemalloc

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return seconds, peak


def test_a_sweep_too_large_is_refused_at_once_before_its_values_exist(tmp_path, monkeypatch, capsys):
    """Was: ``--sweep 'seed=range(0,100000000)'`` printed nothing and grew past 11 GB."""
    monkeypatch.setattr(runner, "run_profile", lambda *a, **k: pytest.fail("a run started"))
    _failing_runs(monkeypatch, calls := [])
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    base = ["run", "--profile", str(path), "--results", str(results), "--quiet"]
    codes: list[int] = []
    seconds, peak = _peak_mib(lambda: codes.append(cli.main([*base, "--sweep", "seed=range(0,100000000)"])))
    err = capsys.readouterr().err
    assert codes == [2] and "100,000,000" in err and "max_sweep_runs" in err, err
    assert seconds < 5 and peak < 50, (seconds, peak)
    # The plan is counted as a product: two keys of 2,000 values are 4,000,000 runs, never listed one by one.
    two = ["--sweep", "seed=range(0,2000)", "--sweep", "window=range(3000,5000)"]
    seconds, peak = _peak_mib(lambda: codes.append(cli.main([*base, *two])))
    err = capsys.readouterr().err
    assert codes[-1] == 2 and "4,000,000 runs" in err and "max_sweep_runs = 1,000" in err, err
    assert seconds < 5 and peak < 50, (seconds, peak)
    # The limit is a parameter: lowered with --set, and in a profile's parameters.
    assert cli.main([*base, "--sweep", "seed=7,8,9", "--set", "max_sweep_runs=2"]) == 2
    err = capsys.readouterr().err
    assert "3 runs" in err and "max_sweep_runs = 2" in err, err
    assert cli.main([*base, "--sweep", "seed=7,8", "--set", "max_sweep_runs=0"]) == 2
    assert "max_sweep_runs = 0" in capsys.readouterr().err
    assert not results.exists() or not list(results.iterdir())
    assert calls == []
    # Raised, the same plan runs.
    assert cli.main([*base, "--sweep", "seed=7,8,9", "--set", "max_sweep_runs=3"]) == 1
    assert len(calls) == 3
    # The limit is the sweep's: its runs are not given it.
    plan = json.loads(next(results.glob("sweep-*/sweep.json")).read_text())
    assert len(plan["runs"]) == 3 and "max_sweep_runs" not in plan["overrides"]


def test_a_profile_sweeping_too_many_values_is_refused_as_it_loads(tmp_path):
    path = _mini_profile(tmp_path, {"seed": "range(0,100000000)"})
    caught: list[ProfileError] = []

    def load() -> None:
        try:
            runner.load_profile(path)
        except ProfileError as exc:
            caught.append(exc)

    seconds, peak = _peak_mib(load)
    assert caught and "100,000,000" in str(caught[0]) and "sweeps.seed" in str(caught[0])
    assert seconds < 5 and peak < 50, (seconds, peak)


def test_the_shipped_profiles_sweep_within_the_default_limit():
    from compaction_lab.run.parameter_rules import DEFAULT_MAX_SWEEP_RUNS

    for prof in (runner.load_profile(n) for n in runner.list_profiles()):
        n = 1
        for values in prof.sweeps.values():
            n *= len(values)
        assert n <= DEFAULT_MAX_SWEEP_RUNS, prof.name


def test_duplicate_sweep_values_are_an_error_naming_them(tmp_path, monkeypatch, capsys):
    """Was: ``seed=7,7`` or ``seed=1,01,0x1,+1`` planned several identical runs."""
    _failing_runs(monkeypatch, calls := [])
    cmd = ["run", "--profile", str(_mini_profile(tmp_path)), "--results", str(tmp_path / "r")]
    assert cli.main([*cmd, "--sweep", "seed=1,01,0x1,+1"]) == 2
    err = capsys.readouterr().err
    assert "seed" in err and "'01'" in err and "'0x1'" in err and "'+1'" in err and "all read as 1" in err, err
    assert not (tmp_path / "r").exists() and calls == []


@pytest.mark.slow
@pytest.mark.parametrize("whom", ["group", "client"])
def test_ctrl_c_on_a_local_cluster_sweep_marks_the_runs_in_flight_interrupted(tmp_path, whom):
    """Was: Ctrl-C on ``--scheduler local`` said "no run folder was being written" while two runs were in a
    notebook; they stayed ``running`` (later ``dead``). SIGINT goes to the whole process group, as a terminal's
    Ctrl-C does (workers and kernels too), or to the client alone (``kill -INT``)."""
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    cmd = _script() + ["run", "--profile", str(path), "--results", str(results), "--quiet", "--sweep", "seed=7,8"]
    cmd += ["--scheduler", "local"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    names: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            plans = list(results.glob("sweep-*/sweep.json"))
            if plans and not names:
                names = [r["run"] for r in json.loads(plans[0].read_text())["runs"]]
            infos = [_read(results / n) for n in names]
            if names and all(i.get("status") == lifecycle.RUNNING and i.get("notebook_running") for i in infos):
                break
            time.sleep(0.2)
        assert names and proc.poll() is None, "the sweep ended before it could be stopped"
        workers = {_read(results / n)["pid"] for n in names}
        if whom == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "no run folder was being written" not in err and "Traceback" not in err, err
    assert "2 run(s) of the sweep were executing" in err and all(str(results / n) in err for n in names), err
    for n in names:
        info = _read(results / n)
        assert info["status"] == lifecycle.INTERRUPTED and info["signal"] == "SIGINT", info
        # The notebook in flight when the signal lands is marked interrupted; on a loaded machine it may have
        # finished between the poll above and the signal (its status ok): then none is left running either way.
        assert info["notebook_running"] is None and info["notebooks"][-1]["status"] in (
            lifecycle.INTERRUPTED,
            lifecycle.OK,
        )
        assert all(nb["status"] != lifecycle.RUNNING for nb in info["notebooks"]), info["notebooks"]
        assert "stopped by SIGINT" in info["interrupted"]["reason"] and "redaction" in info
    listed = {r.name: r.status for r in lifecycle.list_runs(results).runs}
    assert listed == dict.fromkeys(names, lifecycle.INTERRUPTED)
    assert not any(lifecycle.pid_alive(p) for p in workers), "a worker outlived the stopped sweep"


def _read(run_dir: Path) -> dict:
    try:
        return lifecycle.read_run_json(run_dir)
    except (OSError, ValueError):
        return {}


def test_a_stopped_sweep_marks_only_runs_whose_worker_is_gone(tmp_path, monkeypatch):
    """The rule behind the Ctrl-C test, without a cluster: a run whose process ended is marked ``interrupted``;
    one whose process lives on (an existing cluster's worker) is named as left running, its run.json untouched."""
    folder, names = _planned_sweep(tmp_path)
    plan = sweep.SweepPlan.from_json(json.loads((folder / "sweep.json").read_text()))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = lifecycle.ProcessMark.current()
    for name, mark in zip(names, [lifecycle.ProcessMark(gone.pid, me.host, None), me], strict=True):
        (folder.parent / name).mkdir()
        info = {"status": "running", "started": lifecycle.utc_now(), "notebook_running": "01_context_composition"}
        lifecycle.write_json_atomic(folder.parent / name / "run.json", {**info, **mark.fields()})
    alive_before = (folder.parent / names[1] / "run.json").read_text()
    monkeypatch.setattr(sweep, "WORKERS_GONE_WAIT_S", 0.5)
    stop = lifecycle.RunInterrupted(signal.SIGINT)
    marked, left = sweep._mark_interrupted(plan, folder.parent, [0, 1], stop)
    assert marked == [folder.parent / names[0]] and left == [folder.parent / names[1]]
    info = _read(folder.parent / names[0])
    assert info["status"] == lifecycle.INTERRUPTED and info["notebooks"][-1]["notebook"] == "01_context_composition"
    assert (folder.parent / names[1] / "run.json").read_text() == alive_before
    said = str(lifecycle.RunInterrupted(signal.SIGINT, runs=tuple(marked), left_running=tuple(left)))
    assert f"{marked[0]} marked interrupted" in said and f"cannot stop: {left[0]}" in said, said


# --------------------------------------------------------------------------- issue 44: ceilings no profile, --set or plan raises


def _never_expanded(monkeypatch):
    """Fail the test if a sweep's combinations are checked one by one (they were listed)."""
    monkeypatch.setattr(sweep, "_check_sweep", lambda *a, **k: pytest.fail("the combinations were listed"))


@pytest.mark.parametrize("where", ["--set", "profile"])
def test_max_sweep_runs_cannot_be_raised_past_the_hard_ceiling(tmp_path, monkeypatch, capsys, where):
    """Was: ``max_sweep_runs: 1e11`` and two ranges of 50,000 values planned 2.5 billion runs in memory."""
    from compaction_lab.run.parameter_rules import MAX_SWEEP_RUNS_CEILING

    _never_expanded(monkeypatch)
    _failing_runs(monkeypatch, calls := [])
    path = _mini_profile(tmp_path)
    results = tmp_path / "results"
    cmd = ["run", "--profile", str(path), "--results", str(results), "--quiet"]
    cmd += ["--sweep", "seed=range(0,200)", "--sweep", "window=range(3000,3100)"]  # 20,000 runs
    if where == "--set":
        cmd += ["--set", "max_sweep_runs=100000000000"]
    else:
        doc = yaml.safe_load(path.read_text())
        doc["parameters"]["max_sweep_runs"] = 100_000_000_000
        path.write_text(yaml.safe_dump(doc))
    assert cli.main(cmd) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "max_sweep_runs = 100,000,000,000" in err and f"{MAX_SWEEP_RUNS_CEILING:,}" in err, err
    assert not results.exists() and calls == []


def test_a_range_past_what_python_counts_is_one_line_naming_the_key(tmp_path, monkeypatch, capsys):
    """Was: ``--sweep 'seed=range(0,10000000000000000000)'`` ended in an OverflowError traceback."""
    _failing_runs(monkeypatch, calls := [])
    cmd = ["run", "--profile", str(_mini_profile(tmp_path)), "--results", str(tmp_path / "r")]
    for raw in ("range(0,10000000000000000000)", f"range(0,{'9' * 5000})"):
        assert cli.main([*cmd, "--sweep", f"seed={raw}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --sweep seed: ") and err.count("\n") == 1 and len(err) < 400, err
    assert not (tmp_path / "r").exists() and calls == []


@pytest.mark.slow
def test_resume_refuses_a_plan_of_more_runs_than_a_new_sweep_may_have(tmp_path, monkeypatch, capsys):
    """Was: ``--resume`` ran however many runs a hand-edited sweep.json listed, where a new sweep that size is
    refused. The plan's own limit (recorded when it was made) and the hard ceiling both hold."""
    from compaction_lab.run.parameter_rules import DEFAULT_MAX_SWEEP_RUNS, MAX_SWEEP_RUNS_CEILING

    _failing_runs(monkeypatch, calls := [])
    path = _mini_profile(tmp_path)
    results = tmp_path / "results"
    cmd = ["run", "--profile", str(path), "--results", str(results), "--quiet"]
    assert cli.main([*cmd, "--sweep", "seed=7,8,9", "--set", "max_sweep_runs=3"]) == 1
    folder = next(results.glob("sweep-*"))
    assert json.loads((folder / "sweep.json").read_text())["max_sweep_runs"] == 3
    calls.clear()
    assert sweep.resume_sweep(folder, progress=False).executed and len(calls) == 3  # within its own limit

    def refused(doc: dict, *needles: str) -> None:
        (folder / "sweep.json").write_text(json.dumps(doc))
        before = sorted(p.name for p in folder.parent.iterdir()), sorted(p.name for p in folder.iterdir())
        calls.clear()
        _never_expanded(monkeypatch)
        capsys.readouterr()
        assert cli.main(["run", "--resume", str(folder), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "sweep.json" in err, err
        assert all(n in err for n in needles), (needles, err)
        assert calls == [] and json.loads((folder / "sweep.json").read_text()) == doc, "the resume ran or wrote"
        assert before == (sorted(p.name for p in folder.parent.iterdir()), sorted(p.name for p in folder.iterdir()))

    doc = json.loads((folder / "sweep.json").read_text())
    runs = doc["runs"]

    def listing(n: int) -> list[dict]:
        return [{"values": {"seed": i}, "run": f"mini-seed-{i}-20260101-000000"} for i in range(n)]

    refused({**doc, "max_sweep_runs": 2}, "3 runs", "max_sweep_runs = 2")
    # A plan without a recorded limit is held to the default, as a new sweep is.
    no_limit = {k: v for k, v in doc.items() if k != "max_sweep_runs"}
    n = DEFAULT_MAX_SWEEP_RUNS + 1
    refused({**no_limit, "runs": listing(n)}, f"{n:,} runs", f"max_sweep_runs = {DEFAULT_MAX_SWEEP_RUNS:,}")
    # A limit edited past the hard ceiling is refused as such; a plan past the ceiling too.
    refused({**doc, "max_sweep_runs": 10**11}, "max_sweep_runs = 100,000,000,000", f"{MAX_SWEEP_RUNS_CEILING:,}")
    n = MAX_SWEEP_RUNS_CEILING + 1
    refused({**doc, "max_sweep_runs": MAX_SWEEP_RUNS_CEILING, "runs": listing(n)}, f"{n:,} runs")
    assert runs == doc["runs"]

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
from compaction_lab.report import lifecycle, sweep
from compaction_lab.report import run as report
from compaction_lab.report.params import ProfileError, layout_problems


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("compaction-lab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compaction_lab.cli"]


def _mini_profile(tmp_path: Path, sweeps: dict | None = None) -> Path:
    """The smoke profile's parameters on notebooks 01 and 03: a run of seconds with a headline."""
    smoke = report.load_profile("smoke")
    doc: dict = {
        "description": "sweep test",
        "notebooks": ["01_context_composition", "03_closed_book_exam"],
        "parameters": {
            **{k: v for k, v in smoke.parameters.items() if k not in ("turns", "cost_cases")},
            "n_boot": 50,
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
    prof = report.load_profile(_mini_profile(tmp_path, {"seed": "range(1,4)", "window": [2500, 3000]}))
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
    monkeypatch.setattr(report, "run_profile", lambda *a, **k: pytest.fail("the profile's sweep was not run"))
    assert cli.main(["run", "--profile", str(path)]) == 2
    assert cli.main(["run", "--profile", str(path), "--sweep", "window=2000,3000"]) == 2
    assert seen == [{"seed": [1, 2], "window": [2500]}, {"seed": [1, 2], "window": [2000, 3000]}]
    ran: list = []
    monkeypatch.setattr(report, "run_profile", lambda *a, **k: ran.append(k) or pytest.fail("ran once"))
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
    return {n: lifecycle.read_run_json(results / n).get("status") if (results / n).exists() else None for n in names}


@pytest.mark.slow
def test_a_sweep_killed_after_its_first_run_resumes_only_the_rest(tmp_path):
    """Acceptance 2 of issue 18: SIGKILL the sweep once run 1 is complete and run 2 has started; ``--resume``
    runs runs 2 and 3 only (run 1's folder untouched, run 2's dead attempt set aside, the command line's
    ``--set`` kept from the plan) and the comparison covers all three."""
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    cmd = _script() + ["run", "--profile", str(path), "--results", str(results), "--quiet", "--sweep", "seed=7,8,9"]
    cmd += ["--set", "n_boot=40"]  # an override the plan must carry into the resumed runs
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

    # Resumed again, there is nothing left to run: the comparison is only rebuilt.
    r = subprocess.run(_script() + ["run", "--resume", str(folder), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0 and "ran 0 of 3 planned runs" in r.stderr
    assert (results / names[0] / "run.json").read_text() == first


def test_every_shipped_sweep_profile_passes_the_checks_in_every_combination():
    import itertools

    swept = [report.load_profile(n) for n in report.list_profiles()]
    swept = [p for p in swept if p.sweeps]
    assert swept, "no shipped profile has a sweeps: block"
    for prof in swept:
        keys = list(prof.sweeps)
        combos = [dict(zip(keys, v, strict=True)) for v in itertools.product(*prof.sweeps.values())]
        sweep._check_sweep(prof, combos, None, None, None, False)

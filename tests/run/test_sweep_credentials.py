"""Sweeps and what their values may hold (issue 44): credentials masked in every form, folder names that fit.

Item 4: a password in a swept model URL reaches no folder name, no file of the sweep or its runs, and no
line printed; ``--resume`` of such a sweep says in one line that the plan does not keep it. Item 5 (end to
end): an endpoint echoing the ``Authorization: Basic`` header the client sends leaves no base64 of the
credentials in the ledger, run.json's error or notebook 03. Item 11: a long swept value (or profile name)
makes folder names capped to fit a file system, still distinct, and a sweep that cannot be created
leaves no half-made folder.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from compaction_lab import cli
from compaction_lab.endpoints import shared
from compaction_lab.run import lifecycle, runner, sweep
from tests.fake_openai_server import FakeOpenAIServer, Scripted
from tests.run.test_sweep import _failing_runs, _mini_profile

USER, PASSWORD = "admin", "Pa55w0rdXyz"


def _forms(user: str, password: str) -> dict[str, str]:
    """Every form a leak of the credentials could take: plain, percent-encoded, and as a Basic header holds them."""
    basic = f"{user}:{password}".encode()
    b64, safe = base64.b64encode(basic).decode(), base64.urlsafe_b64encode(basic).decode()
    return {
        "password": password,
        "percent-encoded": quote(password, safe=""),
        "user:password": f"{user}:{password}",
        "base64": b64,
        "base64 unpadded": b64.rstrip("="),
        "base64 urlsafe": safe.rstrip("="),
    }


def _leaks(folders: list[Path], forms: dict[str, str]) -> list[tuple[str, str]]:
    """(form, where) for every form found in a file or folder name, or in a file's raw bytes, under `folders`."""
    found = []
    for folder in folders:
        for p in [folder, *folder.rglob("*")]:
            for what, form in forms.items():
                if form in p.name:
                    found.append((what, f"name {p}"))
                if p.is_file() and form.encode() in p.read_bytes():
                    found.append((what, str(p)))
    return found


@pytest.mark.slow
def test_a_password_in_a_swept_model_url_is_masked_in_every_form_everywhere(tmp_path, monkeypatch, capsys):
    """Items 4 and 5: ``--sweep 'model=[{base_url: "http://admin:Pa55w0rdXyz@..."}]'`` against an endpoint
    that echoes the Basic header it is sent (in its answers, then in ``400 Incorrect API key provided: ...``):
    the password, ``user:password`` and their base64 / percent-encoded forms are in no folder or file name,
    no file of the sweep, its run, the ledger or the checkpoints, and no line printed. Resuming the sweep is
    refused in one line naming the parameter whose credential the plan does not keep."""
    forms = _forms(USER, PASSWORD)
    stores = tmp_path / "stores"
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(stores / "checkpoints.sqlite"))
    shared._CLIENTS.clear()
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    refused = Scripted(status=400, body={"error": {"message": "Incorrect API key provided: <authorization>"}})
    with FakeOpenAIServer(echo_authorization=True) as server:
        server.script(*[Scripted()] * 2, *[refused] * 200)
        url = server.base_url.replace("://", f"://{USER}:{PASSWORD}@", 1)
        model = {
            "base_url": url,
            "model": "fake-model",
            "api_key_env": "",
            "max_retries": 0,
            "timeout_s": 10,
            "ledger": str(stores / "ledger.sqlite"),
        }
        argv = ["run", "--profile", str(path), "--results", str(results), "--set", "reader=model"]
        code = cli.main([*argv, "--sweep", f"model=[{json.dumps(model)}]"])
        assert server.count() >= 3 and server.authorizations[0] == f"Basic {forms['base64']}"
    out = capsys.readouterr()
    assert code == 1  # the run failed on the endpoint's refusal, as the scripted endpoint wants
    (folder,) = results.glob("sweep-*")
    (run,) = [p for p in results.iterdir() if p != folder]
    info = lifecycle.read_run_json(run)
    assert info["status"] == "failed" and "Incorrect API key provided" in info["error"]["evalue"]
    assert "***@127.0.0.1" in json.dumps(info["parameters"]) + (folder / "sweep.json").read_text()
    assert (run / "03_closed_book_exam.html").exists()
    assert _leaks([results, stores], forms) == []
    for what, form in forms.items():
        assert form not in out.out + out.err, what
    # The plan keeps no password, so it cannot run the sweep again: said in one line, nothing moved.
    before = sorted(p.name for p in results.rglob("*"))
    assert cli.main(["run", "--resume", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model" in err[0] and "credential" in err[0] and "Traceback" not in err[0]
    assert PASSWORD not in err[0] and sorted(p.name for p in results.rglob("*")) == before
    shared._CLIENTS.clear()


def test_a_plan_holding_masked_values_is_refused_naming_each_parameter(tmp_path):
    """The one-line refusal names every parameter whose value the plan holds masked, wherever it sits."""
    prof = runner.load_profile(_mini_profile(tmp_path))
    prof = prof.with_parameters({"scheduler": "tcp://u:hunter2pw@127.0.0.1:8786"})
    combos = ({"model": {"base_url": f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1", "model": "m"}},)
    plan = sweep.SweepPlan(profile=prof, sweeps={"model": [combos[0]["model"]]}, combos=combos, names=("r1",))
    doc = plan.to_json("tcp://u:hunter2pw@127.0.0.1:8786")
    text = json.dumps(doc)
    assert PASSWORD not in text and "hunter2pw" not in text and text.count("***@") >= 4
    folder = tmp_path / "results" / "sweep-x"
    folder.mkdir(parents=True)
    lifecycle.write_json_atomic(folder / sweep.SWEEP_PLAN, doc)
    with pytest.raises(sweep.ProfileError) as e:
        sweep.resume_sweep(folder, progress=False)
    assert "model" in str(e.value) and "scheduler" in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------- item 11: folder names that fit


def _long_profile(tmp_path: Path) -> Path:
    """The mini profile under a 240-byte file name: ``sweep-<name>-<timestamp>`` alone is past 255 bytes."""
    path = _mini_profile(tmp_path)
    long_path = tmp_path / ("p" * 240 + ".yaml")
    long_path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return long_path


def test_long_swept_values_make_capped_distinct_folder_names(tmp_path, monkeypatch, capsys):
    """Was: ``OSError: [Errno 36] File name too long`` and a sweep folder holding only ``.sweep.lock``."""
    _failing_runs(monkeypatch, calls := [])
    results = tmp_path / "results"
    head = "x" * 300  # past the limit on its own
    values = [f"{head}-one", f"{head}-two"]  # the same up to the cut: still two names
    code = cli.main(
        [
            "run",
            "--profile",
            str(_long_profile(tmp_path)),
            "--results",
            str(results),
            "--quiet",
            "--allow-unknown",
            "--sweep",
            f"label={json.dumps(values)}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err  # both stand-in runs failed, as planned
    names = [p.name for p in results.iterdir()]
    assert len(names) == 3 and len(calls) == 2 and len(set(calls)) == 2  # the sweep folder and two runs
    for name in names:
        assert len(name.encode("utf-8")) <= runner.NAME_MAX_BYTES < 255, name
    (folder,) = results.glob("sweep-*")
    assert json.loads((folder / sweep.SWEEP_PLAN).read_text())["runs"][1]["run"] == calls[1]


def test_a_sweep_that_cannot_be_created_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """Its plan cannot be written (here: the disk is full): one line, exit 2, no half-made sweep folder."""
    _failing_runs(monkeypatch, calls := [])

    def full(path, doc):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lifecycle, "write_json_atomic", full)
    results = tmp_path / "results"
    path = _mini_profile(tmp_path)
    code = cli.main(["run", "--profile", str(path), "--results", str(results), "--quiet", "--sweep", "seed=7,8"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "No space left on device" in err[0]
    assert calls == [] and not list(results.glob("sweep-*"))


def test_the_sweep_page_and_table_hold_masked_values(tmp_path, monkeypatch):
    """The comparison (``sweep.parquet``, ``sweep.html``) and the console show a credentialed value masked."""
    import pandas as pd

    _failing_runs(monkeypatch, [])
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1"
    prof = runner.load_profile(_mini_profile(tmp_path))
    res = sweep.run_sweep(
        prof, {"endpoint_url": [url]}, results=tmp_path / "results", progress=False, allow_unknown=True
    )
    table = pd.read_parquet(res.folder / "sweep.parquet")
    assert list(table["endpoint_url"]) == ["http://***@127.0.0.1:9/v1"]
    assert _leaks([tmp_path / "results"], _forms(USER, PASSWORD)) == []
    doc = yaml.safe_load((res.folder / sweep.SWEEP_PLAN).read_text())
    assert doc["runs"][0]["values"] == {"endpoint_url": "http://***@127.0.0.1:9/v1"}

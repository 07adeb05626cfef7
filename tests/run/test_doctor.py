"""``compaction-lab doctor``: environment checks, endpoint checks, exit codes, and no key ever printed."""

from __future__ import annotations

import dataclasses
import io
import json
import socket

import pytest
import yaml

from compaction_lab import cli
from compaction_lab.core import tokens
from compaction_lab.run import doctor
from tests.fake_openai_server import FakeOpenAIServer
from tests.llm_server import MODEL_ALIAS

SECRET = "sk-PLANTED-0123456789abcdefSECRET"


def _closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _profile(tmp_path, model: dict | None, summarizer: str = "model"):
    params: dict = {"summarizer": summarizer, "reader": "model" if summarizer == "model" else "oracle"}
    if model is not None:
        params["model"] = model
    doc = {
        "description": "doctor test",
        "notebooks": ["01_context_composition", "02_projection_anatomy", "03_closed_book_exam"],
        "parameters": params,
    }
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def _run(profile, tmp_path, spend=False, environ=None, as_json=False):
    # The planned-call dry run is tested in tests/run/test_plan.py and tests/endpoints/test_model_local.py.
    out = io.StringIO()
    code = doctor.run_doctor(
        profile, spend, out, as_json=as_json, results=tmp_path / "results", environ=environ, plan=False
    )
    return code, out.getvalue()


def _by_name(checks):
    return {c.name: c for c in checks}


def test_environment_checks_pass_here(tmp_path):
    checks = _by_name(doctor.environment_checks(tmp_path / "results"))
    assert checks["cl100k_base data"].status == "ok"
    assert checks["python"].status == "ok"
    for dist in ("compaction-lab", "pandas", "tiktoken", "openai"):
        assert checks[dist].status == "ok", checks[dist]
    assert checks["tokenizer auto"].detail.startswith(("bpe-openai", "tiktoken ("))
    assert checks["results folder"].status == "ok"
    assert not (tmp_path / "results").exists()  # probed, not created
    assert not any(c.status == "fail" for c in checks.values()), checks


def test_tampered_tokenizer_hash_fails_naming_the_file(tmp_path, monkeypatch):
    spec = tokens.OFFLINE_ENCODINGS["cl100k_base"]
    monkeypatch.setitem(tokens.OFFLINE_ENCODINGS, "cl100k_base", dataclasses.replace(spec, sha256="0" * 64))
    check = _by_name(doctor.environment_checks(tmp_path))["cl100k_base data"]
    assert check.status == "fail" and spec.resource in check.detail and "0" * 64 in check.detail


def test_unwritable_results_folder_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    check = _by_name(doctor.environment_checks(blocker / "results"))["results folder"]
    assert check.status == "fail" and str(blocker) in check.detail


def test_closed_port_fails_naming_the_url(tmp_path):
    url = _closed_port_url()
    code, text = _run(_profile(tmp_path, {"base_url": url, "model": "m", "api_key_env": ""}), tmp_path)
    assert code == 1
    line = next(ln for ln in text.splitlines() if "endpoint reachable" in ln)
    assert line.startswith("fail") and url in line


def test_missing_key_variable_is_named_and_no_key_is_printed(tmp_path, monkeypatch):
    monkeypatch.delenv("DOCTOR_TEST_KEY", raising=False)
    monkeypatch.setenv("DOCTOR_OTHER_KEY", SECRET)  # a secret elsewhere in the environment
    with FakeOpenAIServer() as server:
        model = {"base_url": server.base_url, "model": "m", "api_key_env": "DOCTOR_TEST_KEY"}
        code, text = _run(_profile(tmp_path, model), tmp_path, spend=True)
        _, js = _run(_profile(tmp_path, model), tmp_path, spend=True, as_json=True)
        assert server.count() == 0  # no key: nothing spent
    assert code == 1
    line = next(ln for ln in text.splitlines() if "api key" in ln)
    assert line.startswith("fail") and "DOCTOR_TEST_KEY" in line
    assert SECRET not in text and SECRET not in js and SECRET[:8] not in text + js


def test_a_set_key_is_never_printed(tmp_path):
    with FakeOpenAIServer() as server:
        model = {"base_url": server.base_url, "model": "m", "api_key_env": "DOCTOR_TEST_KEY"}
        code, text = _run(_profile(tmp_path, model), tmp_path, spend=True, environ={"DOCTOR_TEST_KEY": SECRET})
        assert server.authorizations == [f"Bearer {SECRET}"]
    assert code == 0, text
    assert SECRET not in text and SECRET[-10:] not in text


def test_fake_server_reachable_and_spend_sends_exactly_one_request(tmp_path):
    with FakeOpenAIServer() as server:
        prof = _profile(tmp_path, {"base_url": server.base_url, "model": "fake-model", "api_key_env": ""})
        code, text = _run(prof, tmp_path)
        assert code == 0, text
        assert server.count() == 0
        assert "endpoint reachable" in text and text.count("fail ") == 0
        assert "not listed by this endpoint" in text  # the fake server has no GET /models
        assert "skipped (pass --spend)" in text
        code, text = _run(prof, tmp_path, spend=True)
        assert code == 0, text
        assert server.count() == 1
        body = server.requests[0]["body"]
        assert body["max_tokens"] == 1 and body["model"] == "fake-model"
    assert (
        "model calls: 02_projection_anatomy (summarizer)" in text and "03_closed_book_exam (summarizer, reader)" in text
    )


def test_profile_without_a_model_skips_the_endpoint(tmp_path):
    code, text = _run(_profile(tmp_path, None, summarizer="extractive"), tmp_path, as_json=True)
    doc = json.loads(text)
    assert code == 0 and doc["ok"] and doc["model_calls"] is None
    assert {"name": "endpoint", "status": "skip", "detail": "skip (the profile calls no model)"} in doc["checks"]


def test_cli_doctor(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPACTION_LAB_RESULTS", str(tmp_path / "results"))
    url = _closed_port_url()
    prof = _profile(tmp_path, {"base_url": url, "model": "m", "api_key_env": ""})
    assert cli.main(["doctor", "--profile", prof, "--no-plan"]) == 1
    assert url in capsys.readouterr().out
    assert cli.main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


@pytest.mark.slow
def test_doctor_against_the_local_llama_server(llm_server, tmp_path):
    prof = _profile(tmp_path, {"base_url": llm_server, "model": MODEL_ALIAS, "api_key_env": ""})
    code, text = _run(prof, tmp_path, spend=True)
    assert code == 0, text
    line = next(ln for ln in text.splitlines() if "model listed" in ln)
    assert line.startswith("ok") and MODEL_ALIAS in line
    assert "1-token request" in text and "answered (prompt" in text


# --------------------------------------------------------------------------- issue 25: URLs and secrets


def test_a_malformed_base_url_fails_the_config_check_without_a_traceback(tmp_path):
    code, text = _run(_profile(tmp_path, {"base_url": "http://[::1", "model": "m", "api_key_env": ""}), tmp_path)
    assert code == 1
    line = next(ln for ln in text.splitlines() if "model config" in ln)
    assert line.startswith("fail") and "base_url" in line
    assert "1-token request" not in text  # nothing was tried against it


def test_credentials_in_the_base_url_are_never_printed(tmp_path):
    password = "hunter2-url-pw-77"
    url = _closed_port_url().replace("http://", f"http://labuser:{password}@")
    prof = _profile(tmp_path, {"base_url": url, "model": "m", "api_key_env": ""})
    code, text = _run(prof, tmp_path)
    _, js = _run(prof, tmp_path, as_json=True)
    assert code == 1
    assert password not in text + js and "labuser:" not in text + js
    line = next(ln for ln in text.splitlines() if "endpoint reachable" in ln)
    assert line.startswith("fail") and "http://***@127.0.0.1:" in line

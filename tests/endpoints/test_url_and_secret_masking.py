"""Endpoint URLs and secrets (issue 25).

A malformed base URL is refused, naming the parameter, before anything starts
(no run folder, no traceback); credentials in a base URL are masked wherever
the URL is shown or stored; an API key an endpoint repeats in its answer
reaches no SQLite file (ledger, checkpoints, archive); and no error message
echoes a secret-looking value.
"""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pandas as pd
import pytest
import yaml

from compaction_lab import cli, strategies, summarize
from compaction_lab.core.errors import ProfileError
from compaction_lab.endpoints import ChatClient, EndpointUnreachable, ModelConfig, providers, shared
from compaction_lab.ingest import synthetic
from compaction_lab.privacy import scrub
from compaction_lab.privacy.redactor import redactor
from compaction_lab.run import params, runner
from compaction_lab.run.plan import Plan
from compaction_lab.store.archive import Archive
from compaction_lab.strategies import CompactionContext
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion
from tests.helpers import fake_model, make_session

# A variable name `env_secret_values` does not pick: only the configured key's own masking covers it.
KEY_ENV = "LAB_ENDPOINT_AUTH"
KEY = "Zq7-endpoint-cred-5f1e9a0b3c"
# Shaped like a GitHub token: masked by the privacy package's patterns, whatever variable holds it.
TOKEN = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
URL_USER, URL_PASSWORD = "labuser", "hunter2-url-pw-77"
INLINE_KEY = "sk-INLINEsecret0123456789abcdXYZ"

BAD_URLS = [
    "http://[::1",  # the example: an IPv6 literal never closed
    "http://127.0.0.1:99999/v1",  # port out of range
    "http://127.0.0.1:port/v1",  # port not a number
    "http://127.0.0.1:0/v1",  # port 0 is nothing to connect to
    "ftp://api.example.com/v1",
    "http:///v1",  # no host
    "https://:8080/v1",
    "http://exa mple.com/v1",
    "http://[not-an-ip]/v1",
    "api.example.com/v1",
]
GOOD_URLS = [
    "http://[::1]:8080/v1",
    "https://api.deepseek.com",
    "http://127.0.0.1:8080/v1",
    f"https://{URL_USER}:{URL_PASSWORD}@api.example.com/v1",
    "HTTPS://API.EXAMPLE.COM/v1/",
]


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _with_userinfo(url: str) -> str:
    return url.replace("://", f"://{URL_USER}:{URL_PASSWORD}@", 1)


def _profile(tmp_path: Path) -> str:
    doc = {
        "description": "issue 25",
        "notebooks": ["01_context_composition", "02_projection_anatomy"],
        "parameters": {"summarizer": "model"},
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def _all_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (SQLite databases with their -wal / -shm side files), raw."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# --------------------------------------------------------------------------- item 10: malformed base URLs


@pytest.mark.parametrize("url", BAD_URLS)
def test_model_config_refuses_a_malformed_base_url_naming_it(url):
    with pytest.raises(ValueError) as e:
        ModelConfig.from_mapping({"base_url": url, "model": "m", "api_key_env": ""})
    assert "base_url" in str(e.value)


@pytest.mark.parametrize("url", GOOD_URLS)
def test_model_config_accepts_well_formed_base_urls(url):
    assert ModelConfig.from_mapping({"base_url": url, "model": "m"}).base_url == url


def test_run_refuses_a_malformed_base_url_before_making_a_folder(tmp_path, capsys):
    results = tmp_path / "results"
    model = 'model={base_url: "http://[::1", model: m, api_key_env: ""}'
    code = cli.main(["run", "--profile", _profile(tmp_path), "--results", str(results), "--quiet", "--set", model])
    err = capsys.readouterr().err
    assert code == 2
    assert "base_url" in err and "Traceback" not in err
    assert not results.exists() or not any(results.iterdir())  # no run folder was made


def test_a_provider_with_a_malformed_base_url_is_refused_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTION_LAB_PROVIDERS", str(tmp_path))
    doc = {"description": "broken", "model": {"base_url": "http://[::1", "model": "m", "api_key_env": ""}}
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ProfileError) as e:
        providers.load_provider("broken")
    assert "broken.yaml" in str(e.value) and "base_url" in str(e.value)


# --------------------------------------------------------------------------- item 11: credentials in a URL


def test_client_masks_url_credentials_in_errors_repr_logs_and_the_ledger(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("compaction_lab", "openai", "httpx", "httpx2", "httpcore", "httpcore2"):
        caplog.set_level(logging.DEBUG, logger=name)
    ledger = tmp_path / "ledger.sqlite"
    texts = []
    with FakeOpenAIServer() as server:
        cfg = ModelConfig(
            base_url=_with_userinfo(server.base_url), model="fake-model", api_key_env="", ledger=str(ledger)
        )
        with ChatClient(cfg) as client:
            texts.append(repr(client))
            assert client.complete({"messages": [{"role": "user", "content": "hi"}]}, purpose="t").content == "echo: hi"
            texts.append(client.ledger.calls().to_string())
    down = ModelConfig(
        base_url=_with_userinfo(f"http://127.0.0.1:{_closed_port()}/v1"),
        model="m",
        api_key_env="",
        ledger=str(ledger),
        max_retries=0,
    )
    with ChatClient(down) as client, pytest.raises(EndpointUnreachable) as e:
        client.complete({"messages": [{"role": "user", "content": "hi"}]}, purpose="t")
    assert "***@127.0.0.1" in str(e.value)
    texts += [str(e.value), caplog.text, repr(down)]
    for t in texts:
        assert URL_PASSWORD not in t and f"{URL_USER}:" not in t
    for name, data in _all_bytes(tmp_path).items():
        assert URL_PASSWORD.encode() not in data, name


def test_plan_output_masks_url_credentials_and_prints_whole_token_counts():
    calls = pd.DataFrame(
        {
            "purpose": ["summary:futureos"],
            "calls": [3],
            "prompt_tokens": [60_290.0],  # a sum over a nullable column comes back as floats
            "output_tokens": [1_200.0],
            "cost": [None],
        }
    )
    plan = Plan("p", "m", _with_userinfo("https://api.example.com/v1"), calls, 0, 0, None, 1.0)
    text = plan.describe() + json.dumps(plan.as_dict(), default=str)
    assert URL_PASSWORD not in text and f"{URL_USER}:" not in text and "https://***@api.example.com/v1" in text
    assert "60,290 prompt tokens" in text and "60,290.0" not in text and "1,200.0" not in text
    assert plan.as_dict()["by_purpose"][0]["prompt_tokens"] == 60_290
    assert isinstance(plan.as_dict()["by_purpose"][0]["prompt_tokens"], int)


def test_run_folder_masks_url_credentials_even_with_redaction_off(tmp_path):
    url = _with_userinfo("https://api.example.com/v1")
    off = redactor(False, environ={})
    recorded = off.value({"parameters": {"model": {"base_url": url, "model": "m"}}})  # how run.json is written
    assert URL_PASSWORD not in json.dumps(recorded) and "api.example.com/v1" in json.dumps(recorded)
    nb = {"cells": [{"cell_type": "code", "source": f"model = {{'base_url': '{url}'}}\n"}]}
    (tmp_path / "02.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (tmp_path / "02.html").write_text(f"<p>{url}</p>", encoding="utf-8")
    scrub.scrub_run_folder(tmp_path, off)
    for name, data in _all_bytes(tmp_path).items():
        assert URL_PASSWORD.encode() not in data, name
    json.loads((tmp_path / "02.ipynb").read_text(encoding="utf-8"))  # still a notebook


# --------------------------------------------------------------------------- item 12: the key in every store


@pytest.fixture
def chain():
    (c,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=8000))
    return c.session


def test_a_key_the_endpoint_repeats_reaches_no_sqlite_file(tmp_path, monkeypatch, chain):
    stores = tmp_path / "stores"
    stores.mkdir()
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(stores / "checkpoints.sqlite"))
    shared._CLIENTS.clear()
    leaky = f"Summary. The key is {KEY}; the token {TOKEN}; see {_with_userinfo('https://git.example.com/r')}."
    with FakeOpenAIServer() as server:
        model = fake_model(server.base_url, stores / "ledger.sqlite", api_key_env=KEY_ENV)
        server.script(Scripted(body=completion(leaky)))
        ctx = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", model))
        first = strategies.compact(chain, "futureos-summarized", None, ctx)
        again = strategies.compact(chain, "futureos-summarized", None, ctx)  # from the checkpoint
        assert server.authorizations == [f"Bearer {KEY}"]  # the key was really sent, once
    summary = next(s.text for s in first.segments if s.kind == "summary")
    assert KEY not in summary and TOKEN not in summary and "[REDACTED:" in summary
    assert next(s.text for s in again.segments if s.kind == "summary") == summary  # a rerun reads the same
    # The archive of originals, fed a session that holds the key and the token.
    leaked = make_session([("user", f"export {KEY_ENV}={KEY}"), ("tool_output", f"token {TOKEN}")], session_id="k")
    with Archive(stores / "archive.sqlite") as arch:
        arch.add_session(leaked)
    files = _all_bytes(stores)
    assert {"ledger.sqlite", "checkpoints.sqlite", "archive.sqlite"} <= set(files)
    for name, data in files.items():
        for secret in (KEY, TOKEN, URL_PASSWORD):
            assert secret.encode() not in data, (name, secret)
    shared._CLIENTS.clear()


# --------------------------------------------------------------------------- item 13: errors echo no secret


@pytest.mark.parametrize("value", [INLINE_KEY, "hunter2"])  # a key-shaped value, and one no pattern knows
def test_an_inline_api_key_is_refused_without_being_echoed(tmp_path, capsys, value):
    model = f'model={{base_url: "http://127.0.0.1:9/v1", model: m, api_key: "{value}"}}'
    results = tmp_path / "results"
    code = cli.main(["run", "--profile", _profile(tmp_path), "--results", str(results), "--quiet", "--set", model])
    err = capsys.readouterr().err
    assert code == 2 and "api_key" in err and value not in err
    assert not results.exists() or not any(results.iterdir())
    code = cli.main(["doctor", "--profile", _profile(tmp_path), "--no-plan", "--set", model])
    out = capsys.readouterr()
    assert code == 1 and "api_key" in out.out and value not in out.out + out.err


def test_profile_errors_never_echo_secret_values(tmp_path: Path) -> None:
    prof = runner.load_profile(_profile(tmp_path))
    found = params.problems(
        prof.with_parameters(
            {
                "colour": TOKEN,
                "model": {"base_url": "http://x/v1", "model": INLINE_KEY, "api_key_env": "", "concurrency": INLINE_KEY},
            }
        )
    )
    assert found and not any(TOKEN in p or INLINE_KEY in p for p in found), found
    for bad in (
        lambda: ModelConfig(base_url=f"ftp://{URL_USER}:{URL_PASSWORD}@h/v1", model="m"),
        lambda: ModelConfig(base_url=f"http://{URL_USER}:{URL_PASSWORD}@[::1/v1", model="m"),
        lambda: ModelConfig(base_url="http://x/v1", model="m", concurrency=INLINE_KEY),  # type: ignore[arg-type]  # a wrong type on purpose
    ):
        with pytest.raises(ValueError) as e:
            bad()
        assert URL_PASSWORD not in str(e.value) and INLINE_KEY not in str(e.value)
    for call in (
        lambda: providers.load_provider(INLINE_KEY),  # a key pasted where a provider's name goes
        lambda: runner.parse_assignment(f"model={{api_key: {INLINE_KEY}, base_url: ["),  # not YAML
    ):
        with pytest.raises(ProfileError) as e:
            call()
        assert INLINE_KEY not in str(e.value)


# --------------------------------------------------------------------------- issue 44 item 5: every form of URL credentials

#: A password with characters a URL must percent-encode: its written, decoded and Basic forms all differ.
ODD_USER, ODD_PASSWORD = "lab@user", "Pa55/w0rd:Xyz"


def _credential_forms(user: str, password: str) -> dict[str, str]:
    """What a leak of ``user:password`` looks like: plain, percent-encoded, and as a Basic header carries it."""
    import base64
    from urllib.parse import quote

    basic = f"{user}:{password}".encode()
    return {
        "password": password,
        "percent-encoded": quote(password, safe=""),
        "user:password": f"{user}:{password}",
        "base64": base64.b64encode(basic).decode(),
        "base64 unpadded": base64.b64encode(basic).decode().rstrip("="),
        "base64 urlsafe": base64.urlsafe_b64encode(basic).decode().rstrip("="),
    }


def test_an_endpoint_echoing_the_basic_header_leaks_no_form_of_the_url_credentials(tmp_path):
    """Item 5 of issue 44: with ``user:pass@`` in the base URL the client sends ``Authorization: Basic
    base64(user:pass)``; an endpoint repeating it in an answer or in a 400 error leaves none of the
    credential's forms in the answer, the error, the ledger (its -wal while open too) or a log line."""
    forms = _credential_forms(ODD_USER, ODD_PASSWORD)
    ledger = tmp_path / "ledger.sqlite"
    with FakeOpenAIServer(echo_authorization=True) as server:
        url = server.base_url.replace("://", f"://{_quoted(ODD_USER)}:{_quoted(ODD_PASSWORD)}@", 1)
        cfg = ModelConfig(base_url=url, model="fake-model", api_key_env="", ledger=str(ledger), max_retries=0)
        server.script(
            Scripted(), Scripted(status=400, body={"error": {"message": "Incorrect API key provided: <authorization>"}})
        )
        with ChatClient(cfg) as client:
            answer = client.complete({"messages": [{"role": "user", "content": "hi"}]}, purpose="t").content
            with pytest.raises(Exception) as e:
                client.complete({"messages": [{"role": "user", "content": "again"}]}, purpose="t")
            stored = _all_bytes(tmp_path)  # the ledger's -wal side file is there while the client is open
        assert server.authorizations[0] == f"Basic {forms['base64']}"  # the header really carried them
    assert "Incorrect API key provided" in str(e.value) and "authorization:" in str(answer)
    stored.update(_all_bytes(tmp_path))
    for what, form in forms.items():
        assert form not in str(answer) and form not in str(e.value), what
        for name, data in stored.items():
            assert form.encode() not in data, (what, name)


def _quoted(text: str) -> str:
    """`text` percent-encoded as a URL's userinfo holds it."""
    from urllib.parse import quote

    return quote(text, safe="")

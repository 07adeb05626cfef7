"""The chat client against a scripted OpenAI-compatible server: parsing, retries, errors, the key, the ledger."""

from __future__ import annotations

import collections
import itertools
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import time
import traceback
import uuid

import pytest

from compaction_lab.endpoints import (
    AuthError,
    BadResponse,
    ChatClient,
    EndpointUnreachable,
    ModelConfig,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    Usage,
    request_fingerprint,
)
from compaction_lab.endpoints.client import full_body
from compaction_lab.endpoints.config import SECRETS_MESSAGE
from compaction_lab.store.ledger import Ledger
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion, error_body

KEY_ENV = "COMPACTION_LAB_TEST_KEY"
KEY = "sk-test-0123456789"


def _body(text: str = "hello", **extra) -> dict:
    return {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}], **extra}


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def make_client(server, tmp_path):
    made: list[ChatClient] = []

    def make(base_url: str | None = None, environ: dict | None = None, **kw) -> ChatClient:
        kw.setdefault("api_key_env", KEY_ENV)
        cfg = ModelConfig(
            base_url=base_url or server.base_url, model="fake-model", ledger=str(tmp_path / "ledger.sqlite"), **kw
        )
        c = ChatClient(cfg, environ={KEY_ENV: KEY} if environ is None else environ)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- config


def test_config_from_mapping_and_public():
    cfg = ModelConfig.from_mapping(
        {
            "base_url": "https://api.deepseek.com",
            "model": "deepseek-flash",
            "api_key_env": "DEEPSEEK_API_KEY",
            "concurrency": 8,
            "timeout_s": 30,
            "price_table": "deepseek-flash",
        }
    )
    assert cfg.concurrency == 8 and cfg.timeout_s == 30.0 and cfg.reuse is True
    pub = cfg.public()
    assert pub["api_key_env"] == "DEEPSEEK_API_KEY" and pub["model"] == "deepseek-flash" and pub["ledger"] is None
    assert cfg.label == "model: deepseek-flash"
    assert ModelConfig.from_mapping({"base_url": "http://x/v1", "model": "m", "api_key_env": None}).api_key_env == ""


def test_config_rejects_unknown_keys_and_secrets():
    with pytest.raises(ValueError, match="unknown model config keys: colour, window"):
        ModelConfig.from_mapping({"base_url": "http://x/v1", "model": "m", "window": 1, "colour": "red"})
    for name in ("api_key", "key", "token", "API-KEY", "access_token", "secret"):
        with pytest.raises(ValueError) as e:
            ModelConfig.from_mapping({"base_url": "http://x/v1", "model": "m", name: "sk-literal-value"})
        assert SECRETS_MESSAGE in str(e.value) and "sk-literal-value" not in str(e.value)
    with pytest.raises(ValueError, match="missing model"):
        ModelConfig.from_mapping({"base_url": "http://x/v1"})
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        ModelConfig(base_url="http://x/v1", model="m", api_key_env="sk-pasted/key")
    with pytest.raises(ValueError, match="concurrency"):
        ModelConfig(base_url="http://x/v1", model="m", concurrency=0)


def test_full_body_adds_model_and_temperature():
    cfg = ModelConfig(base_url="http://x/v1", model="m", temperature=0.3)
    assert full_body(cfg, _body())["temperature"] == 0.3 and full_body(cfg, _body())["model"] == "m"
    assert full_body(cfg, _body(temperature=1.0))["temperature"] == 1.0
    with pytest.raises(ValueError, match="leave 'model' out"):
        full_body(cfg, _body(model="other"))
    with pytest.raises(ValueError, match="messages"):
        full_body(cfg, {"max_tokens": 3})
    # The fingerprint is over the whole body: key order does not matter, the model does.
    a = request_fingerprint({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert a == request_fingerprint({"messages": [{"content": "x", "role": "user"}], "model": "m"})
    assert a != request_fingerprint({"model": "n", "messages": [{"role": "user", "content": "x"}]})


# --------------------------------------------------------------------------- success


def test_success_content_usage_and_tool_calls(server, make_client):
    tool_calls = [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    ]
    server.script(
        Scripted(
            body=completion(
                "first",
                usage={"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}},
            )
        ),
        Scripted(
            body=completion(
                "second",
                usage={
                    "prompt_tokens": 200,
                    "completion_tokens": 7,
                    "prompt_cache_hit_tokens": 128,
                    "prompt_cache_miss_tokens": 72,
                },
            )
        ),
        Scripted(body=completion(None, tool_calls=tool_calls, finish_reason="tool_calls")),
    )
    c = make_client()
    r1 = c.complete(_body("one", max_tokens=50), purpose="summary", shape_fingerprint="shape-1")
    assert r1.message == {"role": "assistant", "content": "first"} and r1.finish_reason == "stop"
    assert r1.usage == Usage(prompt_tokens=100, cached_tokens=64, completion_tokens=5)
    assert not r1.from_ledger and r1.latency_s > 0
    r2 = c.complete(_body("two"), purpose="exam")
    assert r2.usage == Usage(prompt_tokens=200, cached_tokens=128, completion_tokens=7)
    r3 = c.complete(
        _body("three", tools=[{"type": "function", "function": {"name": "read_file"}}]), purpose="open-book"
    )
    assert r3.message == {"role": "assistant", "content": None, "tool_calls": tool_calls}
    assert r3.finish_reason == "tool_calls" and r3.tool_calls == tool_calls and r3.content == ""

    # What the server received is exactly the fingerprinted body: the caller's keys plus model and temperature.
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"] == {**_body("one", max_tokens=50), "model": "fake-model", "temperature": 0.0}
    assert [r["fingerprint"] for r in server.requests] == [
        r1.request_fingerprint,
        r2.request_fingerprint,
        r3.request_fingerprint,
    ]
    assert "authorization" not in sent["headers"] and server.authorizations[0] == f"Bearer {KEY}"

    calls = c.ledger.calls()
    assert list(calls["status"]) == ["done"] * 3
    assert list(calls["purpose"]) == ["summary", "exam", "open-book"]
    assert calls["shape_fingerprint"][0] == "shape-1"
    assert list(calls["cached_tokens"]) == [64, 128, 0]


# --------------------------------------------------------------------------- retries and errors


def test_429_retry_after_is_honoured(server, make_client):
    server.script(Scripted(status=429, headers={"Retry-After": "1"}, body=error_body("slow down", "rate_limit")))
    c = make_client(max_retries=2)
    t0 = time.monotonic()
    r = c.complete(_body(), purpose="t")
    assert time.monotonic() - t0 >= 1.0
    assert server.count() == 2
    assert server.requests[1]["time"] - server.requests[0]["time"] >= 1.0
    assert r.content == "echo: hello"


def test_429_retry_after_ms_then_rate_limited(server, make_client):
    # retry-after-ms wins over the backoff (0.5 s x 2^n less jitter >= 0.375 s): the server sees each retry
    # ~50 ms after the last answer, never a backoff apart (its own clock: the client's ledger writes excluded).
    server.script(*[Scripted(status=429, headers={"retry-after-ms": "50"}, body=error_body("busy"))] * 3)
    c = make_client(max_retries=2)
    with pytest.raises(RateLimited, match="after 3 attempt") as e:
        c.complete(_body(), purpose="t")
    assert server.count() == 3 and e.value.status_code == 429
    times = [r["time"] for r in server.requests]
    assert all(0.05 <= b - a < 0.375 for a, b in itertools.pairwise(times)), times
    assert c.ledger.calls()["status"].tolist() == ["failed"]


@pytest.mark.parametrize("status", [401, 403])
def test_auth_error_fails_fast(server, make_client, status):
    server.script(Scripted(status=status, body=error_body("Incorrect API key provided", "invalid_request_error")))
    c = make_client(max_retries=3)
    with pytest.raises(AuthError) as e:
        c.complete(_body(), purpose="t")
    assert server.count() == 1
    msg = str(e.value)
    assert KEY_ENV in msg and server.base_url in msg and KEY not in msg
    row = c.ledger.calls().iloc[0]
    assert row["status"] == "failed" and row["error"].startswith("AuthError")


def test_missing_key_and_keyless_servers(server, make_client, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(AuthError, match=KEY_ENV):
        make_client(environ={})
    with pytest.raises(AuthError, match=KEY_ENV):
        ChatClient(ModelConfig(base_url=server.base_url, model="m", api_key_env=KEY_ENV))  # os.environ
    c = make_client(environ={}, api_key_env="")
    assert c.complete(_body(), purpose="t").content == "echo: hello"
    assert server.authorizations == ["Bearer none"]


def test_timeout_is_retried_then_raised(server, make_client):
    server.script(Scripted(delay=1.5), Scripted(delay=1.5))
    c = make_client(timeout_s=0.5, max_retries=1)
    with pytest.raises(ProviderTimeout) as e:
        c.complete(_body(), purpose="t")
    assert server.count() == 2
    assert "2 attempt" in str(e.value) and "0.5 s" in str(e.value) and server.base_url in str(e.value)


def test_500_then_200_succeeds(server, make_client):
    server.script(Scripted(status=500, body=error_body("boom", "server_error")))
    c = make_client(max_retries=1)
    assert c.complete(_body(), purpose="t").content == "echo: hello"
    assert server.count() == 2


def test_other_http_errors_are_provider_errors(server, make_client):
    server.script(Scripted(status=400, body=error_body("context too long")))
    c = make_client()
    with pytest.raises(ProviderError, match="HTTP 400: context too long") as e:
        c.complete(_body(), purpose="t")
    assert type(e.value) is ProviderError and e.value.status_code == 400 and server.count() == 1


def test_malformed_responses_are_bad_responses(server, make_client):
    server.script(Scripted(body="{not json"), Scripted(body={"id": "x", "object": "chat.completion"}))
    c = make_client()
    with pytest.raises(BadResponse, match="not JSON"):
        c.complete(_body("a"), purpose="t")
    with pytest.raises(BadResponse, match="no choices"):
        c.complete(_body("b"), purpose="t")
    assert server.count() == 2  # a 200 is never retried
    assert c.ledger.calls()["status"].tolist() == ["failed", "failed"]
    # A failed call is not reused: the same body is sent again (and now succeeds).
    assert not c.complete(_body("a"), purpose="t").from_ledger and server.count() == 3


def test_unreachable_endpoint(make_client):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    c = make_client(base_url=url, max_retries=0)
    with pytest.raises(EndpointUnreachable) as e:
        c.complete(_body(), purpose="t")
    assert url in str(e.value)
    assert c.ledger.calls()["status"].tolist() == ["failed"]


# --------------------------------------------------------------------------- concurrency


def test_concurrency_limit(server, make_client):
    server.default_delay = 0.3
    c = make_client(concurrency=2)
    t0 = time.monotonic()
    out = c.map([_body(f"q{i}") for i in range(6)], purpose="exam")
    assert time.monotonic() - t0 >= 0.9  # 6 calls, 2 at a time, 0.3 s each
    assert server.max_in_flight == 2
    assert [r.content for r in out] == [f"echo: q{i}" for i in range(6)]


def test_identical_concurrent_requests_are_sent_once(server, make_client):
    server.default_delay = 0.2
    c = make_client(concurrency=4)
    out = c.map([_body("same")] * 4, purpose="exam")
    assert server.count() == 1
    assert sorted(r.from_ledger for r in out) == [False, True, True, True]


def test_map_raises_the_first_failure(server, make_client):
    server.script(Scripted(status=400, body=error_body("bad")))
    c = make_client(concurrency=1)
    with pytest.raises(ProviderError, match="HTTP 400"):
        c.map([_body("a"), _body("b")], purpose="t")


# --------------------------------------------------------------------------- the key


def test_key_never_leaks(server, tmp_path, caplog, monkeypatch):
    key = f"sk-LEAKCHECK-{uuid.uuid4().hex}"
    monkeypatch.setenv("COMPACTION_LAB_LEAK_KEY", key)
    caplog.set_level(logging.DEBUG)
    for name in ("compaction_lab", "openai", "httpx", "httpx2", "httpcore", "httpcore2"):
        caplog.set_level(logging.DEBUG, logger=name)
    ledger_file = tmp_path / "ledger.sqlite"

    def cfg(**kw):
        return ModelConfig(
            base_url=server.base_url,
            model="fake-model",
            api_key_env="COMPACTION_LAB_LEAK_KEY",
            ledger=str(ledger_file),
            max_retries=1,
            **kw,
        )

    # Servers that echo the key in their error text (some do) must not carry it into ours.
    server.script(
        Scripted(status=401, body=error_body(f"Incorrect API key provided: {key}")),
        Scripted(status=500, body=error_body(f"internal error for {key}")),
        Scripted(status=500, body=error_body(f"internal error for {key}")),
        Scripted(body="garbage"),
        Scripted(status=429, headers={"retry-after-ms": "10"}, body=error_body(f"slow down {key}")),
        Scripted(status=429, headers={"retry-after-ms": "10"}, body=error_body(f"slow down {key}")),
    )
    texts: list[str] = []
    client = ChatClient(cfg())
    texts.append(repr(client))
    for i in range(4):
        with pytest.raises(ProviderError) as e:
            client.complete(_body(f"fail {i}"), purpose="t")
        texts.append("".join(traceback.format_exception(e.type, e.value, e.tb)))
    assert client.complete(_body("works"), purpose="t").content == "echo: works"
    client.complete(_body("works"), purpose="t")  # reused from the ledger
    with pytest.raises(TypeError):
        pickle.dumps(client)
    client.close()
    unreachable = ChatClient(
        ModelConfig(
            base_url=f"http://127.0.0.1:{_free_port()}/v1",
            model="m",
            api_key_env="COMPACTION_LAB_LEAK_KEY",
            ledger=str(ledger_file),
            max_retries=0,
        )
    )
    with pytest.raises(EndpointUnreachable) as e:
        unreachable.complete(_body(), purpose="t")
    texts.append("".join(traceback.format_exception(e.type, e.value, e.tb)))
    unreachable.close()

    assert f"Bearer {key}" in server.authorizations  # the key was really used ...
    assert len(caplog.records) > 5
    for rec in caplog.records:  # ... and is nowhere else
        assert key not in rec.getMessage(), rec.name
    assert key not in caplog.text
    for t in texts:
        assert key not in t
    for f in tmp_path.iterdir():
        assert key.encode() not in f.read_bytes(), f.name
    assert key not in Ledger(ledger_file).calls().to_string()
    # One info line per call from our logger, with no content.
    ours = [r for r in caplog.records if r.name == "compaction_lab.endpoints" and r.levelno == logging.INFO]
    assert len(ours) == 2 and "from_ledger=True" in ours[-1].getMessage()
    assert all("works" not in r.getMessage() for r in ours)


# --------------------------------------------------------------------------- the ledger


def test_ledger_reuse(server, make_client):
    c = make_client()
    a = c.complete(_body(), purpose="t")
    b = c.complete(_body(), purpose="t")
    assert not a.from_ledger and b.from_ledger and server.count() == 1
    assert (b.message, b.usage, b.request_fingerprint) == (a.message, a.usage, a.request_fingerprint)
    assert len(c.ledger.calls()) == 1  # a reuse makes no call, so no row

    fresh = make_client(reuse=False)
    assert not fresh.complete(_body(), purpose="t").from_ledger
    assert not fresh.complete(_body(), purpose="t").from_ledger
    assert server.count() == 3
    # A different temperature is a different request.
    assert not c.complete(_body(temperature=0.7), purpose="t").from_ledger and server.count() == 4


_KILL_SCRIPT = textwrap.dedent("""
    import sys
    from compaction_lab.endpoints import ChatClient, ModelConfig
    cfg = ModelConfig(base_url=sys.argv[1], model="fake-model", api_key_env="", ledger=sys.argv[2],
                      max_retries=0, timeout_s=10)
    with ChatClient(cfg) as client:
        for i in range(12):
            client.complete({"messages": [{"role": "user", "content": f"question {i}"}]}, purpose="kill-test")
""")


@pytest.mark.slow
def test_killed_run_restarts_without_duplicate_requests(tmp_path):
    ledger_file = tmp_path / "ledger.sqlite"
    cfg = ModelConfig(base_url="http://unused/v1", model="fake-model", api_key_env="")
    wanted = {
        request_fingerprint(full_body(cfg, {"messages": [{"role": "user", "content": f"question {i}"}]}))
        for i in range(12)
    }
    with FakeOpenAIServer(default_delay=0.2) as server:
        cmd = [sys.executable, "-c", _KILL_SCRIPT, server.base_url, str(ledger_file)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        done = 0
        while done < 4:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the run never finished 4 calls"
            time.sleep(0.05)
            if ledger_file.exists():
                done = int((Ledger(ledger_file).calls()["status"] == "done").sum())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
        before = Ledger(ledger_file).calls()
        done_before = set(before.loc[before["status"] == "done", "request_fingerprint"])
        assert 4 <= len(done_before) < 12
        started_before = set(before.loc[before["status"] == "started", "request_fingerprint"])
        assert len(started_before) <= 1

        rerun = subprocess.run(cmd, capture_output=True, timeout=60)
        assert rerun.returncode == 0, rerun.stderr.decode()
        sent = collections.Counter(server.fingerprints())

    after = Ledger(ledger_file).calls()
    assert set(after.loc[after["status"] == "done", "request_fingerprint"]) == wanted
    assert set(sent) == wanted
    for fp in done_before:
        assert sent[fp] == 1, "a call done before the kill was requested again"
    repeated = {fp for fp, n in sent.items() if n > 1}
    assert repeated <= started_before and sum(sent.values()) <= 13
    # The row left in flight by the kill is marked abandoned on restart, not left 'started'.
    assert "started" not in set(after["status"])
    assert all("abandoned" in e for e in after.loc[after["status"] == "failed", "error"])


def test_the_package_loads_the_openai_client_only_when_a_name_needs_it():
    """A run that calls no model (and notebook 06) does not pay the openai package's import."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import compaction_lab.endpoints as e\n"
        "from compaction_lab.endpoints import providers, prices\nfrom compaction_lab.store import ledger\n"
        "assert 'openai' not in sys.modules, 'imported early'\n"
        "assert sorted(e.__all__) == sorted(e._EXPORTS)\n"
        "from compaction_lab.endpoints import ChatClient\n"
        "assert 'openai' in sys.modules and ChatClient.__module__ == 'compaction_lab.endpoints.client'\n"
        "try:\n"
        "    e.nothing_here\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

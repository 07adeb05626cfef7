"""Secrets outside the run folder (`privacy.secrets`): URL credentials, stored text, messages, log lines."""

from __future__ import annotations

import logging
import uuid

import pytest

from compaction_lab.privacy import secrets
from compaction_lab.privacy.redactor import redactor
from tests.privacy.privacy_samples import GITHUB, JWT, OPENAI, PEM

MASKED_URLS = [
    ("https://user:pass@api.example.com/v1", "https://***@api.example.com/v1"),
    ("http://tok123@127.0.0.1:8080/v1", "http://***@127.0.0.1:8080/v1"),  # a token as user name
    ("HTTPS://U:P@H/v1", "HTTPS://***@H/v1"),
    ("https://u:p@ss@h/v1", "https://***@h/v1"),  # the userinfo runs to the last @ of the authority
    ("http://u:p@[::1", "http://***@[::1"),  # malformed, still masked
    ("postgres://app:Hunter2@db:5432/x", "postgres://***@db:5432/x"),
    (
        "cannot reach https://a:b@h/v1 (refused); see http://c:d@i/",
        "cannot reach https://***@h/v1 (refused); see http://***@i/",
    ),
]
UNCHANGED_URLS = [
    "https://api.example.com/v1",
    "ssh://git@github.com/o/r.git",  # a user name alone, outside http(s): not a credential
    "https://h/x?email=a@b.org",
    "https://h/x#a@b",
    "see http://a.example and mail me@x.org",
    "https://***@h/v1",
    "no url here: user:pass@host",
]


@pytest.mark.parametrize("url, masked", MASKED_URLS)
def test_mask_url_masks_the_whole_userinfo(url, masked):
    assert secrets.mask_url(url) == masked
    assert secrets.mask_url(masked) == masked  # idempotent


@pytest.mark.parametrize("text", UNCHANGED_URLS)
def test_mask_url_leaves_urls_without_credentials(text):
    assert secrets.mask_url(text) == text


@pytest.mark.parametrize(
    "name, secret",
    [("api_key", True), ("API-KEY", True), ("access_token", True), ("password", True), ("client secret", True)]
    + [("max_tokens", False), ("tokenizer", False), ("api_key_env", False), ("monkey", False), ("base_url", False)],
)
def test_looks_secret_name(name, secret):
    assert secrets.looks_secret_name(name) is secret


def test_shown_masks_values_under_secret_keys_and_secret_shaped_text():
    value = {
        "api_key": "hunter2",  # no pattern knows it: its key gives it away
        "base_url": "https://u:pw-in-url@h/v1",
        "model": OPENAI,
        "api_key_env": "OPENAI_API_KEY",
        "nested": [{"token": 12345678}, ("x", GITHUB)],
        "empty_password": "",
    }
    out = secrets.shown(value)
    text = repr(out)
    for secret in ("hunter2", "pw-in-url", OPENAI, GITHUB, "12345678"):
        assert secret not in text
    assert out["api_key"] == "***" and out["api_key_env"] == "OPENAI_API_KEY" and out["empty_password"] == ""
    assert out["base_url"] == "https://***@h/v1"
    assert value["api_key"] == "hunter2"  # the value itself is left alone


def test_store_masker_masks_credentials_and_known_values_but_not_the_facts_exams_ask_for():
    key = f"cred-{uuid.uuid4().hex[:12]}"  # shaped like nothing: only its registration masks it
    secrets.register_secret(key)
    secrets.register_secret("short")  # under MIN_SECRET_CHARS: ignored
    assert key in secrets.known_secrets() and "short" not in secrets.known_secrets()
    text = f"key {key}; {OPENAI}; {GITHUB}; {JWT}; {PEM}; https://u:p@h/v1"
    out = secrets.store_masker().text(text)
    for secret in (
        key,
        OPENAI,
        GITHUB,
        JWT,
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "u:p@",
    ):
        assert secret not in out
    assert secrets.store_masker().text(out) == out  # idempotent
    # A synthetic chain plants facts like these; an exam asks for them, so a store keeps them.
    facts = "Send the header `X-Canary-Token: cnry_ab12cd34ef` with Authorization: Bearer tok_9f8e7d6c5b; short"
    assert secrets.store_masker().text(facts) == facts
    assert secrets.mask_stored({"a": [facts]}) == {"a": [facts]}


def test_mask_message_masks_every_secret_pattern_and_the_values_given():
    text = "X-Canary-Token: cnry_ab12cd34ef; Bearer tok_9f8e7d6c5b; pw=abcd at https://u:p@h/v1"
    out = secrets.mask_message(text, ["abcd"])
    assert "cnry_ab12cd34ef" not in out and "tok_9f8e7d6c5b" not in out and "abcd" not in out
    assert "https://***@h/v1" in out


def test_a_run_masks_url_credentials_with_redaction_off_and_only_them():
    off = redactor(False, environ={})
    assert not off.enabled and off.active
    text = f"clone https://{GITHUB}@github.com/o/r and ssh://git@github.com/o/r; {OPENAI}"
    assert (
        off.text(text) == f"clone https://[REDACTED:url-userinfo]@github.com/o/r and ssh://git@github.com/o/r; {OPENAI}"
    )
    on = redactor(True, environ={})
    assert "[REDACTED:url-userinfo]" in on.text("postgres://app:Hunter2Secret@db/x")


def test_log_lines_of_the_http_libraries_are_masked(caplog):
    child = logging.getLogger("httpx2.issue25")  # a child made before the masking is installed
    secrets.install_log_masking()
    secrets.install_log_masking()  # idempotent
    assert logging.getLogger("httpx2").filters.count(secrets._FILTER) == 1
    with caplog.at_level(logging.INFO, logger="httpx2"):
        child.info("HTTP Request: POST %s %s", "http://u:pw-in-log@h/v1/chat/completions", '"HTTP/1.1 200 OK"')
    assert "pw-in-log" not in caplog.text and "http://***@h/v1/chat/completions" in caplog.text

"""Secret environment variables: picked by name, masked even with redaction off."""

from __future__ import annotations

from compaction_lab.privacy.env_secrets import env_secret_values
from compaction_lab.privacy.redactor import redactor
from tests.privacy.privacy_samples import OPENAI

# --------------------------------------------------------------------------- environment secrets

FAKE_ENV = {
    "OPENAI_API_KEY": "Xylophone-Marmalade-77",
    "GITHUB_TOKEN": "plainwordstoken",
    "DB_PASSWORD": "  spaced-out-pw  ",
    "STRIPE_KEY": "rk_live_abcdefgh",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "GOOGLE_APPLICATION_CREDENTIALS": "/srv/creds/svc.json",
    "TOKENIZERS_PARALLELISM": "false",
    "SHORT_SECRET": "abc",
    "PATH": "/usr/local/bin:/usr/bin",
    "HOME": "/home/zedquux",
    "KEYBOARD": "us-international",
}


def test_env_secret_values_pick_secret_looking_names():
    assert env_secret_values(FAKE_ENV) == {
        "Xylophone-Marmalade-77",
        "plainwordstoken",
        "spaced-out-pw",
        "rk_live_abcdefgh",
        "wJalrXUtnFEMI/K7MDENG",
        "/srv/creds/svc.json",
    }
    assert env_secret_values({}) == frozenset()


def test_env_secrets_are_masked_even_with_redaction_off():
    off = redactor(False, environ=FAKE_ENV)
    assert not off.enabled and off.patterns == ()
    text = f"echo Xylophone-Marmalade-77 plainwordstoken {OPENAI} zed@example.org"
    assert off.text(text) == f"echo [REDACTED:env-secret] [REDACTED:env-secret] {OPENAI} zed@example.org"
    assert off.counts(text) == {"env-secret": 2}
    on = redactor(True, environ=FAKE_ENV)
    assert on.enabled
    assert on.text(text) == "echo [REDACTED:env-secret] [REDACTED:env-secret] [REDACTED:openai-key] [REDACTED:email]"

"""Secret-looking names (`privacy.env_secrets.looks_secret_name`): one function, a rule per kind of name.

The table is the union of the examples the three former rules were tested and documented with (an
endpoint's or a shown mapping's keys, run parameters, environment variables), each judged by all three.
"""

from __future__ import annotations

import pytest

from compaction_lab.privacy import secrets
from compaction_lab.privacy.env_secrets import env_secret_values, looks_secret_name
from compaction_lab.run import params

# name: (as a key, as a run parameter, as an environment variable)
TABLE: dict[str, tuple[bool, bool, bool]] = {
    "api_key": (True, True, True),
    "API-KEY": (True, True, False),
    "api-key": (True, True, False),
    "apikey": (True, True, True),
    "openai_api_key": (True, True, True),
    "OPENAI_API_KEY": (True, True, True),
    "access_token": (True, True, True),
    "accessToken": (True, True, True),
    "auth_token": (True, True, True),
    "token": (True, True, True),
    "GITHUB_TOKEN": (True, True, True),
    "password": (True, True, True),
    "DB_PASSWORD": (True, True, True),
    "client secret": (True, True, True),
    "SHORT_SECRET": (True, True, True),
    "mytoken": (False, True, True),  # no whole word, but it ends in one
    "STRIPE_KEY": (True, False, True),
    "AWS_SECRET_ACCESS_KEY": (True, False, True),
    "GOOGLE_APPLICATION_CREDENTIALS": (True, False, True),
    "credentials": (True, False, True),
    "passwd": (True, False, True),
    "DB_PASSWD": (True, False, True),
    "token_budget": (True, False, True),
    "secret_sauce": (True, False, True),
    "api_key_envelope": (True, False, True),
    "bearer": (True, False, False),
    "authorization": (True, False, False),
    "key": (True, False, False),
    "x.api.key": (True, False, False),
    "max_tokens": (False, False, True),
    "tail_tokens": (False, False, True),
    "tokenizer": (False, False, True),
    "TOKENIZERS_PARALLELISM": (False, False, True),
    "api_key_env": (False, False, True),  # names a variable: only the environment rule, which masks, takes it
    "monkey": (False, False, False),
    "KEYBOARD": (False, False, False),
    "base_url": (False, False, False),
    "model": (False, False, False),
    "PATH": (False, False, False),
    "HOME": (False, False, False),
}


@pytest.mark.parametrize("name, expected", TABLE.items(), ids=list(TABLE))
def test_each_kind_keeps_its_rule(name, expected):
    as_key, as_parameter, as_environment = expected
    assert looks_secret_name(name) is as_key  # "key" is the default
    assert looks_secret_name(name, "key") is as_key
    assert looks_secret_name(name, "parameter") is as_parameter
    assert looks_secret_name(name, "environment") is as_environment


@pytest.mark.parametrize("name, expected", TABLE.items(), ids=list(TABLE))
def test_every_caller_uses_the_one_rule(name, expected):
    as_key, as_parameter, as_environment = expected
    assert secrets.looks_secret_name(name) is as_key  # shown values, endpoint settings
    assert params.looks_secret(name) is as_parameter  # profiles and --set
    assert bool(env_secret_values({name: "a-long-enough-value"})) is as_environment


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of key, parameter, environment"):
        looks_secret_name("api_key", "header")

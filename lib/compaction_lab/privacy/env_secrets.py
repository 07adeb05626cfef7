"""Secret environment variables: which values count as secrets, masked as ``[REDACTED:env-secret]``.

Values of secret-looking environment variables (`env_secret_values`:
``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ...) are masked as
``[REDACTED:env-secret]`` in every run, **even with redaction off**: they are
never part of what a report studies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["ENV_SECRET", "env_secret_values"]

#: The pattern name under which secret environment values are masked.
ENV_SECRET = "env-secret"

#: Environment variable names whose values are secrets.
_SECRET_ENV_NAME = re.compile(r"API_?KEY|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def env_secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Values of environment variables whose names look secret.

    A name counts when it contains ``API_KEY`` (or ``APIKEY``), ``TOKEN``,
    ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL``, or ends in
    ``_KEY``. Only values of at least 8 characters (after stripping) are
    returned: shorter ones (``true``, ``0``) would mask ordinary text.

    Parameters
    ----------
    environ : mapping, optional
        Default `os.environ`.
    """
    env = os.environ if environ is None else environ
    out = set()
    for key, value in env.items():
        if isinstance(value, str) and _SECRET_ENV_NAME.search(key):
            v = value.strip()
            if len(v) >= 8:
                out.add(v)
    return frozenset(out)

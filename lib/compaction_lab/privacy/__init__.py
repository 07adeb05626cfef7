"""Redaction: mask secrets and personal data before a run folder is shared.

Reports are made from a person's own agent sessions, and those sessions hold
whatever passed through the terminal: API keys, tokens, e-mail addresses,
home-directory paths. Redaction replaces each such span with
``[REDACTED:<pattern name>]`` and is applied twice:

1. **At the source** — `Redactor.session` masks every imported session right
   after import, before anything is computed from it or saved, so tables,
   figures, notebooks and the archive are built from masked text.
2. **A final sweep** — `scrub_run_folder` rewrites every text file, parquet
   table and SQLite database of the run folder in place, catching anything
   that reached a file by another road (an error message, a parameter).
   `find_leaks` then checks raw bytes for known values.

Values of secret-looking environment variables, and credentials in URLs
(``https://user:pass@host``), are masked in every run, even with redaction
off. One module per concept:

``patterns``
    The pattern catalogue (`DEFAULT_PATTERNS`, the running account's
    `user_patterns`, YAML extensions via `load_patterns`); its docstring lists
    what is masked.
``env_secrets``
    Secret-looking names (`looks_secret_name`, one rule per kind of name: a key, a run
    parameter, an environment variable) and the values of secret environment variables
    (`env_secret_values`).
``redactor``
    The masking engine: `Redactor` (text, nested values, sessions) and
    `redactor`, the one a run uses.
``scrub``
    The run-folder sweep (`scrub_run_folder`): text, notebooks, HTML,
    parquet, SQLite with full-text indexes.
``leaks``
    The leak check (`find_leaks`).
``secrets``
    Secrets outside the run folder: URL credentials shown as
    ``https://***@host`` (`mask_url`), what the ledger, checkpoints and
    archive mask before writing (`mask_stored`), and what error messages,
    the doctor and log lines mask (`mask_message`, `shown`).

This file only documents the package: import the modules themselves
(``from compaction_lab.privacy import redactor, scrub``).
"""

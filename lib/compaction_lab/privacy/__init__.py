"""Redaction: mask secrets and personal data before a run folder is shared.

Each secret span becomes ``[REDACTED:<pattern name>]``, applied at the source
(`Redactor.session`, right after import) and by a final sweep of the run folder
(`scrub_run_folder`, then `find_leaks`). One module per concept: ``patterns``,
``env_secrets``, ``redactor``, ``scrub``, ``leaks``, ``secrets``.

This file only documents the package: import the modules themselves
(``from compaction_lab.privacy import redactor, scrub``).

Design: docs/architecture.md#redaction
"""

"""Redaction: mask secrets and personal data before a run folder is shared.

Each secret span becomes ``[REDACTED:<pattern name>]`` in what a run writes: its
figures are drawn from masked arguments and a final sweep masks every file of
the run folder (`scrub_run_folder`, then `find_leaks`), with one redactor per run
(`Redactor.learn`: the account names its sessions tell). The stages compute on
the sessions as written, so redaction never moves a number. One module per concept: ``patterns``,
``env_secrets``, ``redactor``, ``scrub``, ``leaks``, ``secrets``.

This file only documents the package: import the modules themselves
(``from compaction_lab.privacy import redactor, scrub``).

Design: docs/architecture.md#redaction
"""

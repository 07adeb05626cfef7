"""A file name whose bytes are not UTF-8 imports and its sessions save (issue 44, acceptance 2)."""

from __future__ import annotations

import os

from compaction_lab.ingest import sources
from compaction_lab.privacy import redactor as redaction
from tests.report.test_hostile_pages import FIELDS, codex_rollout


def test_a_file_name_that_is_not_utf8_is_written_as_text(tmp_path):
    """Python reads byte 0x80 of a file name as the lone surrogate U+DC80; kept in the session's source
    path it stopped the run folder's save (UnicodeEncodeError in notebook 01, the whole run failed)."""
    folder = tmp_path / "sessions"
    path = codex_rollout(folder, {f: f"{f}-1" for f in FIELDS}, name=os.fsdecode(b"rollout-\x80.jsonl"))
    assert os.fsencode(path.name) == b"rollout-\x80.jsonl"
    src = sources.gather([str(folder)], progress=False, redactor=redaction.redactor(True, None))
    out = tmp_path / "run"
    sources.save(src, out)
    [session] = sources.load_saved(out)
    assert session.source_path.endswith("rollout-\\x80.jsonl")  # the byte, shown; the path still says which file

"""A redacted run's sessions (issue 45): saved as written, private until its final sweep, read back unmasked."""

from __future__ import annotations

import json
import stat

from compaction_lab.core.session import Session
from compaction_lab.ingest import sources
from tests.helpers import make_session
from tests.privacy.privacy_samples import OPENAI

TEXT = f"mail zed.quux@example.org; key {OPENAI}; owner zorvath staff"


def _sources() -> sources.Sources:
    s = make_session([("user", TEXT), ("assistant", "done")], session_id="C--Users-zorvath-chat")
    told = Session(
        id=s.id,
        source_format="chat-jsonl",
        source_path="/r/.pi/agent/sessions/--Users-zorvath-proj--/C--Users-zorvath-chat.jsonl",
        metadata={"cwd": "/Users/zorvath/proj"},
        records=s.records,
    )
    return sources.Sources((told,), "imported")


def test_a_redacted_run_saves_its_sessions_as_written_and_private(tmp_path):
    src = _sources()
    folder = sources.save(src, tmp_path, redact=True)
    # The stages read exactly what was imported: redaction moves no number.
    assert sources.load_saved(tmp_path) == src.sessions
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    # A file name is made of the masked id: the final sweep masks what files hold, not their names.
    assert not [f.name for f in files if "zorvath" in f.name]
    assert json.loads((tmp_path / sources.REDACTION_FILE).read_text()) == {"redact": True, "redact_patterns": None}


def test_the_run_redactor_masks_as_the_sweep_does_with_the_names_the_sessions_tell(tmp_path):
    sources.save(_sources(), tmp_path, redact=True)
    red = sources.run_redactor(tmp_path)
    assert red is not None and red.enabled and red.names == {"zorvath"}
    out = red.text(TEXT)
    assert "zed.quux" not in out and OPENAI not in out and "zorvath" not in out
    heads = sources.session_headers(tmp_path)
    assert [h.id for h in heads] == ["C--Users-zorvath-chat"] and heads[0].records == ()


def test_an_unredacted_run_leaves_no_redaction_file_and_has_no_run_redactor(tmp_path):
    sources.save(_sources(), tmp_path, redact=True)
    folder = sources.save(_sources(), tmp_path)  # notebook 01 again, redaction off
    assert not (tmp_path / sources.REDACTION_FILE).exists()
    assert sources.run_redactor(tmp_path) is None
    assert any("zorvath" in f.name for f in folder.iterdir())  # the id as it is

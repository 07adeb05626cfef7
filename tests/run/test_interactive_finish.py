"""The share notebook opened by hand leaves a redacted folder shareable (issue 45): `interactive.finish`."""

from __future__ import annotations

import io

from compaction_lab.core.session import Session
from compaction_lab.ingest import sources
from compaction_lab.privacy.leaks import find_leaks
from compaction_lab.run import interactive
from tests.helpers import make_session

NEEDLES = ["zorvath", "zed.quux@example.org"]


def _saved(folder, redact: bool) -> None:
    s = make_session([("user", "mail zed.quux@example.org; owner zorvath staff")], session_id="chat")
    told = Session(
        id=s.id,
        source_format="chat-jsonl",
        source_path="/r/.claude/projects/-home-zorvath-proj/chat.jsonl",
        records=s.records,
    )
    sources.save(sources.Sources((told,), "imported"), folder, redact=redact)
    (folder / "exam_bank.jsonl").write_text('{"answer": "zorvath"}\n')


def test_by_hand_a_redacted_folder_is_swept_by_the_share_notebook(tmp_path):
    _saved(tmp_path, redact=True)
    assert find_leaks(tmp_path, NEEDLES)
    said = io.StringIO()
    interactive.finish("", tmp_path, out=said)
    assert find_leaks(tmp_path, NEEDLES) == []
    assert "redacted for sharing" in said.getvalue()


def test_under_the_runner_or_unredacted_finish_leaves_the_folder(tmp_path):
    red, plain = tmp_path / "red", tmp_path / "plain"
    _saved(red, redact=True)
    _saved(plain, redact=False)
    interactive.finish(str(red), red)  # papermill: the runner's final sweep follows the last notebook
    interactive.finish("", plain)
    assert {n for _, n in find_leaks(red, NEEDLES)} == set(NEEDLES)
    assert {n for _, n in find_leaks(plain, NEEDLES)} == set(NEEDLES)

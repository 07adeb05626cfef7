"""One redactor per run (issue 45): the account names its sessions tell, learned once, mask every file alike."""

from __future__ import annotations

import pytest

from compaction_lab.core.session import Session
from compaction_lab.privacy.patterns import DEFAULT_PATTERNS
from compaction_lab.privacy.redactor import Redactor
from compaction_lab.privacy.scrub import scrub_run_folder
from tests.helpers import make_session


@pytest.fixture(scope="module")
def on() -> Redactor:
    return Redactor(patterns=DEFAULT_PATTERNS)


def _told(name_path: str, *, cwd: str | None = None, sid: str = "s1", text: str = "hello") -> Session:
    s = make_session([("user", text)], session_id=sid)
    return Session(
        id=s.id,
        source_format="test",
        source_path=name_path,
        metadata={"cwd": cwd} if cwd else {},
        records=s.records,
    )


@pytest.mark.parametrize(
    "source_path, cwd",
    [
        ("/r/.claude/projects/-home-zorvath-proj/a.jsonl", None),  # Claude Code
        (r"C:\r\.claude\projects\C--Users-zorvath-proj\a.jsonl", None),  # Claude Code on Windows
        ("/r/.pi/agent/sessions/--Users-zorvath-proj--/a.jsonl", None),  # pi
        (r"C:\r\.pi\agent\sessions\--C--Users-zorvath-proj--\a.jsonl", None),  # pi on Windows
        ("/r/trajectories/__Users__zorvath__proj/t.traj", None),  # SWE-agent
        ("/r/x.jsonl", "/home/zorvath/proj"),  # a cwd
    ],
)
def test_every_encoded_home_form_teaches_its_name(on, source_path, cwd):
    learned = on.learn([_told(source_path, cwd=cwd)])
    assert learned.names == {"zorvath"}
    assert learned.text("owner zorvath staff") == "owner [REDACTED:log-user-name] staff"
    assert on.text("owner zorvath staff") == "owner zorvath staff"  # not learned: not masked


def test_a_name_one_session_tells_is_masked_in_every_other(on):
    """A run's files mix sessions (a bank, a table): the name session a tells is masked where b shows it."""
    a = _told("/r/.claude/projects/-home-zorvath-proj/a.jsonl", sid="a")
    b = _told("/r/b.jsonl", sid="b", text="git clone github.com/zorvath/tools")
    run = on.learn([a, b])
    assert run.text(b.records[0].text) == "git clone github.com/[REDACTED:log-user-name]/tools"
    # Each session alone (what masking at import did) leaves b's mention as it was.
    assert on.session(b).records[0].text == b.records[0].text


def test_learning_needs_the_home_patterns_and_skips_generic_accounts(on):
    s = _told("/r/.claude/projects/-home-zorvath-proj/a.jsonl", cwd="/home/ubuntu/x")
    off = Redactor(patterns=())
    assert off.learn([s]) is off
    assert on.learn([s]).names == {"zorvath"}
    assert on.learn([s]).learn([s]).names == {"zorvath"}
    assert on.learn([]) is on


@pytest.mark.parametrize(
    "encoded",
    [
        "/r/.claude/projects/-home-jo-ann-proj/a.jsonl",
        "C--Users-jo-ann-proj",
        "--Users-jo-ann-proj--",
        "cd /__Users__jo-ann__repo",
        '"cwd_encoded": "-home-jo-ann"',
    ],
)
def test_a_hyphenated_name_is_masked_whole_in_every_encoding_anywhere(on, encoded):
    run = on.learn([_told("/r/x.jsonl", cwd="/home/jo-ann/proj")])
    out = run.text(f"see {encoded} now")
    assert "ann" not in out and "[REDACTED:encoded-home-user]" in out, out


def test_the_final_sweep_masks_a_learned_name_in_any_file(on, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "sessions").mkdir(parents=True)
    (run_dir / "exam_bank.jsonl").write_text('{"answer": "github.com/zorvath/tools"}\n')
    (run_dir / "notes.txt").write_text("zorvath wrote it; zorvathx did not\n")
    run = on.learn([_told("/r/.claude/projects/-home-zorvath-proj/a.jsonl")])
    scrub_run_folder(run_dir, run)
    assert "zorvath/" not in (run_dir / "exam_bank.jsonl").read_text()
    assert (run_dir / "notes.txt").read_text() == "[REDACTED:log-user-name] wrote it; zorvathx did not\n"

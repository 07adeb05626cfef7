"""The redactor: values and sessions masked, idempotent, raw JSON kept valid; encoded project folders."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.privacy.leaks import find_leaks
from compaction_lab.privacy.patterns import DEFAULT_PATTERNS, user_patterns
from compaction_lab.privacy.redactor import Redactor, redactor
from tests.helpers import make_session
from tests.privacy.privacy_samples import GITHUB, OPENAI


@pytest.fixture(scope="module")
def on() -> Redactor:
    return Redactor(patterns=DEFAULT_PATTERNS)


def test_redactor_reads_extra_patterns_only_when_enabled(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("- name: ticket-id\n  regex: 'ACME-\\d{6}'\n")
    assert "ticket-id" in [p.name for p in redactor(True, f, environ={}).patterns]
    assert redactor(False, f, environ={}).patterns == ()
    assert redactor(False, tmp_path / "missing.yaml", environ={}).patterns == ()


def test_nothing_to_mask_is_a_no_op():
    r = Redactor()
    assert not r.active and r.text(OPENAI) == OPENAI and r.counts(OPENAI) == {}


# --------------------------------------------------------------------------- values and sessions


def test_value_redacts_nested_strings_and_keys(on):
    obj = {
        "cmd": ["curl", f"-H Authorization: Bearer {GITHUB}"],
        "/home/zedquux": (1, 2.5, None, True),
        "n": 3,
        "nested": {"mail": {"zed@example.org"}},
    }
    out = on.value(obj)
    assert out == {
        "cmd": ["curl", "-H Authorization: Bearer [REDACTED:github-token]"],
        "/home/[REDACTED:home-user]": (1, 2.5, None, True),
        "n": 3,
        "nested": {"mail": {"[REDACTED:email]"}},
    }
    clean = {"a": [1, "two", ("three",)], "b": None}
    assert on.value(clean) is clean
    assert on.value(42) == 42 and on.value(b"bytes") == b"bytes"


def test_session_masks_every_free_text_field(on):
    s = make_session(
        [
            ("user", f"my key is {OPENAI}"),
            ("tool_call", "read_file", {"tool": "read_file", "target": "/home/zedquux/app.py", "call_id": "c1"}),
            ("tool_output", "ok", {"tool": "read_file", "target": "/home/zedquux/app.py", "call_id": "c1"}),
        ]
    )
    s = type(s)(
        id=s.id,
        source_format=s.source_format,
        records=s.records,
        source_path="/home/zedquux/.codex/sessions/x.jsonl",
        metadata={"cwd": "/home/zedquux/app", "n": 1},
    )
    out = on.session(s)
    assert out.records[0].text == "my key is [REDACTED:openai-key]"
    assert out.records[1].target == "/home/[REDACTED:home-user]/app.py"
    assert out.source_path == "/home/[REDACTED:home-user]/.codex/sessions/x.jsonl"
    assert out.metadata == {"cwd": "/home/[REDACTED:home-user]/app", "n": 1}
    assert [r.entry_id for r in out.records] == [r.entry_id for r in s.records]
    assert [r.call_id for r in out.records] == [None, "c1", "c1"]
    assert OPENAI not in out.to_jsonl().decode() and "zedquux" not in out.to_jsonl().decode()


def test_session_id_with_a_secret_is_masked_in_every_record(on):
    s = make_session([("user", "hi"), ("assistant", "hello")], session_id="zed@example.org")
    out = on.session(s)
    assert out.id == "[REDACTED:email]"
    assert {r.session_id for r in out.records} == {out.id}


def test_clean_session_is_returned_unchanged(on, small_session):
    out = on.session(small_session)
    assert out == small_session
    assert out is small_session


# --------------------------------------------------------------------------- properties

FRAGMENTS = [
    "sk-",
    "sk-proj-",
    "Q7vLm2Xc9RtY4bN8wE1sK6dH3fJ0pZaU",
    "ghp_",
    "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
    "AKIA",
    "IOSFODNN7EXAMPLE",
    "eyJ",
    "hbGciOiJIUzI1NiJ9",
    ".",
    "@",
    "example.com",
    "/home/",
    "/Users/",
    "C:\\Users\\",
    "Bearer ",
    "Authorization: ",
    "Basic ",
    "api_key=",
    '"password": "',
    "token: ",
    "secret=",
    "[REDACTED:",
    "]",
    "openai-key",
    "\\n",
    "\n",
    " ",
    '"',
    "'",
    "\\",
    "&quot;",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHC",
    "://u:",
    "xoxb-",
    "AIza",
    "zedquux",
    "Xylophone-Marmalade-77",
    "EDACTED:env",
]
TEXTS = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(FRAGMENTS)), max_size=24).map("".join)
PROPERTY_REDACTOR = Redactor(
    patterns=DEFAULT_PATTERNS + user_patterns(home="/srv/zedquux", user="zedquux"),
    literals=frozenset({"Xylophone-Marmalade-77", "EDACTED:env"}),
)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_redaction_is_idempotent_and_never_raises(s):
    once = PROPERTY_REDACTOR.text(s)
    assert PROPERTY_REDACTOR.text(once) == once
    assert PROPERTY_REDACTOR.counts(once) == {}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(TEXTS, TEXTS, max_size=3), st.booleans())
def test_redacting_raw_json_keeps_it_valid(doc, ascii_only):
    raw = json.dumps(doc, ensure_ascii=ascii_only)
    out = json.loads(PROPERTY_REDACTOR.text(raw))
    assert isinstance(out, dict) and len(out) <= len(doc)


# --------------------------------------------------------------------------- encoded project folders (issue 12, item 11)


def test_encoded_home_of_a_hyphenated_user_is_masked_whole(on):
    """A name with '-' or '.' is several encoded segments; the session's cwd tells the whole name."""
    from compaction_lab.core.session import Session

    for cwd, folder in [("/home/jo-ann/proj", "-home-jo-ann-proj"), ("/Users/j.doe/x", "-Users-j-doe-x")]:
        s = Session(
            id="s",
            source_format="claude_code",
            source_path=f"/r/.claude/projects/{folder}/u.jsonl",
            metadata={"cwd": cwd},
            records=(),
        )
        out = on.session(s).source_path
        assert out.endswith("[REDACTED:encoded-home-user]-" + folder.rsplit("-", 1)[1] + "/u.jsonl"), out
        assert "ann" not in out and "doe" not in out


def test_another_accounts_claude_project_folder_never_reaches_the_run_folder(tmp_path):
    """Issue 12 item 11: a Claude Code session from another account leaked its user name
    through the encoded project folder in source_path (sessions/*.jsonl, notebook 01)."""
    import shutil

    from compaction_lab.ingest import sources
    from tests.helpers import PUBLIC_FIXTURES

    src = PUBLIC_FIXTURES / "claude-code" / "hello-world-script.jsonl"
    folder = tmp_path / ".claude" / "projects" / "-home-qwzlfx-work-app"
    folder.mkdir(parents=True)
    shutil.copy(src, folder / src.name)
    got = sources.gather([str(tmp_path / ".claude")], progress=False, redactor=redactor(True))
    assert got.sessions and all("qwzlfx" not in (s.source_path or "") for s in got.sessions)
    run = tmp_path / "run"
    sources.save(got, run)
    assert not find_leaks(run, ["qwzlfx"])
    # Without redaction the name is there (the test can fail).
    plain = sources.gather([str(tmp_path / ".claude")], progress=False)
    assert any("qwzlfx" in (s.source_path or "") for s in plain.sessions)


def test_the_log_authors_account_name_is_masked_wherever_the_session_shows_it_bare(on):
    """Issue 26 item 8: pi's public session names its author's home in its cwd and encoded folder; the same
    name is an ``ls -l`` owner and a GitHub handle in its records, where no path pattern sees it."""
    from compaction_lab.core.session import Session

    s = make_session(
        [
            ("tool_output", "-rw-r--r--@ 1 zelda9  staff  4494 Dec  8 session.ts"),
            ("assistant", "See https://github.com/zelda9/pi-mono/releases; zelda99 and xzelda9 are other people."),
        ]
    )
    s = Session(
        id=s.id,
        source_format="pi",
        source_path="/r/.pi/agent/sessions/--Users-zelda9-work--/s.jsonl",
        metadata={"cwd": "/Users/zelda9/work"},
        records=s.records,
    )
    out = on.session(s)
    texts = [r.text for r in out.records]
    assert "zelda9 " not in texts[0] and "[REDACTED:log-user-name]  staff" in texts[0]
    assert "github.com/[REDACTED:log-user-name]/pi-mono" in texts[1]
    assert "zelda99" in texts[1] and "xzelda9" in texts[1]  # whole words only
    assert b'zelda9"' not in out.to_jsonl() and "zelda9/" not in (out.source_path or "")
    # Without the home patterns nothing tells the name: the session is left as it was (the negative control).
    assert Redactor(patterns=()).session(s) is s
    # A generic account (root, ubuntu, ...) is never learned as a name.
    generic = Session(id=s.id, source_format="pi", metadata={"cwd": "/home/ubuntu/x"}, records=s.records)
    assert "ubuntu" not in {m for r in on.session(generic).records for m in r.text.split()}
    assert on.session(generic).records[0].text == s.records[0].text


def test_a_swe_agent_home_encoded_with_underscores_is_learned_and_masked_everywhere(on):
    """Issue 45: a SWE-agent session named its author's home as ``/__Users__<name>__…`` (each '/' -> '__') and
    the name survived in its records and the archive. The encoded segment is masked, and the name it tells is
    learned, so a bare mention in the same session is masked too."""
    from compaction_lab.core.session import Session

    s = make_session(
        [
            ("tool_call", "bash cd /__Users__qorvex__work__repo && git log"),
            ("tool_output", "Author: qorvex <dev@example.org>; see github.com/qorvex/repo; qorvexx is someone else"),
        ]
    )
    s = Session(
        id=s.id,
        source_format="swe_agent",
        source_path="/r/trajectories/__Users__qorvex__work__repo/t.traj",
        metadata={"repo": "/__Users__qorvex__work__repo"},
        records=s.records,
    )
    out = on.session(s)
    blob = out.to_jsonl()
    assert b"qorvex " not in blob and b"qorvex/" not in blob and b"qorvex_" not in blob
    assert "__Users__[REDACTED:encoded-home-user]__work__repo" in out.records[0].text
    assert "qorvexx" in out.records[1].text  # whole words only
    assert "qorvex" not in (out.source_path or "") and "qorvex" not in str(out.metadata)
    # The negative control: without the home patterns the name is there.
    assert b"qorvex" in Redactor(patterns=()).session(s).to_jsonl()

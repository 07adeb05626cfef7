"""Redaction: each pattern masks a realistic sample and leaves a near miss; the run-folder sweep leaves no planted value."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from conftest import make_session
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.privacy import redact
from compaction_lab.privacy.redact import (
    DEFAULT_PATTERNS,
    Pattern,
    Redactor,
    ScrubReport,
    env_secret_values,
    find_leaks,
    load_patterns,
    redactor,
    scrub_run_folder,
    user_patterns,
)
from compaction_lab.store import archive

# Realistic-looking values, made up for these tests.
OPENAI = "sk-proj-Q7vLm2Xc9RtY4bN8wE1sK6dH3fJ0pZaU"
ANTHROPIC = "sk-ant-api03-Xk29vLmQ8rTb1nYc7WeP4s_Jd0Hf-Ga5"
GITHUB = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_PAT = "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsT"
AWS = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)

SAMPLES = [
    # (pattern name, text, the secret that must disappear)
    ("openai-key", f"export OPENAI_KEY_IS {OPENAI} now", OPENAI),
    ("openai-key", "key sk-AbCdEf0123456789GhIjKlMnOpQrSt", "sk-AbCdEf0123456789GhIjKlMnOpQrSt"),
    ("anthropic-key", f"using {ANTHROPIC}.", ANTHROPIC),
    ("github-token", f"git clone https://{GITHUB}@github.com/o/r", GITHUB),
    ("github-token", f"GH={GITHUB_PAT}", GITHUB_PAT),
    ("aws-access-key-id", f"aws_access_key_id = {AWS}", AWS),
    ("slack-token", f"SLACK={SLACK}", SLACK),
    ("google-api-key", f"https://maps.example/api?key={GOOGLE}&q=x", GOOGLE),
    ("jwt", f"cookie session={JWT}; path=/", JWT),
    ("bearer-token", "curl -H 'Authorization: Bearer tok_9f8e7d6c5b4a39281706'", "tok_9f8e7d6c5b4a39281706"),
    ("basic-auth", 'headers = {"Authorization": "Basic dXNlcjpodW50ZXIy"}', "dXNlcjpodW50ZXIy"),
    ("url-password", "DATABASE_URL=postgres://app:Hunter2Secret@db.internal:5432/x", "Hunter2Secret"),
    ("secret-assignment", '{"password": "correct horse battery"}', "correct horse battery"),
    ("secret-assignment", "DB_PASSWORD=Tr0ub4dor-3x", "Tr0ub4dor-3x"),
    ("secret-assignment", "client_secret: 9c1f0e7a2b3d4c5e", "9c1f0e7a2b3d4c5e"),
    ("email", "Reach me at greta.ivanova+ci@example.co.uk today.", "greta.ivanova+ci@example.co.uk"),
    ("home-user", "File /home/zedquux/proj/app.py, line 3", "zedquux"),
    ("home-user", "open /Users/zedquux/Library/x", "zedquux"),
    ("home-user", r"C:\Users\zedquux\AppData\x.txt", "zedquux"),
    ("private-key", f"key:\n{PEM}\nafter", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"),
    ("encoded-home-user", "/root/.claude/projects/-home-zedquux-proj/a1.jsonl", "zedquux"),
    ("encoded-home-user", "projects/-Users-zedquux-src-app", "zedquux"),
    ("encoded-home-user", r"C:\.claude\projects\C--Users-zedquux-proj\a.jsonl", "zedquux"),
]

NEAR_MISSES = [
    "pip install sk-learn; the task-12345 passed; scikit-learn-compatible",
    "sk-learn-compatible-estimator-wrapper-thing",
    "the token is valid; a token: abc; max_tokens: 4096",
    '"input_tokens": 123456789, "tokenizer": "o200k_base", "token_count": 12',
    "token = os.environ['GITHUB_TOKEN']; api_key = settings.API_KEY",
    "password = getpass.getpass(); password: Optional[str] = None",
    "api_key=${OPENAI_API_KEY} token=<your-token-here>",
    "Bearer authentication is a bearer of good tokens",
    "AKIAEXAMPLE and ghp_short and xoxb-abc and AIzaShort and eyJhbGciOi",
    "git@github.com:owner/repo.git icon@2x.png python@3.11 user@localhost",
    "/root/.cache /tmp/build /home /Users/Shared/Docs /var/lib/x C:\\Users\\Public\\x",
    "https://example.com/home/index and https://host:8080/path",
    "-----BEGIN PUBLIC KEY-----",
    "projects/-home-Shared-x and my-home-page and -root-proj and x-Users-y",
]


@pytest.fixture(scope="module")
def on() -> Redactor:
    return Redactor(patterns=DEFAULT_PATTERNS)


# --------------------------------------------------------------------------- patterns


def test_every_default_pattern_has_a_sample():
    names = {p.name for p in DEFAULT_PATTERNS}
    assert names == {name for name, _, _ in SAMPLES}
    assert len(names) == len(DEFAULT_PATTERNS)
    assert all(p.description and redact._NAME.match(p.name) for p in DEFAULT_PATTERNS)
    # The module docstring lists every pattern, so readers need not read regexes.
    for name in names | {"env-secret", "home-dir", "user-name"}:
        assert f"``{name}``" in redact.__doc__


@pytest.mark.parametrize("name, text, secret", SAMPLES, ids=[f"{s[0]}-{i}" for i, s in enumerate(SAMPLES)])
def test_default_pattern_masks_sample(on, name, text, secret):
    out = on.text(text)
    assert secret not in out
    assert f"[REDACTED:{name}]" in out
    assert on.counts(text).get(name, 0) >= 1


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(on, text):
    assert on.text(text) == text
    assert on.counts(text) == {}


def test_group_only_masking_keeps_the_context(on):
    assert on.text("Authorization: Bearer tok_9f8e7d6c5b4a39281706") == "Authorization: Bearer [REDACTED:bearer-token]"
    assert on.text("api_key=Zx81kQ0pLmN3") == "api_key=[REDACTED:secret-assignment]"
    assert on.text('"password": "hunter2hunter2"') == '"password": "[REDACTED:secret-assignment]"'
    assert on.text("postgres://app:Hunter2Secret@db/x") == "postgres://app:[REDACTED:url-password]@db/x"


def test_home_directories_keep_their_structure(on):
    assert on.text("/home/zedquux/proj/x.py") == "/home/[REDACTED:home-user]/proj/x.py"
    assert on.text("/Users/zedquux/dev") == "/Users/[REDACTED:home-user]/dev"
    assert on.text(r"C:\Users\zedquux\x") == r"C:\Users\[REDACTED:home-user]\x"
    assert on.text("cd /root && ls /tmp") == "cd /root && ls /tmp"


def test_raw_json_is_redacted_without_breaking_escapes(on):
    doc = {"text": f"line\n{OPENAI}\n/home/zedquux/x\nzed@example.org", "q": 'say "password": "hunter2hunter2"'}
    raw = json.dumps(doc)
    out = json.loads(on.text(raw))
    assert out == {
        "text": "line\n[REDACTED:openai-key]\n/home/[REDACTED:home-user]/x\n[REDACTED:email]",
        "q": 'say "password": "[REDACTED:secret-assignment]"',
    }
    # A match that would cut a \uXXXX escape in two takes the whole escape.
    lit = Redactor(literals=frozenset({"001fsecret"}))
    assert json.loads(lit.text(json.dumps("a\x1fsecret b"))) == "a[REDACTED:env-secret] b"
    assert json.loads(on.text(json.dumps({"C:\\USERS\x1f": 1}))) == {"C:\\USERS[REDACTED:home-user]": 1}


def test_user_patterns_mask_the_running_account_wherever_it_lives():
    r = Redactor(patterns=user_patterns(home="/work/zedquux", user="zedquux"))
    assert r.text("/work/zedquux/x and zedquux@laptop in -home-zedquux-proj") == (
        "/work/[REDACTED:home-dir]/x and [REDACTED:user-name]@laptop in -home-[REDACTED:user-name]-proj"
    )
    assert r.text("zedquuxx and /work/zedquux2") == "zedquuxx and /work/zedquux2"


@pytest.mark.parametrize("home, user", [("/root", "root"), ("/home/ubuntu", "ubuntu"), ("/home/al", "al"), ("", "")])
def test_user_patterns_skip_generic_and_short_accounts(home, user):
    assert user_patterns(home=home, user=user) == ()


def test_user_patterns_default_to_the_running_account(monkeypatch):
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("/work/zedquux")))
    monkeypatch.setattr(redact.getpass, "getuser", lambda: "zedquux")
    assert {p.name for p in user_patterns()} == {"home-dir", "user-name"}
    assert {"home-dir", "user-name"} <= {p.name for p in load_patterns()}
    assert not {"home-dir", "user-name"} & {p.name for p in load_patterns(user=False)}


# --------------------------------------------------------------------------- custom patterns


def test_yaml_patterns_extend_replace_and_drop(tmp_path):
    f = tmp_path / "patterns.yaml"
    f.write_text(
        "- name: ticket-id\n"
        "  regex: 'ACME-\\d{6}'\n"
        "  description: internal ticket numbers\n"
        "- name: internal-host\n"
        "  regex: 'host=(?P<secret>[a-z]+\\.corp)'\n"
        "- name: email\n"
        "  enabled: false\n"
    )
    pats = load_patterns(f, user=False)
    names = [p.name for p in pats]
    assert names == [p.name for p in DEFAULT_PATTERNS if p.name != "email"] + ["ticket-id", "internal-host"]
    r = Redactor(patterns=pats)
    assert r.text("see ACME-123456 on host=build.corp, zed@example.org") == (
        "see [REDACTED:ticket-id] on host=[REDACTED:internal-host], zed@example.org"
    )
    assert r.text("ACME-12345") == "ACME-12345"


def test_patterns_can_be_given_inline_or_as_objects():
    pats = load_patterns([{"name": "ticket-id", "regex": r"ACME-\d{6}"}, {"name": "jwt", "enabled": False}], user=False)
    assert pats[-1] == Pattern("ticket-id", r"ACME-\d{6}", "") and "jwt" not in {p.name for p in pats}
    r = Redactor(patterns=(Pattern("code-name", r"Project (?P<secret>[A-Z][a-z]+)", "internal code names"),))
    assert r.text("Project Bluebird ships") == "Project [REDACTED:code-name] ships"
    assert Pattern("x", "y").replacement == "[REDACTED:x]"
    with pytest.raises(ValueError, match="pattern name"):
        Pattern("has space", "x")


def test_yaml_pattern_reusing_a_name_replaces_it(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("patterns:\n  - name: email\n    regex: 'only@this\\.example'\n")
    pats = load_patterns(f, user=False)
    assert [p.name for p in pats] == [p.name for p in DEFAULT_PATTERNS]
    r = Redactor(patterns=pats)
    assert r.text("zed@example.org only@this.example") == "zed@example.org [REDACTED:email]"


def test_bad_regex_names_file_and_pattern(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("- name: broken\n  regex: 'abc(('\n")
    with pytest.raises(ValueError, match=r"bad\.yaml.*'broken'.*bad regex"):
        load_patterns(f)
    f.write_text("- name: 'no spaces allowed'\n  regex: x\n")
    with pytest.raises(ValueError, match="no spaces allowed"):
        load_patterns(f)
    f.write_text("- name: missing\n")
    with pytest.raises(ValueError, match="'missing' has no 'regex'"):
        load_patterns(f)


# --------------------------------------------------------------------------- environment secrets

FAKE_ENV = {
    "OPENAI_API_KEY": "Xylophone-Marmalade-77",
    "GITHUB_TOKEN": "plainwordstoken",
    "DB_PASSWORD": "  spaced-out-pw  ",
    "STRIPE_KEY": "rk_live_abcdefgh",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "GOOGLE_APPLICATION_CREDENTIALS": "/srv/creds/svc.json",
    "TOKENIZERS_PARALLELISM": "false",
    "SHORT_SECRET": "abc",
    "PATH": "/usr/local/bin:/usr/bin",
    "HOME": "/home/zedquux",
    "KEYBOARD": "us-international",
}


def test_env_secret_values_pick_secret_looking_names():
    assert env_secret_values(FAKE_ENV) == {
        "Xylophone-Marmalade-77",
        "plainwordstoken",
        "spaced-out-pw",
        "rk_live_abcdefgh",
        "wJalrXUtnFEMI/K7MDENG",
        "/srv/creds/svc.json",
    }
    assert env_secret_values({}) == frozenset()


def test_env_secrets_are_masked_even_with_redaction_off():
    off = redactor(False, environ=FAKE_ENV)
    assert not off.enabled and off.patterns == ()
    text = f"echo Xylophone-Marmalade-77 plainwordstoken {OPENAI} zed@example.org"
    assert off.text(text) == f"echo [REDACTED:env-secret] [REDACTED:env-secret] {OPENAI} zed@example.org"
    assert off.counts(text) == {"env-secret": 2}
    on = redactor(True, environ=FAKE_ENV)
    assert on.enabled
    assert on.text(text) == "echo [REDACTED:env-secret] [REDACTED:env-secret] [REDACTED:openai-key] [REDACTED:email]"


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


# --------------------------------------------------------------------------- run folder

ENV_VALUE = "Xylophone-Marmalade-77"
BEARER = "tok_9f8e7d6c5b4a39281706"
NEEDLES = [OPENAI, GITHUB, AWS, "zed.quux@example.org", "zedquux", BEARER, ENV_VALUE, JWT]


def _planted_session():
    return make_session(
        [
            ("user", f"Use {OPENAI} and mail zed.quux@example.org; env {ENV_VALUE}"),
            (
                "tool_call",
                'bash {"cmd": "cat /home/zedquux/.aws/credentials"}',
                {"tool": "bash", "target": "/home/zedquux/.aws/credentials", "call_id": "c1"},
            ),
            ("tool_output", f"aws_access_key_id = {AWS}\ncookie={JWT}", {"tool": "bash", "call_id": "c1"}),
            ("assistant", f"Pushed with {GITHUB}."),
        ],
        session_id="planted",
    )


def _make_run_folder(run: Path) -> None:
    run.mkdir()
    (run / "figures").mkdir()
    (run / "sessions").mkdir()
    (run / "run.json").write_text(
        json.dumps(
            {
                "parameters": {"note": "by zed.quux@example.org in /home/zedquux"},
                "error": f"HTTP 401 for Authorization: Bearer {BEARER}",
            },
            indent=1,
        )
    )
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f'KEY = "{OPENAI}"\nprint(KEY)')
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"{OPENAI}\n/home/zedquux/x.py\n{ENV_VALUE}\n")
    ]
    nb.cells = [cell, nbformat.v4.new_markdown_cell(f"Token `{GITHUB}`")]
    nbformat.write(nb, run / "01_chain.ipynb")
    (run / "report.html").write_text(
        f"<html><body><pre>Authorization: Bearer {BEARER}</pre>"
        f"<td>{GITHUB}</td><script>var data = {json.dumps({'t': f'{JWT} {ENV_VALUE}'})};</script></body></html>"
    )
    (run / "sessions" / "planted.jsonl").write_bytes(_planted_session().to_jsonl())
    df = pd.DataFrame(
        {
            "session_id": ["planted", "planted", "other"],
            "text": [f"key {OPENAI}", "clean", None],
            "paths": [["/home/zedquux/a", "b"], [], ["c"]],
            "n": [1, 2, 3],
        }
    )
    df.to_parquet(run / "table.parquet", index=False)
    # A PNG cannot be rewritten: listed, not touched.
    (run / "figures" / "fig1.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    with archive.Archive(run / "archive.sqlite") as a:
        a.add_sessions([_planted_session(), make_session([("user", "nothing secret here")], session_id="clean")])


def test_scrub_run_folder_leaves_no_planted_value(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    r = Redactor(patterns=DEFAULT_PATTERNS, literals=frozenset({ENV_VALUE}))

    before = find_leaks(run, NEEDLES)
    assert {n for _, n in before} == set(NEEDLES)
    assert {f for f, _ in before} == {
        "run.json",
        "01_chain.ipynb",
        "report.html",
        "sessions/planted.jsonl",
        "table.parquet",
        "archive.sqlite",
    }
    # The full-text index holds the key's lower-cased tokens, not only the record text.
    fts_token = OPENAI.split("-")[-1].lower().encode()
    assert fts_token in (run / "archive.sqlite").read_bytes()

    rep = scrub_run_folder(run, r)
    assert isinstance(rep, ScrubReport)
    assert find_leaks(run, NEEDLES) == []
    assert fts_token not in (run / "archive.sqlite").read_bytes()
    assert rep.unscannable == ("figures/fig1.png",)
    assert set(rep.files_changed) == {
        "run.json",
        "01_chain.ipynb",
        "report.html",
        "sessions/planted.jsonl",
        "table.parquet",
        "archive.sqlite",
    }
    assert rep.files_scanned == 6 and rep.replacements >= 20
    assert not list(run.rglob("*.redact-tmp")) and not list(run.glob("archive.sqlite-*"))

    # Every file is still what it was: valid JSON, a valid notebook, a readable table, a searchable archive.
    assert "[REDACTED:bearer-token]" in json.loads((run / "run.json").read_text())["error"]
    nb = nbformat.read(run / "01_chain.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].source == 'KEY = "[REDACTED:openai-key]"\nprint(KEY)'
    df = pd.read_parquet(run / "table.parquet")
    assert df["text"].tolist()[:2] == ["key [REDACTED:openai-key]", "clean"] and df["text"].isna().tolist()[2]
    assert [list(p) for p in df["paths"]] == [["/home/[REDACTED:home-user]/a", "b"], [], ["c"]]
    assert df["n"].tolist() == [1, 2, 3]
    from compaction_lab.core.session import Session

    Session.from_jsonl((run / "sessions" / "planted.jsonl").read_bytes())
    with archive.Archive(run / "archive.sqlite", readonly=True) as a:
        assert a.count() == 5
        hits = a.search("openai-key")
        assert [h.session_id for h in hits] == ["planted"]
        assert a.search("nothing secret") and a.search(OPENAI.split("-")[-1]) == []
        texts = [rec.text for rec in a.session_records("planted")]
        assert texts[0] == "Use [REDACTED:openai-key] and mail [REDACTED:email]; env [REDACTED:env-secret]"
        assert a.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con = sqlite3.connect(run / "archive.sqlite")
    con.execute("INSERT INTO records_fts(records_fts) VALUES('integrity-check')")  # raises if index != content
    con.close()

    again = scrub_run_folder(run, r)
    assert again.files_changed == () and again.replacements == 0


def test_scrub_is_a_no_op_when_nothing_can_be_masked(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert scrub_run_folder(run, Redactor()) == ScrubReport(0, (), 0, ())
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_scrub_with_redaction_off_masks_only_env_secrets(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    rep = scrub_run_folder(run, redactor(False, environ={"OPENAI_API_KEY": ENV_VALUE}))
    assert rep.replacements > 0
    leaks = {n for _, n in find_leaks(run, NEEDLES)}
    assert ENV_VALUE not in leaks and OPENAI in leaks


def test_scrub_handles_fts_tables_with_their_own_content_and_without_rowid(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    db = run / "other.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE VIRTUAL TABLE notes USING fts5(body);CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;"
    )
    con.execute("INSERT INTO notes(body) VALUES (?)", (f"deploy key {GITHUB} ok",))
    con.execute("INSERT INTO kv VALUES (?, ?)", ("token", "mail zed.quux@example.org"))
    con.commit()
    con.close()
    assert find_leaks(run, [GITHUB, "zed.quux@example.org"])
    rep = scrub_run_folder(run, Redactor(patterns=DEFAULT_PATTERNS))
    assert rep.files_changed == ("other.db",) and rep.replacements == 2
    assert find_leaks(run, [GITHUB, "zed.quux@example.org", GITHUB[4:].lower()]) == []
    con = sqlite3.connect(db)
    assert con.execute("SELECT body FROM notes WHERE notes MATCH 'deploy'").fetchall() == [
        ("deploy key [REDACTED:github-token] ok",)
    ]
    assert con.execute("SELECT v FROM kv").fetchall() == [("mail [REDACTED:email]",)]
    con.close()


def test_find_leaks_decodes_compressed_parquet(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # Without statistics the footer holds no min/max copy of the value.
    pd.DataFrame({"t": [f"x {OPENAI} y"] * 200}).to_parquet(
        run / "t.parquet", compression="gzip", write_statistics=False
    )
    assert OPENAI.encode() not in (run / "t.parquet").read_bytes()
    assert find_leaks(run, [OPENAI]) == [("t.parquet", OPENAI)]


def test_unknown_files_are_sniffed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes").write_text(f"key {OPENAI}\n")
    (run / "blob.bin").write_bytes(b"\x00\x01" + OPENAI.encode())
    rep = scrub_run_folder(run, Redactor(patterns=DEFAULT_PATTERNS))
    assert rep.files_changed == ("notes",) and rep.unscannable == ("blob.bin",)
    assert find_leaks(run, [OPENAI]) == [("blob.bin", OPENAI)]


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
    patterns=DEFAULT_PATTERNS + user_patterns(home="/work/zedquux", user="zedquux"),
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

    from conftest import SHARED_FIXTURES

    from compaction_lab.ingest import sources

    src = SHARED_FIXTURES / "claude-code" / "hello-world-script.jsonl"
    if not src.exists():
        pytest.skip(f"shared fixtures not present: {src}")
    folder = tmp_path / ".claude" / "projects" / "-home-qwzlfx-work-app"
    folder.mkdir(parents=True)
    shutil.copy(src, folder / src.name)
    got = sources.gather([str(tmp_path / ".claude")], progress=False, redactor=redact.redactor(True))
    assert got.sessions and all("qwzlfx" not in (s.source_path or "") for s in got.sessions)
    run = tmp_path / "run"
    sources.save(got, run)
    assert not redact.find_leaks(run, ["qwzlfx"])
    # Without redaction the name is there (the test can fail).
    plain = sources.gather([str(tmp_path / ".claude")], progress=False)
    assert any("qwzlfx" in (s.source_path or "") for s in plain.sessions)

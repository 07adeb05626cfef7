"""The pattern catalogue: each pattern masks a realistic sample and leaves a near miss; custom patterns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction_lab.privacy import patterns
from compaction_lab.privacy.patterns import DEFAULT_PATTERNS, Pattern, load_patterns, user_patterns
from compaction_lab.privacy.redactor import Redactor
from tests.privacy.privacy_samples import ANTHROPIC, AWS, GITHUB, GITHUB_PAT, GOOGLE, JWT, OPENAI, PEM, SLACK

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
    # pi's session folders wrap the encoded cwd in two more dashes (issue 26 item 8)
    ("encoded-home-user", "/x/.pi/agent/sessions/--Users-zedquux-workspaces-pi-mono--/2025.jsonl", "zedquux"),
    ("encoded-home-user", "sessions/--home-zedquux-proj--", "zedquux"),
    # SWE-agent writes a path as one name, '/' -> '__' (issue 45: the user name survived it)
    ("encoded-home-user", "cd /__Users__zedquux__work__repo && ls", "zedquux"),
    ("encoded-home-user", '"repo_path": "__home__zed_quux__proj"', "zed_quux"),
    # Issue 45: Windows' drive form as a value (quoted, assigned) and inside pi's dashes; a value that is
    # the encoded home alone.
    ("encoded-home-user", '{"project": "C--Users-zedquux-api"}', "zedquux"),
    ("encoded-home-user", r"C:\x\.pi\agent\sessions\--C--Users-zedquux-proj--\s.jsonl", "zedquux"),
    ("encoded-home-user", "cwd=-home-zedquux-proj; ls", "zedquux"),
    ("encoded-home-user", '"folder": "-Users-zedquux"', "zedquux"),
    ("encoded-home-user", "see --home-zedquux-proj-- for it", "zedquux"),
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
    "__init__ and __Users__Shared__x and my__home__page and __main__",
    # options and words that look like an encoded home's lead but are not one
    "pip install --home-dir build and make --Users-list and ABC--Users-list",
    "e-mail-Users-guide and my-home-page and xy--home-z",
]


@pytest.fixture(scope="module")
def on() -> Redactor:
    return Redactor(patterns=DEFAULT_PATTERNS)


# --------------------------------------------------------------------------- patterns


def test_every_default_pattern_has_a_sample():
    names = {p.name for p in DEFAULT_PATTERNS}
    assert names == {name for name, _, _ in SAMPLES}
    assert len(names) == len(DEFAULT_PATTERNS)
    assert all(p.description and patterns._NAME.match(p.name) for p in DEFAULT_PATTERNS)
    # The design doc lists every pattern, so readers need not read regexes.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("### Redaction patterns", 1)[1].split("\n## ", 1)[0]
    for name in names | {"env-secret", "home-dir", "user-name"}:
        assert f"- `{name}` " in section
    assert "docs/architecture.md#redaction-patterns" in patterns.__doc__


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
    r = Redactor(patterns=user_patterns(home="/srv/zedquux", user="zedquux"))
    assert r.text("/srv/zedquux/x and zedquux@laptop in -home-zedquux-proj") == (
        "/srv/[REDACTED:home-dir]/x and [REDACTED:user-name]@laptop in -home-[REDACTED:user-name]-proj"
    )
    assert r.text("zedquuxx and /srv/zedquux2") == "zedquuxx and /srv/zedquux2"


@pytest.mark.parametrize("home, user", [("/root", "root"), ("/home/ubuntu", "ubuntu"), ("/home/al", "al"), ("", "")])
def test_user_patterns_skip_generic_and_short_accounts(home, user):
    assert user_patterns(home=home, user=user) == ()


def test_user_patterns_default_to_the_running_account(monkeypatch):
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("/srv/zedquux")))
    monkeypatch.setattr(patterns.getpass, "getuser", lambda: "zedquux")
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


def _url_samples():
    from hypothesis import strategies as st

    noise = st.text(alphabet="abcXY09.-+_%'\"<> :/@\n", max_size=6)
    scheme = st.sampled_from(["https", "HTTP", "ssh", "git+ssh", "s3", "", "-", "*"])
    userinfo = st.text(alphabet="abc09:%*[]-_.~", max_size=8)
    url = st.tuples(
        noise,
        scheme,
        st.sampled_from(["://", ":/", "://***@", "://[REDACTED:x]@"]),
        userinfo,
        st.sampled_from(["@", "", "@@"]),
        noise,
    )
    return st.lists(url.map("".join), min_size=1, max_size=4).map(" ".join)


@pytest.mark.slow
def test_url_userinfo_led_by_its_literal_matches_what_the_leading_lookbehind_matched():
    import re

    from hypothesis import given, settings

    from compaction_lab.privacy.patterns import URL_USERINFO_REGEX

    # The former pattern: the scheme's last character checked by a lookbehind *before* ``://``.
    former = re.compile(URL_USERINFO_REGEX.replace("://(?<=[A-Za-z0-9+.-]://)", "(?<=[A-Za-z0-9+.-])://", 1))
    assert former.pattern != URL_USERINFO_REGEX
    assert URL_USERINFO_REGEX.startswith("://")  # the engine jumps between literals
    now = re.compile(URL_USERINFO_REGEX)

    @settings(max_examples=1500, deadline=None)
    @given(_url_samples())
    def same(text):
        spans = [(m.span(), m.span("secret")) for m in former.finditer(text)]
        assert [(m.span(), m.span("secret")) for m in now.finditer(text)] == spans

    same()

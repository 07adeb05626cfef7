"""One value once, and questions only from what a person or the agent said or saw (issue 45, items 4 and 5).

The public real sessions are mined directly (`probes.mine`) with a small tail and with nothing kept, so
the SWE-agent and Claude Code sessions give questions too: in no bank (the sampled case, the pool) does an
answer come from a harness template, and no two questions of one case are forms of one value. Then one
test per rule on a made-up session: each harness template, the guessable values, collapsing in the pool.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from compaction_lab.core.session import Record, Session
from compaction_lab.exam.questions.probes import (
    TEMPLATES,
    MinedCase,
    ProbeSpec,
    guessable,
    harness_of,
    injected_blocks,
    mine,
    scan,
)
from compaction_lab.exam.questions.probes.forms import collapse, value_key
from compaction_lab.exam.types import Question
from compaction_lab.ingest import load_sessions
from tests.helpers import PUBLIC_FIXTURES, make_session

#: One worker mines these sessions once for every check (``make test`` runs ``--dist loadgroup``).
pytestmark = pytest.mark.xdist_group("probes-once-sessions")

#: (file, tail) per configuration: tail "cut" keeps nothing before the end (every value is covered),
#: an int is a small recent tail in report tokens (a small window's compaction).
CONFIGS: dict[str, tuple[str, str | int]] = {
    "pi-small-tail": ("before-compaction.jsonl", 2000),
    "pi-large-small-tail": ("large-session.jsonl", 2000),
    "cc-nothing-kept": ("coverage-test-fix.jsonl", "cut"),
    "cc-small-tail": ("coverage-test-fix.jsonl", 400),
    "cc-hello-nothing-kept": ("hello-world-script.jsonl", "cut"),
    "cc-sample-nothing-kept": ("sample-session.jsonl", "cut"),
    "pydicom-nothing-kept": ("pydicom__pydicom-1458.traj", "cut"),
    "pydicom-small-tail": ("pydicom__pydicom-1458.traj", 300),
    "i1-nothing-kept": ("swe-agent__test-repo-i1.traj", "cut"),
    "i1-small-tail": ("swe-agent__test-repo-i1.traj", 100),
}

#: Values the harness templates of the public sessions hold: never an answer.
TEMPLATE_VALUES = {
    "python <script_name>.py",
    "buggy-input.png",
    "Script completed successfully, no errors.",
    "cat -n",
    "git commit -a",
    "git restore <file>...",
    "git add <file>...",
    "sudo apt-get install",
    "pip install",
}

_SESSIONS: dict[str, Session] = {}
_MINED: dict[str, MinedCase] = {}


def _mine(key: str) -> tuple[Session, MinedCase]:
    if not _SESSIONS:
        for s in load_sessions(PUBLIC_FIXTURES):
            assert s.source_path is not None  # every loaded session has its file
            _SESSIONS[Path(s.source_path).name] = s
    name, tail = CONFIGS[key]
    s = _SESSIONS[name]
    if key not in _MINED:
        end = s.records[-1].source_order + 1
        spec = ProbeSpec(n_questions=20, n_decoys=2, tail_tokens=tail if isinstance(tail, int) else 8192)
        _MINED[key] = mine(s, spec, tail_start=end if tail == "cut" else None)
    return s, _MINED[key]


def _outside_the_harness(s: Session, r: Record) -> str:
    """`r`'s text with every span a harness wrote (injected blocks, every template) cut out."""
    text = r.text
    for a, b in sorted(harness_of(s).spans(r), reverse=True):
        text = text[:a] + "\n" + text[b:]
    return text


def _banks(m: MinedCase) -> tuple[tuple[str, tuple[Question, ...]], ...]:
    return (("case", m.case.real), ("pool", m.pool))


@pytest.mark.slow
def test_the_small_window_gives_questions_from_every_harness():
    asked = {CONFIGS[k][0] for k in CONFIGS if _mine(k)[1].case.real}
    assert {"before-compaction.jsonl", "coverage-test-fix.jsonl", "pydicom__pydicom-1458.traj"} <= asked
    assert "swe-agent__test-repo-i1.traj" in asked


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_no_answer_comes_from_a_harness_template(key):
    s, m = _mine(key)
    by_order = {r.source_order: r for r in s.records}
    for label, questions in _banks(m):
        for q in questions:
            rec = by_order[q.source_order]
            assert not rec.injected and rec.kind not in ("system", "summary", "meta"), (label, q.id)
            assert q.answer in _outside_the_harness(s, rec), (label, q.id, q.answer)
            assert q.answer not in TEMPLATE_VALUES, (label, q.answer)
            assert "agentId" not in q.answer and "(for resuming" not in q.answer, (label, q.answer)
            assert not guessable(q.answer), (label, q.answer)
            assert q.answer.rstrip("/") != (s.cwd or "").rstrip("/"), (label, q.answer)  # the harness's cwd


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_no_two_questions_of_a_case_share_a_value(key):
    s, m = _mine(key)
    cwd = s.cwd
    for label, questions in _banks(m):
        keys = [value_key(q.answer, cwd, path=q.category == "path") for q in questions]
        assert len(set(keys)) == len(keys), label
        forms = collapse(keys)
        assert not forms.ambiguous, (label, sorted(forms.ambiguous))
        shared = {rep: ks for rep, ks in forms.groups().items() if len(ks) > 1}
        assert not shared, (label, shared)
        assert len(forms) == len(questions)


def test_the_pi_pool_counts_agent_session_once():
    s, m = _mine("pi-small-tail")
    cwd = s.cwd
    named = [q for q in m.pool if value_key(q.answer, cwd).endswith("agent-session.ts")]
    assert len(named) <= 1, [q.answer for q in named]
    assert m.dropped["guessable"] > 0 and any("guessable" in n for n in m.notes)


# --------------------------------------------------------------------------- one rule each

_FILLER = "Nothing notable here, just routine output of the build. " * 12


def _found(s: Session, i: int) -> set[str]:
    r = s.records[i]
    return {c.value for c in scan(r, harness_of(s).spans(r)).found}


_CTF = """We're currently solving the following CTF challenge. The CTF challenge is a crypto problem named "Baby RSA", worth 10 points. The description is:
Decrypt flag.txt: the key sits in KEY-40771 of chall_server.py.
Files included in the challenge: chall_server.py, flag.txt

INSTRUCTIONS:
Now, you're going to solve this challenge on your own. You can also install new software in the container using `sudo apt-get install`, or Python packages with `pip install`.
Note however that you cannot use any interactive session commands (e.g. python, vim) in this environment, but you can write scripts and run them. E.g. you can write a python script and then run it with `python <script_name>.py`.

2. Please make sure that for any blocking command like netcat (nc), you minimize the time - `nc -w5 127.0.0.1 80`.

(Open file: n/a)
(Current directory: /__ctf__baby_rsa)
bash-$"""


def test_a_ctf_instruction_is_not_the_users():
    s = make_session([("user", _CTF), ("tool_output", _FILLER, {"tool": "x"})], source_format="swe_agent")
    assert _found(s, 0) == {"flag.txt", "KEY-40771", "chall_server.py"}
    m = mine(s, ProbeSpec(tail_tokens=40, n_decoys=0))
    answers = {q.answer for q in m.pool}
    assert not answers & TEMPLATE_VALUES and "/__ctf__baby_rsa" not in answers
    assert m.dropped["template"] >= 3


def test_swe_agent_1x_keeps_the_pr_description_only():
    text = (
        "<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code repository in the directory "
        "/testbed. Consider the following PR description:\n\n<pr_description>\nParsing ORD-58213 fails in "
        "src/orders/parse.py\n</pr_description>\n\nCan you help me implement the necessary changes? Create a script "
        "and execute it with `python <filename.py>` using the bash tool."
    )
    s = make_session([("user", text)], source_format="swe_agent")
    assert _found(s, 0) == {"ORD-58213", "src/orders/parse.py"}


def test_the_swe_agent_state_footer_is_the_harnesss():
    out = "Found 1 matches in /repo:\n/repo/src/a_mod.py\n\n(Open file: /repo/src/b_mod.py)\n(Current directory: /repo)\nbash-$"
    s = make_session([("tool_output", out, {"tool": "find_file"})], source_format="swe_agent")
    assert _found(s, 0) == {"/repo/src/a_mod.py"}


def test_the_claude_code_agent_footer_is_not_asked():
    out = (
        "The parser lives in src/orders/parse.py and fails on ORD-58213.\n"
        "agentId: a1341ee (for resuming to continue this agent's work if needed)\n"
        "<usage>total_tokens: 164618\ntool_uses: 12\nduration_ms: 297176</usage>"
    )
    s = make_session([("tool_output", out, {"tool": "Task"})], source_format="claude_code")
    assert _found(s, 0) == {"src/orders/parse.py", "ORD-58213"}
    glued = "Done with ORD-58213.agentId: ab56efdb8850bb53e (for resuming to continue this agent's work if needed)"
    s = make_session([("tool_output", glued, {"tool": "Task"})], source_format="claude_code")
    assert _found(s, 0) == {"ORD-58213"}


def test_the_claude_code_edit_result_sentence_is_not_asked():
    out = (
        "The file /repo/src/a_mod.py has been updated. Here's the result of running `cat -n` on a snippet of "
        "the edited file:\n     1\u2192RATE = 0.0421"
    )
    s = make_session([("tool_output", out, {"tool": "Edit"})], source_format="claude_code")
    assert _found(s, 0) == {"/repo/src/a_mod.py", "0.0421"}


def test_pi_and_codex_notices_are_not_asked():
    read = "const RATE = 0.0421;\n\n[Showing lines 1-1603 of 2377 (50.0KB limit). Use offset=1604 to continue.]"
    older = "const RATE = 0.0421;\n\n... (620 more lines not shown. Use offset=770 to continue reading)"
    codex = "Exit code: 0\nWall time: 1.7 seconds\nOutput:\nbuilt in 184.37 ms"
    s = make_session(
        [("tool_output", read, {"tool": "read"}), ("tool_output", older, {"tool": "read"})], source_format="pi"
    )
    assert _found(s, 0) == {"0.0421"} and _found(s, 1) == {"0.0421"}
    s = make_session([("tool_output", codex, {"tool": "shell"})], source_format="codex")
    assert _found(s, 0) == {"184.37 ms"}


def test_git_status_hints_are_not_asked():
    out = (
        "On branch master\nChanges not staged for commit:\n"
        '  (use "git add <file>..." to update what will be committed)\n'
        '  (use "git restore <file>..." to discard changes in working directory)\n'
        "\tmodified:   src/math_utils.py\n\n"
        'no changes added to commit (use "git add" and/or "git commit -a")'
    )
    s = make_session([("tool_output", out, {"tool": "Bash"})], source_format="claude_code")
    assert _found(s, 0) == {"src/math_utils.py"}


def test_every_template_names_its_upstream_source():
    assert len({t.name for t in TEMPLATES}) == len(TEMPLATES)
    for t in TEMPLATES:
        assert t.harness and t.source and t.kinds, t.name
    assert injected_blocks("no block") == []


@pytest.mark.parametrize(
    "value",
    ["2024", "1999", "Cargo.toml", "package.json", "README.md", "Makefile", ".gitignore", "@pyproject.toml"]
    + ["/etc/passwd", "/usr/bin/env", "/usr/lib/python3.12/site-packages", "/tmp", "/bin/bash"]
    + ["Rows", "Dataset", "AttributeError", "print"],
)
def test_guessable_values(value):
    assert guessable(value)


@pytest.mark.parametrize(
    "value",
    ["2025-12-08T23-22", "packages/coding-agent/package.json", "/tmp/tmpw6sk2trg/src/a.py", "ORD-58213"]
    + ["PixelRepresentation", "TuiController", "48506 bytes", "/home/dev/venvs/x/bin/python", "3.2 GB"],
)
def test_values_that_are_not_guesses(value):
    assert not guessable(value)


def test_guessable_values_are_a_drop_reason():
    s = make_session(
        [
            ("user", "Bump Cargo.toml for the 2024 release, ticket ORD-58213, and check /etc/passwd."),
            ("tool_output", _FILLER, {"tool": "x"}),
        ]
    )
    m = mine(s, ProbeSpec(tail_tokens=40, n_decoys=0))
    assert {q.answer for q in m.pool} == {"ORD-58213"}
    assert m.dropped["guessable"] == 2  # Cargo.toml, /etc/passwd ("2024" is a bare number: no rule finds it)
    assert any("2 guessable" in n for n in m.notes), m.notes


def _forms_session() -> Session:
    s = make_session(
        [
            ("user", "Refactor packages/app/src/core/agent-session.ts please."),
            ("assistant", "I will read src/core/agent-session.ts first."),
            ("assistant", "Then core/agent-session.ts needs a new export."),
            ("assistant", "Done: agent-session.ts now exports the session. See also a/util.ts and b/util.ts."),
            ("assistant", "Both util.ts files import it; the id is ORD-58213."),
            ("tool_output", _FILLER, {"tool": "x"}),
        ]
    )
    return dataclasses.replace(s, metadata={"cwd": "/home/u/repo"})


def test_the_pool_collapses_forms_of_one_value():
    m = mine(_forms_session(), ProbeSpec(tail_tokens=40, n_decoys=0, max_per_record=5))
    answers = sorted(q.answer for q in m.pool)
    assert answers == ["ORD-58213", "a/util.ts", "b/util.ts", "packages/app/src/core/agent-session.ts"]
    (q,) = [q for q in m.pool if q.answer.endswith("agent-session.ts")]
    assert {"src/core/agent-session.ts", "core/agent-session.ts", "agent-session.ts"} <= set(q.aliases)
    assert m.dropped["ambiguous form"] == 1  # util.ts: a form of a/util.ts or of b/util.ts
    assert sum(m.available.values()) == 4
    assert any("3 spellings asked as forms of another value" in n for n in m.notes), m.notes
    assert len(m.case.real) == 4

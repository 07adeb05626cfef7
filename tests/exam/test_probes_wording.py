"""exam.questions.probes: wordings that fit one value, aliases, and decoys that read like real questions."""

from __future__ import annotations

import random
import re

from compaction_lab.core.session import Session
from compaction_lab.exam.questions import probes
from compaction_lab.exam.questions.probes import ProbeSpec, mine
from compaction_lab.exam.questions.probes.decoys import _alike, _swap_word
from tests.helpers import make_session

_FILLER = "Nothing notable here, just routine output of the build. " * 12
_SPEC = ProbeSpec(tail_tokens=40, n_questions=20, n_decoys=0)


def _tail() -> tuple:
    return ("tool_output", _FILLER, {"tool": "bash", "target": "make"})


def _without_step(prompt: str) -> str:
    return re.sub(r" at step \d+", "", prompt)


# --------------------------------------------------------------------------- unique wordings


def test_a_window_that_fits_several_test_names_is_not_used():
    # `it("…", async () =>` fits five test names: no question may be worded with it
    names = ["adds two numbers", "rejects NaN input", "rounds half even", "keeps the sign", "handles overflow"]
    test_file = "\n".join(f'  it("{n}", async () => {{\n    expect(1).toBe(1);\n  }});' for n in names)
    s = make_session(
        [
            ("tool_call", "read math.test.ts", {"tool": "read", "target": "math.test.ts", "call_id": "c1"}),
            ("tool_output", test_file, {"tool": "read", "target": "math.test.ts", "call_id": "c1"}),
            _tail(),
        ]
    )
    m = mine(s, _SPEC)
    assert not any('it("\u2026", async () =>' in q.prompt for q in m.pool)
    # the line of the read output still singles each one out
    for q in m.pool:
        if q.answer in names:
            assert "(line " in q.prompt and "\u201c" not in q.prompt


def test_a_prose_wording_that_fits_three_paths_is_dropped():
    s = make_session(
        [
            ("assistant", "Create `src/app/orders.py`:"),
            ("assistant", "Create `src/app/refunds.py`:"),
            ("assistant", "Create `src/app/ledger.py`:"),
            _tail(),
        ]
    )
    m = mine(s, _SPEC)
    assert m.pool == () and m.case.real == ()
    assert m.dropped["ambiguous wording"] == 3
    assert any("3 ambiguous wording" in n for n in m.notes)


def test_the_window_is_looked_for_in_all_the_text_before_the_cut():
    # "none" is no value the rules extract, yet the window "the secret is `…`" fits it as well
    s = make_session(
        [
            ("assistant", "For staging the secret is `k7x2-pol-9q3z` now."),
            ("tool_output", "For staging the secret is `none` now", {"tool": "bash", "target": "cat notes"}),
            _tail(),
        ]
    )
    m = mine(s, _SPEC)
    assert not any("the secret is `\u2026`" in q.prompt for q in m.pool)


def test_the_same_value_under_the_same_wording_is_not_ambiguous():
    s = make_session(
        [
            ("assistant", "Deployed build bld-20240308-d2s27z to staging."),
            ("assistant", "Deployed build bld-20240308-d2s27z to staging."),
            ("assistant", "The rollback id is RB-77120 for now."),
            _tail(),
        ]
    )
    m = mine(s, _SPEC)
    assert {q.answer for q in m.pool} == {"bld-20240308-d2s27z", "RB-77120"}


def test_occurrences_after_the_cut_do_not_make_a_wording_ambiguous():
    s = make_session(
        [
            ("assistant", "Deployed build bld-20240308-d2s27z to staging."),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
            ("assistant", "Deployed build bld-20240309-x8k1m2 to staging."),
        ]
    )
    assert [q.answer for q in mine(s, _SPEC, cut=2, tail_start=1).pool] == ["bld-20240308-d2s27z"]
    assert mine(s, _SPEC, cut=3, tail_start=2).pool == ()  # both before the cut: the window fits two


def test_no_two_pool_questions_share_a_wording_without_their_steps():
    rows = [("tool_output", f"job JOB-{40000 + i} queued\nok", {"tool": "bash", "target": "submit"}) for i in range(4)]
    s = make_session([*rows, _tail()])
    m = mine(s, _SPEC)
    wordings = [_without_step(q.prompt) for q in m.pool]
    assert len(wordings) == len(set(wordings))


# --------------------------------------------------------------------------- aliases


def _alias_session() -> Session:
    s = make_session(
        [
            ("user", "Use Python 3.11 with the 2024.2 release; read @src/lib/util.py first."),
            ("assistant", "The p95 was 184.37 ms and the dump is 6626 KiB; error rate 1.16% today."),
            (
                "tool_output",
                "wrote /repo/src/app/main.py\nwrote /repo/manual/guide.md",
                {"tool": "bash", "target": "gen"},
            ),
            ("assistant", "Now src/app/main.py imports manual/guide.md as well."),
            ("tool_output", _FILLER + " see manual/guide.md", {"tool": "bash", "target": "make"}),
        ]
    )
    return Session(id=s.id, source_format=s.source_format, records=s.records, metadata={"cwd": "/repo"})


def test_numbers_have_an_alias_only_with_a_real_unit():
    m = mine(_alias_session(), _SPEC)
    aliases = {q.answer: q.aliases for q in m.pool}
    assert aliases["3.11"] == () and aliases["2024.2"] == ()  # not "3.1 1", not "2024 .2"
    assert aliases["184.37 ms"] == ("184.37ms",)
    assert aliases["6626 KiB"] == ("6626KiB",)
    assert aliases["1.16%"] == ("1.16 %",)


def test_path_forms_are_one_value_and_aliases():
    m = mine(_alias_session(), _SPEC)
    by_answer = {q.answer: q for q in m.pool}
    # the absolute and the relative form of main.py are one value, asked once, from its first occurrence
    mains = [q for q in m.pool if q.answer.endswith("src/app/main.py")]
    assert len(mains) == 1 and mains[0].answer == "/repo/src/app/main.py"
    assert mains[0].aliases == ("src/app/main.py", "@src/app/main.py")
    # the mention prefix is not part of the value; the absolute form is not guessed for a relative path
    assert by_answer["src/lib/util.py"].aliases == ("@src/lib/util.py",)
    # manual/guide.md is in the kept tail in its relative form: its absolute form is the same value, not asked
    assert not any(q.answer.endswith("manual/guide.md") for q in m.pool)


def test_a_relative_path_takes_its_absolute_form_when_the_session_writes_it():
    s = make_session(
        [
            ("assistant", "I will edit src/app/orders.py next."),
            ("summary", "Edited /repo/src/app/orders.py."),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
        ]
    )
    s = Session(id=s.id, source_format=s.source_format, records=s.records, metadata={"cwd": "/repo"})
    (q,) = mine(s, _SPEC, cut=1, tail_start=1).pool
    assert q.answer == "src/app/orders.py" and q.aliases == ("/repo/src/app/orders.py", "@src/app/orders.py")


def test_path_forms():
    assert probes.path_forms("/repo/a/b.py", "/repo") == ("a/b.py", ("a/b.py", "@a/b.py"))
    assert probes.path_forms("./a/b.py", "/repo") == ("a/b.py", ("a/b.py", "/repo/a/b.py", "@a/b.py"))
    assert probes.path_forms("b.py", None) == ("b.py", ("@b.py",))
    assert probes.path_forms("~/notes/todo.md", "/repo") == (None, ())
    assert probes.path_forms("/elsewhere/b.py", "/repo") == (None, ())


# --------------------------------------------------------------------------- decoys

#: The shape of every question: what, the subject, the step, then a window or a line.
_SHAPE = re.compile(r"^(What|Which) .+ at step \d+(: \u201c.*\u201d| \(line \d+ of its output\))?\?$|^Which file .+\?$")


def test_decoy_targets_are_shortened_like_real_ones():
    rows = []
    for i, service in enumerate(["ledger", "billing", "refunds", "invoices", "payouts", "disputes"]):
        target = f"cd /srv/{service}-service && ./scripts/run_integration_suite.sh --env staging --verbose"
        rows.append(("tool_output", f"suite run RUN-{51200 + 7 * i} finished", {"tool": "bash", "target": target}))
    s = make_session([*rows, _tail()])
    made = 0
    for seed in range(6):
        m = mine(s, ProbeSpec(tail_tokens=40, n_questions=6, n_decoys=4, seed=seed))
        for d in m.case.decoys:
            assert _SHAPE.match(d.prompt), d.prompt
            shown = re.search(r"on `([^`]*)`", d.prompt)
            if shown:
                made += 1
                # as `short_target` shows a target: at most 60 characters, "…" where it was cut
                assert len(shown.group(1)) <= 60 and shown.group(1).endswith("\u2026")
    assert made


def test_swapped_words_prefer_words_alike():
    vocab = ["created", "liberty", "ledger", "reporting", "beacon"]
    assert _alike("raised", vocab) == ["created"]
    assert _alike("property", vocab) == ["liberty"]
    rng = random.Random(0)
    assert {_swap_word("it raised an error", rng, vocab) for _ in range(10)} == {"it created an error"}


def test_decoys_read_like_real_questions_on_a_hand_made_session():
    s = make_session(
        [
            ("user", "Ship the refund fix; the ticket is RFD-39055 and use port 7412."),
            ("assistant", "Created the release branch and the job JOB-48213 for it."),
            ("tool_output", "deployed build bld-20240308-d2s27z in 184.37 ms", {"tool": "bash", "target": "make"}),
            _tail(),
        ]
    )
    for seed in range(5):
        m = mine(s, ProbeSpec(tail_tokens=40, n_decoys=3, seed=seed))
        for d in m.case.decoys:
            assert _SHAPE.match(d.prompt), d.prompt
            assert "  " not in d.prompt and not d.prompt.endswith("??")

"""exam.questions.probes: questions mined from a user's own sessions (wording, sampling, decoys, real fixtures).

The extraction rules are tested in test_candidates.py.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions import probes
from compaction_lab.exam.questions.bank import tail_start_of
from compaction_lab.exam.questions.probes import MinedCase, ProbeSpec, mine, mine_case, mine_cases
from compaction_lab.exam.types import POINTERS, bank_to_jsonl
from compaction_lab.ingest import load_sessions
from tests.helpers import PUBLIC_FIXTURES, make_session

# --------------------------------------------------------------------------- helpers


def assert_case_sound(case, session: Session, kept: str = "") -> None:
    """The exam's invariants, checked independently of `probes.check_probe_case`.

    The late region is what every arm keeps verbatim: the records from tail_start to the cut, and `kept`.
    """
    by_order = {r.source_order: r for r in session.records}
    kept_recs = [r for r in session.records if case.tail_start <= r.source_order < case.cut]
    late = [normalise(r.text) for r in kept_recs] + [normalise(r.target) for r in kept_recs if r.target]
    late.append(normalise(kept))
    everything = [normalise(r.text) for r in session.records]
    everything += [normalise(r.target) for r in session.records if r.target]
    everything.append(normalise(probes.system_prompt_text(session)))
    raw = session.to_jsonl().decode("utf-8")
    assert case.tail_start <= case.cut
    for q in case.questions:
        assert normalise(q.answer) not in normalise(q.prompt), (q.prompt, q.answer)
        for alias in q.aliases:
            assert normalise(alias) not in normalise(q.prompt)
        if q.decoy:
            assert q.source_order == -1 and q.source_entry_id == ""
            assert not any(normalise(q.answer) in t for t in everything), q.answer
            assert q.answer not in raw
            continue
        rec = by_order[q.source_order]
        assert rec.entry_id == q.source_entry_id
        assert q.answer in rec.text  # occurs in its source entry
        assert q.source_order < case.tail_start  # before the tail
        for form in (q.answer, *q.aliases):
            assert not any(normalise(form) in t for t in late), (q.id, form)  # not kept verbatim before the cut
        assert rec.pointer == q.pointer
        assert "\n" not in q.answer and len(q.answer.split()) < 4
    probes.check_probe_case(case, session, kept=kept)


# --------------------------------------------------------------------------- a hand-made session

_FILLER = "Nothing notable here, just routine output of the build. " * 12


def _orders_session(extra_tail: tuple = (), metadata: dict | None = None) -> Session:
    s = make_session(
        [
            ("system", "You are a coding agent. Keep answers short."),
            ("user", "Add a retry to the orders client. Use port 7412 for the dev server."),
            (
                "assistant",
                "I registered the retry policy as `retry-pol-k7x2q`. The p95 latency was 184.37 ms before the change.",
            ),
            (
                "tool_call",
                'create_order {"sku": "SKU-1", "qty": 2}',
                {"tool": "create_order", "target": "POST /v1/orders", "call_id": "c1"},
            ),
            (
                "tool_output",
                '{"status": "created"}\norder created: ORD-58213\n',
                {"tool": "create_order", "target": "POST /v1/orders", "call_id": "c1"},
            ),
            ("tool_call", 'bash {"command": "pytest -q"}', {"tool": "bash", "target": "pytest -q", "call_id": "c2"}),
            (
                "tool_output",
                "..F.\nFAILED tests/test_orders.py::test_refund_rounding - AssertionError: assert 3 == 4\n"
                "1 failed, 3 passed in 0.42s",
                {"tool": "bash", "target": "pytest -q", "call_id": "c2"},
            ),
            ("assistant", "The rounding test fails; I will look at it next."),
            ("tool_call", 'bash {"command": "make build"}', {"tool": "bash", "target": "make build", "call_id": "c3"}),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make build", "call_id": "c3"}),
            *extra_tail,
            ("assistant", "Build is fine."),
        ],
        session_id="orders",
    )
    if metadata:
        s = Session(id=s.id, source_format=s.source_format, records=s.records, metadata=metadata)
    return s


#: Tail budget that leaves records 8.. (the build call, its output, the last reply) in the tail.
_TAIL = 150


def _orders_case(**kw):
    s = kw.pop("session", None) or _orders_session()
    return s, mine(s, ProbeSpec(tail_tokens=_TAIL, **kw))


def test_hand_made_session_wording_is_pinned():
    s, m = _orders_case()
    assert m.case.tail_start == 8
    prompts = {q.answer: q.prompt for q in m.case.real}
    assert prompts == {
        "7412": "What value did the user specify at step 1: \u201cUse port \u2026 for the dev server\u201d?",
        "retry-pol-k7x2q": "What ID did the assistant give at step 2: "
        "\u201cregistered the retry policy as `\u2026`\u201d?",
        "184.37 ms": "What value did the assistant report at step 2: "
        "\u201cThe p95 latency was \u2026 before the change\u201d?",
        "ORD-58213": "What ID did the `create_order` call on `POST /v1/orders` return at step 4: "
        "\u201corder created: \u2026\u201d?",
        "tests/test_orders.py::test_refund_rounding": "Which failing test did the `bash` call on `pytest -q` report at "
        "step 6: \u201cFAILED \u2026 - AssertionError: assert 3\u201d?",
        "0.42s": "What number did the `bash` call on `pytest -q` report at step 6: "
        "\u201c1 failed, 3 passed in \u2026\u201d?",
    }
    cats = {q.answer: (q.pointer, q.category) for q in m.case.real}
    assert cats["ORD-58213"] == ("tool", "tool_returned_id")
    assert cats["7412"] == ("user", "number")
    assert cats["184.37 ms"] == ("assistant", "number")
    assert cats["tests/test_orders.py::test_refund_rounding"] == ("tool", "error_string")
    aliases = {q.answer: q.aliases for q in m.case.real}
    assert aliases["184.37 ms"] == ("184.37ms",) and aliases["0.42s"] == ("0.42 s",)
    # "AssertionError: assert 3 == 4" is five words: a sentence, not an exact value; it is counted as dropped
    assert m.dropped["phrase"] == 1
    assert any("1 phrase" in n for n in m.notes)
    assert_case_sound(m.case, s)


def test_ids_and_order():
    s, m = _orders_case()
    real, decoys = m.case.real, m.case.decoys
    assert [q.id for q in real] == [f"orders-probe-p{i:02d}" for i in range(len(real))]
    assert [q.id for q in decoys] == [f"orders-probe-d{i:02d}" for i in range(len(decoys))]
    assert [q.source_order for q in real] == sorted(q.source_order for q in real)
    assert m.case.questions == real + decoys
    assert m.case.cut == 11 and m.case.session_id == "orders"
    assert mine_case(s, tail_tokens=_TAIL, case_id="mine").id == "mine"


def test_tail_is_the_banks():
    s, m = _orders_case()
    assert m.case.tail_start == tail_start_of(s, m.case.cut, _TAIL)


def test_values_seen_in_the_tail_or_the_system_prompt_are_never_asked():
    tail = (("assistant", "Still waiting on ORD-58213 and port 7412."),)
    s = _orders_session(extra_tail=tail, metadata={"system_prompt": "Always report latencies like 184.37 ms."})
    m = mine(s, ProbeSpec(tail_tokens=_TAIL + 20))
    assert m.case.tail_start <= 10
    answers = {q.answer for q in m.case.real}
    assert answers and not answers & {"ORD-58213", "7412", "184.37 ms"}
    assert_case_sound(m.case, s)


def test_prompt_never_gives_the_answer_away():
    # the value sits twice in its line: every window would show it, so the window is dropped
    s = make_session(
        [
            ("user", "Set REGION-4471 as primary, REGION-4471 only."),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
        ]
    )
    m = mine(s, ProbeSpec(tail_tokens=40))
    assert [q.answer for q in m.case.real] == ["REGION-4471"]
    assert m.case.real[0].prompt == "What ID did the user specify at step 0?"
    assert_case_sound(m.case, s)


def test_ambiguous_prose_without_a_window_is_not_asked():
    s = make_session(
        [
            ("assistant", "Options:\n`alpha-7781`\n`beta-9926`"),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
        ]
    )
    m = mine(s, ProbeSpec(tail_tokens=40))
    # each value's line gives no words, the line before ("Options:") does
    assert {q.answer for q in m.case.real} == {"alpha-7781", "beta-9926"}
    assert all("\u201c" in q.prompt for q in m.case.real)


def test_rare_values_are_preferred():
    s = make_session(
        [
            ("tool_output", "job JOB-11111 queued", {"tool": "bash", "target": "a"}),
            ("tool_output", "job JOB-11111 still queued", {"tool": "bash", "target": "b"}),
            ("tool_output", "job JOB-22222 queued", {"tool": "bash", "target": "c"}),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
        ]
    )
    for seed in range(8):
        m = mine(s, ProbeSpec(tail_tokens=40, n_questions=1, n_decoys=0, seed=seed))
        assert [q.answer for q in m.case.real] == ["JOB-22222"]


def test_overlapping_values_are_not_both_asked():
    s = make_session(
        [
            ("assistant", "I changed `service.py` today."),
            ("assistant", "The file is app/refunds/service.py now."),
            ("tool_output", _FILLER, {"tool": "bash", "target": "make"}),
        ]
    )
    m = mine(s, ProbeSpec(tail_tokens=40))
    answers = [q.answer for q in m.case.real]
    assert len(answers) == 1 and answers[0] in ("service.py", "app/refunds/service.py")


def test_empty_and_candidate_free_sessions():
    s = make_session([("user", "hi"), ("assistant", "hello")])
    m = mine(s)
    assert m.case.questions == () and m.decoys_skipped == 2 and m.notes
    empty = Session(id="empty", source_format="test", records=())
    assert mine(empty).case.questions == ()


# --------------------------------------------------------------------------- decoys


def test_mutations_look_alike():
    rng = random.Random(3)
    vocab = ["ledger", "beacon", "harbor"]
    for _ in range(20):
        v = probes.mutate("ORD-58213", "identifier", rng, vocab)
        assert re.fullmatch(r"ORD-\d{5}", v) and v != "ORD-58213"
        h = probes.mutate("6322cf4", "identifier", rng, vocab)
        assert re.fullmatch(r"[0-9a-f]{7}", h) and h != "6322cf4"
        n = probes.mutate("184.37 ms", "number", rng, vocab)
        assert re.fullmatch(r"[1-9]\d{2}\.\d{2} ms", n) and n != "184.37 ms"
        p = probes.mutate("src/math_utils.py", "path", rng, vocab)
        assert p.startswith("src/") and p.endswith(".py") and p != "src/math_utils.py"
        b = probes.mutate("bld-20240308-d2s27z", "tool_returned_id", rng, vocab)
        assert b.startswith("bld-") and len(b) == len("bld-20240308-d2s27z") and b != "bld-20240308-d2s27z"


def test_decoys_are_absent_lookalikes_with_made_up_subjects():
    s, m = _orders_case(n_decoys=2)
    assert len(m.case.decoys) == 2 and m.decoys_skipped == 0
    real_prompts = {q.prompt for q in m.case.real}
    for d in m.case.decoys:
        assert d.decoy and d.pointer in POINTERS
        assert d.prompt not in real_prompts  # the subject is made up too
    assert_case_sound(m.case, s)


def test_decoys_that_cannot_be_made_are_skipped_and_reported():
    s, m = _orders_case(n_decoys=50)
    assert len(m.case.decoys) < 50
    assert m.decoys_skipped == 50 - len(m.case.decoys)
    assert any("decoys" in n for n in m.notes)
    assert_case_sound(m.case, s)


# --------------------------------------------------------------------------- sampling and the mix


def test_plan_counts_natural_and_mix():
    assert probes.plan_counts({"assistant": 1, "user": 0, "tool": 100}, 20, None) == (
        {"assistant": 1, "user": 0, "tool": 19},
        {"assistant": 1, "user": 0, "tool": 19},
    )
    # fewer questions than pointers: the most available first
    one = probes.plan_counts({"assistant": 3, "user": 1, "tool": 9}, 1, None)[1]
    assert one == {"assistant": 0, "user": 0, "tool": 1}
    few = probes.plan_counts({"assistant": 2, "user": 2, "tool": 2}, 20, None)[1]
    assert few == {"assistant": 2, "user": 2, "tool": 2}
    planned, asked = probes.plan_counts(
        {"assistant": 3, "user": 50, "tool": 50}, 20, {"assistant": 0.8, "user": 0.1, "tool": 0.1}
    )
    assert planned == {"assistant": 16, "user": 2, "tool": 2} and asked == {"assistant": 3, "user": 2, "tool": 2}


def test_mix_shortfall_is_recorded_never_invented():
    s, m = _orders_case(pointer_mix={"assistant": 1.0}, n_questions=5)
    assert m.asked == {"assistant": 2, "user": 0, "tool": 0}
    assert m.planned == {"assistant": 5, "user": 0, "tool": 0}
    assert m.shortfall == {"assistant": 3, "user": 0, "tool": 0}
    assert any("fewer assistant" in n for n in m.notes)
    assert_case_sound(m.case, s)


def test_spec_from_mapping_and_validation():
    spec = ProbeSpec.from_mapping(
        {
            "tail_tokens": "4096",
            "n_questions": 12,
            "pointer_mix": '{"assistant": 0.8, "user": 0.1, "tool": 0.1}',
            "seed": "3",
            "unknown": 1,
            "n_decoys": None,
        }
    )
    assert spec.tail_tokens == 4096 and spec.n_questions == 12 and spec.seed == 3 and spec.n_decoys == 2
    assert spec.mix == {"assistant": 0.8, "user": 0.1, "tool": 0.1}
    assert ProbeSpec.from_mapping({"pointer_mix": "none"}).mix is None
    assert ProbeSpec().pointer_mix is None
    hash(spec)  # frozen and hashable (the mix is stored as pairs)
    with pytest.raises(ValueError):
        ProbeSpec(pointer_mix={"robot": 1.0})
    with pytest.raises(ValueError):
        ProbeSpec(n_questions=-1)
    with pytest.raises(ValueError):
        ProbeSpec(cuts_per_session=0)


# --------------------------------------------------------------------------- real fixtures


def _fixture(name: str) -> Session:
    return _FIXTURES[name]


_FIXTURES: dict[str, Session] = {}


@pytest.fixture(scope="module", autouse=True)
def _load_fixtures():
    if not _FIXTURES:
        for s in load_sessions(PUBLIC_FIXTURES):
            _FIXTURES[Path(s.source_path).name] = s
    yield


_MINED: dict[tuple, MinedCase] = {}


def _mined(name: str, **kw) -> MinedCase:
    key = (name, tuple(sorted(kw.items(), key=str)))
    if key not in _MINED:
        _MINED[key] = mine(_fixture(name), ProbeSpec(**kw))
    return _MINED[key]


#: The big fixtures and a tail budget that leaves them a covered part. The
#: claude-code session is ~3k report tokens in all, so its default 8k tail would
#: cover nothing; the SWE-agent trajectory's first ~5k tokens are the system
#: prompt and an injected demonstration (not mined), and its few messages give
#: at most two questions each, so its tail is small too.
BIG = {"large-session.jsonl": 8192, "pydicom__pydicom-1458.traj": 300, "coverage-test-fix.jsonl": 400}
#: Real questions each gives at least: the claude-code session's covered part is one listing of six
#: paths (two asked per message), its file names (forms of those paths) and canned tool text
#: (``cat -n``, git's hints, ``pyproject.toml``), which is never asked.
AT_LEAST = {"large-session.jsonl": 10, "pydicom__pydicom-1458.traj": 10, "coverage-test-fix.jsonl": 6}


@pytest.mark.parametrize("name", sorted(BIG))
def test_big_fixtures_yield_sound_questions_over_every_pointer(name):
    m = _mined(name, tail_tokens=BIG[name])
    s = _fixture(name)
    assert 0 < m.case.tail_start < m.case.cut
    assert len(m.case.real) >= AT_LEAST[name], m.notes
    asked = m.asked
    for p in POINTERS:  # every pointer the session has candidates of is represented
        assert (asked[p] > 0) == (m.available[p] > 0), (p, m.available, asked)
    assert len(m.case.decoys) == 2
    assert_case_sound(m.case, s)


def test_big_fixtures_have_the_pointers_we_expect():
    # pi and SWE-agent have user, assistant and tool values in their covered part; the claude-code
    # session's only user turn recurs in the tail (its ids and paths are everywhere), so it has none
    assert all(_mined("large-session.jsonl", tail_tokens=8192).asked[p] for p in POINTERS)
    assert all(_mined("pydicom__pydicom-1458.traj", tail_tokens=300).asked[p] for p in POINTERS)
    cc = _mined("coverage-test-fix.jsonl", tail_tokens=400)
    assert cc.asked["assistant"] and cc.asked["tool"]


@pytest.mark.parametrize("name", ["hello-world-script.jsonl", "sample-session.jsonl"])
def test_tiny_fixtures_ask_what_is_possible(name):
    # ~9 records and a few hundred tokens: with a 20-token tail the covered part holds one or two
    # values at most (a commit hash, a written file), and that is all that is asked; the hello-world
    # session's only one is ``/bin/bash``, a guess rather than a memory, so it asks nothing and says why
    m = _mined(name, tail_tokens=20)
    if name == "hello-world-script.jsonl":
        assert m.case.real == () and m.dropped["guessable"] == 1
        assert any("1 guessable" in n for n in m.notes), m.notes
    else:
        assert 1 <= len(m.case.real) <= sum(m.available.values())
    for p in POINTERS:
        assert (m.asked[p] > 0) == (m.available[p] > 0)
    assert_case_sound(m.case, _fixture(name))
    # the default tail swallows these sessions whole: nothing is covered, nothing is asked
    assert _mined(name).case.real == ()


@pytest.mark.slow
def test_every_fixture_at_the_default_tail_is_sound():
    for name, s in _FIXTURES.items():
        assert_case_sound(_mined(name).case, s)


def test_determinism_on_a_real_session():
    a = _mined("large-session.jsonl", tail_tokens=8192)
    b = mine(_fixture("large-session.jsonl"), ProbeSpec(tail_tokens=8192))
    assert bank_to_jsonl([a.case]) == bank_to_jsonl([b.case])
    c = _mined("large-session.jsonl", tail_tokens=8192, seed=8)
    assert {q.answer for q in c.case.real} != {q.answer for q in a.case.real}
    assert len(c.case.real) == len(a.case.real)


def test_pointer_mix_respected_on_a_real_session():
    m = _mined("large-session.jsonl", tail_tokens=8192, pointer_mix=(("assistant", 0.8), ("user", 0.1), ("tool", 0.1)))
    assert m.asked == {"assistant": 16, "user": 2, "tool": 2}
    assert m.shortfall == {"assistant": 0, "user": 0, "tool": 0}
    assert_case_sound(m.case, _fixture("large-session.jsonl"))


def test_natural_proportions_follow_availability():
    m = _mined("large-session.jsonl", tail_tokens=8192)
    assert m.available["tool"] > m.available["assistant"] > m.available["user"] > 0
    assert m.asked["tool"] > m.asked["assistant"] >= m.asked["user"] >= 1


def test_mine_cases_one_per_session_or_several_cuts():
    sessions = [_fixture("coverage-test-fix.jsonl"), _fixture("pydicom__pydicom-1458.traj")]
    cases = mine_cases(sessions, tail_tokens=400)
    assert [c.session_id for c in cases] == [s.id for s in sessions]
    assert all(c.cut == s.records[-1].source_order + 1 for c, s in zip(cases, sessions, strict=False))
    several = mine_cases(sessions, tail_tokens=400, cuts_per_session=2, n_decoys=0)
    assert len(several) == 4
    assert len({c.id for c in several}) == 4 and len({(c.session_id, c.cut) for c in several}) == 4
    for c in several:
        assert_case_sound(c, next(s for s in sessions if s.id == c.session_id))

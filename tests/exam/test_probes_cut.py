"""exam.questions.probes at a cut: what disqualifies a value (the kept region, not what follows the cut), the pool, checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions import probes
from compaction_lab.exam.questions.probes import ProbeSpec, mine
from compaction_lab.exam.types import POINTERS, bank_to_jsonl
from tests.helpers import make_session

_SPEC = ProbeSpec(n_questions=20, n_decoys=0)


def _compacted_session() -> Session:
    """A session compacted at record 6: a summary there repeats values, and the session goes on using them."""
    return make_session(
        [
            ("user", "Ship the refund fix; the ticket is RFD-39055 and use port 7412."),
            ("assistant", "Created the branch fix/rfd-39055 and the job JOB-48213 for it."),
            ("tool_call", "bash make deploy", {"tool": "bash", "target": "make deploy", "call_id": "c1"}),
            ("tool_output", "deployed build bld-20240308-d2s27z in 184.37 ms", {"tool": "bash", "call_id": "c1"}),
            ("assistant", "Deployed; the rollback id is RB-77120."),
            ("assistant", "Waiting on JOB-48213 before the release notes."),
            # the cut is 6: the agent's own summary, then the rest of the session
            ("summary", "Summary: ticket RFD-39055, build bld-20240308-d2s27z deployed in 184.37 ms, port 7412."),
            ("user", "Is RFD-39055 closed? Check bld-20240308-d2s27z again."),
            ("assistant", "RFD-39055 is closed; the rollback RB-77120 was not needed."),
        ],
        session_id="compacted",
    )


def test_occurrences_after_the_cut_never_disqualify_a_value():
    # Acceptance 1's pinned test: the summary after the cut and the later records repeat RFD-39055,
    # bld-20240308-d2s27z, 184.37 ms, 7412 and RB-77120; all stay eligible. JOB-48213 is in the
    # kept region (tail_start 5 .. cut 6), so it is not.
    s = _compacted_session()
    m = mine(s, _SPEC, cut=6, tail_start=5)
    pool = {q.answer for q in m.pool}
    assert {"RFD-39055", "7412", "bld-20240308-d2s27z", "184.37 ms", "RB-77120"} <= pool
    assert "JOB-48213" not in pool
    assert m.case.cut == 6 and m.case.tail_start == 5
    probes.check_probe_case(m.case, s)


def test_the_old_rule_would_have_dropped_them():
    # mining at the session's end with the same kept records puts the summary and the rest in the
    # kept region: then those values are late and not eligible
    s = _compacted_session()
    m = mine(s, _SPEC, tail_start=5)
    assert not {q.answer for q in m.pool} & {"RFD-39055", "7412", "bld-20240308-d2s27z", "RB-77120"}


def test_kept_text_makes_a_value_ineligible():
    s = _compacted_session()
    m = mine(s, _SPEC, cut=6, tail_start=6, kept="The agent kept: rollback RB-77120 and port 7412.")
    pool = {q.answer for q in m.pool}
    assert "RB-77120" not in pool and "7412" not in pool
    assert "JOB-48213" in pool  # nothing is kept before the cut: tail_start == cut
    assert "RFD-39055" in pool
    probes.check_probe_case(m.case, s, kept="The agent kept: rollback RB-77120 and port 7412.")
    # a question whose answer the kept text holds is not sound
    q = next(q for q in m.pool if q.answer == "RFD-39055")
    asked = replace(m.case, questions=(replace(q, id=f"{m.case.id}-p00"),))
    probes.check_probe_case(asked, s)
    with pytest.raises(ValueError, match="kept text"):
        probes.check_probe_case(asked, s, kept="RFD-39055 is what the agent kept verbatim")


def test_tail_start_is_checked():
    s = _compacted_session()
    with pytest.raises(ValueError, match="tail_start"):
        mine(s, _SPEC, cut=4, tail_start=5)
    with pytest.raises(ValueError, match="tail_start"):
        mine(s, _SPEC, cut=4, tail_start=-1)


def test_check_probe_case_reads_the_late_region_up_to_the_cut():
    s = _compacted_session()
    m = mine(s, _SPEC, cut=6, tail_start=5)
    probes.check_probe_case(m.case, s)
    # the same questions against a case whose cut is the session's end: the summary is then kept
    moved = replace(m.case, cut=len(s.records))
    with pytest.raises(ValueError, match="between tail_start and the cut"):
        probes.check_probe_case(moved, s)


# --------------------------------------------------------------------------- the pool


def _many_values_session() -> Session:
    listing = "\n".join(f"build bld-2024030{d}-k{d}x{d}q{d} ready" for d in range(1, 8))
    return make_session(
        [
            ("user", "Deploy RFD-39055 and RFD-39056 on port 7412 please."),
            ("tool_call", "bash ls builds", {"tool": "bash", "target": "ls builds", "call_id": "c1"}),
            ("tool_output", listing, {"tool": "bash", "target": "ls builds", "call_id": "c1"}),
            ("assistant", "The newest is bld-20240307-k7x7q7; I will deploy it as DEP-55120."),
            ("assistant", "Nothing notable here, just routine output of the build. " * 12),
        ],
        session_id="many",
    )


def test_pool_is_every_eligible_value_and_available_counts_it():
    s = _many_values_session()
    m = mine(s, ProbeSpec(tail_tokens=40, n_questions=3, n_decoys=0, max_per_record=1))
    assert len(m.case.real) == 3
    assert [q.id for q in m.pool] == [f"many-probe-e{i:03d}" for i in range(len(m.pool))]
    assert [q.source_order for q in m.pool] == sorted(q.source_order for q in m.pool)
    assert {p: sum(q.pointer == p for q in m.pool) for p in POINTERS} == dict(m.available)
    # before sampling and before the per-record cap: all seven builds of the listing are there
    assert sum(q.source_order == 2 for q in m.pool) == 7
    assert len({normalise(q.answer) for q in m.pool}) == len(m.pool)
    # every sampled question is a pool question (same record, wording, answer, aliases)
    fields = [(q.source_entry_id, q.source_order, q.prompt, q.answer, q.aliases, q.pointer) for q in m.pool]
    for q in m.case.real:
        assert (q.source_entry_id, q.source_order, q.prompt, q.answer, q.aliases, q.pointer) in fields
    assert all(q.case_id == "many-probe" and not q.decoy for q in m.pool)


def test_at_most_max_per_record_questions_from_one_message():
    s = _many_values_session()
    for cap in (1, 2, 3):
        m = mine(s, ProbeSpec(tail_tokens=40, n_questions=20, n_decoys=0, max_per_record=cap))
        per_record: dict[str, int] = {}
        for q in m.case.real:
            per_record[q.source_entry_id] = per_record.get(q.source_entry_id, 0) + 1
        assert max(per_record.values()) <= cap
        assert per_record["e2"] == cap  # the listing gives exactly the cap, the top-up fills from the others
        assert m.dropped["per-record cap"] > 0
        assert any("per-record cap" in n for n in m.notes)
        probes.check_probe_case(m.case, s, max_per_record=cap)
    with pytest.raises(ValueError, match="more than 1"):
        probes.check_probe_case(m.case, s, max_per_record=1)
    with pytest.raises(ValueError, match="max_per_record"):
        ProbeSpec(max_per_record=0)


def test_the_cap_is_a_shortfall_under_a_mix():
    s = _many_values_session()
    m = mine(s, ProbeSpec(tail_tokens=40, n_questions=4, n_decoys=0, pointer_mix={"tool": 1.0}, max_per_record=2))
    assert m.asked["tool"] == 2 and m.shortfall["tool"] == 2


def test_mining_with_a_cut_is_deterministic():
    s = _compacted_session()
    a = mine(s, ProbeSpec(n_decoys=2), cut=6, tail_start=5)
    b = mine(s, ProbeSpec(n_decoys=2), cut=6, tail_start=5)
    assert bank_to_jsonl([a.case]) == bank_to_jsonl([b.case])
    assert a.pool == b.pool and a.dropped == b.dropped and a.notes == b.notes

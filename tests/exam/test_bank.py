"""Tests of the synthetic question bank: shape, pointer mix, provenance, determinism, shortfalls, checks."""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter

import pytest

from compaction_lab.core.tokens import counter
from compaction_lab.exam.questions.bank import (
    BankShortfallWarning,
    BankSpec,
    bank_summary,
    build_bank,
    build_bank_from_spec,
    build_bank_with_report,
    check_bank,
    cut_points,
    tail_start_of,
)
from compaction_lab.exam.types import POINTERS, bank_from_jsonl, bank_to_jsonl
from compaction_lab.ingest import synthetic
from compaction_lab.ingest.synthetic import PlantedFact, SyntheticChain
from compaction_lab.strategies.arms.futureos import tail_boundaries
from tests.helpers import make_session

SMALL = synthetic.SyntheticSpec(window_tokens=20_000, n_chains=2)
SMALL_SPEC = BankSpec(n_cases=4, n_questions=20, n_decoys=2)


@pytest.fixture(scope="module")
def chains() -> list[SyntheticChain]:
    return synthetic.generate_chains(synthetic.SyntheticSpec())


@pytest.fixture(scope="module")
def built(chains):
    return build_bank_with_report(chains)


@pytest.fixture(scope="module")
def small_chains() -> list[SyntheticChain]:
    return synthetic.generate_chains(SMALL)


def _chain_of(chains, session_id) -> SyntheticChain:
    return next(c for c in chains if c.session.id == session_id)


# -- the default bank -----------------------------------------------------------------------


def test_default_bank_has_18_cases_178_questions_8_decoys(built):
    cases, report = built
    assert len(cases) == 18
    assert sum(len(c.questions) for c in cases) == 178
    assert sum(len(c.decoys) for c in cases) == 8
    # decoys: one each to the first 8 cases
    assert [len(c.decoys) for c in cases] == [1] * 8 + [0] * 10
    # real questions: 170 over 18 cases, the remainder (8) one each to the first cases
    assert [len(c.real) for c in cases] == [10] * 8 + [9] * 10
    assert report.ok and report.notes == ()


def test_default_pointer_counts_match_the_mix(built):
    cases, report = built
    got = Counter(q.pointer for c in cases for q in c.real)
    # 170 real questions at 80/10/10: the facts allow the exact largest-remainder targets
    assert dict(got) == {"assistant": 136, "user": 17, "tool": 17}
    assert dict(report.targets) == dict(report.actual) == dict(got)
    assert report.shortfall == {p: 0 for p in POINTERS}


def test_cases_round_robin_over_chains_and_cuts(chains, built):
    cases, _ = built
    ids = [c.session.id for c in chains]
    assert [c.session_id for c in cases] == ids * 3
    for _k, chain in enumerate(chains):
        mine = [c for c in cases if c.session_id == chain.session.id]
        assert [c.id for c in mine] == [f"{chain.session.id}-c{j}" for j in range(3)]
        end = chain.session.records[-1].source_order + 1
        assert mine[0].cut == end
        assert end > mine[1].cut > mine[2].cut > 0
        for c in mine:
            assert c.tail_start < c.cut


def test_cuts_fall_before_a_user_turn_and_never_split_a_call(chains, built):
    cases, _ = built
    for c in cases:
        s = _chain_of(chains, c.session_id).session
        pos = {r.source_order: i for i, r in enumerate(s.records)}
        if c.cut == s.records[-1].source_order + 1:
            continue
        i = pos[c.cut]
        assert s.records[i].kind == "user" and not s.records[i].injected
        assert tail_boundaries(s.records)[i]


def test_tail_start_is_futureos_tail_for_the_budget(chains, built):
    cases, _ = built
    cnt = counter("cl100k_base")
    for c in cases:
        s = _chain_of(chains, c.session_id).session
        tail = [r for r in s.records if c.tail_start <= r.source_order < c.cut and r.kind not in ("meta", "system")]
        assert sum(cnt.count_many([r.text for r in tail])) <= 8192
        # one more record back would overflow the budget or split a call from its output
        before = [r for r in s.records if r.source_order < c.tail_start and r.kind != "meta"]
        assert before
        hist = before + [r for r in s.records if c.tail_start <= r.source_order < c.cut and r.kind != "meta"]
        valid = tail_boundaries(hist)
        p = len(before)
        assert valid[p]
        q = max(i for i in range(p) if valid[i])
        extra = sum(cnt.count_many([r.text for r in hist[q:p] if r.kind != "system"]))
        assert extra + sum(cnt.count_many([r.text for r in tail])) > 8192


def test_check_bank_passes(chains, built):
    check_bank(built[0], chains)


def test_decoy_values_absent_from_every_byte_of_every_chain(chains, built):
    cases, _ = built
    blobs = [c.session.to_jsonl() for c in chains]
    texts = ["\n".join(r.text for r in c.session.records) for c in chains]
    decoys = [q for c in cases for q in c.decoys]
    assert len(decoys) == 8
    for q in decoys:
        assert q.source_entry_id == "" and q.source_order == -1
        chain = _chain_of(chains, q.case_id.rsplit("-c", 1)[0])
        assert q.answer in {d.value for d in chain.decoys}
        for blob, text in zip(blobs, texts, strict=False):
            assert q.answer.encode("utf-8") not in blob
            assert q.answer not in text
            assert q.answer.casefold() not in text.casefold()


def test_every_answer_in_its_source_entry_before_the_tail(chains, built):
    cases, _ = built
    for c in cases:
        chain = _chain_of(chains, c.session_id)
        facts = {f.fact_id: f for f in chain.facts}
        by_value = {f.value: f for f in chain.facts}
        entry_text: dict[str, str] = {}
        for r in chain.session.records:
            entry_text[r.entry_id] = entry_text.get(r.entry_id, "") + "\n" + r.text
        late = "\n".join(r.text for r in chain.session.records if r.source_order >= c.tail_start)
        answers = [q.answer for q in c.real]
        assert len(set(answers)) == len(answers)  # no fact twice in a case
        for q in c.real:
            f = by_value[q.answer]  # every real question is a planted fact of its chain
            assert f.fact_id in facts and not f.is_decoy
            assert (q.prompt, q.pointer, q.category, q.aliases) == (f.question, f.pointer, f.category, f.aliases)
            assert (q.source_entry_id, q.source_order) == (f.entry_id, f.source_order)
            assert q.answer in entry_text[q.source_entry_id]
            assert q.source_order < c.tail_start
            assert q.answer not in late
            assert q.answer not in q.prompt


def test_question_ids_unique_and_numbered(built):
    cases, _ = built
    ids = [q.id for c in cases for q in c.questions]
    assert len(ids) == len(set(ids))
    for c in cases:
        assert [q.id for q in c.questions] == [f"{c.id}-q{n:02d}" for n in range(len(c.questions))]
        assert all(q.case_id == c.id for q in c.questions)
        real = [q.source_order for q in c.real]
        assert real == sorted(real)


def test_facts_reused_only_across_cases_of_a_chain(built):
    cases, _ = built
    per_chain: dict[str, Counter] = {}
    for c in cases:
        per_chain.setdefault(c.session_id, Counter()).update(q.answer for q in c.real)
    # fresh facts are preferred, so most questions of a chain ask distinct facts
    for counts in per_chain.values():
        assert len(counts) >= 0.7 * sum(counts.values())


# -- determinism and parameters -----------------------------------------------------------


def test_same_seed_is_byte_identical_and_another_seed_differs(chains, built):
    again = build_bank(chains)
    assert bank_to_jsonl(again) == bank_to_jsonl(built[0])
    other = build_bank(chains, seed=8)
    assert bank_to_jsonl(other) != bank_to_jsonl(built[0])
    check_bank(other, chains)
    assert bank_from_jsonl(bank_to_jsonl(again)) == again


def test_a_different_pointer_mix_changes_the_counts(chains, built):
    with warnings.catch_warnings():
        warnings.simplefilter("error", BankShortfallWarning)
        cases, report = build_bank_with_report(chains, BankSpec(pointer_mix={"tool": 1.0}))
    got = Counter(q.pointer for c in cases for q in c.real)
    assert dict(got) == {"tool": 170}
    assert report.ok
    mixed, _ = build_bank_with_report(chains, BankSpec(pointer_mix={"assistant": 1, "user": 1, "tool": 2}))
    got = Counter(q.pointer for c in mixed for q in c.real)
    # 170 × (1/4, 1/4, 1/2) = 42.5, 42.5, 85: the tie goes to assistant (POINTERS order)
    assert dict(got) == {"assistant": 43, "user": 42, "tool": 85}


def test_spec_and_keyword_entry_points_agree(chains, built):
    spec = BankSpec.from_mapping(
        {
            "n_cases": "18",
            "seed": 7,
            "pointer_mix": '{"assistant": 0.8, "user": 0.1, "tool": 0.1}',
            "cut_fractions": "1.0, 0.8, 0.6",
            "window_tokens": 5,
            "x": None,
        }
    )
    assert spec == BankSpec()
    assert bank_to_jsonl(build_bank_from_spec(chains, spec)) == bank_to_jsonl(built[0])


def test_bank_summary_per_case_and_totals(built):
    cases, _ = built
    df = bank_summary(cases)
    assert len(df) == 19 and df.iloc[-1]["case_id"] == "total"
    total = df.iloc[-1]
    assert (total["questions"], total["real"], total["decoys"]) == (178, 170, 8)
    assert (total["assistant"], total["user"], total["tool"]) == (136, 17, 17)
    body = df.iloc[:-1]
    assert list(body["case_id"]) == [c.id for c in cases]
    assert (body["assistant"] + body["user"] + body["tool"] == body["real"]).all()
    assert list(body["tail_start"]) == [c.tail_start for c in cases]


# -- small profiles and shortfalls ----------------------------------------------------------


def test_small_profile_bank_works(small_chains):
    cases, report = build_bank_with_report(small_chains, SMALL_SPEC)
    assert len(cases) == 4
    assert {c.session_id for c in cases} == {c.session.id for c in small_chains}
    assert sum(len(c.decoys) for c in cases) == 2
    check_bank(cases, small_chains)
    real = sum(len(c.real) for c in cases)
    assert real + report.missing_real == 18 and real == report.real_built
    # whatever the facts did not allow is reported, never invented
    for c, a in zip(cases, report.cases, strict=False):
        assert len(c.real) == a.real_actual <= a.real_planned
        for p in POINTERS:
            assert a.actual[p] <= a.eligible[p]
    if not report.ok:
        assert report.notes
        with pytest.warns(BankShortfallWarning):
            build_bank_from_spec(small_chains, SMALL_SPEC)


def test_shortfall_reported_without_inventing_questions(small_chains):
    spec = BankSpec(n_cases=4, n_questions=500, n_decoys=3)
    with pytest.warns(BankShortfallWarning, match="not built"):
        cases = build_bank_from_spec(small_chains, spec)
    _, report = build_bank_with_report(small_chains, spec)
    assert not report.ok and report.missing_real > 0
    assert report.notes[0].startswith(f"{report.missing_real} of 497 real questions not built")
    for c, a in zip(cases, report.cases, strict=False):
        chain = _chain_of(small_chains, c.session_id)
        eligible = {f.value for f in chain.facts if f.source_order < c.tail_start}
        # every eligible fact asked exactly once, nothing else
        assert sorted(q.answer for q in c.real) == sorted(eligible)
        assert sum(a.eligible.values()) == len(eligible)
    assert report.real_built == sum(len(c.real) for c in cases)
    check_bank(cases, small_chains)


def test_decoys_dealt_from_the_case_chain_and_never_twice_in_a_case(small_chains):
    cases, report = build_bank_with_report(small_chains, BankSpec(n_cases=4, n_questions=40, n_decoys=12))
    for c in cases:
        chain = _chain_of(small_chains, c.session_id)
        vals = [q.answer for q in c.decoys]
        assert len(vals) == len(set(vals))
        assert set(vals) <= {d.value for d in chain.decoys}
    # 12 decoys asked, 3 per case, but each chain has only 2
    assert report.missing_decoys == 4
    assert any("decoys (chain" in n for n in report.notes)


def test_more_cases_than_chains_times_cuts_is_an_error(small_chains):
    with pytest.raises(ValueError, match="distinct cases"):
        build_bank(small_chains, n_cases=7, n_questions=7, n_decoys=0)


def test_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="unknown pointers"):
        BankSpec(pointer_mix={"system": 1.0})
    with pytest.raises(ValueError, match="positive sum"):
        BankSpec(pointer_mix={"tool": 0})
    with pytest.raises(ValueError, match="exceeds"):
        BankSpec(n_questions=3, n_decoys=4)
    with pytest.raises(ValueError, match="cut fractions"):
        BankSpec(cut_fractions=(1.2,))
    spec = BankSpec(pointer_mix={"user": 1})
    assert spec.mix == {"assistant": 0.0, "user": 1.0, "tool": 0.0}
    hash(spec)


# -- the counting helpers -----------------------------------------------------------------


def _turns_session():
    call = {"tool": "bash", "call_id": "c1"}
    items = [("system", "sys"), ("user", "go")]
    for k in range(6):
        cid = {"tool": "bash", "call_id": f"c{k}"}
        items += [("assistant", f"step {k}"), ("tool_call", f"bash ls {k}", cid), ("tool_output", f"out {k}", cid)]
    items += [("user", "next"), ("assistant", "ok"), ("tool_call", "bash x", call), ("tool_output", "y", call)]
    return make_session(items)


def test_cut_points_snap_to_user_turns_and_keep_pairs():
    s = _turns_session()
    n = len(s.records)
    cuts = cut_points(s, (1.0, 0.9, 0.5, 0.05))
    assert cuts[0] == n
    # 0.9 of 24 records → 22 (a tool output): snaps back to the user turn at 20
    assert cuts[1] == 20 and s.records[20].kind == "user"
    valid = tail_boundaries(s.records)
    assert all(valid[c] for c in cuts[1:])
    assert len(set(cuts)) == len(cuts)


def test_tail_start_of_keeps_whole_pairs():
    s = _turns_session()
    # a tiny budget still keeps the last call/output unit whole (FutureOS excerpts it rather than dropping it)
    assert tail_start_of(s, len(s.records), 0) == 22
    assert tail_start_of(s, len(s.records), 10**6) == 0  # everything fits (the system record costs nothing)
    assert tail_start_of(s, 0, 100) == 0


# -- check_bank catches corrupted banks -------------------------------------------------------------


def _replace_question(cases, case_index, q_index, **changes):
    cases = list(cases)
    c = cases[case_index]
    qs = list(c.questions)
    qs[q_index] = dataclasses.replace(qs[q_index], **changes)
    cases[case_index] = dataclasses.replace(c, questions=tuple(qs))
    return cases


def test_check_bank_catches_a_present_decoy(chains, built):
    cases = built[0]
    case = cases[0]
    qi = next(i for i, q in enumerate(case.questions) if q.decoy)
    present = _chain_of(chains, cases[3].session_id).facts[-1].value  # present in another chain
    bad = _replace_question(cases, 0, qi, answer=present)
    with pytest.raises(ValueError, match="decoy .* occurs in chain"):
        check_bank(bad, chains)


def test_check_bank_catches_an_answer_after_the_tail(chains, built):
    cases = list(built[0])
    c = cases[0]
    last = max(q.source_order for q in c.real)
    cases[0] = dataclasses.replace(c, tail_start=last)
    with pytest.raises(ValueError, match="not before the tail"):
        check_bank(cases, chains)


def test_check_bank_catches_other_corruptions(chains, built):
    cases = built[0]
    qi = next(i for i, q in enumerate(cases[0].questions) if not q.decoy)
    q = cases[0].questions[qi]
    with pytest.raises(ValueError, match="not in its source entry"):
        check_bank(_replace_question(cases, 0, qi, answer="ZZZ-not-there-00000"), chains)
    with pytest.raises(ValueError, match="contains its answer"):
        check_bank(_replace_question(cases, 0, qi, prompt=f"Is it {q.answer}?"), chains)
    with pytest.raises(ValueError, match="duplicate question id"):
        check_bank(_replace_question(cases, 0, qi, id=cases[0].questions[qi - 1].id), chains)
    with pytest.raises(ValueError, match="not among the chains"):
        check_bank(cases, chains[1:])


def _hand_chain(late_copy: bool) -> SyntheticChain:
    """A two-part session whose answer is planted early and, optionally, repeated in the tail."""
    filler = "word " * 3000
    items = [
        ("system", "sys"),
        ("user", "Use port P-7412-XK for the proxy."),
        ("assistant", filler),
        ("user", "next"),
        ("assistant", "the proxy is p-7412-xk" if late_copy else "done"),
    ]
    s = make_session(items, session_id="hand")
    fact = PlantedFact(
        "hand-f000",
        "hand",
        "user_constraint",
        "user",
        "P-7412-XK",
        (),
        "e1",
        1,
        "Which port did the user say to use for the proxy?",
    )
    decoy = PlantedFact(
        "hand-d00",
        "hand",
        "tool_returned_id",
        "tool",
        "ORD-00000-QQ",
        (),
        "",
        -1,
        "What order ID came back?",
        is_decoy=True,
    )
    return SyntheticChain(s, (fact,), (decoy,))


def test_check_bank_catches_an_answer_repeated_in_the_tail():
    ok = _hand_chain(late_copy=False)
    cases = build_bank([ok], n_cases=1, n_questions=2, n_decoys=1, pointer_mix={"user": 1}, tail_tokens=100)
    assert cases[0].tail_start == 3 and [q.answer for q in cases[0].questions if not q.decoy] == ["P-7412-XK"]
    leaky = _hand_chain(late_copy=True)
    # the same bank over a session that repeats the value (case-folded) in the tail fails
    with pytest.raises(ValueError, match="at or after tail_start"):
        check_bank(cases, [leaky])
    with pytest.raises(ValueError, match="at or after tail_start"):
        build_bank([leaky], n_cases=1, n_questions=2, n_decoys=1, pointer_mix={"user": 1}, tail_tokens=100)


def test_build_raises_when_a_decoy_is_present():
    chain = _hand_chain(late_copy=False)
    # present only after case-folding and whitespace collapse: the grader would still find it
    bad = dataclasses.replace(chain, decoys=(dataclasses.replace(chain.decoys[0], value="Word \n word"),))
    with pytest.raises(ValueError, match="decoy .* occurs in chain hand"):
        build_bank([bad], n_cases=1, n_questions=2, n_decoys=1, pointer_mix={"user": 1}, tail_tokens=100)

"""Tests for `compaction_lab.core.excerpt`: the per-record cap every stage after the tally reads through (issue #12 item 8)."""

from __future__ import annotations

import base64
import dataclasses
import random
import re

import pytest

from compaction_lab.core import excerpt
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.questions import probes
from compaction_lab.ingest import sources, synthetic
from compaction_lab.tally import composition
from tests.helpers import make_session

CAP = excerpt.RECORD_CAP_CHARS


def _blob(chars: int, seed: int = 1) -> str:
    """One line of base64, no whitespace (``base64 -w0 image.png`` in a tool output)."""
    return base64.b64encode(random.Random(seed).randbytes(chars * 3 // 4 + 3)).decode("ascii")[:chars]


def _words(chars: int, seed: int = 2) -> str:
    rng = random.Random(seed)
    vocab = ["alpha", "beta", "gamma", "delta", "ORD-58213", "src/app.py", "1,024", "retry", "the"]
    out, n = [], 0
    while n < chars:
        w = rng.choice(vocab)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:chars]


def _big_session(text: str, session_id: str = "big"):
    return make_session(
        [
            ("user", "Encode the logo and show me the output."),
            ("tool_call", "shell base64 -w0 logo.png", {"tool": "shell", "call_id": "c1"}),
            ("tool_output", text, {"tool": "shell", "call_id": "c1"}),
            ("assistant", "The encoded logo is above; the build id was BLD-48213-QZ."),
            ("user", "Thanks."),
        ],
        session_id=session_id,
    )


# --------------------------------------------------------------------------- the excerpt itself


def test_a_text_within_the_cap_is_returned_as_is():
    text = _words(5_000)
    assert excerpt.excerpt_text(text, 5_000) is text
    assert excerpt.excerpt_text("", 1_000) == ""


def test_a_long_text_keeps_its_head_and_tail_around_a_marker_that_says_how_much_was_left_out():
    text = _blob(1_000_000)
    out = excerpt.excerpt_text(text, CAP)
    assert len(out) <= CAP
    (m,) = list(excerpt.MARKER_PATTERN.finditer(out))
    head, tail = out[: m.start()], out[m.end() :]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) > CAP * 0.99  # nearly all of the cap is content, not marker
    left_out = len(text) - len(head) - len(tail)
    assert f"{left_out:,} of {len(text):,} characters left out" in m.group(0)
    assert f"first {len(head):,} and last {len(tail):,}" in m.group(0)
    assert f"per-record cap {CAP:,}" in m.group(0)


def test_the_excerpt_is_deterministic_and_excerpting_it_again_changes_nothing():
    text = _blob(600_000)
    once = excerpt.excerpt_text(text, CAP)
    assert excerpt.excerpt_text(text, CAP) == once
    assert excerpt.excerpt_text(once, CAP) is once


def test_cuts_fall_on_whitespace_so_no_word_or_id_is_halved():
    text = _words(400_000)
    out = excerpt.excerpt_text(text, CAP)
    m = excerpt.MARKER_PATTERN.search(out)
    head, tail = out[: m.start()], out[m.end() :]
    assert head.endswith(" ") and not tail[0].isspace()
    assert text[len(head) - 1] == " " and text[len(text) - len(tail) - 1] == " "


@pytest.mark.parametrize("cap", [0, 999, -5, 1.5, "200000", True, None])
def test_a_bad_cap_is_a_clear_error(cap):
    with pytest.raises(ValueError, match="per-record cap must be an integer"):
        excerpt.excerpt_text("x" * 5_000, cap)
    with pytest.raises(ValueError, match="per-record cap"):
        excerpt.cap_sessions([], cap)


# --------------------------------------------------------------------------- counting


def test_cap_sessions_counts_what_it_excerpted_and_leaves_other_records_and_sessions_alone():
    big = _big_session(_blob(3_000_000))
    small = _big_session("short output", session_id="small")
    ex = excerpt.cap_sessions([big, small], CAP)
    assert ex.records == 1 and ex.largest == 3_000_000 and ex.cap == CAP
    capped, same = ex.sessions
    assert same is small
    assert [len(r.text) <= CAP for r in capped.records] == [True] * len(big.records)
    (out,) = [r for r in capped.records if r.kind == "tool_output"]
    assert ex.chars_left_out == 3_000_000 - len(excerpt.MARKER_PATTERN.sub("", out.text))
    # Everything but the long record's text is untouched.
    assert [r for r in capped.records if r.kind != "tool_output"] == [r for r in big.records if r.kind != "tool_output"]
    assert out.entry_id == "e2" and out.tool == "shell" and out.call_id == "c1"


def test_the_capper_excerpts_record_by_record_and_counts_as_cap_sessions_does():
    sessions = [_big_session(_blob(500_000), "a"), _big_session("short", "b"), _big_session(_words(300_000), "c")]
    whole = excerpt.cap_sessions(sessions, CAP)
    capper = excerpt.Capper(CAP)
    streamed = capper.excerpts(dataclasses.replace(s, records=tuple(map(capper, s.records))) for s in sessions)
    assert streamed == whole
    assert (streamed.records, streamed.largest) == (2, 500_000)
    with pytest.raises(ValueError, match="per-record cap"):
        excerpt.Capper(10)


def test_the_note_names_the_stage_the_count_and_the_cap():
    ex = excerpt.cap_sessions([_big_session(_blob(500_000), "a"), _big_session(_blob(400_000), "b")], CAP)
    note = ex.note("the exam")
    assert note.startswith(f"2 records excerpted to at most {CAP:,} characters for the exam")
    assert f"{ex.chars_left_out:,} characters left out" in note and "500,000" in note
    assert excerpt.cap_sessions([_big_session("short")], CAP).note("the exam") == ""


def test_for_stage_says_so_on_stderr_only_when_it_excerpted(capsys):
    excerpt.for_stage([_big_session("short")], "the exam")
    assert capsys.readouterr() == ("", "")
    (s,) = excerpt.for_stage([_big_session(_blob(300_000))], "the exam")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("note: 1 record excerpted to at most 200,000 characters for the exam")
    assert max(len(r.text) for r in s.records) <= CAP


# --------------------------------------------------------------------------- the stages' entry points


@pytest.fixture
def big_run(tmp_path):
    """A run folder whose saved session holds one 3 MB single-line tool output."""
    session = _big_session(_blob(3_000_000))
    sources.save(sources.Sources((session,), "imported"), tmp_path)
    return tmp_path, session


def test_load_saved_gives_later_stages_excerpts_and_the_run_folder_keeps_the_full_text(big_run, capsys):
    run, session = big_run
    (loaded,) = sources.load_saved(run)
    assert max(len(r.text) for r in loaded.records) <= CAP
    assert "note: 1 record excerpted" in capsys.readouterr().err
    (saved,) = (run / "sessions").glob("*.jsonl")
    assert session.records[2].text in saved.read_text(encoding="utf-8")  # no data lost
    (whole,) = sources.load_saved(run, cap=10_000_000)
    assert whole.records == session.records
    assert loaded == excerpt.cap_sessions([session], CAP).sessions[0]  # read a line at a time, capped the same


def test_load_saved_rejects_a_bad_cap_before_reading_anything(tmp_path):
    with pytest.raises(ValueError, match="per-record cap"):
        sources.load_saved(tmp_path, cap=10)  # an empty folder would otherwise be FileNotFoundError


def test_the_exam_and_cost_notebooks_read_excerpts(big_run, monkeypatch):
    """for_run serves notebooks 03, 04 (cost) and 05 (open book, archive): its sessions and the probe miner's are capped."""
    run, _ = big_run
    seen: list[int] = []
    mine = probes.mine

    def spy(session, spec, **kw):
        seen.extend(len(r.text) for r in session.records)
        return mine(session, spec, **kw)

    monkeypatch.setattr(probes, "mine", spy)
    rc = exam_cases.for_run(run, {"tail_tokens": 50, "probe_n_questions": 5, "cut": "end"})
    assert seen and max(seen) <= CAP
    assert all(len(r.text) <= CAP for s in rc.sessions.values() for r in s.records)


def test_the_exam_built_from_imported_sessions_reads_excerpts(monkeypatch, capsys):
    """`compaction-lab exam` builds straight from the imported sessions, without load_saved."""
    seen: list[int] = []
    mine = probes.mine
    monkeypatch.setattr(
        probes,
        "mine",
        lambda s, spec, **kw: seen.extend(len(r.text) for r in s.records) or mine(s, spec, **kw),
    )
    rc = exam_cases.build([_big_session(_blob(1_000_000))], None, {"tail_tokens": 50, "cut": "end"})
    assert seen and max(seen) <= CAP
    assert all(len(r.text) <= CAP for s in rc.sessions.values() for r in s.records)
    assert "for the exam" in capsys.readouterr().err


def test_the_follow_up_attribution_reads_excerpts(monkeypatch, capsys):
    seen: list[int] = []
    find = composition.find_followups

    def spy(session, min_score=1.5):
        seen.extend(len(r.text) for r in session.records)
        return find(session, min_score=min_score)

    monkeypatch.setattr(composition, "find_followups", spy)
    composition.followups_table([_big_session(_blob(1_000_000))])
    assert seen and max(seen) <= CAP
    assert "for the follow-up attribution" in capsys.readouterr().err


def test_the_tally_still_counts_the_true_size():
    text = _blob(2_000_000)
    comp = composition.composition_table([_big_session(text)])
    row = comp[comp["kind"] == "tool_output"].iloc[0]
    assert row["chars"] == 2_000_000
    from compaction_lab.core.tokens import get_encoding

    assert row["tokens"] == len(get_encoding().encode_ordinary(text))


def test_probes_never_ask_about_the_marker():
    # A guard (the marker is worded so that no probe rule matches it): its numbers are no session's values,
    # and the words and IDs on both sides of the cut are still mined.
    text = " ".join(f"order ORD-{i:05d}-QX shipped in {i % 97 + 3} days" for i in range(20_000))
    rec = _big_session(excerpt.excerpt_text(text, 20_000)).records[2]
    m = excerpt.MARKER_PATTERN.search(rec.text)
    found = probes.extract(rec)
    assert found  # the excerpt's content is still mined
    assert all(c.end <= m.start() or c.start >= m.end() for c in found)
    marker_numbers = set(re.findall(r"\d[\d,]+", m.group(0)))
    assert not marker_numbers & {c.value for c in found}


# --------------------------------------------------------------------------- normal sessions


def test_normal_sessions_are_the_very_same_objects():
    chains = synthetic.generate_chains(synthetic.SyntheticSpec(seed=7, n_chains=2, window_tokens=6000), progress=False)
    sessions = [c.session for c in chains]
    ex = excerpt.cap_sessions(sessions)
    assert ex.records == 0 and ex.chars_left_out == 0 and ex.note("the exam") == ""
    assert all(a is b for a, b in zip(ex.sessions, sessions, strict=False))


def test_a_normal_run_folder_loads_unchanged_and_silently(tmp_path, capsys):
    chains = synthetic.generate_chains(synthetic.SyntheticSpec(seed=7, n_chains=1, window_tokens=4000), progress=False)
    src = sources.Sources(tuple(c.session for c in chains), "synthetic", tuple(chains))
    sources.save(src, tmp_path)
    (loaded,) = sources.load_saved(tmp_path)
    assert loaded.records == chains[0].session.records
    assert capsys.readouterr().err == ""

"""The recorded block of the exam: cases at the compactions agents recorded, every arm beside them."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from compaction_lab import ingest
from compaction_lab.core import runfolder
from compaction_lab.exam import readers
from compaction_lab.exam.exams import recorded
from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.report import charts
from compaction_lab.strategies.base import CompactionContext
from compaction_lab.summarize.extractive import ExtractiveSummarizer
from tests.helpers import FIXTURES
from tests.recorded_expectations import EXPECTED, FILES, MODELS, load

#: A tiny tail, so that these short sessions have questions before it.
PARAMS = {"tail_tokens": 8, "probe_n_questions": 8, "probe_n_decoys": 1, "seed": 7}


@pytest.fixture(scope="module")
def sessions():
    swe = next(iter(ingest.load_sessions(FIXTURES / "swe_agent" / "function_calling.traj")))
    return [load(a) for a in sorted(FILES)] + [swe]


@pytest.fixture(scope="module")
def built(sessions):
    return recorded.build(sessions, PARAMS)


def test_one_case_per_recorded_compaction_with_the_model_from_the_log(built):
    assert len(built.cases) == 4
    assert sorted(zip(built.found["agent"], built.found["model"], strict=False)) == sorted(MODELS.items())
    assert list(built.found.columns) == recorded.FOUND_COLUMNS
    assert all(built.found["questions"] > 0)
    assert built.describe().startswith("Real compactions found in your logs: 4 (in 4 sessions)")


def test_sessions_without_compaction_are_counted_skips(built):
    assert list(built.skipped["reason"]) == ["its format (swe_agent) records no compactions"]
    assert "Sessions skipped (no recorded case): 1" in built.describe()


def test_probes_come_only_from_records_before_the_compaction(built):
    for case in built.cases:
        session = built.sessions[case.session_id]
        cut = int(built.found.set_index("case_id").loc[case.id, "cut"])
        assert case.cut == cut
        for q in case.real:
            assert 0 <= q.source_order < cut, (q.answer, q.source_order, cut)
            rec = next(r for r in session.records if r.entry_id == q.source_entry_id)
            assert rec.source_order < cut and rec.kind != "summary"
        assert all("3.9.14" not in q.answer for q in case.questions if not q.decoy)  # only after the compaction


@pytest.fixture(scope="module")
def result(built):
    ctx = CompactionContext(summarizer=ExtractiveSummarizer())
    return recorded.run(
        built, ["codex", "opencode", "claude-code", "pi", "full"], ctx, readers.get_reader("verbatim"), n_boot=200
    )


def test_recorded_rows_graded_against_the_agents_own_next_request(built, result):
    ans = result.answers[(result.answers["strategy"] == "recorded") & ~result.answers["decoy"]]
    assert len(ans) == sum(len(c.real) for c in built.cases)
    agent_of = dict(zip(built.found["case_id"], built.found["agent"], strict=False))
    for _, row in ans.iterrows():
        sent = "\n".join(text for _, _, text in EXPECTED[agent_of[row["case_id"]]])
        assert bool(row["correct"]) == (row["answer"] in sent), row["answer"]
    assert ans["correct"].any() and not ans["correct"].all()  # the story plants values both kept and dropped


def test_table_has_every_arm_beside_each_compaction_with_intervals(built, result):
    t = result.table
    assert list(t.columns) == recorded.TABLE_COLUMNS
    for case_id, g in t.groupby("case_id"):
        agent = built.found.set_index("case_id").loc[case_id, "agent"]
        rec_row = g[g["recorded"]]
        assert len(rec_row) == 1
        assert rec_row["strategy_label"].iloc[0] == f"recorded ({agent}, {MODELS[agent]})"
        assert g["own_agent"].sum() == 1 and g[g["own_agent"]]["strategy"].iloc[0] == agent
        assert set(g["strategy"]) == {"recorded", "codex", "opencode", "claude-code", "pi", "full"}
        assert (g["ci_low"] <= g["recall"]).all() and (g["recall"] <= g["ci_high"]).all()


def test_figure_and_no_data(result):
    chart = charts.fig_recorded(result.table)
    assert chart.to_dict()["facet"]["row"]["field"] == "compaction_label"
    empty = charts.fig_recorded(pd.DataFrame(columns=recorded.TABLE_COLUMNS))
    assert empty.to_dict()["title"]["subtitle"] == "not measured"


def test_a_run_without_compactions_is_empty_not_an_error():
    swe = next(iter(ingest.load_sessions(FIXTURES / "swe_agent" / "function_calling.traj")))
    rc = recorded.build([swe], PARAMS)
    assert rc.cases == () and rc.describe().startswith("Real compactions found in your logs: 0")
    res = recorded.run(rc, ["full"], CompactionContext(), readers.get_reader("verbatim"))
    assert res.table.empty and list(res.table.columns) == recorded.TABLE_COLUMNS


def test_for_run_saves_the_bank_and_reuses_it(tmp_path, sessions):
    sdir = tmp_path / runfolder.SESSIONS
    sdir.mkdir()
    for s in sessions:
        (sdir / f"{s.id}.jsonl").write_bytes(s.to_jsonl())
    first = recorded.for_run(tmp_path, PARAMS)
    assert (tmp_path / recorded.BANK_FILE).exists()
    again = recorded.for_run(tmp_path, {**PARAMS, "seed": 99})  # the saved bank decides
    assert again.cases == first.cases
    assert again.found.equals(first.found)  # counts from the saved cases, not from a new mining


# --------------------------------------------------------------------------- issue 26: the recorded arm, fairly examined


def test_kept_region_and_pool_on_each_compaction(built, result):
    """Per compaction: where the agent's kept region starts, its pool, and the pool recall of every arm."""
    f = built.found.set_index("case_id")
    assert (f["tail_start"] <= f["cut"]).all()
    assert (f["eligible_values"] == [len(built.pools[c]) for c in f.index]).all()
    assert (f["eligible_in_summary"] <= f["eligible_values"]).all()
    t = result.table
    assert (t["pool_n"] == t["case_id"].map(f["eligible_values"])).all()
    rec_rows = t[t["recorded"]].set_index("case_id")
    assert (rec_rows["pool_recall"] - f.loc[rec_rows.index, "recorded_pool_recall"]).abs().max() < 1e-12
    own = t[t["own_agent"]]
    assert own["kept_match"].notna().all() and (own["kept_note"] != "").all()
    assert t.loc[~t["own_agent"], "kept_match"].isna().all()


def _session_with_a_summary_that_repeats(value: str):
    """A pi-like session: a value said before the compaction, repeated in its summary and after it."""
    import dataclasses

    from tests.helpers import make_session

    texts = [
        ("user", f"Open ticket {value} for the flaky deploy job, please."),
        ("assistant", f"Opened {value}; the deploy job is marked flaky."),
        ("user", "Now look at the cache settings."),
        ("assistant", "The cache TTL is 300 seconds in config/cache.yaml."),
        ("summary", f"Goal: fix the deploy job (ticket {value}). Done: cache settings read."),
        ("user", f"Close {value} when the build is green."),
        ("assistant", f"Will close {value} after the next green build."),
    ]
    s = make_session(texts)
    first_kept = s.records[2].entry_id
    compaction = {
        "entry_id": s.records[4].entry_id,
        "source_order": 4,
        "model": "m-test",
        "first_kept_entry_id": first_kept,
    }
    return dataclasses.replace(s, source_format="pi", metadata={"compactions": [compaction]})


def test_a_value_the_summary_and_the_rest_of_the_session_repeat_stays_eligible():
    """Acceptance 1's pinned case: the first design dropped every value seen at or after the cut (the summary,
    the rest of the session), so the recorded arm could only lose. Now the value before the kept region stays
    eligible, the real summary is counted as holding it, and the recorded arm is credited."""
    value = "OPS-48213"
    s = _session_with_a_summary_that_repeats(value)
    rc = recorded.build([s], {"tail_tokens": 0, "probe_n_questions": 5, "probe_n_decoys": 0})
    (row,) = rc.found.to_dict("records")
    kept = s.records[2].entry_id
    assert row["tail_start"] == 2 and row["kept_from"] == kept  # pi kept it on verbatim: values there are not asked
    pool = {q.answer for q in rc.pools[row["case_id"]]}
    assert value in pool and "config/cache.yaml" not in pool
    assert row["eligible_in_summary"] >= 1 and row["eligible_values"] == len(pool)
    (case,) = rc.cases
    assert value in {q.answer for q in case.real}
    res = recorded.run(rc, ["full"], CompactionContext(), readers.get_reader("verbatim"), n_boot=50)
    got = res.answers[(res.answers["strategy"] == "recorded") & (res.answers["answer"] == value)]
    assert got["correct"].all()


@pytest.mark.slow
def test_the_public_pi_session_with_two_real_compactions():
    """Acceptance 1 on pi-mono's own test session (whole file): both compactions have an eligible pool and
    the real summaries claude-opus-4-5 wrote hold some of it; the recorded arm's recall over that pool."""
    from tests.helpers import PUBLIC_FIXTURES

    (s,) = [x for x in ingest.load_sessions(PUBLIC_FIXTURES / "pi") if len(x.metadata.get("compactions") or ()) == 2]
    rc = recorded.build(
        [s], {"probe_n_questions": 20, "probe_n_decoys": 2, "window": 200_000, "output_ceiling": 32_000}
    )
    f = rc.found
    assert len(f) == 2 and set(f["model"]) == {"claude-opus-4-5"}
    assert (f["eligible_values"] > 0).all() and (f["eligible_in_summary"] > 0).all()
    assert f["recorded_pool_recall"].between(0, 1).all()
    assert (f["questions"] > 0).all()


def test_an_opaque_summary_is_not_readable_not_zero(tmp_path):
    """Issue 27 item 2: a Codex remote compaction's summary is encrypted (the model reads it, we cannot): the
    recorded block claims nothing about what it holds -- ``eligible_in_summary`` is empty, not 0."""
    src = FIXTURES / "codex" / "rollout-2026-01-20T09-00-00-0199c0de-0000-7000-8000-00000000e0c1.jsonl"
    path = tmp_path / src.name
    path.write_text(src.read_text("utf-8").replace("ENCRYPTED_COMPACTION_SUMMARY", "QUJD" * 1_000), "utf-8")
    (remote,) = list(ingest.load_sessions(path))
    built = recorded.build([remote, load("codex")], PARAMS)
    rows = built.found.set_index("session_id")
    assert list(built.found.columns) == recorded.FOUND_COLUMNS
    opaque, readable = rows.loc[remote.id], rows.loc[load("codex").id]
    assert not opaque["summary_readable"] and opaque["opaque_summary_tokens"] == 588
    assert pd.isna(opaque["eligible_in_summary"])
    assert readable["summary_readable"] and readable["opaque_summary_tokens"] == 0
    assert readable["eligible_in_summary"] >= 0 and not pd.isna(readable["eligible_in_summary"])


def test_the_recorded_block_asks_a_model_reader_every_draw(built, tmp_path, monkeypatch):
    """The recorded block takes the closed book's `draws`: a stand-in is refused, a model reader asked each draw."""
    from compaction_lab.endpoints import shared
    from compaction_lab.exam.readers.model import ModelReader
    from tests.fake_openai_server import FakeOpenAIServer

    ctx = CompactionContext(summarizer=ExtractiveSummarizer())
    with pytest.raises(ValueError, match="draws=2 needs a model reader"):
        recorded.run(built, ["codex"], ctx, readers.get_reader("verbatim"), draws=2)
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()
    one = replace(built, cases=built.cases[:1])
    with FakeOpenAIServer() as server:
        cfg = {"base_url": server.base_url, "model": "m", "api_key_env": "", "max_retries": 0, "concurrency": 2}
        cfg["ledger"] = str(tmp_path / "ledger.sqlite")
        res = recorded.run(one, ["codex"], ctx, ModelReader(cfg, temperature=0.7), n_boot=50, draws=2)
        sent = server.count()
    shared._CLIENTS.clear()
    per_question = res.answers.groupby(["strategy", "question_id"])["draw"].apply(sorted)
    assert len(per_question) and all(d == [0, 1] for d in per_question)
    assert sent == len(res.answers)  # every draw a request of its own


def test_the_recorded_arms_real_summary_is_summary_recall_its_kept_records_scope(built, result):
    """Issue 47: where each recorded-arm answer was found, checked against the hand-built next requests."""
    questions = {q.id: q for c in built.cases for q in c.questions}
    agent_of = dict(zip(built.found["case_id"], built.found["agent"], strict=False))
    ans = result.answers[(result.answers["strategy"] == "recorded") & ~result.answers["decoy"]]
    for _, row in ans.iterrows():
        sent = EXPECTED[agent_of[row["case_id"]]]
        summary = normalise("\n\n".join(text for kind, _, text in sent if kind == "summary"))
        kept = normalise("\n\n".join(text for kind, _, text in sent if kind != "summary"))
        forms = accepted(questions[row["question_id"]])
        in_summary, in_kept = any(f in summary for f in forms), any(f in kept for f in forms)
        want = ("both" if in_summary else "verbatim") if in_kept else ("summary" if in_summary else "nowhere")
        assert row["found_in"] == want, (row["answer"], agent_of[row["case_id"]])
    assert (ans.loc[ans["correct"], "found_in"] == "summary").any()
    t = result.table
    assert (t["scope_retained"] + t["summary_retained"] == t["retained"]).all()  # the verbatim reader
    for _, row in t[t["recorded"]].iterrows():
        mine = ans[ans["case_id"] == row["case_id"]]
        assert row["summary_retained"] == (mine["correct"] & (mine["found_in"] == "summary")).sum()
        assert row["summary_by"] == f"recorded summary ({row['agent']}, {MODELS[row['agent']]})"
    assert (t.loc[t["strategy"] == "full", "summary_retained"] == 0).all()
    assert (t.loc[t["strategy"] == "full", "summary_by"] == "").all()
    assert (t.loc[t["strategy"] == "codex", "summary_by"] == "extractive stand-in").all()
    assert (t["pool_scope_retained"] <= t["pool_retained"]).all()
    full = t[t["strategy"] == "full"]
    assert (full["pool_scope_retained"] == full["pool_retained"]).all()  # the whole history, nothing summarised

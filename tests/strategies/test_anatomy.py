import pandas as pd

from compaction_lab import strategies
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import CompactionContext, anatomy, labels


def _chains():
    return [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=2, window_tokens=6000))]


def test_projections_table_has_one_row_per_case_strategy_segment():
    sessions = _chains()
    ctx = CompactionContext(window=4000, output_ceiling=500)
    results = anatomy.project_cases(anatomy.cases_at_end(sessions), ["codex", "full"], ctx)
    table = anatomy.projections_table(results)
    assert list(table.columns) == anatomy.PROJECTION_COLUMNS
    assert len(table) == sum(len(p.segments) for _, p in results)
    assert set(table["case_id"]) == {f"{s.id}@{len(s.records)}" for s in sessions}
    totals = anatomy.strategy_totals(table)
    assert len(totals) == 4 and (totals["tokens"] > 0).all()
    for case, proj in results:
        row = totals[(totals["case_id"] == case.case_id) & (totals["strategy_label"] == labels.strategy_label(proj))]
        assert int(row["tokens"].iloc[0]) == proj.tokens
    means = anatomy.mean_tokens_by_strategy(table)
    assert list(means["strategy_label"]) == ["codex", "full (uncompacted reference)"]


def test_stand_in_is_in_the_label():
    from compaction_lab import summarize

    ctx = CompactionContext(window=4000, output_ceiling=500, summarizer=summarize.get_summarizer("extractive"))
    ((case, proj),) = anatomy.project_cases(anatomy.cases_at_end(_chains()[:1]), ["futureos-summarized"], ctx)
    assert labels.strategy_label(proj) == "futureos-summarized (extractive stand-in)"
    ctx_none = CompactionContext(window=4000, output_ceiling=500)
    ((case, proj),) = anatomy.project_cases([case], ["futureos-summarized"], ctx_none)
    assert "fallback" in labels.strategy_label(proj)


def test_budgets_table_shows_budgets_and_use():
    sessions = _chains()
    ctx = CompactionContext(window=128_000, output_ceiling=32_000)
    proj = strategies.compact(sessions[0], "futureos-deterministic", None, ctx)
    b = anatomy.budgets_table(ctx, sessions[0], proj)
    assert list(b["part"]) == ["system", "tools", "history", "evidence", "summary", "tail", "margin", "headroom"]
    assert b.loc[b["part"] == "margin", "budget"].iloc[0] == 2048
    used = b.set_index("part")["used"]
    assert used["system"] == proj.segments[0].tokens and pd.isna(used["headroom"])


def test_a_session_with_arguments_nested_past_the_bound_loses_no_other_session(tmp_path):
    """Notebook 02's `project_cases` over a folder holding one hostile Codex session (calls carrying JSON
    nested 100,000 levels) and ordinary ones: was `RecursionError`, losing every session of the run; now
    every strategy projects every case."""
    from compaction_lab.ingest import ImportAudit, load_sessions
    from tests.deep_json import write_rollout

    write_rollout(tmp_path)
    report = ImportAudit()
    sessions = list(load_sessions(tmp_path, report)) + _chains()
    assert report.n_skipped == 0 and len(sessions) == 3
    ctx = CompactionContext(window=4000, output_ceiling=500)
    results = anatomy.project_cases(anatomy.cases_at_end(sessions), None, ctx)
    done = {(case.session.id, proj.strategy) for case, proj in results}
    assert done == {(s.id, name) for s in sessions for name in strategies.names()}

import pytest

from compaction_lab.ingest import synthetic
from compaction_lab.report import explorer
from compaction_lab.strategies import CompactionContext


@pytest.fixture(scope="module")
def ex():
    sessions = [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=2, window_tokens=6000))]
    # Codex without a summariser does not compact (issue 27 item 6): the placeholder keeps it smaller than full
    ctx = CompactionContext(window=8000, output_ceiling=1000, params={"on_failure": "placeholder"})
    return explorer.ProjectionExplorer(sessions, ctx)


def test_update_recomputes_for_the_settings(ex):
    sid = next(iter(ex.sessions))
    big = ex.update(sid, "futureos-deterministic", 128_000, 32_000, 8192, 32768, 2048)
    small = ex.update(sid, "futureos-deterministic", 8_000, 1_000, 1024, 2048, 256)
    assert small["tokens"].sum() < big["tokens"].sum()
    assert ex.last.strategy == "futureos-deterministic" and ex.last_table is small


def test_widget_controls_drive_the_callback_without_a_browser(ex):
    box = ex.widget()
    assert box.children and ex.last_table is not None
    ex._controls["strategy"].value = "codex"
    assert ex.last.strategy == "codex"
    before = ex.last_table["tokens"].sum()
    ex._controls["strategy"].value = "full"
    assert ex.last.strategy == "full" and ex.last_table["tokens"].sum() != before
    second = list(ex.sessions)[1]
    ex._controls["session_id"].value = second
    assert ex.last.session_id == second


def test_needs_sessions():
    with pytest.raises(ValueError):
        explorer.ProjectionExplorer([])


def test_it_opens_on_the_strategy_it_is_given_and_refuses_one_it_does_not_offer():
    """Notebook 02 opens it on the run's first arm: with a model summarizer, opening on the first registered
    arm sent a summary request for an arm the run left out."""
    sessions = [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=3000))]
    ex = explorer.ProjectionExplorer(sessions, CompactionContext(window=8000, output_ceiling=1000), start="codex")
    ex.widget()
    assert ex._controls["strategy"].value == "codex" and ex.last.strategy == "codex"
    assert explorer.ProjectionExplorer(sessions).start == ex.names[0]  # no start: the first offered
    with pytest.raises(ValueError, match="cannot open on 'nope'"):
        explorer.ProjectionExplorer(sessions, start="nope")

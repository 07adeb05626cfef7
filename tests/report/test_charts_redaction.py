"""A redacted run's figures (issue 45): drawn from masked arguments, since no sweep can rewrite a PNG."""

from __future__ import annotations

from compaction_lab.core.session import Session
from compaction_lab.ingest import sources
from compaction_lab.report import charts
from compaction_lab.tally import composition
from tests.helpers import make_session


def _session() -> Session:
    s = make_session(
        [("user", "fix the parser"), ("assistant", "done"), ("user", "the parser you fixed earlier, again?")],
        session_id="C--Users-zorvath-chat",
    )
    return Session(
        id=s.id,
        source_format="chat-jsonl",
        source_path="/r/.pi/agent/sessions/--Users-zorvath-proj--/x.jsonl",
        metadata={"cwd": "/Users/zorvath/proj"},
        records=s.records,
    )


def _draw(folder) -> tuple[list, str]:
    """(the numbers of every dataset the figure draws, its spec, SVG and HTML as one text)."""
    sessions = sources.load_saved(folder)
    comp = composition.composition_table(sessions)
    pointers = composition.pointer_table(composition.followups_table(sessions))
    chart = charts.draw(folder, "fig2_composition", comp, pointers)
    numbers = [
        [v for row in rows for v in row.values() if isinstance(v, int | float)]
        for rows in chart.to_dict()["datasets"].values()
    ]
    files = "".join((folder / "figures" / f"fig2_composition.{ext}").read_text() for ext in ("svg", "html"))
    return sorted(numbers), chart.to_json() + files


def test_a_redacted_runs_figure_is_drawn_from_masked_arguments_and_the_same_numbers(tmp_path):
    src = sources.Sources((_session(),), "imported")
    red_dir, plain_dir = tmp_path / "red", tmp_path / "plain"
    sources.save(src, red_dir, redact=True)
    sources.save(src, plain_dir)
    red_numbers, red = _draw(red_dir)
    plain_numbers, plain = _draw(plain_dir)
    assert "zorvath" in plain  # the negative control: the session id is a label of the figure
    assert "zorvath" not in red and "[REDACTED:encoded-home-user]" in red
    # Only strings are masked: the figure draws the same numbers.
    assert red_numbers == plain_numbers and any(red_numbers)

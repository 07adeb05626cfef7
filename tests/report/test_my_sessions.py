"""The `my_sessions` chain on real-world input, end to end (issue 12).

Each test runs the real `my_sessions` profile (redaction on, its own defaults)
pointed at the shipped fixture sessions, so what a new user would meet is what
is tested.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from conftest import FIXTURES, PUBLIC_FIXTURES

from compaction_lab.report import run as report
from compaction_lab.report import share

pytestmark = pytest.mark.slow


def _need(path):
    assert path.exists(), f"fixture missing from the repository: {path}"
    return path


#: Fewer bootstrap resamples and priced turns than a real run: these tests read what the chain says, not its
#: precision.
LIGHTER = {"n_boot": 200, "turns": 10, "cost_cases": 2}


def test_short_sessions_that_give_no_question_complete_the_chain(tmp_path):
    """Item 2: the three Claude Code fixtures are shorter than the 8,192-token tail, so no question can
    be mined; notebook 03 crashed ("Cannot set a DataFrame with multiple columns…")."""
    folder = _need(PUBLIC_FIXTURES / "claude-code")
    res = report.run_profile(
        "my_sessions", results=tmp_path, progress=False, overrides={"session_paths": [str(folder)], **LIGHTER}
    )
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    assert json.loads((res.run_dir / "run.json").read_text())["status"] == "ok"
    assert pd.read_parquet(res.run_dir / "exam_closed.parquet").empty
    bank = (res.run_dir / "exam_bank.jsonl").read_text().splitlines()
    assert len(bank) == 3 and all(json.loads(line)["questions"] == [] for line in bank)
    # The reader is told why, in the notebook, the figures and the report.
    nb03 = (res.run_dir / "03_closed_book_exam.html").read_text(encoding="utf-8")
    assert "No question could be asked" in nb03
    assert "not measured" in (res.run_dir / "figures" / "fig1_retained.svg").read_text(encoding="utf-8")
    assert share.NO_HEADLINE.split(":")[0] in (res.run_dir / "report.html").read_text(encoding="utf-8")
    # Costs do not need questions: they are still priced.
    assert not pd.read_parquet(res.run_dir / "cost.parquet").empty


def _damaged_folder(root):
    """The shipped fixtures under good/, and one of each kind of damaged file under zz_damaged/."""
    import shutil

    import zstandard

    good = root / "good"
    shutil.copytree(_need(PUBLIC_FIXTURES), good, ignore=shutil.ignore_patterns("*.md"))
    for p in good.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    bad = root / "zz_damaged"
    bad.mkdir()
    chat = [
        {"role": "user", "content": "Deploy build 7Q2-XK9 to staging, \ud800 please."},
        {"role": "assistant", "content": "Deployed 7Q2-XK9; ticket OPS-4471 opened."},
    ]
    hello = (good / "claude-code" / "hello-world-script.jsonl").read_bytes()
    (bad / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + hello)  # the same session again, BOM first
    (bad / "surrogate.jsonl").write_text("".join(json.dumps(m) + "\n" for m in chat), encoding="utf-8")
    (bad / "nul-tail.jsonl").write_bytes(json.dumps(chat[1]).encode() + b"\n" + b"\x00" * 4096)
    (bad / "empty.jsonl").write_bytes(b"")
    (bad / "not-a-session.json").write_text('{"hello": "world"}\n', encoding="utf-8")
    raw = zstandard.ZstdCompressor().compress((good / "claude-code" / "coverage-test-fix.jsonl").read_bytes())
    cut = int(len(raw) * 0.6)
    (bad / "damaged.jsonl.zst").write_bytes(raw[:cut] + bytes(b ^ 0xFF for b in raw[cut : cut + 64]) + raw[cut + 64 :])
    (bad / "loop-a.jsonl").symlink_to(bad / "loop-b.jsonl")
    (bad / "loop-b.jsonl").symlink_to(bad / "loop-a.jsonl")
    (bad / "dangling.jsonl").symlink_to(bad / "gone.jsonl")
    (bad / "again").symlink_to(root)  # a folder loop
    return good


def test_damaged_files_are_counted_and_change_nothing_for_the_good_sessions(tmp_path):
    """Acceptance 3: the fixtures plus one of each damaged file complete, every skip is listed in
    import_report.json, and the good sessions are examined exactly as in a run without the bad files."""
    good = _damaged_folder(tmp_path / "in")
    # Import and exam are what damage could change: notebooks 01-03, nothing rendered.
    prof = report.load_profile("my_sessions")
    kept = {k: v for k, v in prof.parameters.items() if k not in ("turns", "cost_cases")}  # notebook 04's
    prof = dataclasses.replace(prof, notebooks=prof.notebooks[:3], parameters=kept)
    clean = report.run_profile(
        prof, results=tmp_path / "clean", progress=False, render=False, overrides={"session_paths": [str(good)]}
    )
    mixed = report.run_profile(
        prof,
        results=tmp_path / "mixed",
        progress=False,
        render=False,
        overrides={"session_paths": [str(tmp_path / "in")]},
    )
    for res in (clean, mixed):
        assert json.loads((res.run_dir / "run.json").read_text())["status"] == "ok"
    rep = json.loads((mixed.run_dir / "import_report.json").read_text())
    reasons = rep["reasons"]
    for reason in ("empty_file", "unknown_format", "duplicate_session", "corrupt_compressed"):
        assert reasons.get(reason, 0) >= 1, (reason, rep)
    skips = pd.read_parquet(mixed.run_dir / "import_skips.parquet")
    named = " ".join(skips["path"].astype(str))
    for name in (
        "empty.jsonl",
        "not-a-session.json",
        "damaged.jsonl.zst",
        "loop-a.jsonl",
        "dangling.jsonl",
        "nul-tail.jsonl",
        "again",
    ):
        assert name in named, (name, skips.to_string())
    assert rep.get("notes", {}).get("lone_surrogates_replaced", 0) >= 1
    # The good sessions: the same questions, answered the same way, by every strategy.
    key = ["strategy", "case_id", "question_id"]
    a = pd.read_parquet(clean.run_dir / "exam_closed.parquet").sort_values(key).reset_index(drop=True)
    b = pd.read_parquet(mixed.run_dir / "exam_closed.parquet")
    b = b[b["case_id"].isin(set(a["case_id"]))].sort_values(key).reset_index(drop=True)
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b)


def test_a_real_session_with_a_recorded_compaction_gives_recorded_rows(tmp_path):
    """Issue 14, acceptance 3: pi's own public test session (an excerpt of pi-mono's
    test/fixtures/before-compaction.jsonl, see tests/fixtures/pi/) holds a compaction claude-opus-4-5
    wrote. `my_sessions` examines it beside every arm; the Claude Code fixtures (no compaction) are
    counted skips."""

    real = FIXTURES / "pi" / "upstream-compaction-before-compaction-excerpt.jsonl"
    res = report.run_profile(
        "my_sessions",
        results=tmp_path,
        progress=False,
        overrides={"session_paths": [str(real), str(_need(PUBLIC_FIXTURES / "claude-code"))], **LIGHTER},
    )
    d = res.run_dir
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    found = pd.read_parquet(d / "recorded_compactions.parquet")
    assert list(zip(found["agent"], found["model"], strict=False)) == [("pi", "claude-opus-4-5")]
    table = pd.read_parquet(d / "exam_recorded.parquet")
    mine = table[table["recorded"]]
    assert list(mine["strategy_label"]) == ["recorded (pi, claude-opus-4-5)"]
    row = mine.iloc[0]
    assert row["n"] > 0 and row["ci_low"] <= row["recall"] <= row["ci_high"]
    assert set(table["strategy"]) >= {"recorded", "pi", "codex", "opencode", "claude-code", "gemini-cli", "aider"}
    assert table.loc[table["own_agent"], "strategy"].tolist() == ["pi"]
    skipped = pd.read_parquet(d / "recorded_skipped.parquet")
    assert len(skipped) == 3 and set(skipped["reason"]) == {"no compaction in its claude-code log"}
    page = (d / "report.html").read_text(encoding="utf-8")
    assert "Real compactions found in your logs: 1" in page and "recorded (pi, claude-opus-4-5)" in page
    assert "fig_recorded" in {p.stem for p in (d / "figures").glob("*.svg")}

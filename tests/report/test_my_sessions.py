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

from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.exam.types import bank_from_jsonl
from compaction_lab.report import share
from compaction_lab.run import runner
from tests.helpers import FIXTURES, LIGHTER, PUBLIC_FIXTURES

pytestmark = pytest.mark.slow


def _need(path):
    assert path.exists(), f"fixture missing from the repository: {path}"
    return path


def test_short_sessions_that_give_no_question_complete_the_chain(tmp_path, warm_kernels):
    """Item 2: the three Claude Code fixtures are far below W − O (and shorter than the 8,192-token tail),
    so no question can be mined; notebook 03 crashed ("Cannot set a DataFrame with multiple columns…").
    Under the default cut they would not compact at W: each is listed with its size, none is cut."""
    folder = _need(PUBLIC_FIXTURES / "claude-code")
    res = runner.run_profile(
        "my_sessions",
        results=tmp_path,
        progress=False,
        overrides={"session_paths": [str(folder)], **LIGHTER},
        launch=warm_kernels,
    )
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    assert json.loads((res.run_dir / "run.json").read_text())["status"] == "ok"
    assert pd.read_parquet(res.run_dir / "exam_closed.parquet").empty
    assert (res.run_dir / "exam_bank.jsonl").read_text() == "\n"  # no case at all: nothing was cut
    rows = pd.read_parquet(res.run_dir / "exam_sessions.parquet")
    assert len(rows) == 3 and not rows["would_compact"].any() and (rows["cut"] == "").all()
    assert rows["reason"].str.startswith("would not compact at W = 200,000").all()
    # The reader is told why, in the notebook, the figures and the report.
    nb03 = (res.run_dir / "03_closed_book_exam.html").read_text(encoding="utf-8")
    assert "No question could be asked" in nb03 and "would not compact at W = 200,000" in nb03
    assert "would not compact at W = 200,000" in (res.run_dir / "report.html").read_text(encoding="utf-8")
    assert "not measured" in (res.run_dir / "figures" / "fig1_retained.svg").read_text(encoding="utf-8")
    assert share.NO_HEADLINE.split(":")[0] in (res.run_dir / "report.html").read_text(encoding="utf-8")
    # Costs do not need questions: they are still priced.
    assert not pd.read_parquet(res.run_dir / "cost.parquet").empty


def _damaged_folder(root):
    """The shipped fixtures under good/, and one of each kind of damaged file under zz_damaged/."""
    import shutil

    import zstandard

    good = root / "good"
    # The 2.4 MB pi session with real compactions has its own test below; the damage is what matters here.
    shutil.copytree(_need(PUBLIC_FIXTURES), good, ignore=shutil.ignore_patterns("*.md", "before-compaction.jsonl"))
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


def test_damaged_files_are_counted_and_change_nothing_for_the_good_sessions(tmp_path, warm_kernels):
    """Acceptance 3: the fixtures plus one of each damaged file complete, every skip is listed in
    import_audit.json, and the good sessions are examined exactly as in a run without the bad files."""
    good = _damaged_folder(tmp_path / "in")
    # Import and exam are what damage could change: notebooks 01-03, nothing rendered.
    prof = runner.load_profile("my_sessions")
    kept = {k: v for k, v in prof.parameters.items() if k not in ("turns", "cost_cases")}  # notebook 04's
    prof = dataclasses.replace(prof, notebooks=prof.notebooks[:3], parameters=kept)
    # Cut every session at its end: these sessions are below W − O, and the comparison needs questions.
    clean = runner.run_profile(
        prof,
        launch=warm_kernels,
        results=tmp_path / "clean",
        progress=False,
        render=False,
        overrides={"session_paths": [str(good)], "cut": "end"},
    )
    mixed = runner.run_profile(
        prof,
        launch=warm_kernels,
        results=tmp_path / "mixed",
        progress=False,
        render=False,
        overrides={"session_paths": [str(tmp_path / "in")], "cut": "end"},
    )
    for res in (clean, mixed):
        assert json.loads((res.run_dir / "run.json").read_text())["status"] == "ok"
    rep = json.loads((mixed.run_dir / "import_audit.json").read_text())
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


def test_a_real_session_with_a_recorded_compaction_gives_recorded_rows(tmp_path, warm_kernels):
    """Issue 14, acceptance 3: pi's own public test session (an excerpt of pi-mono's
    test/fixtures/before-compaction.jsonl, see tests/fixtures/pi/) holds a compaction claude-opus-4-5
    wrote. `my_sessions` examines it beside every arm; the Claude Code fixtures (no compaction) are
    counted skips."""

    real = FIXTURES / "pi" / "upstream-compaction-before-compaction-excerpt.jsonl"
    res = runner.run_profile(
        "my_sessions",
        launch=warm_kernels,
        results=tmp_path,
        progress=False,
        overrides={"session_paths": [str(real), str(_need(PUBLIC_FIXTURES / "claude-code"))], **LIGHTER},
        notebook_html=False,  # its tables and report.html are read
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
    _the_real_summary_is_summary_recall_its_kept_region_scope(d, real, table)


def _pi_log_regions(log) -> tuple[str, str]:
    """The agent's real summary and its kept region, read straight from a version-1 pi log (normalised).

    Kept: the entries from ``firstKeptEntryIndex`` (the header is entry 0) up to the compaction entry, their
    message text, reasoning and tool-call arguments. ``my_sessions`` redacts the account name in home paths,
    so the log's texts are given the same marker.
    """
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    at = next(i for i, e in enumerate(entries) if e.get("type") == "compaction")
    home = str(entries[0]["cwd"]).split("/workspaces/")[0] + "/"

    def strings(o):
        if isinstance(o, str):
            yield o
        elif isinstance(o, dict | list):
            for v in o.values() if isinstance(o, dict) else o:
                yield from strings(v)

    def texts(entry):
        content = entry.get("message", {}).get("content")
        for item in [{"text": content}] if isinstance(content, str) else content or []:
            yield from (item[k] for k in ("text", "thinking") if isinstance(item.get(k), str))
            if item.get("type") == "toolCall":
                yield from strings(item.get("arguments"))

    def norm(text: str) -> str:
        return normalise(text.replace(home, "/Users/[REDACTED:home-user]/"))

    kept = "\n\x00\n".join(t for e in entries[entries[at]["firstKeptEntryIndex"] : at] for t in texts(e))
    return norm(entries[at]["summary"]), norm(kept)


def _the_real_summary_is_summary_recall_its_kept_region_scope(d, log, table):
    """Issue 47, acceptance 4: the recorded arm's right answers whose value is in the agent's real summary and
    not in its kept region are ``summary`` and count in its summary recall; a value in the kept region would
    be ``verbatim``/``both`` (scope). The expectation comes from the log itself, not from `found.regions`."""
    summary, kept = _pi_log_regions(log)
    bank = {q.id: q for c in bank_from_jsonl((d / "exam_recorded_bank.jsonl").read_bytes()) for q in c.questions}
    answers = pd.read_parquet(d / "exam_recorded_answers.parquet")
    mine = answers[(answers["strategy"] == "recorded") & ~answers["decoy"]]
    assert len(mine) and (mine["summary_by"] == "recorded summary (pi, claude-opus-4-5)").all()
    expected = []
    for _, a in mine.iterrows():
        forms = accepted(bank[a["question_id"]])
        in_summary, in_kept = any(f in summary for f in forms), any(f in kept for f in forms)
        expected.append(("both" if in_summary else "verbatim") if in_kept else ("summary" if in_summary else "nowhere"))
    assert list(mine["found_in"]) == expected
    # the verbatim reader: right exactly where the value is found
    assert (mine["correct"] == (mine["found_in"] != "nowhere")).all()
    row = table[table["recorded"]].iloc[0]
    right = mine["correct"].astype(bool)
    assert row["summary_retained"] == (right & (mine["found_in"] == "summary")).sum() > 0
    assert row["scope_retained"] == (right & mine["found_in"].isin(["verbatim", "both"])).sum()
    # questions are mined outside the kept region (docs/exams.md#4), so none of the agent's is scope here
    assert row["scope_retained"] == 0 and row["summary_by"] == "recorded summary (pi, claude-opus-4-5)"
    # every arm, verbatim reader: the two parts add up to the total
    assert (table["scope_retained"] + table["summary_retained"] == table["retained"]).all()
    assert (table["pool_scope_retained"] <= table["pool_retained"]).all()


#: The four real public sessions issue 26 was found on: pi's own session with two real compactions, a Claude
#: Code transcript, two SWE-agent trajectories.
FOUR = (
    ("pi", "before-compaction.jsonl"),
    ("claude-code", "coverage-test-fix.jsonl"),
    ("swe-agent", "pydicom__pydicom-1458.traj"),
    ("swe-agent", "swe-agent__test-repo-i1.traj"),
)


def test_four_real_sessions_give_numbers_you_can_trust(tmp_path, warm_kernels):
    """Issue 26, acceptance 1-5 on a `my_sessions` run of the four sessions (its defaults; four arms, so the
    recorded block on the 400k-token pi session stays quick)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for sub, name in FOUR:
        (folder / name).write_bytes(_need(PUBLIC_FIXTURES / sub / name).read_bytes())
    arms = ["futureos-deterministic", "pi", "codex", "full"]
    res = runner.run_profile(
        "my_sessions",
        launch=warm_kernels,
        results=tmp_path / "out",
        progress=False,
        overrides={"session_paths": [str(folder)], "strategy_names": arms, **LIGHTER},
        notebook_html=False,  # its tables and report.html are read
    )
    d = res.run_dir
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    # 1. Both real compactions: an eligible pool, part of it in the real summary, the recorded arm's pool recall.
    found = pd.read_parquet(d / "recorded_compactions.parquet")
    assert len(found) == 2 and (found["eligible_values"] > 0).all() and (found["eligible_in_summary"] > 0).all()
    assert found["recorded_pool_recall"].between(0, 1).all()
    # 2. Intervals with width, their units and method; feasibility flagged.
    head = pd.read_parquet(d / "headline.parquet")
    for name in ("exam_recall", "exam_recorded"):
        t = pd.read_parquet(d / f"{name}.parquet")
        assert ((t["ci_low"] < t["ci_high"]) | (t["n"] >= 1000)).all(), name
    assert ((head["ci_low"] < head["ci_high"]) | (head["n"] >= 1000)).all()
    assert {"n_sessions", "n_records", "ci_method", "over_window"} <= set(head.columns)
    assert (head["n_sessions"] == 1).all() and (head["ci_method"] != "").all()
    # 3. Where each session was cut: only the pi session outgrows W − O = 168,000; the others are listed.
    rows = pd.read_parquet(d / "exam_sessions.parquet").set_index("session_id")
    columns = ["tokens", "tokens_model", "calibration", "would_compact", "cut", "questions", "reason"]
    assert list(rows.columns) == columns and len(rows) == 4
    assert rows["would_compact"].sum() == 1
    big = rows[rows["would_compact"]].iloc[0]
    assert big["tokens"] > 168_000 and big["cut"] != "" and big["questions"] > 0
    # cut = auto: pi's log recorded two compactions, so the session is cut there; its usage calibrates it
    assert big["cut"] == "452,804" and 1.2 < big["calibration"] < 1.35 and big["tokens_model"] > big["tokens"]
    swe = ["pydicom__pydicom-1458", "swe-agent__test-repo-i1"]
    assert rows.loc[swe, "calibration"].isna().all()  # no usage in their logs: uncalibrated
    small = rows[~rows["would_compact"]]
    assert (small["cut"] == "").all() and (small["questions"] == 0).all()
    assert small["reason"].str.contains("would not compact at W = 200,000").all()
    recall = pd.read_parquet(d / "exam_recall.parquet").set_index("strategy")
    assert recall.loc["full", "over_window"] and not recall.loc["pi", "over_window"]
    assert head["strategy"].iloc[-1] == "full" and "not sendable" in head["retained_of_n"].iloc[-1]
    # The bank: exact, unique values, none of them a phrase or from a harness template.
    bank = [json.loads(line) for line in (d / "exam_bank.jsonl").read_text().splitlines() if line.strip()]
    qs = [q for c in bank for q in c["questions"] if not q["decoy"]]
    assert qs
    answers_of: dict[str, set[str]] = {}
    for q in qs:
        answers_of.setdefault(q["prompt"], set()).add(q["answer"])
        assert "\n" not in q["answer"] and len(q["answer"].split()) < 4, q["answer"]
    assert all(len(a) == 1 for a in answers_of.values())
    # 4. The natural mix, shown beside the sensitivity table.
    info = json.loads((d / "run.json").read_text())
    assert info["parameters"]["probe_pointer_mix"] == "natural"
    page = (d / "report.html").read_text(encoding="utf-8")
    assert "The pool of usable values is" in page and "Recall under other question mixes" in page
    assert "natural (the pool&#39;s own)" in page or "natural (the pool's own)" in page
    assert "would not compact at W = 200,000" in page and "Not sendable at this window" in page
    _continuation_split_is_presence(d)
    # 5. Redaction: the author's account name (pi's encoded folder, its cwd) nowhere; no SQLite side files.
    for p in d.rglob("*"):
        if p.is_file():
            assert b"badlogic" not in p.read_bytes(), p
    assert not [p.name for p in d.rglob("*") if p.name.endswith(("-wal", "-shm"))]


def _continuation_split_is_presence(d):
    """Issue 47 on a real run's needed-next targets: offline, a target is held exactly when its value is found
    somewhere (``found_in`` not ``nowhere``); the held counts of the action rows are those of the target rows;
    per arm and block, scope + summary = held, and the recorded arm's summary is the agent's own."""
    targets = pd.read_parquet(d / "continuation_targets.parquet")
    assert set(targets["block"]) == {"closed", "recorded"}
    assert (targets["correct"] == (targets["found_in"] != "nowhere")).all()
    actions = pd.read_parquet(d / "exam_continuation.parquet")
    key = ["block", "case_id", "strategy", "action_rank"]
    held = targets.groupby(key)["correct"].sum()
    counted = actions.set_index(key)["n_held"]
    assert (counted.reindex(held.index) == held).all() and counted.sum() == held.sum()
    recall = pd.read_parquet(d / "continuation_recall.parquet")
    assert (recall["scope_retained"] + recall["summary_retained"] == recall["retained"]).all()
    mine = recall[(recall["block"] == "recorded") & (recall["strategy"] == "recorded")].iloc[0]
    assert mine["summary_by"] == "recorded summary (pi, claude-opus-4-5)"
    rows = targets[(targets["block"] == "recorded") & (targets["strategy"] == "recorded")]
    assert mine["summary_retained"] == (rows["correct"] & (rows["found_in"] == "summary")).sum()

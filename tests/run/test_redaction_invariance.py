"""Redaction never moves a number (issue 45, acceptance 3 and 5).

One `my_sessions` run on the public fixture sessions (plus a planted session whose author's home shows
in every encoded form the supported agents write) with redaction and one without: every numeric column
of the tables the report is made of is identical, and the redacted folder holds neither a planted secret
nor the author's account name, in any file's bytes or any file's name. The pair is run once per test
session, on one xdist worker.
"""

from __future__ import annotations

import functools
import json
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab.privacy.leaks import find_leaks
from compaction_lab.run import runner
from tests.helpers import PUBLIC_FIXTURES
from tests.privacy.privacy_samples import GITHUB, OPENAI

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("redaction-invariance")]

#: The author of the planted session: told by its folder (pi's encoded cwd) and file name (Claude Code's
#: Windows project folder), then written bare and in SWE-agent's and Claude Code's encodings.
AUTHOR = "wyndrel"
#: Accounts written only in an encoded home inside the text (no metadata tells them).
ENCODED_ONLY = {"quimbly": "cd /__Users__quimbly__repo && ls", "vantrees": '"project": "C--Users-vantrees-api"'}
EMAIL = "wyndrel.osk@example-mail.org"
SECRETS = [OPENAI, GITHUB, EMAIL]
NEEDLES = [AUTHOR, *ENCODED_ONLY, *SECRETS]

#: The numeric columns of these tables are the numbers a report shows (acceptance 3).
TABLES = ("headline", "exam_recall", "exam_recorded", "recorded_compactions", "continuation_recall", "composition")
#: Fewer bootstrap resamples and priced turns than a real run: both runs take the same.
LIGHTER = {"n_boot": 200, "turns": 10, "cost_cases": 2}


def _planted(folder: Path) -> None:
    """Write a chat-JSONL session under pi's encoded cwd, named as Claude Code names a Windows project."""
    where = folder / f"--Users-{AUTHOR}-proj--"
    where.mkdir(parents=True)
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(8):
        msgs += [
            {
                "role": "user",
                "content": f"Step {i}: see ~/.claude/projects/-home-{AUTHOR}-proj/ and github.com/{AUTHOR}/tools; "
                f"{ENCODED_ONLY['quimbly']}; mail {EMAIL} when build_{i:03d} passes.",
            },
            {
                "role": "tool",
                "content": f"OPENAI_API_KEY={OPENAI}\ngh auth token: {GITHUB}\n"
                f"{ENCODED_ONLY['vantrees']}\nowner {AUTHOR} staff\nresult_{i} = {1000 + 37 * i}",
            },
            {"role": "assistant", "content": f"Decision {i}: keep retry_limit_{i} at {3 + i} for module_{i}."},
        ]
    (where / f"C--Users-{AUTHOR}-chat.jsonl").write_text("\n".join(json.dumps(m) for m in msgs) + "\n")


@pytest.fixture(scope="session")
def pair(tmp_path_factory, warm_kernels):
    """(redacted run folder, plain run folder) of the same sessions and parameters.

    Session-wide, in this module's xdist group: built once per test run, in the worker's warm kernels.
    """
    base = tmp_path_factory.mktemp("invariance")
    inbox = base / "in"
    shutil.copytree(PUBLIC_FIXTURES, inbox)
    _planted(inbox)
    overrides = {"session_paths": [str(inbox)], **LIGHTER}
    run = functools.partial(runner.run_profile, "my_sessions", progress=False, overrides=overrides, launch=warm_kernels)
    red, plain = run(results=base / "red", redact=True), run(results=base / "plain", redact=False)
    return red.run_dir, plain.run_dir


@pytest.mark.parametrize("table", TABLES)
def test_redaction_moves_no_number(pair, table):
    red, plain = (pd.read_parquet(d / f"{table}.parquet") for d in pair)
    numeric = [c for c in plain.columns if pd.api.types.is_numeric_dtype(plain[c])]
    assert numeric, f"{table} has no numeric column"
    assert list(red.columns) == list(plain.columns) and len(red) == len(plain)
    pd.testing.assert_frame_equal(red[numeric], plain[numeric], check_exact=True)


def test_the_exam_asked_real_questions(pair):
    """The questions and decoys are made from the values as written: no marker is cut into an answer."""
    red, plain = pair
    assert len(pd.read_parquet(plain / "exam_closed.parquet")) > 0
    for d in pair:
        bank = (d / "exam_bank.jsonl").read_text(encoding="utf-8")
        assert "[SWITCHED:" not in bank
    for line in (plain / "exam_bank.jsonl").read_text(encoding="utf-8").splitlines():
        for q in json.loads(line)["questions"] if line.strip() else ():
            assert "REDACTED" not in q["answer"] and "REDACTED" not in q["prompt"], q


def test_the_redacted_folder_holds_no_planted_value_nor_the_authors_name(pair):
    red, plain = pair
    assert {n for _, n in find_leaks(plain, NEEDLES)} == set(NEEDLES)  # they were there to be found
    assert find_leaks(red, NEEDLES) == []
    names = [p.relative_to(red).as_posix() for p in red.rglob("*")]
    assert not [n for n in names if any(needle in n for needle in NEEDLES)]
    sweep = json.loads((red / "run.json").read_text())["redaction"]
    assert sweep["enabled"] and any(f.startswith("sessions/") for f in sweep["files_changed_by_final_sweep"])
    shown = (red / "sessions").iterdir()
    assert any("[REDACTED:log-user-name]" in p.read_text(encoding="utf-8") for p in shown)
    # Private while it held the sessions as written; once swept, as any run folder.
    assert stat.S_IMODE(red.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    assert stat.S_IMODE((red / "sessions").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)

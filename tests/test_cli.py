"""The console script end to end, as a user types it."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compaction_lab import cli


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("compaction-lab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compaction_lab.cli"]


@pytest.mark.slow
def test_run_smoke_prints_the_run_folder_last(tmp_path):
    r = subprocess.run(
        _script() + ["run", "--profile", "smoke", "--results", str(tmp_path), "--name", "cli-smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # Six kernel shutdowns; each used to race a SIGINT against the kernel's last reply (issue #12).
    assert "KeyboardInterrupt caught in kernel" not in r.stderr and "Traceback" not in r.stderr
    last = r.stdout.strip().splitlines()[-1]
    run_dir = Path(last)
    assert run_dir == (tmp_path / "cli-smoke").resolve()
    assert (run_dir / "report.html").exists() and (run_dir / "composition.parquet").exists()


def test_profiles_lists_shipped_profiles(capsys):
    assert cli.main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "smoke" in out and "default" in out


def test_help_names_the_commands(capsys):
    try:
        cli.main(["--help"])
    except SystemExit as e:
        assert e.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "profiles" in out


# --------------------------------------------------------------------------- import / history / tally

import json  # noqa: E402  (imported below the helpers the CLI tests share)

import pandas as pd  # noqa: E402  (imported below the helpers the CLI tests share)

from compaction_lab.ingest import ImportAudit, load_sessions  # noqa: E402  (imported below the helpers the CLI tests share)
from compaction_lab.tally import composition  # noqa: E402  (imported below the helpers the CLI tests share)
from tests.helpers import PUBLIC_FIXTURES  # noqa: E402  (imported below the helpers the CLI tests share)

PI = PUBLIC_FIXTURES / "pi" / "large-session.jsonl"


def _first_single_block_tool_result(path: Path) -> tuple[int, str]:
    """Independently of the importer: the line number and text of a one-block pi toolResult."""
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        obj = json.loads(line)
        msg = obj.get("message") or {}
        content = msg.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        if (
            obj.get("type") == "message"
            and msg.get("role") == "toolResult"
            and len(blocks) == 1
            and blocks[0].get("type") == "text"
            and len(blocks[0]["text"]) > 200
        ):
            return lineno, blocks[0]["text"]
    raise AssertionError("no single-block toolResult in the fixture")


def test_import_search_get_round_trip(tmp_path, capsys):
    db = str(tmp_path / "archive.sqlite")
    assert cli.main(["import", str(PUBLIC_FIXTURES), "--archive", db, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert " new records" in out
    n_first = int(out.split(":")[1].split()[0])
    assert n_first > 1000

    # Re-import: nothing added.
    assert cli.main(["import", str(PUBLIC_FIXTURES), "--archive", db, "--quiet"]) == 0
    assert ": 0 new records" in capsys.readouterr().out

    lineno, original = _first_single_block_tool_result(PI)
    # A planted string: a line of that tool output, searched as a phrase.
    needle = next(ln for ln in original.splitlines() if len(ln.split()) >= 4)
    assert cli.main(["history", "search", needle, "--archive", db, "--json", "--limit", "50"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert any(h["entry_id"] == f"L{lineno}" and h["kind"] == "tool_output" for h in hits)
    session = next(h["session_id"] for h in hits if h["entry_id"] == f"L{lineno}")

    # get: the original text, byte for byte.
    assert cli.main(["history", "get", f"L{lineno}", "--session", session, "--archive", db]) == 0
    assert capsys.readouterr().out == original

    assert cli.main(["history", "get", "no-such-entry", "--archive", db]) == 1
    assert cli.main(["history", "search", "zzqxqzz-never-there", "--archive", db]) == 1


def test_history_without_archive_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["history", "search", "x", "--archive", str(tmp_path / "none.sqlite")]) == 2
    assert "compaction-lab import" in capsys.readouterr().err


def test_import_unknown_file_names_the_formats_tried(tmp_path, capsys):
    junk = tmp_path / "notes.jsonl"
    junk.write_text('{"hello": "world"}\n')
    assert cli.main(["import", str(junk), "--archive", str(tmp_path / "a.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "not a recognised session format" in err and "codex" in err and "claude_code" in err


def test_tally_prints_the_composition_table(capsys):
    assert cli.main(["tally", str(PUBLIC_FIXTURES), "--json"]) == 0
    captured = capsys.readouterr()
    got = pd.DataFrame(json.loads(captured.out))
    expected = composition.composition_table(load_sessions(PUBLIC_FIXTURES, ImportAudit()))
    pd.testing.assert_frame_equal(
        got[composition.COMPOSITION_COLUMNS].reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False
    )
    assert "skipped" not in captured.err  # the real fixtures import cleanly
    assert cli.main(["tally", str(PUBLIC_FIXTURES)]) == 0
    assert "tool traffic" in capsys.readouterr().out


def test_checkpoints_list_and_release(tmp_path, capsys):
    from compaction_lab.store.checkpoints import CheckpointStore, checkpoint_key
    from compaction_lab.strategies import CompactionContext

    db = str(tmp_path / "ck.sqlite")
    store = CheckpointStore(db)
    key = checkpoint_key("sess-1", 42, "futureos-summarized", "summarized-1", CompactionContext())
    store.claim(key, "worker-that-crashed", pid=999_999, host="elsewhere")
    assert cli.main(["checkpoints", "list", "--db", db]) == 0
    out = capsys.readouterr().out
    assert str(key) in out and "started" in out
    assert cli.main(["checkpoints", "release", str(key), "--db", db]) == 0
    assert "released" in capsys.readouterr().out
    assert cli.main(["checkpoints", "release", str(key), "--db", db]) == 1
    assert cli.main(["checkpoints", "list", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_project_prints_segments_and_json(capsys):
    traj = PUBLIC_FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"
    assert (
        cli.main(
            ["project", str(traj), "--strategy", "futureos-summarized", "--window", "16000", "--output-ceiling", "4000"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "futureos-summarized (extractive stand-in)" in out and "evidence_index" in out and "prefix-shared" in out
    assert cli.main(["project", str(traj), "--strategy", "codex", "--json", "--summarizer", "none"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy"] == "codex" and data["summary_request"]["shape"] == "history+instruction"
    assert data["summary_request"]["tools"] == 0 and data["receipt"]["fallback"] is True
    assert sum(s["tokens"] for s in data["segments"]) == data["tokens"]
    # no summary: Codex does not compact (issue 27 item 6), the history goes out unchanged
    assert data["notes"]["compaction_failed"] and not any(s["kind"] == "summary" for s in data["segments"])


def test_project_respect_trigger_and_bad_input(capsys):
    traj = PUBLIC_FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"
    assert cli.main(["project", str(traj), "--strategy", "codex", "--respect-trigger"]) == 0
    assert "does not fire" in capsys.readouterr().out
    assert cli.main(["project", str(traj), "--strategy", "nope"]) == 2
    assert cli.main(["project", str(traj), "--strategy", "codex", "--cut", "100000"]) == 2
    assert "outside session" in capsys.readouterr().err


def test_exam_prints_recall_with_intervals(capsys):
    assert cli.main(["exam", "--profile", "smoke", "--strategy", "full", "--strategy", "codex", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["strategy"] for r in rows} == {"full", "codex"}
    full = next(r for r in rows if r["strategy"] == "full")
    assert full["retained"] == full["n"] and full["ci_low"] <= full["recall"] <= full["ci_high"]
    assert cli.main(["exam", "--profile", "smoke", "--strategy", "full"]) == 0
    out = capsys.readouterr().out
    assert "verbatim reader (retention ceiling)" in out and "synthetic bank" in out
    # what the uncompacted reference answers it keeps by design: nothing came through a summary
    assert f"scope {full['retained']} · summary 0" in out and full["scope_retained"] == full["retained"]
    codex = next(r for r in rows if r["strategy"] == "codex")
    assert codex["scope_retained"] + codex["summary_retained"] == codex["retained"]
    assert cli.main(["exam", "--profile", "nope"]) == 2


# --------------------------------------------------------------------------- parameters fail first (issue #12 item 9)


def _chat_session(path: Path) -> Path:
    path.write_text(
        "".join(
            json.dumps(m) + "\n"
            for m in [
                {"role": "user", "content": "Deploy build 7Q2-XK9 to staging."},
                {"role": "assistant", "content": "Deployed 7Q2-XK9; ticket OPS-4471 opened."},
            ]
            * 5
        ),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("strategy", ["futureos-summarized", "codex"])
@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--window", "0"], "--window = 0"),
        (["--window", "-5"], "--window = -5"),
        (["--window", "32000"], "--output-ceiling = 32,000"),  # the default ceiling fills the window
        (["--output-ceiling", "0"], "--output-ceiling = 0"),
    ],
)
def test_project_refuses_a_window_with_no_room(tmp_path, capsys, strategy, flags, needle):
    # Was: a traceback for FutureOS, "capacity -31,990" (and a projection) for the others.
    code = cli.main(["project", str(_chat_session(tmp_path / "s.jsonl")), "--strategy", strategy, *flags])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ") and needle in err and out == ""


def test_project_names_futureos_when_only_its_margin_does_not_fit(tmp_path, capsys):
    session = str(_chat_session(tmp_path / "s.jsonl"))
    assert cli.main(["project", session, "--strategy", "futureos-deterministic", "--window", "33000"]) == 2
    assert "'futureos-deterministic'" in capsys.readouterr().err
    assert cli.main(["project", session, "--strategy", "codex", "--window", "33000", "--json"]) == 0


@pytest.mark.slow
def test_run_refuses_unknown_keys_unless_allowed(tmp_path, capsys):
    prof = tmp_path / "tiny.yaml"
    prof.write_text(
        "description: one small chain\nnotebooks: [01_context_composition]\n"
        "parameters: {n_chains: 1, window_tokens: 1500}\n"
    )
    base = ["run", "--profile", str(prof), "--results", str(tmp_path / "r"), "--quiet", "--set", "windw_tokens=9"]
    assert cli.main(base) == 2
    assert "unknown parameter windw_tokens = 9" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    assert cli.main([*base, "--allow-unknown"]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((run_dir / "run.json").read_text())["unused_parameters"] == ["windw_tokens"]


def test_exam_checks_the_profile_and_its_window(tmp_path, capsys):
    prof = tmp_path / "tight.yaml"
    prof.write_text("description: no room\nparameters: {n_chains: 1, window: 400, output_ceiling: 500}\n")
    assert cli.main(["exam", "--profile", str(prof), "--strategy", "full"]) == 2
    assert "window = 400 must exceed output_ceiling = 500" in capsys.readouterr().err


def test_profiles_lists_a_profile_that_could_not_run_as_invalid(tmp_path, monkeypatch, capsys):
    (tmp_path / "typo.yaml").write_text("description: a typo\nparameters: {seed: abc}\n")
    monkeypatch.setenv("COMPACTION_LAB_PARAMS", str(tmp_path))
    assert cli.main(["profiles"]) == 0
    assert "typo" in (out := capsys.readouterr().out) and "(invalid:" in out and "seed = 'abc'" in out


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(tmp_path, monkeypatch, capsys):
    """Issue 12 item 6 for the other commands: Ctrl-C printed a raw KeyboardInterrupt traceback."""
    from compaction_lab import ingest

    def interrupted(*a, **k):
        raise KeyboardInterrupt
        yield  # pragma: no cover

    monkeypatch.setattr(ingest, "plan", interrupted)  # the tally's and the import's reading starts there
    (tmp_path / "s.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    assert cli.main(["tally", str(tmp_path / "s.jsonl")]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


@pytest.mark.slow
def test_run_reaches_its_scheduler_before_making_a_run_folder(tmp_path, monkeypatch, capsys):
    """Item 17 of issue 44: ``run --scheduler tcp://127.0.0.1:1`` without a sweep was checked only in notebook
    01 (exit 1, a failed run folder); now exit 2 in one line before anything is written -- the address from
    ``--scheduler``, ``--set scheduler=`` or the environment alike -- and a credential in it is not repeated."""
    from compaction_lab.engine import scheduler as engine

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1.0)
    results = tmp_path / "results"
    run = ["run", "--profile", "smoke", "--results", str(results), "--quiet"]
    for argv, environ in (
        ([*run, "--scheduler", "tcp://127.0.0.1:1"], None),
        ([*run, "--set", "scheduler=tcp://127.0.0.1:1"], None),
        (run, "tcp://127.0.0.1:1"),
        ([*run, "--scheduler", "tcp://user:pa55word@127.0.0.1:1"], None),
    ):
        if environ is None:
            monkeypatch.delenv(engine.SCHEDULER_ENV, raising=False)
        else:
            monkeypatch.setenv(engine.SCHEDULER_ENV, environ)
        code = cli.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2, argv
        assert len(err) == 1 and err[0].startswith("error: ") and "127.0.0.1:1" in err[0], err
        assert "pa55word" not in err[0] and "user:" not in err[0]
        assert not results.exists() or not any(results.iterdir()), argv  # no run folder was made


@pytest.mark.parametrize(
    ("extra", "kernels"),
    [
        (["--sweep", "seed=1,2", "--scheduler", "local"], 0),
        (["--sweep", "seed=1,2", "--scheduler", "tcp://127.0.0.1:1"], 0),
        (["--sweep", "seed=1,2", "--scheduler", "sync"], None),
        (["--sweep", "seed=1,2"], None),
        (["--scheduler", "local"], None),  # one run: its notebooks execute here, only nested work goes there
        (["--kernels", "1"], 1),
    ],
)
def test_run_launches_kernels_only_where_its_runs_execute(extra, kernels, monkeypatch):
    """``run`` starts its kernels as it begins; a sweep sent to an engine runs none here, so it starts none."""
    from contextlib import nullcontext

    from compaction_lab.cli import run as run_cmd
    from compaction_lab.run import kernel

    counts = []
    monkeypatch.setattr(kernel, "launched", lambda count, notebooks: counts.append(count) or nullcontext())
    with run_cmd._launched(cli.build_parser().parse_args(["run", "--profile", "smoke", *extra])):
        pass
    assert counts == [kernel.default_kernels() if kernels is None else kernels]

"""Storage paths checked up front (issue #12 item 10): a clear error naming the path, exit code 2, no
traceback, and nothing created or overwritten.

Tests run as root, where a folder's mode does not stop writes. A read-only folder is therefore tested in a
forked child that drops to the ``nobody`` account (uid/gid 65534) first; the folder is owned by root with
mode 0o555. Where the machine cannot drop privileges those tests skip and say so. A folder that cannot be
created because its parent is a file needs no privileges and is tested everywhere.
"""

import io
import os
import shutil
import sqlite3
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.ingest import sources
from compaction_lab.run import params, runner
from compaction_lab.store import checkpoints

NOBODY = 65534


def _session(path: Path) -> Path:
    """A tiny chat-JSONL session."""
    path.write_text(
        '{"role": "user", "content": "Deploy build 7Q2-XK9."}\n{"role": "assistant", "content": "Deployed 7Q2-XK9."}\n',
        encoding="utf-8",
    )
    return path


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# --------------------------------------------------------------------------- the helpers


def test_writable_folder_probe_leaves_nothing_behind(tmp_path):
    paths.check_writable_folder(tmp_path / "not" / "yet", "results folder")
    assert list(tmp_path.iterdir()) == []  # neither the folders nor the probe


def test_a_folder_under_a_file_is_named(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(paths.StoragePathError, match=r"cannot be created: .*plain is a file"):
        paths.check_writable_folder(tmp_path / "plain" / "sub", "results folder")
    with pytest.raises(paths.StoragePathError, match="is a file, not a folder"):
        paths.check_writable_folder(tmp_path / "plain", "results folder")


def test_sqlite_file_check(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(paths.StoragePathError, match="is not an SQLite database"):
        paths.check_sqlite_file(tmp_path / "notes.txt", "archive", create=True)
    with pytest.raises(paths.StoragePathError, match="is a folder"):
        paths.check_sqlite_file(tmp_path, "archive", create=True)
    with pytest.raises(paths.StoragePathError, match="no archive at"):
        paths.check_sqlite_file(tmp_path / "missing.sqlite", "archive", create=False)
    paths.check_sqlite_file(tmp_path / "new" / "a.sqlite", "archive", create=True)
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "notes.txt").read_text() == "hello"


# --------------------------------------------------------------------------- --archive


@pytest.mark.parametrize("kind", ["text file", "folder"])
def test_archive_that_is_not_an_sqlite_file_is_a_clear_error(tmp_path, capsys, kind):
    # Was: "sqlite3.DatabaseError: file is not a database" / "disk I/O error" tracebacks.
    target = tmp_path / "target"
    if kind == "folder":
        target.mkdir()
    else:
        target.write_text("my notes, not a database\n")
    session = _session(tmp_path / "s.jsonl")
    for argv in (
        ["import", str(session), "--archive", str(target), "--quiet"],
        ["history", "search", "7Q2-XK9", "--archive", str(target)],
        ["history", "get", "L1", "--archive", str(target)],
    ):
        code, err = _cli(argv, capsys)
        assert code == 2 and err.startswith("error: ") and str(target) in err, (argv, err)
    if kind == "text file":
        assert target.read_text() == "my notes, not a database\n"  # never overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "target"]  # no journal beside it
    # A missing archive is said so too, and reading never creates it (nor its folder).
    missing = tmp_path / "sub" / "none.sqlite"
    for argv in (
        ["history", "search", "x", "--archive", str(missing)],
        ["history", "get", "L1", "--archive", str(missing)],
    ):
        code, err = _cli(argv, capsys)
        assert code == 2 and "no archive at" in err
    assert not (tmp_path / "sub").exists()


def test_archive_pointed_at_another_database_is_refused_untouched(tmp_path, capsys):
    other = tmp_path / "ledger.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE calls (id INTEGER)")
    before = other.read_bytes()
    code, err = _cli(["import", str(_session(tmp_path / "s.jsonl")), "--archive", str(other), "--quiet"], capsys)
    assert code == 2 and "not an archive of originals" in err
    assert other.read_bytes() == before


def test_import_into_a_folder_that_cannot_exist_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    code, err = _cli(
        ["import", str(_session(tmp_path / "s.jsonl")), "--archive", str(tmp_path / "plain" / "a.sqlite"), "--quiet"],
        capsys,
    )
    assert code == 2 and "plain is a file" in err


# --------------------------------------------------------------------------- --results


def test_results_naming_a_file_fails_before_any_notebook(tmp_path, capsys):
    # Was: a FileExistsError traceback.
    target = tmp_path / "results.txt"
    target.write_text("x")
    code, err = _cli(["run", "--profile", "smoke", "--results", str(target), "--quiet"], capsys)
    assert code == 2 and "results folder" in err and str(target) in err
    assert target.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["results.txt"]


# --------------------------------------------------------------------------- checkpoints --db


def test_checkpoints_list_and_release_never_create_a_database(tmp_path, capsys):
    # Was: the database and its folders were created for any typo'd path.
    typo = tmp_path / "chekpoints" / "ck.sqlite"
    for argv in (
        ["checkpoints", "list", "--db", str(typo)],
        ["checkpoints", "release", "s:1:v1:abcdef12", "--db", str(typo)],
    ):
        code, err = _cli(argv, capsys)
        assert code == 2 and f"no checkpoint database at {typo}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["text file", "folder", "archive"])
def test_checkpoints_db_that_is_not_a_checkpoint_database_is_a_clear_error(tmp_path, capsys, kind):
    # Was: "sqlite3.DatabaseError: file is not a database" (or our table written into someone else's file).
    db = tmp_path / "x.sqlite"
    if kind == "folder":
        db.mkdir()
    elif kind == "text file":
        db.write_text("not a database")
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE records (id INTEGER)")
    before = db.read_bytes() if db.is_file() else None
    for argv in (
        ["checkpoints", "list", "--db", str(db)],
        ["checkpoints", "release", "s:1:v1:abcdef12", "--db", str(db)],
    ):
        code, err = _cli(argv, capsys)
        assert code == 2 and str(db) in err, err
    assert (db.read_bytes() if db.is_file() else None) == before


# --------------------------------------------------------------------------- the ledger


def test_a_ledger_that_is_a_folder_is_named(tmp_path):
    from compaction_lab.store.ledger import Ledger

    with pytest.raises(paths.StoragePathError, match=f"ledger {tmp_path} is a folder"):
        Ledger(tmp_path)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- history search --limit


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_history_search_limit_must_be_positive(capsys, limit):
    # Was: "no matches" (exit 1), as if the archive held nothing.
    with pytest.raises(SystemExit) as info:
        cli.main(["history", "search", "x", "--limit", limit])
    assert info.value.code == 2
    assert "--limit: must be a positive integer" in capsys.readouterr().err


# --------------------------------------------------------------------------- read-only folders (privileges dropped)


def _unprivileged(fn) -> tuple[int, str]:
    """Run ``fn()`` (returning an exit code) in a forked child as ``nobody``; return its code and stderr.

    Everything `fn` imports must be imported already: the child may not be able to read the interpreter's
    own files. An exception in the child is exit code 70 with its traceback in the returned stderr.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.close(read)
            out = io.TextIOWrapper(os.fdopen(write, "wb"), encoding="utf-8", write_through=True)
            sys.stdout = sys.stderr = out
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            except OSError as exc:
                print(f"cannot drop privileges: {exc}")
                code = 77
            else:
                try:
                    code = int(fn())
                except BaseException:
                    traceback.print_exc()
                    code = 70
            out.flush()
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, encoding="utf-8", errors="replace") as fh:
        err = fh.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 77:
        pytest.skip(f"this machine cannot drop privileges to test a read-only folder ({err.strip()})")
    return code, err


def _import_what_commands_use() -> None:
    """Import, before a child drops privileges, the modules the commands import lazily (the child may
    not be able to read the interpreter's or the checkout's files)."""
    import zstandard  # noqa: F401  (loaded now: the child may not read site-packages later)

    from compaction_lab import ingest
    from compaction_lab.ingest import sources  # noqa: F401  (loaded now, as above)

    cli.build_parser()
    for fmt in ingest.formats():
        ingest.importer(fmt)


@pytest.fixture
def readonly_folder():
    """A folder nobody may write in (owned by root, mode 0o555) inside a folder nobody may enter."""
    if not hasattr(os, "fork") or os.geteuid() != 0:
        pytest.skip("needs root, to drop to another account (a non-root run cannot test root-owned folders)")
    base = Path(tempfile.mkdtemp(prefix="ro-test-"))
    base.chmod(0o755)
    folder = base / "readonly"
    folder.mkdir(mode=0o555)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


def test_import_into_a_read_only_folder_is_a_clear_error(readonly_folder, tmp_path):
    # Was: "sqlite3.OperationalError: unable to open database file".
    session = _session(readonly_folder.parent / "s.jsonl")
    session.chmod(0o644)
    _import_what_commands_use()
    code, err = _unprivileged(
        lambda: cli.main(["import", str(session), "--archive", str(readonly_folder / "a.sqlite"), "--quiet"])
    )
    assert code == 2 and err.startswith("error: ") and str(readonly_folder) in err and "cannot write" in err, err
    assert list(readonly_folder.iterdir()) == []


def test_a_read_only_results_folder_fails_before_any_notebook(readonly_folder):
    # Was: a PermissionError traceback from creating the run folder.
    smoke = runner.load_profile("smoke")
    assert params.problems(smoke) == []  # warms the notebook and registry caches the child relies on

    def run() -> int:
        try:
            runner.run_profile(smoke, results=readonly_folder / "results", progress=False)
        except runner.ProfileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0

    code, err = _unprivileged(run)
    assert code == 2 and "results folder" in err and "cannot write" in err, err
    assert list(readonly_folder.iterdir()) == []


def test_the_folder_probe_sees_what_root_does_not(readonly_folder):
    def probe() -> int:
        try:
            paths.check_writable_folder(readonly_folder, "results folder")
        except paths.StoragePathError as exc:
            print(exc, file=sys.stderr)
            return 2
        return 0

    code, err = _unprivileged(probe)
    assert code == 2 and "cannot write in" in err
    paths.check_writable_folder(readonly_folder, "results folder")  # root may write there: no error


def test_checkpoint_store_in_a_read_only_folder_is_a_clear_error(readonly_folder):
    def open_store() -> int:
        try:
            checkpoints.CheckpointStore(readonly_folder / "ck.sqlite")
        except checkpoints.CheckpointError as exc:
            print(exc, file=sys.stderr)
            return 2
        return 0

    code, err = _unprivileged(open_store)
    assert code == 2 and "cannot write in" in err, err


def test_a_folder_this_account_may_not_enter_is_a_counted_skip_or_a_clear_error(readonly_folder, tmp_path):
    """Review of issue 12 items 5 and 10: `Path.exists()` raises PermissionError when a parent folder
    cannot be entered, so `my_sessions` (sources.gather) and the storage checks still gave tracebacks
    for another account's folders."""
    locked = readonly_folder.parent / "locked"
    locked.mkdir(mode=0o700)
    hidden = _session(locked / "s.jsonl")
    good = _session(readonly_folder.parent / "good.jsonl")
    good.chmod(0o644)
    _import_what_commands_use()

    def child() -> int:
        got = sources.gather([str(hidden), str(good)], progress=False)
        assert got.audit is not None  # paths were given: an import, which has an audit
        reasons = {(sk.path, sk.reason) for sk in got.audit.skipped}
        assert len(got.sessions) == 1 and (str(hidden), "unreadable") in reasons, reasons
        for check in (
            lambda: paths.check_writable_folder(locked / "res", "results folder"),
            lambda: paths.check_sqlite_file(locked / "a.sqlite", "archive", create=True),
        ):
            try:
                check()
            except paths.StoragePathError as exc:
                assert str(locked) in str(exc)
            else:
                return 3
        return 0

    code, err = _unprivileged(child)
    assert code == 0, err

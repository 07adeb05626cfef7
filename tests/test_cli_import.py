"""``compaction-lab import`` refuses a path that does not exist before it writes anything (issue 44 item 12:
``import --archive Y /nonexistent`` left a 53 KB archive ``Y`` behind)."""

from __future__ import annotations

import pytest

from compaction_lab import cli
from tests.helpers import PUBLIC_FIXTURES


@pytest.mark.parametrize("with_a_good_path", [False, True])
def test_import_of_a_missing_path_writes_no_archive(tmp_path, capsys, with_a_good_path):
    archive = tmp_path / "new" / "Y"
    missing = tmp_path / "nonexistent"
    paths = [str(PUBLIC_FIXTURES), str(missing)] if with_a_good_path else [str(missing)]
    assert cli.main(["import", "--archive", str(archive), "--quiet", *paths]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: {missing}: no such file or directory"]
    assert not archive.exists() and not archive.parent.exists()


def test_import_of_a_missing_path_leaves_an_existing_archive_untouched(tmp_path, capsys):
    archive = tmp_path / "archive.sqlite"
    assert cli.main(["import", "--archive", str(archive), "--quiet", str(PUBLIC_FIXTURES)]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert cli.main(["import", "--archive", str(archive), "--quiet", str(tmp_path / "gone")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before

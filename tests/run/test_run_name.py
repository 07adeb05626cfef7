"""A run folder name given by hand (``--name``): one plain folder name that fits, or one line before any folder."""

from __future__ import annotations

import pytest

from compaction_lab import cli
from compaction_lab.run import runner


@pytest.mark.parametrize(
    "name",
    ["x" * 300, "é" * 130, "../escaped", "a/b", ".", "..", "nul\0byte"],
    ids=["300-bytes", "260-bytes-utf8", "dotdot-path", "slash", "dot", "dotdot", "nul"],
)
def test_a_hand_given_name_that_is_no_plain_folder_name_is_one_line_before_any_folder(tmp_path, capsys, name):
    """Issue 44 (noticed with item 11): ``--name`` of 300 bytes was an ``OSError: [Errno 36]`` traceback, and a
    name holding ``/`` or ``..`` made a folder outside the results folder."""
    results = tmp_path / "results"
    code = cli.main(["run", "--profile", "smoke", "--results", str(results), "--name", name, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: --name "), err
    assert not results.exists() or not any(results.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["results"])


def test_a_name_of_the_longest_allowed_size_is_accepted():
    runner.check_run_name("r" * runner.NAME_MAX_BYTES)
    with pytest.raises(runner.ProfileError, match="at most"):
        runner.check_run_name("r" * (runner.NAME_MAX_BYTES + 1))

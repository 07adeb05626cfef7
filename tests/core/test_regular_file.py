"""Reading a file someone else may have put in place: regular files only, never blocking, bounded."""

from __future__ import annotations

import os

import pytest

from compaction_lab.core import regular_file


def test_a_regular_file_is_read_whole_up_to_the_bound(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert regular_file.read(f, 10) == b"x" * 10
    with pytest.raises(regular_file.TooLarge, match="larger than 9 bytes"):
        regular_file.read(f, 9)


@pytest.mark.parametrize("make, kind", [("fifo", "a FIFO"), ("folder", "a folder"), ("device", "a character device")])
def test_what_is_not_a_regular_file_is_refused_at_once_naming_it(tmp_path, make, kind):
    path = tmp_path / make
    if make == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer for ever
    elif make == "folder":
        path.mkdir()
    else:
        path = "/dev/zero"  # never ends
    with pytest.raises(regular_file.NotRegular) as caught:
        regular_file.read(path, 1 << 20)
    assert caught.value.kind == kind and isinstance(caught.value, ValueError)


def test_a_link_is_followed_unless_told_not_to(tmp_path):
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_bytes(b"data")
    link.symlink_to(target)
    assert regular_file.read(link, 100) == b"data"
    with pytest.raises(regular_file.NotRegular, match="a link"):
        regular_file.read(link, 100, follow_links=False)
    with pytest.raises(FileNotFoundError):
        regular_file.read(tmp_path / "absent", 100)

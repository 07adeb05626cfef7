"""Reading a file someone else may have put in place: a regular file only, never blocking, at most N bytes.

A profile, a run folder's ``run.json``, a sweep's plan, a memo entry: each is a path anyone with write
access to its folder can replace by a FIFO (whose open or read waits for ever), a device (``/dev/zero``
never ends), a link, or a file of any size. `read` opens without blocking, judges what it opened (not
what a path pointed at a moment before) and reads at most one byte past the bound. Design:
docs/architecture.md#secrets.
"""

from __future__ import annotations

import os
import stat

#: What a file that is not a regular one is, by `stat.S_IFMT`, for messages.
KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a link",
}


class NotRegular(ValueError):
    """The path is no regular file; `kind` says what it is (``a FIFO``)."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{os.fspath(path)}: not a regular file ({kind})")
        self.kind = kind


class TooLarge(ValueError):
    """The file holds more than the bound allowed."""


def read(path: str | os.PathLike[str], max_bytes: int, *, follow_links: bool = True) -> bytes:
    """Return the bytes of regular file `path`, refusing anything else or more than `max_bytes`.

    Parameters
    ----------
    path : str or Path
    max_bytes : int
        The most bytes read; a larger file is refused, its rest never read.
    follow_links : bool
        False: a link in the path's last place is refused (``O_NOFOLLOW``), not followed.

    Raises
    ------
    FileNotFoundError
        No such file.
    NotRegular
        A folder, FIFO, device, socket (or, with ``follow_links=False``, a link): a `ValueError`.
    TooLarge
        More than `max_bytes` (a `ValueError`).
    OSError
        It cannot be opened or read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if not follow_links and os.path.islink(path):  # O_NOFOLLOW's ELOOP
            raise NotRegular(path, KINDS[stat.S_IFLNK]) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, KINDS.get(stat.S_IFMT(mode), "not a regular file"))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"{os.fspath(path)}: larger than {max_bytes:,} bytes")
    return data


__all__ = ["KINDS", "NotRegular", "TooLarge", "read"]

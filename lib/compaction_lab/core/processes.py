"""Processes: whether one is alive, and the environment the processes started in a block inherit.

Whether one is alive is the one liveness rule of checkpoints, the ledger and runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


def pid_alive(pid: int) -> bool:
    """Tell whether a process with this id exists on this machine.

    Parameters
    ----------
    pid : int

    Returns
    -------
    bool
        ``os.kill(pid, 0)`` succeeds, or fails only for lack of permission
        (another user's live process); False once no such process exists.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["pid_alive"]


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set these environment variables for the block (and for every process started in it), then restore them.

    A variable that was unset before is unset again after, not left empty.
    """
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

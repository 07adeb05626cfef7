"""Whether a process is alive: the one liveness rule of checkpoints, the ledger and runs."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while a process with this id exists on this machine.

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

"""The error a profile or its parameters raise when they cannot make a meaningful run.

It lives here, at the bottom of the stages, because every stage that reads a parameter may raise it (an
provider, the runner, a sweep) and none of them may import the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar


def _unmasked(text: str) -> str:
    return text


class ProfileError(ValueError):
    """A profile, or the parameters it runs with, cannot make a meaningful run (every problem listed).

    Its message never holds a secret: URL credentials, secret values and
    secret-shaped text (``sk-...``, ``api_key: ...``) are masked whoever raises it.
    The masker is `compaction_lab.privacy.secrets.mask_message`, which installs
    itself here when it is imported (privacy sits above core: it redacts core's
    records); every module that raises this error imports it first.
    """

    masker: ClassVar[Callable[[str], str]] = staticmethod(_unmasked)

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(type(self).masker(str(message)), *args)

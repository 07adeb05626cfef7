"""The redaction pair: one `my_sessions` run of the public fixtures plus a planted session, redacted and not.

A session fixture (`redaction_pair`), built once per test run on one xdist worker
(`tests.conftest.SHARED_SESSION_FIXTURES`), in that worker's warm kernels. Read by the redaction tests
(`tests/run/test_redaction_invariance.py`: no number moves, nothing planted is left) and, its redacted run,
by the figure-text test of a `my_sessions` run (`tests/report/test_figure_text.py`: pi's sessions, one
with compactions pi recorded, and the short Claude Code and SWE-agent sessions).
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

from compaction_lab.run import runner
from tests.helpers import LIGHTER, PUBLIC_FIXTURES
from tests.privacy.privacy_samples import GITHUB, OPENAI

#: The author of the planted session: told by its folder (pi's encoded cwd) and file name (Claude Code's
#: Windows project folder), then written bare and in SWE-agent's and Claude Code's encodings.
AUTHOR = "wyndrel"
#: Accounts written only in an encoded home inside the text (no metadata tells them).
ENCODED_ONLY = {"quimbly": "cd /__Users__quimbly__repo && ls", "vantrees": '"project": "C--Users-vantrees-api"'}
EMAIL = "wyndrel.osk@example-mail.org"
SECRETS = [OPENAI, GITHUB, EMAIL]
NEEDLES = [AUTHOR, *ENCODED_ONLY, *SECRETS]


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
def redaction_pair(tmp_path_factory, warm_kernels) -> tuple[Path, Path]:
    """(redacted run folder, plain run folder) of the same sessions and parameters."""
    base = tmp_path_factory.mktemp("invariance")
    inbox = base / "in"
    shutil.copytree(PUBLIC_FIXTURES, inbox)
    _planted(inbox)
    overrides = {"session_paths": [str(inbox)], **LIGHTER}
    run = functools.partial(runner.run_profile, "my_sessions", progress=False, overrides=overrides, launch=warm_kernels)
    red = run(results=base / "red", redact=True)
    plain = run(results=base / "plain", redact=False, notebook_html=False)  # its tables are compared, no page
    return red.run_dir, plain.run_dir

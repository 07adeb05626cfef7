"""Measured speeds and times live in benchmark output, not in the library's prose (issue 49, acceptance 4).

A docstring or comment that says "~0.6 s" or "1.8 GB/s" goes stale with the next machine or change;
`make bench` measures them and says where. This finds such figures in the library's source.
"""

from __future__ import annotations

import re

from tests.helpers import REPO_ROOT

#: An approximate time or size ("~0.5 s", "~70 MB") or a throughput ("1.8 GB/s"), as measurements are written.
MEASURED = re.compile(r"~\d[\d.,]* ?(?:s|ms|MB|GB|MiB|GiB)\b|\d[\d.,]* ?(?:[KMG]i?B/s)\b|\d[\d.]* s against")


def test_no_measured_figure_in_the_library_source():
    found = [
        f"{path.relative_to(REPO_ROOT)}:{i}: {line.strip()}"
        for path in sorted((REPO_ROOT / "lib" / "compaction_lab").rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if MEASURED.search(line)
    ]
    assert not found, "measured figures belong in benchmark output:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for():
    assert MEASURED.search("costs ~0.6 s each") and MEASURED.search("hashes 1.8 GB/s")
    assert not MEASURED.search("timeout_s = 120") and not MEASURED.search("MAX_BYTES = 8 * 1024 * 1024")

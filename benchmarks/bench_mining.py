"""Mining exam questions from a real session: pi's public session (~1,300 records, 2.4 MB) at its end.

Was a timed unit test (`tests/exam/test_probes_real.py`); speed targets live here. The target is
generous: it catches a blow-up of the miner (a quadratic scan), not a few percent.
"""

from __future__ import annotations

import sys

from _common import Results, repo_root, timed

from compaction_lab.exam.questions.probes import ProbeSpec, mine
from compaction_lab.ingest import load_sessions

SESSION = "tests/fixtures/public/pi/before-compaction.jsonl"
TARGET_S = 10.0


def main() -> int:
    res = Results("mining")
    (s,) = list(load_sessions(repo_root() / SESSION))
    cut = s.records[-1].source_order + 1
    spec = ProbeSpec(n_questions=20, n_decoys=2, tail_tokens=8192)
    with timed() as t:
        m = mine(s, spec, cut=cut)
    res.add("mine pi's public session at its end", t["seconds"], "s", f"< {TARGET_S:g} s", t["seconds"] < TARGET_S)
    res.add("  questions", len(m.case.questions), "")
    res.add("  pool", len(m.pool), "values")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())

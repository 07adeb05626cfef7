"""Projecting a 1M-token session with every strategy (offline providers): well under a second each.

The session is a seeded synthetic chain grown to 1,000,000 report tokens. Each
strategy is timed cold (first call: empty token cache, empty per-text scan caches of the extractive
stand-in, empty memo) and warm (computed again with those caches full; the memo, which would hand
back the first projection, is emptied); the target applies to the cold time, the honest one.
"""

from __future__ import annotations

import sys

from _common import Results, timed

from compaction_lab import strategies, summarize
from compaction_lab.core.tokens import counter
from compaction_lab.ingest import synthetic
from compaction_lab.store import memo
from compaction_lab.strategies import CompactionContext
from compaction_lab.summarize import extractive

TARGET_S = 1.0


def main() -> int:
    res = Results("strategies")
    with timed() as t:
        (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(seed=3, n_chains=1, window_tokens=1_000_000))
    s = chain.session
    res.add("generate 1M-token chain", t["seconds"], "s")
    ctx = CompactionContext(window=1_000_000, output_ceiling=32_000, summarizer=summarize.get_summarizer("extractive"))
    for name in strategies.names():
        counter(ctx.encoding)._cache.clear()  # cold: no counts cached from an earlier strategy
        for scan in (extractive._sentences, extractive._ids_of, extractive._paths_of, extractive._matching_lines):
            scan.cache_clear()
        memo._MEMOS.clear()
        with timed() as cold:
            proj = strategies.compact(s, name, None, ctx)
        memo._MEMOS.clear()  # warm caches, but computed again
        with timed() as warm:
            strategies.compact(s, name, None, ctx)
        res.add(f"{name} (cold)", cold["seconds"], "s", f"< {TARGET_S:g} s", cold["seconds"] < TARGET_S)
        res.add(f"{name} (warm)", warm["seconds"], "s")
        res.add(f"  {name} projection", proj.tokens, "tokens")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())

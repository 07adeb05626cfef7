"""Compare two run folders' tables and figures: what a refactoring must leave identical.

    python benchmarks/compare_runs.py BEFORE AFTER [--rename TABLE:OLD=NEW ...] [--figure OLD=NEW ...]
                                                   [--field OLD=NEW ...]

Every table (``*.parquet``) of BEFORE is read with pandas and compared with AFTER's by
`pandas.testing.assert_frame_equal` (columns renamed first where ``--rename table:old=new`` says so); every
question bank (``*.jsonl``) and every figure's SVG (``figures/*.svg``, stems renamed by ``--figure``) byte for
byte, after the data fields a chart names in its SVG (``aria-label``) are renamed in BEFORE's text by ``--field``
and, in both, the ids Vega numbers from counters of its runtime (gradients, clip paths) are numbered as
`compaction_lab.report.theme.stable_ids` numbers them: they name no content, and a figure drawn before that
function depended on what its kernel drew earlier. Prints one line per file (``same``, ``differs: ...``, ``missing``, ``new``) and exits 1 when anything
differs or is missing. Timings, paths and versions live in ``run.json`` and the notebooks, which are not
compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from compaction_lab.report.theme import stable_ids


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        old, _, new = item.partition("=")
        if not new:
            raise SystemExit(f"expected OLD=NEW, got {item!r}")
        out[old] = new
    return out


def compare_tables(before: Path, after: Path, renames: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """Return (file, verdict) for every table and bank of either folder."""
    rows = []
    names = sorted({p.name for p in before.glob("*.parquet")} | {p.name for p in after.glob("*.parquet")})
    for name in names:
        a, b = before / name, after / name
        if not b.exists() or not a.exists():
            rows.append((name, "missing" if not b.exists() else "new"))
            continue
        left = pd.read_parquet(a).rename(columns=renames.get(a.stem, {}))
        right = pd.read_parquet(b)
        try:
            pd.testing.assert_frame_equal(left, right)
            rows.append((name, "same"))
        except AssertionError as exc:
            rows.append((name, "differs: " + " ".join(str(exc).split())[:300]))
    for bank in sorted({p.name for p in before.glob("*.jsonl")} | {p.name for p in after.glob("*.jsonl")}):
        a, b = before / bank, after / bank
        if not (a.exists() and b.exists()):
            rows.append((bank, "missing" if a.exists() else "new"))
        else:
            rows.append((bank, "same" if a.read_bytes() == b.read_bytes() else "differs: bytes"))
    return rows


def compare_figures(
    before: Path, after: Path, stems: dict[str, str], fields: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """Return (figure, verdict) for every SVG of either folder's ``figures/`` (`fields` renamed in BEFORE's)."""
    rows = []
    a_svgs = {stems.get(p.stem, p.stem): p for p in (before / "figures").glob("*.svg")}
    b_svgs = {p.stem: p for p in (after / "figures").glob("*.svg")}
    for stem in sorted(set(a_svgs) | set(b_svgs)):
        if stem not in b_svgs or stem not in a_svgs:
            rows.append((f"figures/{stem}.svg", "missing" if stem not in b_svgs else "new"))
        else:
            old = a_svgs[stem].read_text(encoding="utf-8")
            for a, b in (fields or {}).items():
                old = old.replace(a, b)
            same = stable_ids(old) == stable_ids(b_svgs[stem].read_text(encoding="utf-8"))
            rows.append((f"figures/{stem}.svg", "same" if same else "differs: bytes"))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Compare two run folders; print a line per file; 1 when anything differs or is missing."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rename", action="append", default=[], help="TABLE:OLD=NEW, a column renamed in a table")
    ap.add_argument("--figure", action="append", default=[], help="OLD=NEW, a figure stem renamed")
    ap.add_argument("--field", action="append", default=[], help="OLD=NEW, a data field a chart names, renamed")
    args = ap.parse_args(argv)
    renames: dict[str, dict[str, str]] = {}
    for item in args.rename:
        table, _, pair = item.partition(":")
        renames.setdefault(table, {}).update(_pairs([pair]))
    rows = compare_tables(args.before, args.after, renames) + compare_figures(
        args.before, args.after, _pairs(args.figure), _pairs(args.field)
    )
    for name, verdict in rows:
        print(f"{verdict.split(':')[0]:8} {name}{'' if verdict in ('same', 'missing', 'new') else ': ' + verdict}")
    bad = [r for r in rows if r[1] != "same" and r[1] != "new"]
    print(f"{len(rows) - len(bad)} of {len(rows)} same or new; {len(bad)} differ or are missing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

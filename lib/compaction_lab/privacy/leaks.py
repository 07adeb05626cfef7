"""The leak check: `find_leaks` says where known secret values still occur in a run folder."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path

from compaction_lab.privacy.scrub import PARQUET_MAGIC, PARQUET_SUFFIXES, parquet_strings, run_files

__all__ = ["find_leaks"]


def _needle_forms(needle: str) -> set[bytes]:
    return {
        needle.encode("utf-8"),
        json.dumps(needle)[1:-1].encode("utf-8"),
        json.dumps(needle, ensure_ascii=False)[1:-1].encode("utf-8"),
        html.escape(needle).encode("utf-8"),
    }


def find_leaks(run_dir: Path, needles: Iterable[str]) -> list[tuple[str, str]]:
    """Where known secret values still occur in a run folder.

    Every file is searched as raw bytes (UTF-8, plus the JSON- and
    HTML-escaped forms of each needle), binary ones and databases included.
    Parquet files are also decoded, since their pages may be compressed:
    every string value, column name and metadata entry is searched.

    Returns
    -------
    list of (relative path, needle)
        Sorted; empty when nothing leaks.
    """
    run_dir = Path(run_dir)
    wanted = [(n, _needle_forms(n)) for n in dict.fromkeys(needles) if n]
    found: set[tuple[str, str]] = set()
    if not wanted:
        return []
    for p in run_files(run_dir):
        if not p.is_file():
            continue
        rel = p.relative_to(run_dir).as_posix()
        data = p.read_bytes()
        for needle, forms in wanted:
            if any(f in data for f in forms):
                found.add((rel, needle))
        if data.startswith(PARQUET_MAGIC) or p.suffix.lower() in PARQUET_SUFFIXES:
            try:
                strings = list(parquet_strings(p))
            except Exception:  # not readable as parquet: the raw search above stands
                continue
            for needle, _ in wanted:
                if any(needle in s for s in strings):
                    found.add((rel, needle))
    return sorted(found)

"""The leak check finds known values, also inside compressed parquet pages."""

from __future__ import annotations

import pandas as pd

from compaction_lab.privacy.leaks import find_leaks
from tests.privacy.privacy_samples import OPENAI


def test_find_leaks_decodes_compressed_parquet(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # Without statistics the footer holds no min/max copy of the value.
    pd.DataFrame({"t": [f"x {OPENAI} y"] * 200}).to_parquet(
        run / "t.parquet", compression="gzip", write_statistics=False
    )
    assert OPENAI.encode() not in (run / "t.parquet").read_bytes()
    assert find_leaks(run, [OPENAI]) == [("t.parquet", OPENAI)]

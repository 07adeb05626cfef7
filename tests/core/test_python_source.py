"""core/python_source.py: one thread parses at a time; what ast gives and raises is unchanged."""

from __future__ import annotations

import ast
import json
import threading
import time

import pytest

from compaction_lab.core import python_source
from compaction_lab.run import kernel


def test_parse_and_literal_give_what_ast_gives_and_raise_what_it_raises():
    assert ast.dump(python_source.parse("import os\nx = 1")) == ast.dump(ast.parse("import os\nx = 1"))
    assert python_source.literal("[1, 'a', None]") == [1, "a", None]
    with pytest.raises(SyntaxError):
        python_source.parse("%matplotlib inline")
    with pytest.raises(ValueError):
        python_source.literal("os.getcwd()")


def test_two_lanes_warming_at_once_never_parse_at_once(tmp_path, monkeypatch):
    """CPython 3.11's ast constructor shares its recursion depth across threads (python/cpython#106905):
    two sweep lanes building their kernels' warm code at once raised SystemError. No two parses overlap."""
    cells = [{"cell_type": "code", "source": f"import json\nx{i} = {i}"} for i in range(20)]
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    inside, most = [0], [0]
    guard = threading.Lock()
    real = ast.parse

    def slow_parse(source, *args, **kwargs):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.002)  # long enough for the other thread to arrive, were it let in
        try:
            return real(source, *args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    codes: list[str] = []
    threads = [threading.Thread(target=lambda: codes.append(kernel.warm_code([notebook]))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(codes) == 3 and len(set(codes)) == 1 and "import json" in codes[0]
    assert most[0] == 1, f"{most[0]} threads parsed at once"

"""Python source parsed one thread at a time: a notebook cell's imports, a parameter's default.

CPython 3.11's ``ast`` constructor keeps its recursion depth in state every thread shares; two threads
parsing at once (a sweep's lanes warming their kernels, `compaction_lab.run.sweep`) can corrupt it and
raise ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905, fixed in 3.13 by
a per-thread depth). Every parse in the library goes through `parse` and `literal`, which hold one lock.
Design: docs/architecture.md#sweeps-and---resume.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """`ast.parse` of `source` (a module), while no other thread parses; raises SyntaxError as it does."""
    with _LOCK:
        return ast.parse(source)


def literal(source: str) -> Any:
    """`ast.literal_eval` of `source`, while no other thread parses; raises what it raises."""
    with _LOCK:
        return ast.literal_eval(source)

"""Adding an arm or an importer touches only its own module (issue 28, acceptance 3).

A throwaway package in a temporary folder holds one module defining a new arm and one defining a new
importer, each registering itself as the library's own modules do. Pointing the registries at the
package (`Registry.add_package`, as a plug-in would) is all it takes: the arm is listed and projects, a
file in the new format is recognised and imported by `ingest.load_sessions` (what `ingest.sources` and
the CLI's ``import`` call). Nothing of the library is edited, and the registries are restored afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction_lab import ingest, strategies
from compaction_lab.ingest import IMPORTERS, ImportAudit, UnknownFormat
from compaction_lab.strategies import STRATEGIES
from tests.helpers import forget_package, plugin_package

ARM = "keep-last-two"
FORMAT = "toy_log"

STRATEGY_MODULE = f'''"""A throwaway arm: keep the last two records of the history, verbatim."""
from compaction_lab.core.projection import Projection, Segment
from compaction_lab.strategies.base import STRATEGIES, history, role_of


class KeepLastTwo:
    name = "{ARM}"
    algorithm_version = "{ARM}-1"
    estimator = "tiktoken"

    def fires(self, tokens, ctx):
        return tokens >= ctx.window - ctx.output_ceiling

    def compact(self, session, cut, ctx):
        kept = history(session, cut)[-2:]
        segments = tuple(Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind) for r in kept)
        capacity = ctx.window - ctx.output_ceiling
        return Projection(
            self.name, self.algorithm_version, session.id, cut, segments, capacity, self.estimator, None, None, {{}}
        )


STRATEGIES.add("{ARM}", KeepLastTwo(), rank=55)
'''

IMPORTER_MODULE = f'''"""A throwaway importer: one session per file of {{"toy": <role>, "say": <text>}} lines."""
import sys

from compaction_lab.ingest.builder import SessionBuilder, file_stem
from compaction_lab.ingest.files import iter_jsonl
from compaction_lab.ingest.registry import IMPORTERS

FORMAT = "{FORMAT}"


def sniff(head):
    return bool(head.objects) and all(set(o) == {{"toy", "say"}} for o in head.objects)


def load(path, audit):
    b = SessionBuilder(file_stem(path), FORMAT, path)
    for lineno, obj, _ in iter_jsonl(path, audit):
        b.add("user" if obj["toy"] == "user" else "assistant", str(obj["say"]), f"l{{lineno}}")
    yield b.build()


IMPORTERS.add(FORMAT, sys.modules[__name__], rank=5)
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The throwaway package, importable; the registries see it for this test only."""
    name = plugin_package(
        tmp_path, monkeypatch, {"keep_last_two": STRATEGY_MODULE, "toy_log": IMPORTER_MODULE}, STRATEGIES, IMPORTERS
    )
    yield name
    STRATEGIES.remove(ARM)
    IMPORTERS.remove(FORMAT)
    forget_package(name)
    # Other tests in this process see the library's arms and importers only.
    assert ARM not in strategies.names() and FORMAT not in ingest.formats()
    with pytest.raises(ValueError, match=f"unknown strategy '{ARM}'"):
        strategies.get(ARM)


def _toy_file(folder: Path) -> Path:
    f = folder / "chat.jsonl"
    lines = [("user", "fix the flaky test"), ("agent", "looking at it"), ("user", "thanks"), ("agent", "done")]
    f.write_text("".join(f'{{"toy": "{r}", "say": "{t}"}}\n' for r, t in lines), encoding="utf-8")
    return f


def test_a_new_arm_and_a_new_importer_touch_only_their_own_modules(plugin: str, tmp_path: Path):
    f = _toy_file(tmp_path)
    with pytest.raises(UnknownFormat):  # before: no importer claims the file, no such arm
        ingest.detect(f)
    assert ARM not in strategies.names()

    STRATEGIES.add_package(plugin)
    IMPORTERS.add_package(plugin)

    names = strategies.names()
    assert names.index("claude-code") < names.index(ARM) < names.index("pi")  # listed at its rank (55)
    assert ingest.formats()[0] == FORMAT  # asked first (rank 5)
    assert ingest.detect(f) == FORMAT
    audit = ImportAudit()
    (session,) = ingest.load_sessions(tmp_path, audit)
    assert session.source_format == FORMAT and audit.formats[FORMAT] == 1 and audit.n_skipped == 0
    assert [r.text for r in session.records] == ["fix the flaky test", "looking at it", "thanks", "done"]

    proj = strategies.compact(session, ARM)
    assert proj.strategy == ARM and [s.text for s in proj.segments] == ["thanks", "done"]
    assert proj.tokens > 0  # counted like any arm's projection

"""What several test modules share: the fixture folders, hand-made sessions, a fake summarizer.

Fixtures (pytest's) stay in ``conftest.py``; plain helpers live here and are imported
(``from tests.helpers import make_session``).
"""

from __future__ import annotations

from compaction_lab.core.paths import REPO_ROOT
from compaction_lab.core.session import Record, Session

#: The suite's own fixtures (tests/fixtures/), wherever a test file sits in the tree.
FIXTURES = REPO_ROOT / "tests" / "fixtures"
#: Real public agent sessions of other projects (pi, Claude Code, SWE-agent), copied into the repository;
#: where each comes from is in tests/fixtures/SOURCES.md.
PUBLIC_FIXTURES = FIXTURES / "public"

#: Fewer bootstrap resamples, priced turns and cost cases than a real run, for a test chain run that reads what
#: the chain says (its tables, figures, pages), not its precision.
LIGHTER = {"n_boot": 200, "turns": 10, "cost_cases": 2}


def fake_model(base_url: str, ledger, api_key_env: str = "") -> dict:
    """A model config for a fake OpenAI server: no retries, a short timeout, its own ledger file."""
    return {
        "base_url": base_url,
        "model": "fake-model",
        "api_key_env": api_key_env,
        "max_retries": 0,
        "timeout_s": 5,
        "ledger": str(ledger),
    }


def question_of(fact, case_id: str):
    """A synthetic chain's planted fact (or decoy) as the exam's `Question` in case `case_id`."""
    from compaction_lab.exam.types import Question

    return Question(
        id=fact.fact_id,
        case_id=case_id,
        pointer=fact.pointer,
        category=fact.category,
        prompt=fact.question,
        answer=fact.value,
        aliases=fact.aliases,
        source_entry_id=fact.entry_id,
        source_order=fact.source_order,
        decoy=fact.is_decoy,
    )


def case_at_end(chain, tail_tokens: int, n_facts: int, decoys: int = 0):
    """A case cutting `chain` at its end: its first `n_facts` facts from before the last `tail_tokens`, then decoys.

    Returns the case and ``{session id: session}``.
    """
    import itertools

    from compaction_lab.core.tokens import counter
    from compaction_lab.exam.types import Case

    s = chain.session
    toks = counter("cl100k_base").count_many([r.text for r in s.records])
    from_end = list(itertools.accumulate(reversed(toks)))
    tail_start = len(toks) - next(i for i, t in enumerate(from_end) if t >= tail_tokens) - 1
    case_id = f"{s.id}@{len(s.records)}"
    facts = [f for f in chain.facts if f.source_order < tail_start][:n_facts]
    assert len(facts) >= min(3, n_facts)
    qs = tuple(question_of(f, case_id) for f in facts) + tuple(question_of(d, case_id) for d in chain.decoys[:decoys])
    return Case(id=case_id, session_id=s.id, cut=len(s.records), tail_start=tail_start, questions=qs), {s.id: s}


def make_session(items: list[tuple], session_id: str = "s1", source_format: str = "test") -> Session:
    """Build a session from (kind, text[, extra-fields dict]) tuples, one record per item."""
    recs = []
    for i, item in enumerate(items):
        kind, text = item[0], item[1]
        extra = item[2] if len(item) > 2 else {}
        recs.append(
            Record(
                session_id=session_id, entry_id=f"e{i}", block_index=0, source_order=i, kind=kind, text=text, **extra
            )
        )
    return Session(id=session_id, source_format=source_format, records=tuple(recs))


class FakeSummarizer:
    """A summarizer for strategy tests: records every request, answers a fixed text or raises.

    Parameters
    ----------
    text : str
        The summary it answers.
    name, stand_in : provider identity as receipts and labels show it.
    error : Exception, optional
        Raised instead of answering (an unreachable or failing endpoint).
    usage : (input, cached, output) tokens it reports.
    """

    def __init__(
        self,
        text: str = "SUMMARY TEXT",
        name: str = "fake",
        stand_in: bool = False,
        error: Exception | None = None,
        usage: tuple[int, int, int] = (1000, 0, 10),
    ):
        self.text, self.name, self.stand_in, self.error, self.usage = text, name, stand_in, error, usage
        self.requests: list = []

    def summarize(self, request):
        from compaction_lab.summarize import SummaryResult

        self.requests.append(request)
        if self.error is not None:
            raise self.error
        inp, cached, out = self.usage
        return SummaryResult(self.text, input_tokens=inp, cached_tokens=cached, output_tokens=out)


def only_notebooks(profile, notebooks: tuple[str, ...]):
    """`profile` cut down to `notebooks`: the parameters none of them declares dropped (they would be refused).

    For a lighter run of a shipped profile in a test.
    """
    import dataclasses

    from compaction_lab.run.params import declared_parameters

    declared = {k for nb in notebooks for k in declared_parameters(nb)}
    return dataclasses.replace(
        profile,
        notebooks=tuple(notebooks),
        parameters={k: v for k, v in profile.parameters.items() if k in declared},
        notebook_parameters={nb: ps for nb, ps in profile.notebook_parameters.items() if nb in notebooks},
    )


def plugin_package(tmp_path, monkeypatch, modules: dict[str, str], *registries):
    """Write a throwaway package into `tmp_path` holding `modules` (name -> source) and make it importable.

    Each of `registries` discovers the library's own modules first and keeps its package list only for the
    test (``monkeypatch``), so pointing it at the package (`Registry.add_package`) is forgotten afterwards.
    Returns the package's name; `forget_package` drops its modules from ``sys.modules``.
    """
    import importlib
    import uuid

    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("", encoding="utf-8")
    for module, text in modules.items():
        (tmp_path / name / f"{module}.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    for registry in registries:
        registry.discover()  # the library's own modules first, so restoring the package list loses nothing
        monkeypatch.setattr(registry, "_packages", list(registry._packages))
        monkeypatch.setattr(registry, "_discovered", set(registry._discovered))
    return name


def forget_package(name: str) -> None:
    """Drop a throwaway package's modules from ``sys.modules`` (other tests import only the library's)."""
    import sys

    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]

"""The exam and cost stages' per-session work on the engine: same tables, one task per session or case."""

import pickle

import pytest

from compaction_lab import summarize
from compaction_lab.cost import model as cost
from compaction_lab.cost.assumptions import CostAssumptions
from compaction_lab.engine import scheduler
from compaction_lab.exam import tasks
from compaction_lab.exam.exams import closed
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.readers import VerbatimReader
from compaction_lab.ingest import sources, synthetic
from compaction_lab.strategies import CompactionContext
from tests.helpers import PUBLIC_FIXTURES, case_at_end

NAMES = ["full", "codex", "futureos-deterministic", "futureos-summarized"]


class PicklingEngine(scheduler.Engine):
    """A sync engine that sends every task and its result through pickle, as a worker process would."""

    def __init__(self) -> None:
        super().__init__(scheduler.SYNC)
        self.tasks: list[str] = []

    def submit(self, fn, *args, retries=0, **kwargs):
        fn, args, kwargs = pickle.loads(pickle.dumps((fn, args, kwargs)))
        self.tasks.append(fn.__qualname__)
        done = super().submit(fn, *args, **kwargs)
        return scheduler._Done(pickle.loads(pickle.dumps(done.result())))


@pytest.fixture
def on_engine(monkeypatch):
    """Give a scheduler; every engine the stages open is a `PicklingEngine` (its tasks are listed)."""
    opened: list[PicklingEngine] = []

    def open_engine(choice, **kw):
        assert choice == scheduler.SYNC
        opened.append(PicklingEngine())
        return opened[-1]

    monkeypatch.setenv(scheduler.SCHEDULER_ENV, scheduler.SYNC)
    monkeypatch.setattr(tasks, "open_engine", open_engine)
    return opened


@pytest.fixture
def here(monkeypatch):
    monkeypatch.delenv(scheduler.SCHEDULER_ENV, raising=False)


def _square(x, plus):
    return x * x + plus


def _fail(x):
    raise ValueError(f"bad {x}")


def test_without_a_scheduler_the_work_stays_here(here, monkeypatch):
    monkeypatch.setattr(tasks, "open_engine", lambda *a, **k: pytest.fail("no engine without a scheduler"))
    assert tasks.given_scheduler() is None
    assert tasks.each(_square, [3, 1, 2], 1) == [10, 2, 5]


def test_with_a_scheduler_each_item_is_a_task_and_results_keep_their_order(on_engine):
    assert tasks.each(_square, range(7), 1) == [x * x + 1 for x in range(7)]
    assert on_engine[0].tasks == ["_square"] * 7
    with pytest.raises(ValueError, match="bad 0"):
        tasks.each(_fail, [0, 1])


@pytest.fixture(scope="module")
def chain_case():
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=20_000))
    case, sessions = case_at_end(chain, 4000, 5, decoys=1)
    ctx = CompactionContext(window=8000, output_ceiling=1000, summarizer=summarize.get_summarizer("extractive"))
    return case, sessions, ctx


def _closed(chain_case):
    case, sessions, ctx = chain_case
    return closed.run_closed([case, case], sessions, NAMES, ctx, VerbatimReader())


def test_the_closed_book_on_the_engine_gives_the_same_rows(chain_case, monkeypatch, request):
    monkeypatch.delenv(scheduler.SCHEDULER_ENV, raising=False)
    mine = _closed(chain_case)
    opened = request.getfixturevalue("on_engine")
    theirs = _closed(chain_case)
    assert opened[0].tasks == ["_closed_case", "_closed_case"]  # one task per case
    assert theirs.answers.equals(mine.answers) and theirs.projections.equals(mine.projections)
    assert len(mine.answers) == 2 * len(NAMES) * len(chain_case[0].questions)


def _costs(chain_case):
    case, sessions, ctx = chain_case
    projections = exam_cases.projections_by_case([case], sessions, NAMES, ctx)
    table = cost.cost_table([case], sessions, projections, ctx.shape, ["gpt-4.1"], None, CostAssumptions())
    return projections, table


def test_projections_and_costs_on_the_engine_are_the_same(chain_case, monkeypatch, request):
    monkeypatch.delenv(scheduler.SCHEDULER_ENV, raising=False)
    mine, mine_table = _costs(chain_case)
    opened = request.getfixturevalue("on_engine")
    theirs, theirs_table = _costs(chain_case)
    assert [e.tasks for e in opened] == [["_case_projections"], ["_case_bills"]]
    assert list(theirs) == list(mine) == [(chain_case[0].id, n) for n in NAMES]
    assert all(theirs[k].tokens == mine[k].tokens and theirs[k].messages() == mine[k].messages() for k in mine)
    assert theirs_table.equals(mine_table) and not mine_table.empty


@pytest.fixture(scope="module")
def small_sessions():
    # Claude Code logs record usage (the measured cache table has rows); SWE-agent's do not.
    src = sources.gather([str(PUBLIC_FIXTURES / "claude-code"), str(PUBLIC_FIXTURES / "swe-agent")], progress=False)
    return src.sessions


def test_mined_cases_and_measured_cache_on_the_engine_are_the_same(small_sessions, monkeypatch, request):
    params = {"tail_tokens": 500, "probe_n_questions": 8, "cut": "end"}
    monkeypatch.delenv(scheduler.SCHEDULER_ENV, raising=False)
    mine = exam_cases.build(small_sessions, None, params)
    mine_measured = cost.measured_table(small_sessions)
    opened = request.getfixturevalue("on_engine")
    theirs = exam_cases.build(small_sessions, None, params)
    theirs_measured = cost.measured_table(small_sessions)
    n = len(small_sessions)
    assert [e.tasks for e in opened] == [["_cut_and_mine"] * n, ["measured_vs_simulated"] * n]
    assert theirs.cases == mine.cases and mine.cases and theirs.notes == mine.notes and theirs.pool == mine.pool
    assert theirs.session_rows.equals(mine.session_rows)
    assert theirs_measured.equals(mine_measured) and not mine_measured.empty

"""Which price table and cache rule the cost figures show: one choice, made once (notebook 04).

``figure_table: auto`` (notebook 04's default) follows the sessions priced: synthetic sessions get
the seed report's own table (`SEED_TABLE`, deepseek-flash, CNY); imported logs get the table of the
model family their sessions record (``metadata["model"]``, read by `exam.actions.rediscovery.family_of`,
the rule rediscovery pricing uses too), one table per family (`FAMILY_TABLES`). Sessions of
several families: the family of most sessions, ties broken by the order of `FAMILY_TABLES`; no
family with a table: the seed's table. ``figure_simulator: auto`` is the chosen table's own cache
rule. The chosen table is always among the tables priced (added when the user's list lacks it).

`choose_figure` returns the choice with the reason, for the line notebook 04 prints; `mark_shown`
records it in the cost table (column ``shown``), which the report's money columns follow
(`report.share.cost_view`). No pandas at import, so a profile's check imports this cheaply.

Spec: docs/cost.md (section 6, "The cost table and the report").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from compaction_lab.core.session import Session

#: The value of ``figure_table`` / ``figure_simulator`` that lets the sessions decide.
AUTO = "auto"

#: The seed report's own table (CNY): synthetic sessions, and sessions of no priced family.
SEED_TABLE = "deepseek-flash"

#: Model family (`exam.actions.rediscovery.MODEL_FAMILIES`) -> the price table its sessions are shown in.
#: The order breaks ties between families with as many sessions.
FAMILY_TABLES: tuple[tuple[str, str], ...] = (
    ("DeepSeek", "deepseek-flash"),
    ("Anthropic", "claude-sonnet-4-6"),
    ("OpenAI", "gpt-4.1"),
)

#: ``source_format`` of generated sessions (no model of their own: the seed's table).
SYNTHETIC = "synthetic"


@dataclass(frozen=True)
class FigureChoice:
    """The price table and cache rule figures 3, 5 and 6 and the report's money columns show.

    Parameters
    ----------
    table : str
        Price table name (``data/prices/<table>.yaml``).
    simulator : str
        Cache rule (`cost.cache.SIMULATORS`).
    currency : str
        The table's currency (ISO code): the money the figures and the report show.
    price_tables : tuple of str
        The tables to price: the user's, with `table` appended when it was missing.
    reason : str
        Why this table and rule (one sentence, for the notebook's output).
    """

    table: str
    simulator: str
    currency: str
    price_tables: tuple[str, ...]
    reason: str

    @property
    def line(self) -> str:
        """The line notebook 04 prints: what is shown and why."""
        return (
            f"Figures 3, 5, 6 and the report's money: {self.table} prices ({self.currency}) under the "
            f"{self.simulator} cache rule. Why: {self.reason}."
        )


def session_model(session: Session) -> str | None:
    """Return the model a session records (``metadata["model"]``, else the first of ``models``), None if none."""
    meta = session.metadata or {}
    model = meta.get("model")
    if not (isinstance(model, str) and model):
        models = meta.get("models")
        model = models[0] if isinstance(models, (list, tuple)) and models else None
    return model if isinstance(model, str) and model else None


def table_for_sessions(sessions: Iterable[Session]) -> tuple[str, str]:
    """Return the price table the sessions' model family is shown in, and why.

    Parameters
    ----------
    sessions : iterable of Session
        The sessions priced (a run's sessions).

    Returns
    -------
    (str, str)
        The table name and the reason: synthetic sessions only -> `SEED_TABLE`; imported logs ->
        the table of the family most sessions record (`FAMILY_TABLES`, whose order breaks ties;
        synthetic sessions count for the seed's family); no session of a family with a table ->
        `SEED_TABLE`.
    """
    from compaction_lab.exam.actions.rediscovery import family_of

    tables = dict(FAMILY_TABLES)
    seed_family = next(f for f, t in FAMILY_TABLES if t == SEED_TABLE)
    votes: Counter[str] = Counter()
    synthetic = imported = unknown = 0
    for s in sessions:
        if s.source_format == SYNTHETIC:
            synthetic += 1
            votes[seed_family] += 1
            continue
        imported += 1
        family = family_of(session_model(s))
        if family in tables:
            votes[family] += 1
        else:
            unknown += 1
    if not imported:
        what = f"{synthetic} synthetic sessions" if synthetic else "no sessions"
        return SEED_TABLE, f"{what}: the seed report's table"
    if not votes:
        return SEED_TABLE, (
            f"none of the {imported} imported sessions records a model of a family with a price table: "
            "the seed report's table"
        )
    order = [f for f, _ in FAMILY_TABLES]
    best = max(order, key=lambda f: (votes[f], -order.index(f)))
    counted = ", ".join(f"{f} {votes[f]}" for f in order if votes[f])
    tie = sum(1 for f in order if votes[f] == votes[best]) > 1
    extra = f"; {unknown} with no model of a priced family" if unknown else ""
    how = "tie broken by the fixed order " + " > ".join(order) if tie else "the family of most sessions"
    return tables[best], f"the sessions' model family is {best} ({how}; sessions by family: {counted}{extra})"


def _rule_and_currency(table: str) -> tuple[str, str]:
    from compaction_lab.endpoints.prices import load_price_table

    loaded = load_price_table(table)
    return loaded.cache_rule, loaded.currency


def choose_figure(
    sessions: Iterable[Session],
    figure_table: str,
    figure_simulator: str,
    price_tables: Sequence[str],
    simulators: Sequence[str] = (),
) -> FigureChoice:
    """Resolve notebook 04's ``figure_table`` and ``figure_simulator`` (either may be ``"auto"``).

    Parameters
    ----------
    sessions : iterable of Session
        The run's sessions (read only when ``figure_table`` is ``"auto"``).
    figure_table : str
        ``"auto"`` (`table_for_sessions`) or a price table name, which must be among `price_tables`.
    figure_simulator : str
        ``"auto"``: the table's own cache rule when it is priced under it, else the first other
        rule of `simulators` but ``none``, else ``none``. Or a rule name, which must be priced.
    price_tables : sequence of str
        The tables notebook 04 prices.
    simulators : sequence of str
        The rules every table is priced under; empty: each table under its own rule and ``none``.

    Returns
    -------
    FigureChoice

    Raises
    ------
    ValueError
        When an explicit ``figure_table`` is not among `price_tables`, or the simulator is not
        one the table is priced under (the message names the parameter).
    """
    tables = tuple(price_tables)
    if figure_table == AUTO:
        table, why = table_for_sessions(sessions)
        if table not in tables:
            tables = (*tables, table)
            why += f"; added to price_tables {list(price_tables)}"
        why = f"figure_table auto: {why}"
    else:
        if figure_table not in tables:
            raise ValueError(
                f"figure_table = {figure_table!r}: not among price_tables {list(tables)}, "
                "so figures 3, 5 and 6 would be empty"
            )
        table, why = figure_table, "figure_table as given"
    own, currency = _rule_and_currency(table)
    priced = list(dict.fromkeys(simulators)) or [own, "none"]
    if figure_simulator == AUTO:
        sim = own if own in priced else next((s for s in priced if s != "none"), "none")
        why += "; figure_simulator auto: " + ("the table's own rule" if sim == own else f"{own!r} not priced")
    else:
        if figure_simulator not in priced:
            raise ValueError(
                f"figure_simulator = {figure_simulator!r}: figure_table {table!r} is priced under {priced} "
                "only, so figures 3, 5 and 6 would be empty (figure_simulator: auto picks its own rule)"
            )
        sim = figure_simulator
    return FigureChoice(table=table, simulator=sim, currency=currency, price_tables=tables, reason=why)


def mark_shown(cost: pd.DataFrame, table: str, simulator: str) -> pd.DataFrame:
    """Return a copy of a cost table whose ``shown`` column marks the rows of `table` under `simulator`.

    The run folder's record of the choice: `report.share.cost_view` shows these rows by default.
    """
    out = cost.copy()
    out["shown"] = ((out["price_table"] == table) & (out["simulator"] == simulator)).astype(bool)
    return out


def shown_pair(cost: Any) -> tuple[str, str] | None:
    """Return the (price table, simulator) a cost table marks ``shown``; None when it marks none (older runs)."""
    if "shown" not in getattr(cost, "columns", ()):
        return None
    rows = cost[cost["shown"].eq(True)]
    if rows.empty:
        return None
    return str(rows["price_table"].iloc[0]), str(rows["simulator"].iloc[0])


__all__ = [
    "AUTO",
    "FAMILY_TABLES",
    "SEED_TABLE",
    "FigureChoice",
    "choose_figure",
    "mark_shown",
    "session_model",
    "shown_pair",
    "table_for_sessions",
]

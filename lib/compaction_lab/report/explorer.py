"""An ipywidgets explorer for notebook 02: pick a chain, a strategy, a window and budgets.

The widget only wires controls to `ProjectionExplorer.update`, a plain method
that recomputes the projection and its segment table; tests call it (and
drive the controls) without a browser.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.report import charts
from compaction_lab.strategies import anatomy
from compaction_lab.strategies.base import CompactionContext

#: The budgets the sliders start at (the widget compacts once with them as it opens: `doctor` counts it).
START: dict[str, int] = {"tail_tokens": 8_192, "history_target": 32_768, "evidence_tokens": 2_048}
#: The window and output-ceiling sliders' ranges: a context's W and O start there, held to them.
WINDOW_RANGE, CEILING_RANGE = (8_000, 1_000_000), (1_000, 64_000)


def start_context(ctx: CompactionContext) -> CompactionContext:
    """Return the context the widget opens with: `ctx`'s W and O held to the sliders' ranges, the `START` budgets."""
    return dataclasses.replace(
        ctx,
        window=min(max(int(ctx.window), WINDOW_RANGE[0]), WINDOW_RANGE[1]),
        output_ceiling=min(max(int(ctx.output_ceiling), CEILING_RANGE[0]), CEILING_RANGE[1]),
        params={**dict(ctx.params), **START},
    )


class ProjectionExplorer:
    """Interactive projection anatomy over a fixed set of sessions.

    Parameters
    ----------
    sessions : sequence of Session
    ctx : CompactionContext, optional
        Base context; the controls override window, output ceiling and budgets.
    names : sequence of str, optional
        Strategies offered (default: all registered).
    start : str, optional
        The strategy it opens on (notebook 02: the run's first, so opening sends no request for an arm the
        run left out); default the first offered.
    """

    def __init__(
        self,
        sessions: Sequence[Session],
        ctx: CompactionContext | None = None,
        names: Sequence[str] | None = None,
        start: str | None = None,
    ):
        if not sessions:
            raise ValueError("the explorer needs at least one session")
        self.sessions = {s.id: s for s in sessions}
        self.ctx = ctx or CompactionContext()
        self.names = list(names or strategies.names())
        if start is not None and start not in self.names:
            raise ValueError(f"the explorer cannot open on {start!r}: offered {', '.join(self.names)}")
        self.start = start if start is not None else self.names[0]
        self.last: Projection | None = None
        self.last_table: pd.DataFrame | None = None
        self._controls: dict = {}
        self._out = None

    def update(
        self,
        session_id: str,
        strategy: str,
        window: int,
        output_ceiling: int,
        tail_tokens: int,
        history_target: int,
        evidence_tokens: int,
    ) -> pd.DataFrame:
        """Recompute the projection for these settings; returns (and keeps) its segment table."""
        params = {
            **self.ctx.params,
            "tail_tokens": int(tail_tokens),
            "history_target": int(history_target),
            "evidence_tokens": int(evidence_tokens),
        }
        ctx = dataclasses.replace(self.ctx, window=int(window), output_ceiling=int(output_ceiling), params=params)
        case = anatomy.cases_at_end([self.sessions[session_id]])[0]
        ((_, proj),) = anatomy.project_cases([case], [strategy], ctx)
        self.last = proj
        self.last_table = anatomy.projections_table([(case, proj)])
        return self.last_table

    def _values(self) -> dict:
        return {k: w.value for k, w in self._controls.items()}

    def _on_change(self, _change=None) -> None:
        table = self.update(**self._values())
        if self._out is None:
            return
        # Set the Output widget's outputs directly instead of capturing with
        # `with out:`: capture depends on the frontend routing messages, and a
        # headless papermill run could wait on it forever.
        summary = table.groupby("segment_kind", sort=False)["tokens"].agg(["count", "sum"])
        self._out.outputs = ()
        self._out.append_stdout(
            f"{self.last.strategy}: {self.last.tokens:,} tokens in {len(table)} segments "
            f"(capacity {self.last.capacity:,} {self.last.estimator})\n"
        )
        self._out.append_display_data(summary)
        self._out.append_display_data(charts.fig7_projection_anatomy(table, width=480))

    def widget(self):
        """Build the controls and an output area, wired to `update`."""
        import ipywidgets as w

        first = next(iter(self.sessions))
        self._controls = {
            "session_id": w.Dropdown(options=list(self.sessions), value=first, description="chain"),
            "strategy": w.Dropdown(options=self.names, value=self.start, description="strategy"),
            "window": w.IntSlider(
                value=self.ctx.window, min=WINDOW_RANGE[0], max=WINDOW_RANGE[1], step=8_000, description="window W"
            ),
            "output_ceiling": w.IntSlider(
                value=self.ctx.output_ceiling,
                min=CEILING_RANGE[0],
                max=CEILING_RANGE[1],
                step=1_000,
                description="output O",
            ),
            "tail_tokens": w.IntSlider(value=START["tail_tokens"], min=0, max=32_768, step=512, description="tail"),
            "history_target": w.IntSlider(
                value=START["history_target"], min=0, max=131_072, step=1_024, description="history"
            ),
            "evidence_tokens": w.IntSlider(
                value=START["evidence_tokens"], min=0, max=8_192, step=256, description="evidence"
            ),
        }
        self._out = w.Output()
        # Stable CSS classes (cl-explorer, cl-explorer-<control>, cl-explorer-output) for the browser test.
        self._out.add_class("cl-explorer-output")
        for key, c in self._controls.items():
            c.add_class(f"cl-explorer-{key.replace('_', '-')}")
            c.observe(self._on_change, names="value")
        self._on_change()
        box = w.VBox(
            [
                w.HBox(list(self._controls.values())[:2]),
                w.HBox(list(self._controls.values())[2:4]),
                w.HBox(list(self._controls.values())[4:]),
                self._out,
            ]
        )
        box.add_class("cl-explorer")
        return box

"""How many questions each case asks of each pointer: exact shares and a min-cost max-flow allocation.

The bank (`exam.questions.bank`) and the probe miner (`exam.questions.probes`) both split a total over pointers by the
largest-remainder rule; the bank then allocates questions to cases with a min-cost max-flow so the
bank's pointer mix is as close to its target as the eligible facts allow.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from compaction_lab.exam.types import POINTERS


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` split over `parts`, the remainder one each to the first parts."""
    if parts <= 0:
        return []
    base, rem = divmod(total, parts)
    return [base + (1 if i < rem else 0) for i in range(parts)]


def largest_remainder(total: int, weights: Mapping[str, Any]) -> dict[str, int]:
    """Round ``total * w / sum(w)`` to integers summing to `total` (largest remainders, ties in POINTERS order).

    Weights are read as exact decimals (``0.1`` is 1/10), so ties are real ties.
    Keys are POINTERS (missing ones weigh 0).
    """
    w = {p: _exact(weights.get(p, 0)) for p in POINTERS}
    s = sum(w.values())
    if total <= 0 or s <= 0:
        return {p: 0 for p in POINTERS}
    quota = {p: total * w[p] / s for p in POINTERS}
    out = {p: int(quota[p]) for p in POINTERS}  # floor: quotas are >= 0
    order = sorted(POINTERS, key=lambda p: (-(quota[p] - out[p]), POINTERS.index(p)))
    for p in order[: total - sum(out.values())]:
        out[p] += 1
    return out


def _exact(x: Any) -> Fraction:
    # repr of a float is its shortest decimal, so 0.1 becomes 1/10, not the binary approximation
    return x if isinstance(x, Fraction) else Fraction(repr(float(x)) if not isinstance(x, int) else x)


def mix_plan(rows: Sequence[int], targets: Mapping[str, int]) -> list[dict[str, int]]:
    """Per-row pointer counts: each row sums to its `rows` entry, each pointer to its target.

    Rows are filled in order, each with a largest-remainder share of what is
    still left of every target, so the shares stay proportional and the last
    row takes the exact remainder. Needs ``sum(rows) == sum(targets)``.
    """
    left = {p: int(targets.get(p, 0)) for p in POINTERS}
    if sum(rows) != sum(left.values()):
        raise ValueError(f"rows sum to {sum(rows)} but targets to {sum(left.values())}")
    plan = []
    for r in rows:
        share = largest_remainder(r, left)
        # a share never exceeds what is left: quota <= left and left is an integer
        for p in POINTERS:
            left[p] -= share[p]
        plan.append(share)
    return plan


def allocate(
    rows: Sequence[int],
    targets: Mapping[str, int],
    caps: Sequence[Mapping[str, int]],
    plan: Sequence[Mapping[str, int]] | None = None,
) -> list[dict[str, int]]:
    """Questions per case and pointer, as close to the plan as the eligible facts allow.

    A min-cost max-flow (source → case → pointer → sink): case ``i`` asks at
    most ``rows[i]`` questions and at most ``caps[i][p]`` of pointer ``p``.
    Lexicographically it (1) maximises the questions asked, (2) minimises the
    questions above a pointer's target (so, with (1), the distance of the
    bank's pointer counts from `targets`), (3) minimises departures from each
    case's `plan` share (default `mix_plan`).

    Returns
    -------
    list of dict
        ``x[i][p]`` with ``x[i][p] <= caps[i][p]`` and ``sum_p x[i][p] <= rows[i]``.
    """
    n = len(rows)
    plan = mix_plan(rows, targets) if plan is None else plan
    big = sum(rows) + 1  # one question over a target costs more than every plan departure together
    src, sink = 0, n + len(POINTERS) + 1
    node = {p: n + 1 + k for k, p in enumerate(POINTERS)}
    flow = _MinCostFlow(sink + 1)
    arcs: list[list[tuple[str, int]]] = []
    for i in range(n):
        flow.add(src, 1 + i, rows[i], 0)
        mine = []
        for p in POINTERS:
            cap = max(0, int(caps[i].get(p, 0)))
            inside = min(cap, int(plan[i].get(p, 0)))
            mine.append((p, flow.add(1 + i, node[p], inside, 0)))
            mine.append((p, flow.add(1 + i, node[p], cap - inside, 1)))
        arcs.append(mine)
    for p in POINTERS:
        flow.add(node[p], sink, int(targets.get(p, 0)), 0)
        flow.add(node[p], sink, sum(rows), big)
    flow.run(src, sink)
    out = []
    for mine in arcs:
        x = {p: 0 for p in POINTERS}
        for p, arc in mine:
            x[p] += flow.flow_on(arc)
        out.append(x)
    return out


class _MinCostFlow:
    """Successive shortest paths (Bellman-Ford queue) on a tiny graph; deterministic edge order."""

    def __init__(self, n: int):
        self.graph: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.orig: list[int] = []

    def add(self, u: int, v: int, cap: int, cost: int) -> int:
        """Add an arc; returns its id (its reverse is id ^ 1)."""
        e = len(self.to)
        for a, b, c, w in ((u, v, cap, cost), (v, u, 0, -cost)):
            self.graph[a].append(len(self.to))
            self.to.append(b)
            self.cap.append(c)
            self.cost.append(w)
            self.orig.append(c)
        return e

    def flow_on(self, e: int) -> int:
        return self.orig[e] - self.cap[e]

    def run(self, s: int, t: int) -> tuple[int, int]:
        total = cost = 0
        n = len(self.graph)
        while True:
            dist: list[int | None] = [None] * n
            prev = [-1] * n
            dist[s] = 0
            queue, queued = deque([s]), [False] * n
            queued[s] = True
            while queue:
                u = queue.popleft()
                queued[u] = False
                du = dist[u]
                assert du is not None  # only vertices with a distance are ever queued
                for e in self.graph[u]:
                    if self.cap[e] <= 0:
                        continue
                    v, d = self.to[e], du + self.cost[e]
                    dv = dist[v]
                    if dv is None or d < dv:
                        dist[v], prev[v] = d, e
                        if not queued[v]:
                            queue.append(v)
                            queued[v] = True
            dist_t = dist[t]
            if dist_t is None:
                return total, cost
            push: int | None = None
            v = t
            while v != s:
                e = prev[v]
                push = self.cap[e] if push is None else min(push, self.cap[e])
                v = self.to[e ^ 1]
            assert push is not None  # t is reachable and t != s, so the path has at least one arc
            v = t
            while v != s:
                e = prev[v]
                self.cap[e] -= push
                self.cap[e ^ 1] += push
                v = self.to[e ^ 1]
            total += push
            cost += push * dist_t


__all__ = ["allocate", "largest_remainder", "mix_plan", "split_evenly"]

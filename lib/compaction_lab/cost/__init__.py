"""The cost model: what a compaction and the turns after it cost, the way providers bill.

This package turns token counts into money and says which figures are computed and which are
assumed. The price tables it bills with live beside the endpoints
(`compaction_lab.endpoints.prices`: ``data/prices/*.yaml``, `price`, `convert`). One module per
concept:

``cache``
    Prefix-cache simulators (``deepseek``, ``openai``, ``anthropic``, ``none``) run on real
    token-id sequences, and the cache-shape experiment.
``assumptions``
    `CostAssumptions`: what the cost figures assume (later turns, their growth and replies, the
    period, the simulated turns, the seed); no pandas, so a profile's check imports it cheaply.
``model``
    Compaction cost cold and cached, per-turn cost after compaction, break-even turns, one
    compaction plus T later turns.
``choice``
    Which price table and cache rule the figures and the report show (``figure_table``).

This file only documents the package: import the modules themselves
(``from compaction_lab.cost import cache, model``), so importing one never pulls in the others.

Design: docs/cost.md.
"""

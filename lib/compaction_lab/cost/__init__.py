"""The cost model: what a compaction and the turns after it cost, the way providers bill.

Compaction is a budget problem. This package turns token counts into money
and says which figures are computed and which are assumed
(``docs/cost.md``). One module per concept:

``prices``
    Price tables (``data/prices/*.yaml``): per-1M-token prices for input
    (cache miss), cache read (hit), cache write (where billed) and output,
    optional peak prices, the cache rule and its parameters, the source page
    and the date it was read. `price` bills one request; `convert` changes
    currency only with an explicit rate.
``cache``
    Prefix-cache simulators (``deepseek``, ``openai``, ``anthropic``,
    ``none``) run on real token-id sequences, so cache hits are computed,
    not assumed; and the cache-shape experiment (identical request, system
    prompt substituted, tool definitions dropped, one line added at the top).
``model``
    Compaction cost cold and cached, per-turn cost after compaction,
    break-even turns, one compaction plus T later turns.

This file only documents the package: import the modules themselves
(``from compaction_lab.cost import prices, cache``), so importing one never
pulls in the others.
"""

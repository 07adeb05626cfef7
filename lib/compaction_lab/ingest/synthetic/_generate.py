"""Generating chains, and checking each chain's planting guarantees before returning it.

Every chain is checked as it is built: a planted value occurs exactly once in its
chain and inside the entry it was planted in, no decoy value occurs in the chain,
and no question gives its answer away. `generate_chains` adds the check across
chains: a decoy of one chain occurs in none of the others either.
"""

from __future__ import annotations

from compaction_lab.ingest.synthetic._builder import _ChainBuilder, _joined
from compaction_lab.ingest.synthetic._types import SyntheticChain, SyntheticSpec


def _verify_chain(chain: SyntheticChain, joined: str | None = None) -> None:
    """Check the planting guarantees of one chain; raise ValueError with a clear message if violated."""
    s = chain.session
    joined = _joined(s) if joined is None else joined
    by_entry: dict[str, list[str]] = {}
    for r in s.records:
        by_entry.setdefault(r.entry_id, []).append(r.text)
    for f in chain.facts:
        n = joined.count(f.value)
        if n != 1:
            raise ValueError(
                f"{s.id}: planted value {f.value!r} ({f.fact_id}) occurs {n} times in the chain, expected exactly 1"
            )
        if f.value not in "\n".join(by_entry.get(f.entry_id, [])):
            raise ValueError(f"{s.id}: planted value {f.value!r} ({f.fact_id}) is not inside its entry {f.entry_id!r}")
        if f.value in f.question:
            raise ValueError(f"{s.id}: question of {f.fact_id} contains its value")
    for d in chain.decoys:
        if d.value in joined:
            raise ValueError(f"{s.id}: decoy value {d.value!r} ({d.fact_id}) occurs in the chain")
        if d.value in d.question:
            raise ValueError(f"{s.id}: question of decoy {d.fact_id} contains its value")


def generate_chain(profile: SyntheticSpec, index: int) -> SyntheticChain:
    """Generate chain `index` of `profile` (independent of the other chains).

    Parameters
    ----------
    profile : SyntheticSpec
        Generation parameters.
    index : int
        Chain index; the session id is ``f"syn-{seed}-{index}"``.

    Returns
    -------
    SyntheticChain
        The session, its planted facts and its decoys.

    Raises
    ------
    ValueError
        If a planted value does not occur exactly once (inside its entry) or a
        decoy value occurs in the chain.
    """
    chain = _ChainBuilder(profile, index).build()
    _verify_chain(chain)
    return chain


def generate_chains(profile: SyntheticSpec, progress: bool = False) -> list[SyntheticChain]:
    """Generate all chains of `profile` and check that no decoy occurs in any of them.

    Parameters
    ----------
    profile : SyntheticSpec
        Generation parameters.
    progress : bool
        Show a tqdm progress bar over chains (terminal or notebook).
    """
    from tqdm.auto import tqdm

    chains = [
        generate_chain(profile, i)
        for i in tqdm(range(profile.n_chains), desc="synthetic chains", unit="chain", disable=not progress)
    ]
    joined = [_joined(c.session) for c in chains]
    for c in chains:
        for d in c.decoys:
            for other, text in zip(chains, joined, strict=False):
                if d.value in text:
                    raise ValueError(f"decoy value {d.value!r} of {c.session.id} occurs in chain {other.session.id}")
    return chains

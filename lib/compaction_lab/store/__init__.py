"""Stores beside the flow, each content-keyed, each where one variable says (default under ``data/``).

- the ledger of model calls (`ledger`, ``COMPACTION_LAB_LEDGER``): every request and its response;
- compaction checkpoints (`checkpoints`, ``COMPACTION_LAB_CHECKPOINTS``): one committed projection each;
- the memo (`memo`, ``COMPACTION_LAB_MEMO``): results kept by the hash of all they depend on;
- the archive of originals (`archive`, FTS5), which the open-book exam searches.

Design: docs/architecture.md (the store stage) and docs/run-folder.md (where each lives).
"""

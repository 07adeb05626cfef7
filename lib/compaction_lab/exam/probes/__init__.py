"""Questions mined from anyone's own sessions: identifiers, paths, numbers, error strings, quoted values.

The synthetic bank asks about facts the generator planted; a user's own
sessions have no ledger, so `exam.probes` mines one. From every record of the
*covered part* (``source_order < tail_start``, the history a compaction
replaces) it extracts values by kind-specific rules, keeps those a reader
could only know from memory, asks a natural question about each ("What ID did
the `http_request` call on `…/v1/refunds` return at step 27: “"id": "…",”?"),
samples them with a seed and adds decoys: lookalike values checked absent from
the whole session.

Extraction rules (`RULES`, first claim wins, a later rule never matches inside
an earlier rule's span in the same record)
    error_string  an exception line ``SomeError: message`` (Python and
                  dotted class names), ``error[E0308]: …`` (rustc),
                  ``error TS2345: …`` (tsc), ``error: …`` / ``FATAL: …`` /
                  ``panic: …`` at a line start, ``npm ERR! …``, and the node id
                  of a ``FAILED tests/x.py::test_y`` line.
    path          slash paths (absolute, ``~/``, ``./``, or relative with an
                  extension or at least three parts; never inside a URL) and
                  bare file names with a known extension (``hello.sh``).
    identifier    UUIDs, ticket-style ids (``ORD-58213``, ``RFD-39055-FU``),
                  hex hashes of 7–64 characters (git SHAs), slug/prefixed ids
                  (``ord_8f3k2q``, ``bld-20240308-d2s27z``) and long mixed
                  letter-digit tokens (``tmpw6sk2trg``). In the output of an
                  HTTP/API call (tool or target says http/curl/request/api, or
                  the target is a URL) the category is ``tool_returned_id``.
    number        numbers with a unit (``184.37 ms``, ``3.2 GB``, ``6626 KiB``,
                  ``1.16%``), decimals (``0.0421``; versions such as ``0.7.29``
                  are not numbers), and ports in context (``port 7412``,
                  ``localhost:8000`` → ``8000``).
    quoted        backticked or quoted strings of 4–60 characters (not in tool
                  calls, whose JSON arguments are all quoted; not JSON keys).

Decisions where the exam design (``docs/exams.md``) is silent
---------------------------------
Covered part and tail
    ``tail_start`` is the bank's (`bank.tail_start_of`: FutureOS's recent tail
    for ``tail_tokens`` report tokens before the cut, whole records, a call
    never split from its output), so a probe case and a bank case at the same
    cut agree on what is covered.
Which records are mined
    user (not ``injected``: harness text such as AGENTS.md or hook feedback is
    not what the person said), assistant, reasoning, tool_call and tool_output
    records. System records are never mined, and a value that occurs in the
    session's system prompt (``metadata["system_prompt"]`` or any ``system``
    record) is never asked.
Usable values
    Presence and absence use the grader's normalisation (`grading.normalise`):
    a value is usable iff, normalised, it occurs in no record text or tool
    target at or after ``tail_start`` (the tail and everything after the cut)
    and not in the system prompt; it is at least 4 characters, not a bare
    integer below 1000, not a round or all-zero number, and not a common word
    (`COMMON_WORDS`; a quoted value that is one lowercase word is too
    guessable as well). Values are deduplicated by normalised form; the first
    covered occurrence whose question can be phrased without the answer is
    the source.
Sampling
    ``random.Random(f"{seed}:{case_id}")``. Per pointer, each category's
    candidates (sorted by source_order, offset, value) are shuffled, then
    stably sorted by how often the value occurs in the covered part, so values
    seen once come first; categories are dealt round-robin in a seeded order,
    so one abundant category (paths in listings) does not crowd out the rest.
    A value contained in an already chosen one, or containing it, is passed
    over (``src/app.py`` kept would also answer ``app.py``).
    Counts per pointer: with ``pointer_mix=None``, one per pointer that has
    candidates, the rest one at a time to the pointer furthest below its
    share of availability (never above what is available; a gap left by a
    passed-over value is topped up the same way); with a mix,
    ``allocation.largest_remainder`` of ``n_questions`` capped by availability and
    no top-up from other pointers — what a pointer lacks is a shortfall in
    `MinedCase`, never invented. ``n_questions`` counts real questions;
    ``n_decoys`` come on top. Real questions are listed in source order (ids
    ``-p00`` …), decoys after them (``-d00`` …).
Question wording
    A question names its step (the source record's source_order) and, for tool
    records, the tool and a shortened target, plus a window of words around
    the value with the value replaced by “…”. Errors without a window name
    only the call (and the output line when the record has several errors);
    a tool-output value alone on its line is located by its line number, a
    prose value alone on its line by the end of the line before. A wording
    that would contain the answer falls back to one without the window, then
    without the target, then without both; a wording that could mean another
    value of the same record (no window, no line, several values) is not
    used. If no wording is left, that occurrence is not asked. Numbers with a
    unit take the other spacing (``184.37ms``) as an alias when it too is
    absent from the tail.
Decoys
    Sources are the sampled real questions in a seeded order. The value is
    mutated to look alike: identifiers and numbers change some digits/letters
    keeping their shape and any alphabetic prefix (``ORD-58213`` →
    ``ORD-58791``), paths change one word of the file stem (``math_utils.py``
    → ``ledger_utils.py``), texts change digits or swap one word for another
    word of the session. The prompt is the source's wording with its subject
    made up too — one word of the target or of the window swapped — so the
    event it asks about did not happen and ``NOT_FOUND`` is right. Both the
    value and the made-up subject are checked absent (normalised) from every
    record text, tool target and the system prompt, and the value also from
    the raw ``Session.to_jsonl`` bytes. Up to 60 seeded tries per source; a
    decoy that cannot be made is skipped and counted in `MinedCase`.

The package, one module per stage:

``candidates``  the extraction rules and what they find in one record.
``wording``     how a candidate is asked about, without giving the answer away.
``haystacks``   the session's normalised text, before and after ``tail_start``.
``selection``   usable candidates, counts per pointer and the seeded draw.
``decoys``      lookalike values with a made-up subject, checked absent.
``mining``      the spec, one mined case and its report, every session's cases.
``checks``      a mined case validated against its session.
"""

from __future__ import annotations

from compaction_lab.exam.probes.candidates import (
    CATEGORIES,
    COMMON_WORDS,
    MINED_KINDS,
    RULES,
    Candidate,
    Rule,
    extract,
    guessable,
)
from compaction_lab.exam.probes.checks import check_probe_case
from compaction_lab.exam.probes.decoys import mutate
from compaction_lab.exam.probes.haystacks import system_prompt_text
from compaction_lab.exam.probes.mining import MinedCase, ProbeSpec, mine, mine_all, mine_case, mine_cases
from compaction_lab.exam.probes.selection import plan_counts, select, usable_candidates
from compaction_lab.exam.probes.wording import Variant, phrase, render, short_target

__all__ = [
    "CATEGORIES",
    "COMMON_WORDS",
    "Candidate",
    "MINED_KINDS",
    "MinedCase",
    "ProbeSpec",
    "RULES",
    "Rule",
    "Variant",
    "check_probe_case",
    "extract",
    "guessable",
    "mine",
    "mine_all",
    "mine_case",
    "mine_cases",
    "mutate",
    "phrase",
    "plan_counts",
    "render",
    "select",
    "short_target",
    "system_prompt_text",
    "usable_candidates",
]

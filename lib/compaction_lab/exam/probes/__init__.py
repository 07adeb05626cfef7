"""Questions mined from anyone's own sessions: identifiers, paths, numbers, error strings, quoted values.

The synthetic bank asks about facts the generator planted; a user's own
sessions have no ledger, so `exam.probes` mines one. From every record of the
*covered part* (``source_order < tail_start``, the history a compaction
replaces) it extracts values by kind-specific rules, keeps those a reader
could only know from memory and that a question can single out, asks a
natural question about each ("What ID did the `http_request` call on
`…/v1/refunds` return at step 27: “"id": "…",”?"), samples them with a seed
and adds decoys: lookalike values checked absent from the whole session.
Every usable value is also kept as the case's *pool* (`MinedCase.pool`), so a
projection can be graded against all of them, not only the sample.

Extraction rules (`RULES`, first claim wins, a later rule never matches inside
an earlier rule's span in the same record)
    error_string  an exception line ``SomeError: message`` (Python and
                  dotted class names), ``error[E0308]: …`` (rustc),
                  ``error TS2345: …`` (tsc), ``error: …`` / ``FATAL: …`` /
                  ``panic: …`` at a line start, ``npm ERR! …``, and the node id
                  of a ``FAILED tests/x.py::test_y`` line.
    path          slash paths (absolute, ``~/``, ``./``, or relative with an
                  extension or at least three parts; never inside a URL) and
                  bare file names with a known extension (``hello.sh``). A
                  leading ``@`` (pi's mention prefix) is not part of the value.
    identifier    UUIDs, ticket-style ids (``ORD-58213``, ``RFD-39055-FU``),
                  hex hashes of 7–64 characters (git SHAs), slug/prefixed ids
                  (``ord_8f3k2q``, ``bld-20240308-d2s27z``) and long mixed
                  letter-digit tokens (``tmpw6sk2trg``). In the output of an
                  HTTP/API call (tool or target says http/curl/request/api, or
                  the target is a URL) the category is ``tool_returned_id``.
    number        numbers with a unit (``184.37 ms``, ``3.2 GB``, ``6626 KiB``,
                  ``1.16%``; the unit on the same line), decimals (``0.0421``;
                  versions such as ``0.7.29`` are not numbers), and ports in
                  context (``port 7412``, ``localhost:8000`` → ``8000``).
    quoted        backticked or quoted strings of 4–60 characters (not in tool
                  calls, whose JSON arguments are all quoted; not JSON keys;
                  not ending in an escaping backslash).

Decisions where the exam design (``docs/exams.md``) is silent
---------------------------------
Covered part, tail and cut
    ``tail_start`` is the bank's (`bank.tail_start_of`: FutureOS's recent tail
    for ``tail_tokens`` report tokens before the cut, whole records, a call
    never split from its output), so a probe case and a bank case at the same
    cut agree on what is covered. A caller may pass its own ``tail_start``
    (a recorded compaction's kept region; equal to the cut when the agent
    kept nothing) and ``kept`` text (the verbatim-kept part of an agent's own
    next request).
Which records are mined
    user, assistant, reasoning, tool_call and tool_output records that are
    not ``injected`` (harness text such as AGENTS.md, hook feedback or
    SWE-agent's demonstration is not what anyone said). System records are
    never mined, and a value that occurs in the session's system prompt
    (``metadata["system_prompt"]`` or any ``system`` record) is never asked.
Harness templates (`harness`)
    Text a harness wrote inside a mined record is masked: injected blocks in
    any record (``<system-reminder>…</system-reminder>``,
    ``<environment_context>``, ``<command-name>`` and the other openings of
    `core.text.INJECTED_PREFIXES`, to their closing tag); in user records,
    everything outside the issue of SWE-agent's instance message (between
    its ``ISSUE:`` and ``INSTRUCTIONS:`` lines) and every line shared with an
    injected record or the system prompt (the template repeated in the
    demonstration). A value touching masked text is dropped (``template``).
Exact values only
    An answer is one line of fewer than four whitespace-separated words
    (longer error lines are not asked; the paths, ids and quoted values
    inside them still are, since a rejected match claims no span). A quoted
    value of two or more words of lowercase letters only is a phrase
    (``how to show it``), not a value. A path that is a list joined by "/"
    (not anchored, and every part a plain word — ``Model/thinking/theme`` —
    or a part before the last with a file extension — ``main.ts/tui.ts``) is
    not a path. These are dropped as ``phrase`` and ``slash-list``.
Usable values
    Presence and absence use the grader's normalisation (`grading.normalise`).
    The *late* region is what every arm keeps verbatim: the records from
    ``tail_start`` to the cut and the ``kept`` text. A value is usable iff,
    normalised, it occurs in no late record text or tool target, not in the
    kept text and not in the system prompt — occurrences at or after the cut
    (a recorded compaction's own summary, the rest of the session) never
    disqualify it; it is at least 4 characters, not a bare integer below
    1000, not a round or all-zero number, and not a common word
    (`COMMON_WORDS`; a quoted value that is one lowercase word is too
    guessable as well). A path is compared in its form relative to the
    session's ``cwd`` (``metadata["cwd"]``; ``./`` dropped): the absolute
    and the relative form of one path are one value, and neither may be
    late. Values are deduplicated by that compared form; the first covered
    occurrence whose question can be phrased is the source.
Aliases
    A number with a unit (the ``unit_number`` rule's `candidates.UNITS`)
    takes the other spacing (``184.37ms``); no other number has an alias
    (``3.11`` is not ``3.1 1``). A path takes its relative form, its
    ``@``-mention form and, for a relative path, its absolute form under
    ``cwd`` when the session writes that form somewhere. Each alias only when
    it too is absent from the late region, the kept text and the system
    prompt.
Sampling
    ``random.Random(f"{seed}:{case_id}")``. Per pointer, each category's
    candidates (sorted by source_order, offset, value) are shuffled, then
    stably sorted by how often the value occurs in the covered part, so values
    seen once come first; categories are dealt round-robin in a seeded order,
    so one abundant category (paths in listings) does not crowd out the rest.
    A value contained in an already chosen one, or containing it, is passed
    over (``src/app.py`` kept would also answer ``app.py``); so is a value
    from a message (its entry) that already has ``max_per_record`` (default
    2) questions, so one long output cannot dominate a case.
    Counts per pointer: with ``pointer_mix=None`` (natural: the pool's own
    composition), one per pointer that has candidates, the rest one at a
    time to the pointer furthest below its share of availability (never
    above what is available; a gap left by a passed-over value is topped up
    the same way, within the per-message cap); with a mix,
    ``allocation.largest_remainder`` of ``n_questions`` capped by
    availability and no top-up from other pointers — what a pointer lacks is
    a shortfall in `MinedCase`, never invented. ``n_questions`` counts real
    questions; ``n_decoys`` come on top. Real questions are listed in source
    order (ids ``-p00`` …), decoys after them (``-d00`` …), pool questions
    ``-e000`` … in source order.
Question wording
    A question names its step (the source record's source_order) and, for tool
    records, the tool and a shortened target, plus a window of words around
    the value with the value replaced by “…”. Errors without a window name
    only the call (and the output line when the record has several errors);
    any other tool-output value without a window (none asked for, or no
    words around it on its line) is located by its line number, a prose
    value alone on its line by the end of the line before. A wording that
    would contain the answer, or that fits another value (below), falls back
    to one without the window, then without the target, then without both; a
    wording that could mean another value of the same record (no window, no
    line, several values) is not used.
Unique wordings (`uniqueness`)
    The reader never sees step numbers, so a wording must fit one value of
    everything before the cut: the same wording without its step, made for
    every other value found before the cut (inexact ones too), must not
    name a different value, and a window's words, looked for in the
    normalised text before the cut, must hold the same value wherever they
    occur (``it("…", async () =>`` around five test names fits none of
    them). Otherwise the next wording is tried; if none is left, the value
    is dropped (``ambiguous wording``).
Notes on what was not asked
    `MinedCase.dropped` and a line of `MinedCase.notes` count what was not
    asked and why: distinct values otherwise usable that were ``template``,
    ``phrase``, ``slash-list`` or ``ambiguous wording``, and the draws
    passed over by the ``per-record cap``.
Decoys
    Sources are the sampled real questions in a seeded order. The value is
    mutated to look alike: identifiers and numbers change some digits/letters
    keeping their shape and any alphabetic prefix (``ORD-58213`` →
    ``ORD-58791``), paths change one word of the file stem (``math_utils.py``
    → ``ledger_utils.py``), texts change digits or swap one word (one part of
    a camelCase name) for another word of the session. The prompt is the
    source's wording with its subject made up too — one word of the target
    (then shortened exactly as real targets are, "…" included) or of the
    window swapped, preferably for a session word with the same ending and a
    similar length so the sentence still reads as one — so the event it asks
    about did not happen and ``NOT_FOUND`` is right. Both the value and the
    made-up subject (a target: the whole line and the part shown) are
    checked absent (normalised) from every record text, tool target and the
    system prompt, and the value also from the raw ``Session.to_jsonl``
    bytes. Up to 60 seeded tries per source; a decoy that cannot be made is
    skipped and counted in `MinedCase`.

The package, one module per stage:

``candidates``  the extraction rules, what they find in one record and what they reject.
``harness``     the spans of a record a harness wrote (templates, injected blocks).
``wording``     how a candidate is asked about, without giving the answer away.
``uniqueness``  whether a wording fits one value of everything before the cut.
``haystacks``   the session's normalised text before ``tail_start``, up to the cut, and in all.
``selection``   usable values (the pool), counts per pointer and the seeded draw.
``decoys``      lookalike values with a made-up subject, checked absent.
``mining``      the spec, one mined case and its report, every session's cases.
``checks``      a mined case validated against its session.
"""

from __future__ import annotations

from compaction_lab.exam.probes.candidates import (
    CATEGORIES,
    COMMON_WORDS,
    MINED_KINDS,
    REJECT_REASONS,
    RULES,
    Candidate,
    Rule,
    extract,
    guessable,
    inexact,
    scan,
    slash_list,
)
from compaction_lab.exam.probes.checks import check_probe_case
from compaction_lab.exam.probes.decoys import mutate
from compaction_lab.exam.probes.harness import Harness, harness_of, injected_blocks, issue_frame
from compaction_lab.exam.probes.haystacks import system_prompt_text
from compaction_lab.exam.probes.mining import MinedCase, ProbeSpec, mine, mine_all, mine_case, mine_cases
from compaction_lab.exam.probes.selection import (
    DROP_REASONS,
    eligible,
    path_forms,
    plan_counts,
    select,
    usable_candidates,
)
from compaction_lab.exam.probes.uniqueness import Wordings
from compaction_lab.exam.probes.wording import Variant, phrase, render, short_target

__all__ = [
    "CATEGORIES",
    "COMMON_WORDS",
    "DROP_REASONS",
    "Candidate",
    "Harness",
    "MINED_KINDS",
    "MinedCase",
    "ProbeSpec",
    "REJECT_REASONS",
    "RULES",
    "Rule",
    "Variant",
    "Wordings",
    "check_probe_case",
    "eligible",
    "extract",
    "guessable",
    "harness_of",
    "inexact",
    "injected_blocks",
    "issue_frame",
    "mine",
    "mine_all",
    "mine_case",
    "mine_cases",
    "mutate",
    "path_forms",
    "phrase",
    "plan_counts",
    "render",
    "scan",
    "select",
    "short_target",
    "slash_list",
    "system_prompt_text",
    "usable_candidates",
]

"""Phrase tables for user turns and assistant prose.

Templates hold ``«slot»`` placeholders filled from an area context (`_area_ctx`);
none of them ever contains a planted value, so a planted value occurs only where
the planting code puts it. Follow-up templates name an earlier record by its
subject, the way a user refers back to something without quoting it.
"""

_GOALS = (
    ("bug", "`«fn»` in «module» «bug». Can you find out why and fix it?", "the «bug_short» bug in `«fn»`"),
    (
        "bug",
        "We're seeing «symptom» in staging. I think it comes from «module»; please fix it and add a regression test.",
        "the «symptom» problem",
    ),
    ("feature", "Add «feature» to `«fn»` in «module».", "adding «feature» to `«fn»`"),
    (
        "refactor",
        "«module» has grown too big. Split the «noun» validation out of `«fn»` without changing behaviour.",
        "the refactor of `«fn»`",
    ),
    (
        "flaky",
        "The «area» tests are flaky on CI: «test» fails about one run in ten. Make them deterministic.",
        "the flaky «area» tests",
    ),
    (
        "perf",
        "«endpoint» got slow after the last release. Profile `«fn»` and speed it up.",
        "the slowdown of «endpoint»",
    ),
    (
        "config",
        "Move the «area» timeouts and retry counts into «config» so ops can tune them without a deploy.",
        "the «area» settings in «config»",
    ),
    (
        "schema",
        "We need a «attr» column on «table». Add the migration and wire it through `«fn»`.",
        "the «attr» column on «table»",
    ),
)
_BUGS = (
    ("returns the wrong status when the «noun» is already «status»", "wrong-status"),
    ("double-counts discounted lines", "double-counting"),
    ("crashes when a «noun» has no «attr»", "missing-«attr»"),
    ("times out against the «ext» sandbox", "timeout"),
    ("ignores the currency of the «noun»", "currency"),
    ("writes duplicate rows when it is retried", "duplicate-rows"),
)
_SYMPTOMS = (
    "duplicate «nouns» after retries",
    "errors from «endpoint» whenever «attr» is missing",
    "«nouns» stuck in «status»",
    "«nouns» that are processed twice",
)
_FEATURES = (
    "idempotency keys",
    "pagination",
    "retries with backoff",
    "structured logging",
    "a dry-run mode",
    "caching",
    "validation for «attr»",
    "metrics for each «ext» call",
)
_GOAL_EXTRAS = (
    "Keep the public API unchanged.",
    "Run the full suite before you tell me it's done.",
    "Don't add new dependencies.",
    "Small, reviewable diffs please.",
    "No need to update the docs yet.",
)

_PLAN = (
    "I'll start by reading «module» and «test» to see how `«fn»` handles this today, then make the change and run the «area» tests.",
    "Let me look at `«fn»` in «module» first; I want to know who calls it before changing its behaviour.",
    "Plan: find where «nouns» are handled in «module», write a failing test in «test» that reproduces the problem, fix it, "
    "then run the suite and the linters.",
    "First I'll get a picture of the «area» code (the module, its tests and the config) before deciding where the change belongs.",
)
_EXPLAIN = (
    "`«fn»` loads the «noun», builds the payload inline and calls the «ext» client without a per-call timeout, so one slow "
    "response stalls the worker. The tests in «test» only cover the happy path.",
    "The «noun» status is set before the transaction commits. If the flush fails, the in-memory object still says "
    "«status», which matches what you're seeing.",
    "There are «n» call sites of `«fn»` and all of them go through the same wrapper, so I can add an optional parameter "
    "without breaking anyone.",
    "«module» already has a retry loop, but it retries on every exception, including validation errors that will never "
    "succeed. That's why the «ext» calls pile up.",
    "The «attr» field is optional in the schema, but `«fn»` assumes it is always set. «Noun»s created before the last "
    "migration don't have it.",
    "The config for «area» is read once at import time, so changing it needs a restart. That's fine for now, but it means "
    "the tests have to patch the module constant rather than the settings object.",
)
_DECIDE = (
    "I'll move the validation into a helper and keep the public signature of `«fn»` unchanged, because «other_module» depends on it.",
    "Rather than patching the symptom in the handler, I'll fix `«fn»` itself so every caller gets the same behaviour.",
    "I'll make the change in two steps: first the data access in «module», then the caller. That keeps each diff reviewable.",
    "The smallest safe fix is to guard against a missing «attr» in `«fn»` and log it; a backfill can come later.",
    "I'll add the new test first so we can see it fail, then change the code.",
    "Now the edit itself: `«fn»` gets the new branch, and the old path stays as the fallback.",
)
_FAIL = (
    "«title» fails: «short». The test encodes the intended contract, so the code is wrong, not the test. I'll fix `«fn»`.",
    "The traceback ends in `«fn»`: «attr» is not set for «nouns» the factory builds, and the code assumes it is. I'll add "
    "a default there instead of changing the factory.",
    "«title» is failing because of my change: I renamed a field the test still relies on. I'll keep the old name working "
    "rather than edit the test.",
    "This failure («title») is a real bug the new test exposed, not flakiness. I'll fix the ordering in `«fn»`.",
)
_REASON = (
    "The failing assertion compares what `«fn»` returns with what the test expects. It looks as if the state is updated "
    "after the value is returned. Let me check the order of operations in `«fn»` before changing anything.",
    "The error comes from inside `«fn»`, not from the test setup. The factory creates «nouns» without «attr», which the real "
    "API never does... but old rows can. So the code has to handle it.",
    "If I change the return type here, the type checker will complain in «other_module». Better to keep the signature and add "
    "the guard inside.",
    "Two options: retry inside `«fn»`, or let the caller decide. The caller already has a deadline, so retrying inside would "
    "double the worst case. Caller it is.",
)
_EXPLORE_REASON = (
    "Before touching `«fn»` I want to see how the tests construct «nouns»; if they bypass the factory, a behaviour change "
    "could hide behind the fixtures.",
    "The call into the «ext» client is the interesting part. Where is the timeout configured: in the module or in config?",
    "If `«fn»` is also used by «other_module», a signature change would ripple. Let me search before deciding.",
    "The schema and the code may disagree about «attr»; the schema file will tell me which one is authoritative.",
)
_PASS = (
    "All «k» tests in «test» pass now«new». Next I'll run the linters.",
    "Green. Running the whole suite to make sure nothing else depended on the old behaviour.",
    "The «area» tests pass. Let me also run the static checks, since I touched type hints.",
)
_REPORT_FIX = (
    "Done. `«fn»` now «change»; the «area» tests pass and I didn't touch «other_module».",
    "Summary: the fix is in «module». The root cause was «cause». Tests pass. A possible next step: «next».",
)
_REPORT = (
    "Done. The change is in «module» and covered by «test»; the suite passes. I didn't touch «other_module».",
    "That's finished: `«fn»` is updated and the «area» tests pass. A possible next step: «next».",
    "Summary: «module» carries the change, «test» covers it, and nothing else in «area» needed to change.",
)
_CHANGES = (
    "handles a missing «attr» explicitly",
    "retries only transient errors",
    "keeps the «noun» status consistent when the flush fails",
    "rounds once, at the end",
    "uses the configured timeout",
)
_CAUSES = (
    "a retry loop that retried validation errors",
    "the status being set before the commit",
    "double rounding of discounted lines",
    "an unset «attr» on older «nouns»",
)
_NEXTS = ("a backfill for old «nouns»", "a dashboard panel for the new metric", "removing the legacy path after a week")
_ACKS = (
    "Understood; I'll keep that in mind for the rest of this change.",
    "Got it.",
    "Noted. That doesn't conflict with what I'm doing in «module».",
    "Okay, I'll stick to that.",
)
#: Casual user interjections and the reply each gets (the "also check" one triggers a read).
_INTERJECT = (
    ("Looks good so far, keep going.", "Will do.", False),
    ("Can you also check «other_module» while you're in there?", "Sure, reading it now.", True),
    ("Please don't reformat unrelated code in «module».", "Understood, I'll keep the diff limited to `«fn»`.", False),
    (
        "If the full suite takes more than a few minutes, run only the «area» tests for now.",
        "It takes well under a minute, but I'll stick to the «area» tests until the end.",
        False,
    ),
)
_CONSTRAINT_LEADS = ("Also: ", "One more thing: ", "Before you continue: ", "")
_COMMIT_ASKS = ("Thanks. Commit this with a sensible message.", "Good, commit it.", "Looks right to me; please commit.")

#: Follow-up templates by what the earlier record was.
_FOLLOWUP_ASSISTANT_PROPOSAL = (
    "Earlier you proposed «subject»; does that still hold after this change?",
    "Going back to what you said before about «subject»: is that still the plan?",
    "You mentioned «subject» earlier. Why did you go that way again?",
)
_FOLLOWUP_ASSISTANT_SAID = (
    "Remind me what you said earlier about «subject».",
    "You mentioned «subject» before; is that still accurate?",
    "What was your conclusion about «subject» last time?",
)
_FOLLOWUP_USER = (
    "Remind me what I said earlier about «subject».",
    "I told you something before about «subject»; are we still respecting it?",
    "What did I ask for last time regarding «subject»?",
)
_FOLLOWUP_TOOL_ERROR = (
    "What was the error from «subject» before?",
    "Remind me why «subject» failed last time.",
    "Earlier there was a failure in «subject»; what did it say again?",
)
_FOLLOWUP_TOOL = (
    "What did «subject» show earlier?",
    "Remind me what «subject» returned previously.",
    "Last time, what came back from «subject»?",
)
_FOLLOWUP_EDIT = (
    "Earlier you edited «subject»; what did you change there?",
    "Remind me what you changed before in «subject».",
)
_FOLLOWUP_READ = (
    "What was in «subject» when you read it before?",
    "Remind me what «subject» contained last time you looked.",
)
_FOLLOWUP_REPLIES = (
    "Going back to «subject»: nothing in the change I just made affects it, so it still stands.",
    "I re-checked «subject» against the current state of the code; it is still consistent with what we're doing now.",
    "That was before the last edit. The relevant part hasn't changed since, so what we concluded about «subject» still applies.",
)

"""The rules the token-budget probes check, in the words a failing probe's hint shows, each
with the methods (and fields) it is about."""

from __future__ import annotations

from servelab.grading.about import About, Hint

PROBE_HINTS: dict[str, Hint] = {
    "spent": Hint(
        "schedule_running: stop the loop once the budget is spent (while budget is left): a "
        "running request past that point waits for the next step; it gets no chunk of 0 tokens",
        About(("schedule_running",)),
    ),
    "one-token": Hint(
        "schedule_running: a running request that has all its tokens computed but the last "
        "needs one token: n = seq.num_tokens - num_computed_tokens, cut to the budget left",
        About(("schedule_running",)),
    ),
    "sample": Hint(
        "a waiting request takes what is left of the budget, one token if that is all: n = "
        "min(seq.num_tokens - hit, budget); a chunk samples exactly when it reaches the end "
        "of the request's tokens (start + n == seq.num_tokens), so a one-token chunk "
        "mid-prompt samples nothing",
        About(("schedule_running", "admit")),
    ),
    "chunk": Hint(
        "`admit`: a waiting request takes what is left of the budget: n = "
        "min(seq.num_tokens - hit, budget), and the rest of its prompt runs in later steps as "
        "a running request",
        About(("admit",)),
    ),
    "prefix": Hint(
        "a prefix hit counts as computed and never against the budget: start at hit = "
        "self.cached_tokens(seq) and subtract only n",
        About(("admit",), ("num_computed_tokens",)),
    ),
    "blocks-wait": Hint(
        "`admit`: allocate before taking the head off waiting; on OutOfBlocks stop with the "
        "request still at the head of waiting, to be admitted when blocks come back",
        About(("admit",), ("waiting",)),
    ),
    "chunk-blocks": Hint(
        "`admit`: allocate the blocks of the chunk that runs now (its hit + n tokens), not of "
        "the whole prompt: a long prompt starts as soon as its first chunk fits, and later "
        "chunks take their blocks as they run",
        About(("admit",), ("waiting", "running")),
    ),
    "shared-prefix": Hint(
        "`admit`: the blocks of a prefix hit held by a running request are shared, not taken "
        "from the free pool: let allocate decide (stop on OutOfBlocks), or count only the "
        "blocks past the hit",
        About(("admit",), ("waiting", "running")),
    ),
    "hit-reported": Hint(
        "`admit`: an admitted chunk reports its prefix hit: Chunk(seq, hit, n, slots, samples, "
        "hit), its num_cached the hit's tokens (0 without one)",
        About(("admit",)),
    ),
    "victims-order": Hint(
        "`preempt` puts each victim at the front of waiting (waiting.appendleft): victims are "
        "taken newest first, so two preempted in one step come back oldest first",
        About(("preempt",), ("waiting",)),
    ),
    "retry-budget": Hint(
        "schedule_running: take n from the budget only after extend succeeds; a failed extend "
        "ran nothing, so the retry (after preempting the latest) has the whole budget left",
        About(("schedule_running",)),
    ),
    "front": Hint(
        "`preempt` puts a request back at the front of waiting (waiting.appendleft): it came "
        "before every request still waiting",
        About(("preempt",), ("waiting",)),
    ),
    "recompute": Hint(
        "a running request needs seq.num_tokens - num_computed_tokens tokens, whatever it "
        "generated before: a recomputed request's prompt and generated tokens all run again",
        About(("schedule_running",)),
    ),
    "victim-latest": Hint(
        "when a request's new blocks do not fit, preempt the latest running request "
        "(running.pop()), retry, and stop the running phase when the victim is the request itself",
        About(("schedule_running", "preempt"), ("running", "out.preempted")),
    ),
    "samples-at-end": Hint(
        "a chunk samples only when it reaches the request's last token (start + n == "
        "num_tokens, prompt and generated): a recomputed request's chunk past its prompt "
        "but short of its end samples nothing",
        About(("admit", "schedule_running"), ("out.scheduled",)),
    ),
    "running-order": Hint(
        "schedule_running walks the running requests in running order (oldest first, as "
        "admitted), and `admit` adds to the end of running: the oldest request is the first "
        "to get tokens and the last a short budget cuts",
        About(("schedule_running", "admit"), ("out.scheduled", "running")),
    ),
    "reported-once": Hint(
        "each victim is reported once: `preempt` appends it to out.preempted, so the caller "
        "of preempt does not list it again",
        About(("preempt", "schedule_running"), ("out.preempted",)),
    ),
    "admit-spent": Hint(
        "`admit` stops once the budget is spent (while budget > 0): a waiting request past "
        "that point stays waiting; it gets no chunk of 0 tokens",
        About(("admit",)),
    ),
    "hit-fresh": Hint(
        "`admit`: a request's prefix hit is what the cache holds when it is admitted: look it "
        "up (self.cached_tokens(seq)) at every admission try, as blocks fill and are reclaimed "
        "while it waits",
        About(("admit",), ("out.scheduled",)),
    ),
    "preempt-when-short": Hint(
        "schedule_running preempts only when the extend's new blocks do not fit: a running "
        "request needs blocks_needed(start + n) - blocks_needed(start) new blocks, so tokens "
        "that fit the room left in its last block need none",
        # a preemption moves the request and frees its blocks: all of it is this rule's action
        About(
            ("schedule_running",),
            ("running", "waiting", "out.preempted", "tables", "refcounts", "free", "num_free"),
        ),
    ),
    # no rule can be told from the chunks alone: where the step's chunks come from, no cause
    "no-rule": Hint(
        "a step's chunks come from `schedule_running` (the running requests, in running "
        "order) and then `admit` (prompts from the head of waiting, while the budget lasts): "
        "the first chunk that differs from the expected list above says which of the two",
        About(),
    ),
    "reset": Hint(
        "`preempt`: a preempted request is recomputed: reset its num_computed_tokens to 0, free "
        "its blocks and put it back at the front of waiting",
        About(("preempt",), ("num_computed_tokens", "waiting")),
    ),
}

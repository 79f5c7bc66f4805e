"""The token-budget probe for an admitted chunk's ``num_cached``: the notebook's rule is the
prefix hit found at admission, before the chunk's own blocks are allocated and cached."""

from __future__ import annotations

from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.token_budget_script import BudgetScript

__all__ = ["HIT_BEFORE_ALLOCATE", "hit_before_allocate"]

HIT_BEFORE_ALLOCATE = Hint(
    "`admit`: an admitted chunk's num_cached is the hit looked up before allocate (its "
    "start): Chunk(seq, hit, n, slots, samples, hit)",
    About(("admit",)),
)
"""The probe's rule, whatever its failure shows."""

_ASKED_AFTER = Hint(
    f"{HIT_BEFORE_ALLOCATE}, not a second cached_tokens(seq) asked once allocate has cached "
    "the chunk's own full blocks",
    About(("admit",)),
)
"""The rule, where the learner's num_cached is what the manager answers after the allocate."""


def hit_before_allocate(impl: Any) -> None:
    """Request 1 finds 8 of its 13 tokens cached and computes the other 5 in one chunk, which
    fills the block [50, 51, 52, 53]. Its num_cached is the hit found at admission, 8: the
    cache holds 12 of its tokens only once the chunk's own blocks are allocated."""
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=16, prefix=True)
    s.add(0, list(range(9)), 1)
    s.step()
    s.step()  # request 0 is retired: its two full blocks stay cached
    tokens = [*range(8), 50, 51, 52, 53, 54]
    s.add(1, tokens, 1)
    before = s.bm.num_cached_tokens(tokens)
    s.step()
    got = [(c.seq.seq_id, c.start, c.num_cached) for c in s.out.scheduled]
    want = [(1, 8, 8)]
    if got == want:
        return
    what = "the admitted chunk as (seq_id, start, num_cached)"
    reported = got[0][2] if len(got) == 1 and got[0][:2] == (1, 8) else None
    after = s.bm.num_cached_tokens(tokens)
    if reported is None or reported != after or after == before:
        s.expect(got, want, what)
    size = s.bm.block_size
    own = [tokens[b : b + size] for b in range(before, after, size)]
    blocks = ", ".join(map(str, own))
    raise s.fail(
        f"{what} is {got!r}, expected {want!r}: num_cached is the prefix hit found at "
        f"admission, {before} (bm.num_cached_tokens before the step); yours, {after}, is what "
        f"it answers after this chunk's allocate, counting the full block"
        f"{'s' if len(own) > 1 else ''} {blocks} the chunk computes itself",
        hint=_ASKED_AFTER,
    )

"""What a token-budget call reported, checked against what it did before a reading leans on it.

A chunk in ``out.scheduled`` is what yours says ran; the request's num_computed_tokens and its
place in the queues are what yours did. Where the two disagree, a reading built on the chunk's
numbers blames an update that was right: so a reading uses a chunk only where it agrees with
the state, and a count only after comparing it with the reference's.
"""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference, call


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _count(side: Any, sid: Any) -> Any:
    counts = side.get("num_computed_tokens") if hasattr(side, "get") else None
    return counts.get(sid) if isinstance(counts, dict) else None


def as_done(d: Difference, c: Any, obj: Any) -> bool:
    """Whether chunk ``c`` (yours, from the call run again into ``obj``) reports what yours did:
    it ends where yours left the request's num_computed_tokens, and starts where that count
    stood before the call (a running request) or at the request's prefix hit (one admitted)."""
    sid = c.seq.seq_id
    if call(obj, "num_computed_tokens", sid) != c.start + c.num_tokens:
        return False
    if sid in _ids(d.before.get("running")):
        return bool(_count(d.before, sid) == c.start)
    hit = call(getattr(d.subject, "bm", None), "num_cached_tokens", c.seq.token_ids)
    return bool(c.start == (hit if isinstance(hit, int) else 0))


def computed_differs(d: Difference, c: Any, mine: Any) -> str | None:
    """Where yours left request ``c``'s num_computed_tokens at ``mine``, not at the end of the
    chunk it reported: the sentence that the reference's count supports. The count as the
    reference's: the chunk is what differs, not the update. Neither the count nor the chunk the
    reference's: both differences, no cause. None: the chunk ends where the reference's count
    stands, so the update is what differs (the caller's reading)."""
    sid, end = c.seq.seq_id, c.start + c.num_tokens
    theirs = _count(d.theirs, sid)
    if not isinstance(theirs, int) or theirs == end:
        return None
    chunk = f"its chunk as start {c.start}, num_tokens {c.num_tokens} (ending at {end})"
    if mine == theirs:
        return (
            f"yours set request {sid}'s num_computed_tokens to {mine}, as the reference does, "
            f"yet reported {chunk}: a chunk reports the tokens that ran, so start + num_tokens "
            f"is where num_computed_tokens now stands ({mine})"
        )
    return (
        f"yours set request {sid}'s num_computed_tokens to {mine} (the reference {theirs}) "
        f"and reported {chunk}"
    )


def blocks_differ(d: Difference, sid: Any) -> bool:
    """Whether yours left request ``sid`` holding another number of tokens' blocks than the
    reference does: an allocation that matched the reference's is not what differs."""
    mine, theirs = d.mine.get("lengths"), d.theirs.get("lengths")
    return isinstance(mine, dict) and isinstance(theirs, dict) and mine.get(sid) != theirs.get(sid)


def hit_not_fresh(d: Difference, chunks: list[Any], obj: Any) -> str | None:
    """A request yours admitted in the call (yours run again into ``obj``) starts, and says it
    starts, at another hit than the block manager finds for it: for the first one, as the call
    begins; for a later one, where the cache finds the same hit before the call and after it
    (so no admission between changed it). Its chunk agrees with the count yours left, so the
    start is the difference; where an earlier admission of the call had that hit, so much is
    said too, as a fact."""
    admitted = [c for c in chunks if c.seq.seq_id not in _ids(d.before.get("running"))]
    for i, c in enumerate(admitted):
        sid = c.seq.seq_id
        hit = call(getattr(d.subject, "bm", None), "num_cached_tokens", c.seq.token_ids)
        if not isinstance(hit, int) or c.start == hit or getattr(c, "num_cached", None) != c.start:
            continue
        if call(obj, "num_computed_tokens", sid) != c.start + c.num_tokens:
            continue
        if i and call(getattr(obj, "bm", None), "num_cached_tokens", c.seq.token_ids) != hit:
            continue
        earlier = [e.seq.seq_id for e in admitted[:i] if e.start == c.start]
        was = (
            f"; {c.start} is the hit of request {earlier[0]}, admitted before it in this call"
            if earlier
            else ""
        )
        when = "before the call and after it" if i else "at its admission"
        return (
            f"yours admitted request {sid} from token {c.start} (num_cached {c.start}), where the "
            f"cache holds {hit} of its tokens {when} (bm.num_cached_tokens){was}: an "
            "admitted chunk starts at the hit the cache holds then (self.cached_tokens(seq), "
            "looked up at each admission)"
        )
    return None

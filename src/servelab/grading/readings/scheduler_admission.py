"""An admission test asked of the pool after the allocation it should decide, with a proof.

``admit`` asks ``fits`` before it allocates: the question is whether the request's blocks
would leave the watermark. Asked after ``bm.allocate``, the pool already lacks those blocks,
so they count twice and a request that fits is refused. Named only where a re-run of your
``admit`` on a copy records it: ``bm.allocate`` of a request the reference admits, then your
``fits`` for it (its own token count) answering no while that request still holds its
blocks, and your ``fits`` with the same question, asked of the pool as it was before the
call, answering yes.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import StepOutput

_Event = tuple[str, Any, Any, int]


def _events(subject: Any) -> list[_Event] | None:
    """Your ``admit`` run again on a copy: each ``bm.allocate`` / ``bm.free_seq`` (with its
    request and the free count before it) and each call of your ``fits`` (with its argument,
    its answer and the free count as it was asked), in order; None when it cannot run."""
    events: list[_Event] = []
    try:
        obj = copy.deepcopy(subject)
        bm, fits = obj.bm, obj.fits
        allocate, free_seq = bm.allocate, bm.free_seq

        def on_allocate(sid: Any, *a: Any, **k: Any) -> Any:
            free = bm.num_free
            result = allocate(sid, *a, **k)
            events.append(("allocate", sid, None, free))
            return result

        def on_free(sid: Any, *a: Any, **k: Any) -> Any:
            events.append(("free", sid, None, bm.num_free))
            return free_seq(sid, *a, **k)

        def on_fits(n: Any, *a: Any, **k: Any) -> Any:
            free = bm.num_free
            answer = fits(n, *a, **k)
            events.append(("fits", n, answer, free))
            return answer

        bm.allocate, bm.free_seq, obj.fits = on_allocate, on_free, on_fits
        with line_budget(LINES_PER_CALL):
            obj.admit(StepOutput())
    except (Exception, OutOfLines):
        return None
    return events


def _asked_before(subject: Any, n: Any) -> Any:
    try:
        obj = copy.deepcopy(subject)
        with line_budget(LINES_PER_CALL):
            return obj.fits(n)
    except (Exception, OutOfLines):
        return None


def _tokens_of(subject: Any, sid: Any) -> Any:
    """The token count of request ``sid`` waiting before the call (None if none waits)."""
    for seq in getattr(subject, "waiting", ()):
        if getattr(seq, "seq_id", None) == sid:
            return getattr(seq, "num_tokens", None)
    return None


def fits_after_allocating(d: Any, admitted: list[Any]) -> str | None:
    """Yours allocated a request's blocks, then asked ``fits`` for it of the pool that left,
    and was refused where the same question asked first is answered yes. ``admitted``: the
    requests the reference admits on the call and yours does not."""
    events = _events(d.subject)
    if not events:
        return None
    holding: dict[Any, int] = {}
    for kind, what, answer, free in events:
        if kind == "allocate":
            holding[what] = free
        elif kind == "free":
            holding.pop(what, None)
        elif kind == "fits" and answer is False:
            sid = next((s for s in holding if s in admitted), None)
            if sid is None or what != _tokens_of(d.subject, sid):
                continue  # a question about another request than the one holding blocks
            if _asked_before(d.subject, what) is not True:
                continue
            before = holding[sid]
            return (
                f"yours allocated request {sid}'s blocks, then asked fits({what}) of the pool "
                f"that allocation left ({free} free, not {before}): its own blocks count "
                f"twice, and it was refused, where fits({what}) asked first answers True. Ask "
                "fits before bm.allocate, and allocate only what fits"
            )
    return None

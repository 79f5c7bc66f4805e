"""Readings of a scheduler's admit and retire that state a cause only where a re-run proves it.

Each reading here calls your method again on copies of the scheduler as it was before the
call, with one thing changed, and names what yours asks about only when its answer moves
with that one thing: a request left waiting is put on prompt + max_new_tokens only where
yours admits a request of the same blocks with a shorter future and leaves it waiting with
a longer one; a retire that changed nothing is put on never retiring only where later steps
do not retire it either.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import Sequence


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def admitted_for_its_future(d: Difference) -> str | None:
    """Yours left the head of waiting where the reference admits it, your own fits says yes
    to the tokens it allocates and no to its prompt + max_new_tokens, and a re-run proves
    which of the two yours asks about (:func:`_asked_about`)."""
    waiting = list(getattr(d.subject, "waiting", ()))
    mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
    left = [s for s in waiting if s.seq_id in theirs and s.seq_id not in mine]
    if not left or left[0] is not waiting[len(mine) - len(_ids(d.before.get("running")))]:
        return None
    seq, after = left[0], d.after()  # your fits asked as your admit left the pool
    future = seq.prompt_len + seq.max_new_tokens
    if future == seq.num_tokens or call(after, "fits", seq.num_tokens) is not True:
        return None
    if call(after, "fits", future) is not False:
        return None
    asked = _asked_about(d, seq, future, after)
    if asked is None:
        return None
    kept = seq.seq_id in _ids(d.mine.get("waiting"))  # or dropped from both queues
    said = f"left sequence {seq.seq_id} waiting" if kept else f"did not admit sequence {seq.seq_id}"
    return (
        f"yours {said}, which your fits({seq.num_tokens}) admits "
        f"and fits({future}) refuses: {asked}; admit asks fits(seq.num_tokens), the tokens it "
        "allocates now; add() already refused what can never fit"
    )


def _admits(d: Difference, seq: Any, tokens: int, to_generate: int) -> bool | None:
    """Your admit, called again on a copy of the scheduler as it was, with ``seq`` made a
    request of ``tokens`` tokens and ``to_generate`` to generate: whether it admits it (None
    when the call fails)."""
    try:
        obj, out = copy.deepcopy((d.subject, d.args[0] if d.args else None))
        at = next(i for i, s in enumerate(obj.waiting) if s.seq_id == seq.seq_id)
        obj.waiting[at] = Sequence.dummy(seq.seq_id, tokens, to_generate)
        with line_budget(LINES_PER_CALL):
            obj.admit(out)
        return any(s.seq_id == seq.seq_id for s in obj.running)
    except (Exception, OutOfLines):
        return None


def _asked_about(d: Difference, seq: Any, future: int, after: Any) -> str | None:
    """What your admit asks about, told by two re-runs with a request of the same blocks as
    ``seq`` (its tokens, or one fewer where they fill their last block): one whose prompt +
    max_new_tokens also stays in those blocks, one whose prompt + max_new_tokens is
    ``seq``'s own. Admitted, then left waiting: yours asks about prompt + max_new_tokens
    (only that moved). Admitted both times where ``seq`` (a token more, filling its last
    block) was left and fits(tokens + 1) refuses: yours asks about more tokens than it
    allocates. Anything else (a block kept back for other reasons, say): None, no cause."""
    size = getattr(getattr(d.subject, "bm", None), "block_size", None)
    n = seq.num_tokens
    if not isinstance(size, int) or size < 1:
        return None
    base = n if n % size else n - 1
    if base < 1 or (n % size == 0 and size < 2):
        return None
    room = -(-n // size) * size - base  # the future stays in n's blocks
    short = _admits(d, seq, base, room)
    long = _admits(d, seq, base, future - base) if future > base else None
    if short is True and long is False:
        return (
            "yours asks about prompt + max_new_tokens (run again with a request of the same "
            "blocks, it admits it when its future fits and leaves it waiting with this one's)"
        )
    if short is True and long is True and base == n - 1 and call(after, "fits", n + 1) is False:
        return (
            f"yours admits a request of {base} tokens whatever it has to generate, and left "
            f"this one of {n}, which your fits({n}) admits: yours asks about a token more "
            "than it allocates (a slot for the first decode?)"
        )
    return None


def retires_at_a_later_step(d: Difference, left: list[Any]) -> bool | None:
    """Your step(), run twice on a copy of the scheduler as it was before the retire call:
    True when the finished sequences ``left`` are all gone from running by then (yours
    retires them, late), False when every one still runs (a scheduler that never retires),
    None when it cannot be told (a step fails, or some are gone and some not)."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(2 * LINES_PER_CALL):
            obj.step()
            obj.step()
        running = {getattr(s, "seq_id", None) for s in obj.running}
    except (Exception, OutOfLines):
        return None
    still = [s for s in left if s in running]
    return True if not still else False if len(still) == len(left) else None


def watermark_twice(d: Difference) -> str | None:
    """Your ``fits``, asked again on copies of the scheduler as it was with the watermark
    set to 2 and to 1, about requests of whole blocks that leave 3, 4 and 2 blocks free:
    refusing the first and admitting the other two is what a watermark taken off twice does
    (free - watermark - needed >= watermark). The reference admits all three; a strict
    comparison, a block counted too many or a count of tokens does not answer so."""
    size = getattr(getattr(d.subject, "bm", None), "block_size", None)
    free = d.before.get("num_free")
    if not isinstance(size, int) or size < 1 or not isinstance(free, int) or free < 4:
        return None
    answers = []
    for watermark, left in ((2, 3), (2, 4), (1, 2)):
        try:
            obj = copy.deepcopy(d.subject)
            obj.watermark = watermark
            with line_budget(LINES_PER_CALL):
                answers.append(obj.fits((free - left) * size))
        except (Exception, OutOfLines):
            return None
    if answers != [False, True, True]:
        return None
    return (
        "yours refuses where num_free - needed is below twice the watermark (asked again with "
        "the watermark at 2, it refuses a request that leaves 3 blocks free and admits one "
        "that leaves 4): the watermark is taken off twice; admit while num_free - needed >= "
        "watermark, the watermark counted once"
    )

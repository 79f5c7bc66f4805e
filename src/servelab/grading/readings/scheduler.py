"""Readings of a scheduler's first diverging call: admission, decode order, victims."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _victims(after: Any) -> list[Any]:
    """The victims a side's step output names (``out.preempted``), as shown."""
    shown = after.get("out.preempted")
    return list(shown) if isinstance(shown, list | tuple) else []


def _scheduler_decode(d: Difference) -> str | None:
    before = _ids(d.before.get("running"))
    mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
    gone_mine = [s for s in before if s not in mine]
    gone_theirs = [s for s in before if s not in theirs]
    if set(mine) == set(theirs) and mine != theirs:
        if mine == sorted(mine):
            return (
                "yours reorders running by id: decode in the order of running (arrival), not "
                "in the order of their ids"
            )
        return "decode keeps running in its order: the oldest first, newcomers at the back"
    waiting_mine = _ids(d.mine.get("waiting"))
    still = [s for s in before if s in mine and s in waiting_mine]
    if still:
        return (
            f"yours preempted sequence {still[0]} (it waits again) yet left it in running: a "
            "victim leaves running when it is preempted, or the loop decodes it after its "
            "blocks are gone"
        )
    fewer = len(_victims(d.mine)) < len(_victims(d.theirs))
    if len(gone_mine) < len(gone_theirs) and fewer:
        return (
            "when a retry after a preemption still finds no block, preempt again: a step can "
            "take several victims"
        )
    if gone_mine and gone_theirs and gone_mine != gone_theirs:
        victim = gone_mine[0]
        if before and victim == max(before) and before[-1] != victim:
            return (
                f"yours preempted sequence {victim}, the highest id; the victim is the newest "
                "running sequence, the last of running, whatever its id"
            )
        return (
            f"yours preempted sequence {victim}; the victim is the newest running sequence "
            f"(running[-1], {gone_theirs[0]} here), not the one whose append failed"
        )
    waiting_mine, waiting_theirs = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    if len(gone_mine) > 1 and set(gone_mine) == set(gone_theirs) and waiting_mine != waiting_theirs:
        victims = [s for s in waiting_mine if s in gone_mine]
        if victims == sorted(victims) and [s for s in before if s in gone_mine] != victims:
            return (
                f"yours left the victims waiting in the order of their ids ({victims}), as if "
                "it took the highest id first; the victim is always the newest running "
                "sequence, the last of running, whatever its id"
            )
    return None


def _count_off(d: Difference) -> str | None:
    """A refusal of ``n`` tokens by a ``fits`` that admits ``n - 1`` needing as many blocks:
    the block count is off, not the comparison with the watermark."""
    n = d.args[0] if d.args else None
    size = getattr(getattr(d.subject, "bm", None), "block_size", None)
    if d.returned("mine") != "False" or not isinstance(n, int) or not isinstance(size, int):
        return None
    blocks = -(-n // size)
    if n < 2 or size < 1 or blocks != -(-(n - 1) // size):
        return None
    if d.probe("fits", n - 1) != ("returned", True):
        return None
    return (
        f"yours admits {n - 1} tokens but refuses {n}, which need the same {blocks} blocks: "
        "count the blocks as ceil(n / block_size)"
    )


def _leaves_the_watermark(d: Difference) -> bool:
    """Whether the request ``fits`` was asked about leaves exactly the watermark free."""
    values: tuple[Any, ...] = (
        d.args[0] if d.args else None,
        getattr(getattr(d.subject, "bm", None), "block_size", None),
        getattr(d.subject, "watermark", None),
        d.before.get("num_free"),
    )
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return False
    n, size, watermark, free = values
    return bool(size > 0 and free + (-n // size) == watermark)  # free - ceil(n / size)


def _decoded_after_finishing(d: Difference) -> list[Any]:
    """The sequences finished before the step that your step decodes all the same (read by
    running your step again on a copy of the scheduler as it was before the call)."""
    finished = [
        s.seq_id for s in getattr(d.subject, "running", ()) if getattr(s, "is_finished", False)
    ]
    if not finished:
        return []
    kind, out = d.probe("step")
    if kind != "returned":
        return []
    decoded = [getattr(getattr(x, "seq", None), "seq_id", None) for x in out.decodes]
    return [i for i in finished if i in decoded]


def victim_in_output(d: Difference, noun: str) -> str | None:
    """A victim left out of the step's ``preempted`` list (or put in another list, or twice)."""
    victim = getattr(d.args[0], "seq_id", None) if d.args else None
    mine, theirs = d.mine.get("out.preempted") or [], d.theirs.get("out.preempted") or []
    elsewhere = [
        n[len("out.") :]
        for n in d.differ
        if n.startswith("out.") and n != "out.preempted" and victim in (d.mine.get(n) or [])
    ]
    if elsewhere:
        where = f"put {noun} {victim} in out.{elsewhere[0]}"
    elif mine.count(victim) > theirs.count(victim):
        where = f"put {noun} {victim} in out.preempted {mine.count(victim)} times"
    else:
        where = f"did not put {noun} {victim} in out.preempted"
    return (
        f"yours {where}: each victim goes into out.preempted once, so the step's output says "
        f"which {noun}s lost their blocks and will run again"
    )


def scheduler_reading(d: Difference) -> str | None:
    """The rule a scheduler's first diverging call breaks."""
    if d.hidden:
        return None
    m, differ = d.method, d.differ
    if m == "add" and d.they_raised and not d.i_raised:
        return (
            "a request that can never fit (its prompt + max_new_tokens in blocks, above "
            "num_blocks - watermark) raises RequestTooLarge in add()"
        )
    if m == "fits" and not d.same_outcome:
        found = _count_off(d)
        if found is not None:
            return found
        if d.returned("mine") == "False" and _leaves_the_watermark(d):
            # a strict comparison and a count of tokens read as blocks both refuse here
            return (
                "yours refused a request that leaves exactly the watermark free: admit while "
                "num_free - needed >= watermark, needed in blocks (ceil(n_tokens / "
                "block_size)): is your comparison strict (> where >= belongs), or your count "
                "not in blocks?"
            )
        return "admit only while num_free - needed >= watermark: the watermark stays free"
    if m == "retire" and differ:
        before = _ids(d.before.get("running"))
        mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
        if len(mine) < len(theirs):
            return (
                "yours retired a sequence a step early: it retires once finished (its last "
                "token emitted), at the start of the next step"
            )
        if len(mine) == len(before):
            rule = "retire frees every finished sequence (bm.free_seq) and drops it from running"
            if not d.changed("mine"):
                left = [s for s in before if s not in theirs]
                return (
                    f"yours changed nothing: finished sequence(s) {left} stay running, and a "
                    f"scheduler that never retires decodes them forever; {rule}"
                )
            return rule
        if len(mine) > len(theirs):
            left = [s for s in mine if s not in theirs]
            return (
                f"yours left finished sequence(s) {left} running: retire every finished "
                "sequence, however the list it walks changes under it"
            )
    if m == "admit" and "waiting" in differ:
        mine_w, theirs_w = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
        if sorted(mine_w) == sorted(theirs_w):
            return (
                f"yours reordered waiting ({mine_w}, not {theirs_w}): admission takes waiting "
                "in order and leaves the rest in their order (first come, first served)"
            )
    if m == "decode" and d.i_raised and not d.they_raised and not differ:
        before = _ids(d.before.get("running"))
        gone = [x for x in before if x not in _ids(d.mine.get("running"))]
        if gone:
            return (
                f"yours preempted sequence(s) {gone} in this call, as the reference does, "
                f"then raised {d.error('mine')}: does your loop still visit a sequence it has "
                "preempted, whose blocks are gone? A loop over a copy of running "
                "(list(self.running)) does; walk running itself, so a victim taken out of it "
                "is not decoded"
            )
    if m == "decode":
        return _scheduler_decode(d)
    if m == "preempt" and "out.preempted" in differ:
        return victim_in_output(d, "sequence")
    if m == "preempt" and differ & {"tables", "refcounts", "free"}:
        return "a preempted sequence must give back its blocks (bm.free_seq) before it waits"
    if m == "preempt" and "waiting" in differ:
        return (
            "a preempted sequence goes to the front of waiting; with several victims in a "
            "step, the older victim stands first"
        )
    if m == "step" and not differ:
        again = _decoded_after_finishing(d)
        if again:
            return (
                f"yours decoded finished sequence(s) {again} once more and then retired them: "
                "retire at the start of step(), before decoding, not after decoding"
            )
    if m == "step" and "lengths" in differ:
        return (
            "yours decoded the sequences it just admitted: admit after decoding, not before "
            "decoding (a prefill is the admitted sequence's work in this step)"
        )
    return None

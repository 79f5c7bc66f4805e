"""Readings of a scheduler's first diverging call: admission, decode order, victims."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.budget_kept import victim_lost, victims_replaced
from servelab.grading.readings.difference import (
    MINE_RAISED,
    RETURNED,
    THEIRS_RAISED,
    Difference,
    written_for,
)
from servelab.grading.readings.scheduler_admission import fits_after_allocating
from servelab.grading.readings.scheduler_count import count_off, one_block_off
from servelab.grading.readings.scheduler_ends import (
    admits_newest_first,
    decoded_a_victim,
    fits_waives_the_watermark_when_idle,
    retried_its_own_victim,
    skips_a_full_decode,
)
from servelab.grading.readings.scheduler_late import retired_by_own_count
from servelab.grading.readings.scheduler_listed import listed_not_decoded, slot_not_appended
from servelab.grading.readings.scheduler_raised import (
    fits_counts_the_pool,
    requeued_by_id,
    took_then_raised,
)
from servelab.grading.readings.scheduler_retired import moved_the_last_in
from servelab.grading.readings.scheduler_rules import (
    admitted_for_its_future,
    retires_at_a_later_step,
    watermark_twice,
)
from servelab.grading.readings.scheduler_sized import sized_with_generated
from servelab.grading.readings.scheduler_stale import free_read_once, kept_from_before
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import Sequence

_BLOCKS = ("tables", "lengths", "refcounts", "free", "num_free")
# what each reading explains; a direction or a value it needs is checked where it is read
TOO_LARGE = written_for("waiting", outcomes=(THEIRS_RAISED,))
FITS = written_for()
RETIRE_EARLY = written_for("running", "out.finished", *_BLOCKS)
NEVER_RETIRED = written_for("running", "out.finished", *_BLOCKS)
LEFT_RUNNING = written_for("running", "out.finished", *_BLOCKS, outcomes=(*RETURNED, MINE_RAISED))
ADMIT_ORDER = written_for("waiting")
DECODE_ORDER = written_for("running", "out.decodes", *_BLOCKS)
VICTIM = written_for("running", "waiting", "out.decodes", "out.preempted", *_BLOCKS)
PREEMPT_BLOCKS = written_for(*_BLOCKS)
PREEMPT_FRONT = written_for("waiting")


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _victims(after: Any) -> list[Any]:
    """The victims a side's step output names (``out.preempted``), as shown."""
    shown = after.get("out.preempted")
    return list(shown) if isinstance(shown, list | tuple) else []


def _asker(d: Difference, before: list[Any]) -> Any:
    """The first running sequence, in decode order, whose append_slot finds no free block
    (its length fills its blocks and every free one went to those before it); None unknown."""
    lengths, free = d.before.get("lengths"), d.before.get("num_free")
    size = getattr(getattr(d.subject, "bm", None), "block_size", None)
    if not isinstance(lengths, dict) or not isinstance(free, int) or not isinstance(size, int):
        return None
    for s in before:
        if not isinstance(lengths.get(s), int) or size < 1:
            return None
        if lengths[s] % size == 0:
            if free == 0:
                return s
            free -= 1
    return None


def _other_victim(d: Difference, before: list[Any], mine: list[Any], theirs: list[Any]) -> str:
    """Another victim than the newest: what that victim was, where the state proves it. With
    several victims, the one named is one the reference kept, and "here" names the
    reference's victims, the newest first (each was running[-1] when it was taken)."""
    victim = next(s for s in mine if s not in theirs)
    here = f"{theirs[0]} here"
    if len(theirs) > 1:  # in the order taken
        here = f"here {', then '.join(str(s) for s in theirs[::-1])}"
    rule = f"the victim is the newest running sequence, running[-1] ({here})"
    said = f"yours preempted sequence {victim}"
    facts = []
    if victim == _asker(d, before):
        facts.append("the one whose append failed")
    if before and victim == before[0]:
        facts.append("the oldest running")
    if before and victim == max(before) and before[-1] != victim:
        facts.append("the highest id")
    # a victim chosen by its length can hold the highest id too: its length is said as well
    held = {e[0]: e[1] for e in d.before.get("running") or () if isinstance(e, tuple)}
    most = max(held.values(), default=None)
    longest = bool(facts) and held.get(victim) == most and held.get(before[-1]) != most
    if longest:
        facts.append("one holding the most tokens")
    if not facts:
        return f"{said}; {rule}"
    whatever = "its id, its length" if longest else "its id"
    return f"{said}, {' and '.join(facts)}; {rule}, whatever {whatever} or whose append failed"


def _decoded_twice(d: Difference) -> str | None:
    """A sequence yours decoded more than once in the call, where the reference did not."""
    mine, theirs = d.mine.get("out.decodes"), d.theirs.get("out.decodes")
    if not isinstance(mine, list) or not isinstance(theirs, list):
        return None
    twice = [s for s in dict.fromkeys(mine) if mine.count(s) > max(1, theirs.count(s))]
    if not twice:
        return None
    said = (
        f"yours decoded sequence {twice[0]} {mine.count(twice[0])} times in one step: every "
        "running sequence decodes once per step"
    )
    if _victims(d.mine):
        return f"{said}; after a preemption the loop retries the one that found no block"
    return said


def _scheduler_decode(d: Difference) -> str | None:
    twice = _decoded_twice(d)
    if twice is not None:
        return twice
    before = _ids(d.before.get("running"))
    mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
    gone_mine = [s for s in before if s not in mine]
    gone_theirs = [s for s in before if s not in theirs]
    if set(mine) == set(theirs) and mine != theirs and DECODE_ORDER.fits(d):
        if mine == before[::-1]:  # reversed; with two sequences, id order may be the same
            return (
                f"yours left running reversed ({before} -> {mine}): decode keeps running in its "
                "order, the oldest first, newcomers at the back"
            )
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
    # yours took the reference's first victims, in its order, and stopped: proven by the
    # victims themselves (a wrong victim that frees more blocks also ends with fewer)
    mine_v, theirs_v = _victims(d.mine), _victims(d.theirs)
    fewer = bool(mine_v) and len(mine_v) < len(theirs_v) and theirs_v[: len(mine_v)] == mine_v
    if len(gone_mine) < len(gone_theirs) and fewer:
        return (
            "when a retry after a preemption still finds no block, preempt again: a step can "
            "take several victims"
        )
    extra = [s for s in gone_mine if s not in gone_theirs]
    first = mine_v[: len(theirs_v)] == theirs_v  # the reference's victims, first, in its order
    if gone_theirs and extra and set(gone_theirs) <= set(gone_mine) and first and VICTIM.fits(d):
        return (
            f"yours preempted {extra} as well as {gone_theirs}: preempt one victim at a time, "
            "the newest running sequence, and retry the append after each; stop as soon as it "
            "finds a block"
        )
    same_count = len(gone_mine) == len(gone_theirs) and VICTIM.fits(d)
    if gone_mine and gone_theirs and gone_mine != gone_theirs and same_count:
        return _other_victim(d, before, gone_mine, gone_theirs)
    waiting_mine, waiting_theirs = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    same_victims = _victims(d.mine) == _victims(d.theirs)  # chosen right: no id rule broken
    if (
        len(gone_mine) > 1
        and set(gone_mine) == set(gone_theirs)
        and waiting_mine != waiting_theirs
        and not same_victims
    ):
        victims = [s for s in waiting_mine if s in gone_mine]
        every = len(victims) > 1 and set(victims) == set(gone_mine)  # an order needs them all
        if (
            every
            and victims == sorted(victims)
            and [s for s in before if s in gone_mine] != victims
        ):
            return (
                f"yours left the victims waiting in the order of their ids ({victims}), as if "
                "it took the highest id first; the victim is always the newest running "
                "sequence, the last of running, whatever its id"
            )
    return None


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


def _skipped_after_removal(before: list[Any], kept: list[Any], left: list[Any]) -> bool:
    """Every finished sequence yours left running comes right after one yours dropped: what a
    loop that removes from the list it walks skips (the next one slides into the place)."""
    dropped = [s for s in before if s not in kept]
    at = {s: i for i, s in enumerate(before)}
    return bool(dropped) and all(
        s in at and at[s] > 0 and before[at[s] - 1] in dropped for s in left
    )


def _retires_when_spaced(d: Difference) -> bool:
    """Your retire, called again on a copy where a sequence still running (one made for the
    probe) stands after each finished one, retires every finished one: what it missed was the
    one right after a removal, not a finished sequence as such (one retired per step misses
    the second here too)."""
    try:
        obj, out = copy.deepcopy((d.subject, d.args[0] if d.args else None))
        done = [s for s in obj.running if s.is_finished]
        ids = [s.seq_id for s in (*obj.running, *obj.waiting)]
        if not done or not all(isinstance(i, int) for i in ids):
            return False
        fresh = max(ids) + 1
        obj.running = [
            x
            for i, s in enumerate(done)
            for x in (s, Sequence.dummy(fresh + i, prompt_len=1, max_new_tokens=1))
        ]
        with line_budget(LINES_PER_CALL):
            obj.retire(out)
        return not any(s.is_finished for s in obj.running)
    except (Exception, OutOfLines):
        return False


def _retires_when_first(d: Difference) -> str:
    """Where your retire, called again on copies whose finished sequences stand first in
    running, then last, retires some ("first", "last"): it is not a retire that never
    retires, it misses them where they stood; "" when it retires none either way."""
    for where in ("first", "last"):
        try:
            obj, out = copy.deepcopy((d.subject, d.args[0] if d.args else None))
            running = list(obj.running)
            done = [s for s in running if s.is_finished]
            if not done or len(done) == len(running):
                return ""
            rest = [s for s in running if not s.is_finished]
            obj.running = done + rest if where == "first" else rest + done
            with line_budget(LINES_PER_CALL):
                obj.retire(out)
            if len(obj.running) < len(running):
                return where
        except (Exception, OutOfLines):
            return ""
    return ""


def _retires_next_call(d: Difference) -> bool:
    """Your retire, called twice on a copy of the scheduler as it was (each call with its own
    copy of the step's output), retires at the second call what the first left: late, not
    never (a retire that acts on what the call before it marked)."""
    try:
        obj, out = copy.deepcopy((d.subject, d.args[0] if d.args else None))
        again = copy.deepcopy(out)
        with line_budget(LINES_PER_CALL):
            obj.retire(out)
            kept = len(obj.running)
            obj.retire(again)
        return kept == len(d.subject.running) and len(obj.running) < kept
    except (Exception, OutOfLines):
        return False


def _retires_alone(d: Difference) -> bool | None:
    """Your retire on a copy whose running list holds the finished sequences alone: True when
    it retires them all, False when it retires none (as the call itself did, where they ran
    alone already), None when it cannot be told (it retires some, or the call fails)."""
    try:
        obj, out = copy.deepcopy((d.subject, d.args[0] if d.args else None))
        done = [s for s in obj.running if s.is_finished]
        if not done:
            return None
        if len(done) == len(obj.running):
            return False
        obj.running = done
        with line_budget(LINES_PER_CALL):
            obj.retire(out)
    except (Exception, OutOfLines):
        return None
    left = len([s for s in obj.running if s.is_finished])
    return True if left == 0 else False if left == len(done) else None


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


def _named(shown: Any, seq_id: Any) -> int:
    """How many entries of an output list, as shown (``<sequence 1>``, or the id), name
    ``seq_id``."""
    if not isinstance(shown, list | tuple):
        return 0
    return sum(1 for e in shown if e == seq_id or str(e).endswith(f" {seq_id}>"))


def victim_in_output(d: Difference, noun: str) -> str | None:
    """A victim left out of the step's ``preempted`` list (or put in another list, or twice)."""
    victim = getattr(d.args[0], "seq_id", None) if d.args else None
    mine = _named(d.mine.get("out.preempted"), victim)
    theirs = _named(d.theirs.get("out.preempted"), victim)
    elsewhere = [
        n[len("out.") :]
        for n in d.differ
        if n.startswith("out.") and n != "out.preempted" and _named(d.mine.get(n), victim)
    ]
    if elsewhere:
        where = f"put {noun} {victim} in out.{elsewhere[0]}"
    elif mine > theirs:
        where = f"put {noun} {victim} in out.preempted {mine} times"
    elif mine < theirs:
        where = f"did not put {noun} {victim} in out.preempted"
    else:
        return None
    return (
        f"yours {where}: each victim goes into out.preempted once, so the step's output says "
        f"which {noun}s lost their blocks and will run again"
    )


def _victim_id(d: Difference) -> Any:
    return getattr(d.args[0], "seq_id", None) if d.args else None


def _kept_blocks(d: Difference) -> bool:
    """Yours left the victim a block table the reference freed."""
    mine, theirs = d.mine.get("tables"), d.theirs.get("tables")
    victim = _victim_id(d)
    kept = isinstance(mine, dict) and victim in mine
    return kept and isinstance(theirs, dict) and victim not in theirs


def _not_first(d: Difference) -> bool:
    """The reference put the victim first in waiting, yours did not."""
    victim = _victim_id(d)
    mine, theirs = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    return theirs[:1] == [victim] and mine[:1] != [victim]


def _one_token_short(d: Difference, mine: list[Any], theirs: list[Any]) -> bool:
    """Every sequence yours retired and the reference kept had exactly one token left."""
    early = [s for s in getattr(d.subject, "running", ()) if s.seq_id in theirs]
    early = [s for s in early if s.seq_id not in mine]
    return bool(early) and all(s.max_new_tokens - s.num_generated == 1 for s in early)


def _decoded_admitted(d: Difference) -> bool:
    """Your step (run again on a copy) decodes a sequence it prefills in the same step."""
    kind, out = d.probe("step")
    if kind != "returned":
        return False
    decoded = {getattr(getattr(x, "seq", None), "seq_id", None) for x in out.decodes}
    return any(getattr(getattr(p, "seq", None), "seq_id", None) in decoded for p in out.prefills)


def scheduler_reading(d: Difference) -> str | None:
    """The rule a scheduler's first diverging call breaks."""
    if d.hidden:
        return None
    m, differ = d.method, d.differ
    first = _FIRST.get(m)
    found = first(d) if first is not None else None
    if found is not None:
        return found
    if m == "add" and TOO_LARGE.fits(d):
        return (
            "a request that can never fit (its prompt + max_new_tokens in blocks, above "
            "num_blocks - watermark) raises RequestTooLarge in add()"
        )
    if m == "fits" and not d.same_outcome and FITS.fits(d):
        found = fits_counts_the_pool(d) or count_off(d) or watermark_twice(d)
        if found is not None:
            return found
        if d.returned("mine") == "False" and _leaves_the_watermark(d):
            said = "yours refused a request that leaves exactly the watermark free"
            rule = (
                "admit while num_free - needed >= watermark, needed in blocks (ceil(n_tokens / "
                "block_size))"
            )
            line = one_block_off(d)
            if line:
                return f"{said}: {line}; {rule}"
            # a strict comparison, a block too many, a count of tokens: all refuse here
            return f"{said}: {rule}"
        if d.returned("mine") == "True" and d.returned("theirs") == "False":
            return (
                fits_waives_the_watermark_when_idle(d)
                or "admit only while num_free - needed >= watermark: the watermark stays free"
            )
        return None
    if m == "retire" and differ:
        before = _ids(d.before.get("running"))
        mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
        if len(mine) < len(theirs) and RETIRE_EARLY.fits(d) and _one_token_short(d, mine, theirs):
            return (
                "yours retired a sequence a step early: it retires once finished (its last "
                "token emitted), at the start of the next step"
            )
        if len(mine) == len(before) > len(theirs) and NEVER_RETIRED.fits(d):
            rule = "retire frees every finished sequence (bm.free_seq) and drops it from running"
            if not d.changed("mine"):
                left = [s for s in before if s not in theirs]
                where = _retires_when_first(d)
                if where:
                    return (
                        f"yours changed nothing: finished sequence(s) {left} stay running, yet "
                        f"yours retires them once they stand {where} in running: walk every "
                        f"running sequence, from the first to the last, and stop at none; {rule}"
                    )
                if _retires_next_call(d):
                    return (
                        f"yours changed nothing: finished sequence(s) {left} stay running, yet "
                        "called once more on a copy, yours retires them: one call late. A "
                        f"sequence retires at the first step that finds it finished; {rule}"
                    )
                alone = _retires_alone(d)
                if alone:
                    return (
                        f"yours changed nothing: finished sequence(s) {left} stay running, yet "
                        "on a copy where only finished sequences run, yours retires them: "
                        f"retire each finished one, whatever runs beside it; {rule}"
                    )
                short = retired_by_own_count(d, left)
                if short:
                    return short
                later = retires_at_a_later_step(d, left) if alone is False else None
                if later is True:  # retired, by later steps: late, not never
                    return (
                        f"yours changed nothing: finished sequence(s) {left} stay running at "
                        "this step, and your step(), run on a copy, retires them only at a later "
                        f"step: a sequence retires at the first step that finds it finished; {rule}"
                    )
                if alone is False and later is False:  # two steps ran, none retired
                    return (
                        f"yours changed nothing: finished sequence(s) {left} stay running, and "
                        "yours retires none on a second call either, nor with only finished "
                        "sequences running: a scheduler that never retires decodes them "
                        f"forever; {rule}"
                    )
                # one call seen: what it left, not what later calls do
                return (
                    f"yours changed nothing: finished sequence(s) {left} stay running at this "
                    f"step, to be decoded again; {rule}"
                )
            return rule
        if len(mine) > len(theirs) and LEFT_RUNNING.fits(d):
            left = [s for s in mine if s not in theirs]
            said = f"yours left finished sequence(s) {left} running: retire every finished sequence"
            if _skipped_after_removal(before, mine, left) and _retires_when_spaced(d):
                return f"{said}, however the list it walks changes under it"
            return said
    if m == "admit" and "running" in differ:
        mine_r, theirs_r = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
        refused = [s for s in theirs_r if s not in mine_r]
        extra = [s for s in mine_r if s not in theirs_r]
        told = (
            admitted_for_its_future(d)
            or (fits_after_allocating(d, refused) if refused else None)
            or (kept_from_before(d, refused) if refused else None)
            or (free_read_once(d, extra) if extra else None)
        )
        if told is not None:
            return told
    if m in ("admit", "retire") and differ == {"running"}:
        if m == "retire" and (swapped := moved_the_last_in(d)) is not None:
            return swapped
        mine_r, theirs_r = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
        if sorted(mine_r) == sorted(theirs_r) and mine_r != theirs_r:
            keeps = (
                "admit puts each sequence it admits at the back (append)"
                if m == "admit"
                else "retire drops the finished ones and keeps the rest in their order"
            )
            return (
                f"yours left running as {mine_r}, not {theirs_r}: running stays in order of "
                f"arrival, the oldest first, for decode to take in that order; {keeps}"
            )
    if m == "admit" and "waiting" in differ and ADMIT_ORDER.fits(d):
        mine_w, theirs_w = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
        if sorted(mine_w) == sorted(theirs_w):
            return (
                f"yours reordered waiting ({mine_w}, not {theirs_w}): admission takes waiting "
                "in order and leaves the rest in their order (first come, first served)"
            )
    if m == "decode" and d.i_raised and not d.they_raised and not differ:
        before = _ids(d.before.get("running"))
        gone = [x for x in before if x not in _ids(d.mine.get("running"))]
        # the error a block manager raises for a sequence it has freed: an append for a victim
        if gone and d.error("mine") in ("UnknownSequence", "KeyError"):
            return retried_its_own_victim(d) or (
                f"yours preempted sequence(s) {gone} in this call, as the reference does, "
                f"then raised {d.error('mine')}: does your loop still visit a sequence it has "
                "preempted, whose blocks are gone? A loop over a copy of running "
                "(list(self.running)) does; walk running itself, so a victim taken out of it "
                "is not decoded"
            )
    if m == "decode":
        return _scheduler_decode(d)
    found = took_then_raised(d, "sequence") if m == "admit" else None
    if m == "preempt":
        found = victims_replaced(d, "sequence") or requeued_by_id(d)
    if found is not None:
        return found
    if m == "preempt" and "out.preempted" in differ:
        return victim_in_output(d, "sequence")
    if m == "preempt" and PREEMPT_BLOCKS.fits(d) and _kept_blocks(d):
        return "a preempted sequence must give back its blocks (bm.free_seq) before it waits"
    if m == "preempt" and PREEMPT_FRONT.fits(d) and _not_first(d):
        lost = victim_lost(d, "sequence")
        if lost is not None:
            return f"{lost}; of several victims in a step, the older victim stands first"
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
    if m == "step" and "lengths" in differ and _decoded_admitted(d):
        return (
            "yours decoded the sequences it just admitted: admit after decoding, not before "
            "decoding (a prefill is the admitted sequence's work in this step)"
        )
    return None


# --- readings of what a call shows for certain: the rule broken, whatever the cause


DECODE_TOKENS = written_for("running", "out.decodes", *_BLOCKS)
FINISHED_ORDER = written_for("out.finished", "free")
VICTIMS_QUEUED = written_for("waiting", "running", "out.decodes", "out.preempted", *_BLOCKS)
PREEMPTED_IDS = written_for("out.preempted")


def _tokens(running: Any) -> dict[Any, Any]:
    """A side's running sequences as shown, ``[(id, tokens), ...]``: tokens by id."""
    if not isinstance(running, list):
        return {}
    return {e[0]: e[1] for e in running if isinstance(e, tuple) and len(e) == 2}


def _decode_added_tokens(d: Difference) -> str | None:
    """Yours left running sequences holding more tokens after decode, where the reference's
    decode leaves every count as it was: a scheduler never appends a token, whatever made
    yours do it (the engine appends the sampled token after the step)."""
    if not DECODE_TOKENS.fits(d) or "running" not in d.differ:
        return None
    before, mine = _tokens(d.before.get("running")), _tokens(d.mine.get("running"))
    theirs = _tokens(d.theirs.get("running"))
    grew = [
        s
        for s, n in mine.items()
        if s in theirs and theirs[s] == before.get(s) and isinstance(n, int) and n > theirs[s]
    ]
    if not grew:
        return None
    return (
        f"yours added tokens to sequence(s) {grew} in decode (sequence {grew[0]} holds "
        f"{mine[grew[0]]} tokens after it, {theirs[grew[0]]} before): decode asks the block "
        "manager for each sequence's next slot (bm.append_slot) and leaves its tokens alone; "
        "the engine appends the sampled token after the step"
    )


def _finished_order(d: Difference) -> str | None:
    """The same finished sequences listed in another order, running left as the reference
    leaves it: the step's output lists them in the order of running."""
    mine, theirs = d.mine.get("out.finished"), d.theirs.get("out.finished")
    if not isinstance(mine, list) or not isinstance(theirs, list) or mine == theirs:
        return None
    if sorted(map(repr, mine)) != sorted(map(repr, theirs)) or not FINISHED_ORDER.fits(d):
        return None
    return (
        f"yours listed this step's finished sequences as {mine}, not {theirs}: retire walks "
        "running from the oldest to the newest and lists each finished sequence in that order"
    )


def _victims_queued_elsewhere(d: Difference) -> str | None:
    """The reference's victims, in its order, and running left as the reference leaves it,
    yet waiting in another order, the requests waiting before in theirs: where a victim went
    back into waiting is what differs, not which victim was chosen."""
    mine_v, theirs_v = _victims(d.mine), _victims(d.theirs)
    if not mine_v or mine_v != theirs_v or not VICTIMS_QUEUED.fits(d):
        return None
    if d.mine.get("running") != d.theirs.get("running"):
        return None
    mine_w, theirs_w = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    if mine_w == theirs_w or sorted(mine_w, key=repr) != sorted(theirs_w, key=repr):
        return None
    victims = [s for s in theirs_w if s in _ids(d.before.get("running"))]
    rest = [s for s in mine_w if s not in victims]
    if not victims or rest != [s for s in theirs_w if s not in victims]:
        return None
    return (
        f"yours preempted the same sequences as the reference, in the same order, yet left "
        f"waiting as {mine_w}, not {theirs_w}: each victim goes to the front of waiting as it "
        "is preempted (appendleft), whichever sequence it is, so of a step's victims the "
        "older stands first"
    )


def _victim_as_id(d: Difference) -> str | None:
    """Yours put the victim's id in out.preempted where the sequence itself belongs."""
    victim = _victim_id(d)
    mine = d.mine.get("out.preempted")
    if victim is None or not isinstance(mine, list) or not PREEMPTED_IDS.fits(d):
        return None
    shown = (str(victim), f"<int {victim}>")  # an id entry, as localise shows a number
    if not any(isinstance(e, str) and e in shown for e in mine):
        return None
    return (
        f"yours put {victim}, the victim's seq_id, in out.preempted, where the reference puts "
        "the sequence itself: out.preempted lists Sequence objects, the requests that lost "
        "their blocks and will run again"
    )


def _first_for_decode(d: Difference) -> str | None:
    readings = (listed_not_decoded, slot_not_appended, _decode_added_tokens)
    later = (_victims_queued_elsewhere, skips_a_full_decode, decoded_a_victim)
    return next((said for r in readings + later if (said := r(d)) is not None), None)


_FIRST = {
    "add": sized_with_generated,
    "admit": admits_newest_first,
    "decode": _first_for_decode,
    "retire": _finished_order,
    "preempt": _victim_as_id,
}

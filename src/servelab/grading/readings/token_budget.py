"""Readings of a token-budget scheduler's first diverging call: the chunks, the budget, the
victims.

What a step schedules lives partly in the ``BudgetStep`` it fills, which the state comparison
does not see: a reading runs your method again on a copy, with a fresh step, and checks each
chunk against the rules every step of the notebook keeps (a chunk samples exactly when it
reaches the end of the request; the budget left is the budget less the tokens that ran).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from servelab.grading.readings.budget_admission import block_of_budget
from servelab.grading.readings.budget_asker import asker_kept
from servelab.grading.readings.budget_charged import charged_or_cut
from servelab.grading.readings.budget_kept import (
    cap_counts_the_step,
    checks_the_pool,
    chunk_only_allocated,
    kept_back,
    victim_lost,
    victims_replaced,
)
from servelab.grading.readings.budget_one_call import one_per_call
from servelab.grading.readings.budget_one_each import one_token_each
from servelab.grading.readings.budget_partial import kept_partial
from servelab.grading.readings.budget_reported import (
    as_done,
    blocks_differ,
    computed_differs,
    hit_not_fresh,
)
from servelab.grading.readings.budget_slots import shared_read, slots_call, slots_read
from servelab.grading.readings.budget_victims import (
    removed_twice,
    self_victim_ran,
    victim_visited,
)
from servelab.grading.readings.budget_watched import watched_running
from servelab.grading.readings.difference import Difference, call, written_for
from servelab.grading.readings.scheduler import victim_in_output
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.budget import BudgetStep

_BLOCKS = (
    "tables",
    "lengths",
    "refcounts",
    "free",
    "num_free",
    "hashed",
    "cached",
    "reclaim order",
)
# what each reading explains; a direction or a value it needs is checked where it is read
VICTIM = written_for(
    "running", "waiting", "num_computed_tokens", "out.scheduled", "out.preempted", *_BLOCKS
)
KEPT_BLOCKS = written_for(*_BLOCKS)
FIRST_VICTIM = VICTIM  # the same fields
KEPT_COMPUTED = written_for("num_computed_tokens")
QUEUED_BACK = written_for("waiting")
CAP = written_for("running", "waiting", "num_computed_tokens", "out.scheduled", *_BLOCKS)
EXACT_FIT = CAP
SKIPPED = written_for("num_computed_tokens", "out.scheduled", "result", *_BLOCKS)


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _queue(obj: Any) -> list[Any]:
    """A scheduler copy's waiting requests as (seq_id, tokens) entries, as fields show them."""
    return [(s.seq_id, s.num_tokens) for s in getattr(obj, "waiting", None) or ()]


def _again(d: Difference, budget: int | None = None) -> tuple[list[Any], Any, Any] | None:
    """Your call run again on a copy of the scheduler as it was, with a fresh step (and the
    call's budget, or ``budget``): the chunks it scheduled, what it returned, and the copy
    after it; None when it cannot run."""
    if len(d.args) != 2 or not isinstance(d.args[1], int):
        return None
    try:
        obj = copy.deepcopy(d.subject)
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            returned = getattr(obj, d.method)(out, d.args[1] if budget is None else budget)
    except (Exception, OutOfLines):
        return None
    return list(out.scheduled), returned, obj


def _hit_left_out(chunks: list[Any]) -> str | None:
    """An admitted chunk starts at its prefix hit, so its num_cached is its start."""
    for c in chunks:
        if getattr(c, "num_cached", c.start) != c.start:
            return (
                f"yours admitted request {c.seq.seq_id} from token {c.start} (its prefix hit) "
                f"with num_cached={c.num_cached}: an admitted chunk reports its hit, "
                "Chunk(seq, hit, n, slots, samples, hit)"
            )
    return None


def _sampling(chunks: list[Any]) -> str | None:
    for c in chunks:
        end = c.start + c.num_tokens
        if bool(c.samples) != (end == c.seq.num_tokens):
            return (
                f"yours scheduled tokens {c.start}..{end - 1} of request {c.seq.seq_id} (of "
                f"{c.seq.num_tokens}) with samples={c.samples}: a chunk samples exactly when it "
                "reaches the end of the request's tokens (start + num_tokens == seq.num_tokens), "
                "a prompt's last chunk as well as a decode"
            )
    return None


def _budget_returned(d: Difference, chunks: list[Any], returned: Any) -> str | None:
    budget = d.args[1]
    spent = sum(c.num_tokens for c in chunks)
    if not isinstance(returned, int) or returned == budget - spent:
        return None
    if d.returned("theirs") != str(budget - spent):
        return None
    said = f"yours returned {returned} from a budget of {budget} after scheduling {spent} tokens"
    if spent and returned == budget - 2 * spent and _twice_with_longer_chunk(d, spent, chunks):
        return (
            f"{said}: it took them from the budget twice; return the budget less the tokens "
            "scheduled, each taken once"
        )
    return f"{said}: return the budget left, {budget} less the tokens scheduled ({budget - spent})"


def _twice_with_longer_chunk(d: Difference, spent: int, chunks: list[Any]) -> bool:
    """Proof of tokens taken twice. With one-token chunks only, twice the tokens is also one
    token more per chunk (a sampled token charged, say): so yours runs again on a copy whose
    first running request has two more tokens to run, and twice must hold of its longer chunk."""
    if spent != len(chunks):
        return True
    try:
        obj = copy.deepcopy(d.subject)
        sid = obj.running[0].seq_id
        obj.computed[sid] = max(0, obj.computed[sid] - 2)
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            returned = getattr(obj, d.method)(out, d.args[1])
    except (Exception, OutOfLines):
        return False
    longer = sum(c.num_tokens for c in out.scheduled)
    return longer > len(out.scheduled) and returned == d.args[1] - 2 * longer


def _computed(d: Difference, chunks: list[Any], obj: Any) -> str | None:
    """num_computed_tokens after a chunk: its end, start + num_tokens."""
    left = d.args[1]
    done = getattr(obj, "computed", None)
    if not isinstance(done, dict):
        return None
    for c in chunks:
        sid, end = c.seq.seq_id, c.start + c.num_tokens
        mine = done.get(sid)
        if mine is not None and mine != end:
            differs = computed_differs(d, c, mine)
            if differs is not None:
                return differs
            said = (
                f"yours set request {sid}'s num_computed_tokens to {mine} after its chunk of "
                f"{c.num_tokens} tokens from {c.start}"
            )
            if mine == c.start + left and _moves_with_budget(d, sid, mine):
                return (
                    f"{said}: it advanced by the budget left ({left}), not by the tokens that "
                    f"ran; it becomes start + num_tokens ({end})"
                )
            if mine == c.num_tokens and c.start and c.start == getattr(c, "num_cached", 0):
                said += f" (its num_tokens alone: the prefix hit of {c.start} left out)"
            return f"{said}: it becomes the chunk's end, start + num_tokens ({end})"
        left -= c.num_tokens
    return None


def _moves_with_budget(d: Difference, sid: Any, mine: int) -> bool:
    """Proof of num_computed_tokens set by the budget: the call run again with one more token
    of budget sets it one further (the tokens that ran stay put whenever the chunk took the
    whole rest of the prompt)."""
    ran = _again(d, d.args[1] + 1)
    done = getattr(ran[2], "computed", None) if ran is not None else None
    return isinstance(done, dict) and done.get(sid) == mine + 1


def _chunk_sizes(d: Difference, chunks: list[Any]) -> str | None:
    """A chunk shorter than the tokens the request needs and the budget allows, of a request
    the reference admits too (one it leaves waiting, the pool full, takes no chunk at all)."""
    honest = charged = d.args[1]
    theirs = d.theirs.get("running")
    admitted = _ids(theirs) if isinstance(theirs, list) else None  # None: not shown
    for c in chunks:
        need = c.seq.num_tokens - c.start
        short = c.num_tokens < min(need, honest)
        if short and admitted is not None and c.seq.seq_id not in admitted:
            return None
        if short:
            said = (
                f"yours gave request {c.seq.seq_id} {c.num_tokens} of its {need} tokens to run, "
                f"where the tokens run before it leave {honest} of the budget"
            )
            if c.num_tokens == min(need, charged) and charged < honest:
                if _full_without_hits(d, c.seq.seq_id):
                    return (
                        f"{said}: {honest - charged} short, the cached tokens of the prefix "
                        "hits before it; on a copy whose requests find no hit, yours gives it "
                        "the whole budget left. Cached tokens cost nothing, only the tokens "
                        "that run (num_tokens) come off the budget"
                    )
                return f"{said}: a chunk takes min(tokens still to run, budget left)"
            blocks = charged_or_cut(
                chunks,
                d.args[1],
                getattr(getattr(d.subject, "bm", None), "block_size", None),
                c,
                said,
                lambda b: (_again(d, b) or (None,))[0],
            )
            return blocks or f"{said}: a chunk takes min(tokens still to run, budget left)"
        honest -= c.num_tokens
        charged -= c.num_tokens + c.num_cached
    return None


def _full_without_hits(d: Difference, sid: Any) -> bool:
    """Proof of prefix hits charged: your call run again on a copy whose ``cached_tokens``
    finds no hit gives request ``sid`` the whole budget left (the budget less the tokens run
    before it), where it ran short. A chunk shortened by another cost (a block per request, a
    sampled token) stays short without hits."""
    if len(d.args) != 2 or not isinstance(d.args[1], int):
        return False
    try:
        obj = copy.deepcopy(d.subject)
        obj.cached_tokens = lambda seq: 0
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(out, d.args[1])
    except (Exception, OutOfLines):
        return False
    left = d.args[1]
    for c in out.scheduled:
        if getattr(c, "num_cached", 0):
            return False
        need = c.seq.num_tokens - c.start
        if c.seq.seq_id == sid:
            return left < need and c.num_tokens == left
        left -= c.num_tokens
    return False


def _overspent(d: Difference, chunks: list[Any]) -> str | None:
    """Chunks that add up to more tokens than the budget the call was given."""
    budget, spent = d.args[1], sum(c.num_tokens for c in chunks)
    if spent <= budget:
        return None
    shown = ", ".join(f"{c.num_tokens} for request {c.seq.seq_id}" for c in chunks)
    return (
        f"yours scheduled {spent} tokens ({shown}) with a budget of {budget}: each chunk's "
        "num_tokens comes off the budget, and a chunk takes at most the budget left"
    )


def _admitted_blocks(d: Difference, chunks: list[Any]) -> str | None:
    """An admitted request holds blocks for its tokens up to its chunk's end."""
    lengths = d.mine.get("lengths")
    if not isinstance(lengths, dict):
        return None
    for c in chunks:
        sid, end = c.seq.seq_id, c.start + c.num_tokens
        got = lengths.get(sid)
        if got is None or got == end or not blocks_differ(d, sid):
            continue
        if got == c.seq.num_tokens:
            return (
                f"yours allocated blocks for request {sid}'s whole prompt ({got} tokens) at a "
                f"chunk that ends at token {end}: allocate token_ids[:hit + n], up to the "
                "chunk's end; later chunks extend it"
            )
        return (
            f"yours left request {sid} holding {got} tokens' blocks where its chunk ends at "
            f"{end}: allocate token_ids[:hit + n], up to the chunk's end"
        )
    return None


def _victim(d: Difference) -> str | None:
    before = _ids(d.before.get("running"))
    waiting = _ids(d.before.get("waiting"))
    mine = [s for s in _ids(d.mine.get("waiting")) if s not in waiting]
    theirs = [s for s in _ids(d.theirs.get("waiting")) if s not in waiting]
    if not mine or not theirs or mine == theirs or not before or not VICTIM.fits(d):
        return None
    extra = [s for s in mine if s not in theirs]
    if set(theirs) < set(mine) and _preempts_without_retry(d):
        return (
            f"yours preempted {extra} as well as {theirs}: preempt one request at a time, the "
            "latest running (running.pop()), and retry the extend after each; stop as soon "
            "as it fits"
        )
    # the same victims queued in another order is no other victim: running.pop() at each
    # failed extend always takes the same ones, latest first (a first victim other than the
    # latest, with another count, is _first_victim's, proven by a re-run)
    if len(mine) != len(theirs) or set(mine) == set(theirs):
        return None
    # the request named is one the reference kept; its victims wait in running order
    victim = next(s for s in mine if s not in theirs)
    here = f"{theirs[0]} here"
    if len(theirs) > 1:  # in the order taken
        here = f"here {', then '.join(str(s) for s in theirs[::-1])}"
    return (
        f"yours preempted request {victim}; the victim is the latest running request, the "
        f"last of running ({here}): running.pop(), retried until the request fits"
    )


def _reordered(d: Difference) -> str | None:
    """Yours left the requests it kept running in another order than they ran before the
    call: which victim running.pop() takes follows from that order, so the order is said."""
    before, mine = _ids(d.before.get("running")), _ids(d.mine.get("running"))
    kept = [s for s in before if s in mine]
    if len(mine) < 2 or mine == kept or sorted(mine, key=repr) != sorted(kept, key=repr):
        return None
    if not VICTIM.fits(d):
        return None
    return (
        f"yours left running as {mine}, where it ran as {before} before the call: running "
        "keeps the order of admission, the latest last, so running.pop() takes the latest "
        "running request"
    )


def _victim_ids(victims: Any) -> list[Any]:
    """``out.preempted`` as the fields show it: ids, or the sequences themselves."""
    if not isinstance(victims, list):
        return []
    return [getattr(v, "seq_id", v) for v in victims]


def _first_victim(d: Difference) -> str | None:
    """Victims whose first is not the latest running request, where the reference's first is:
    that first choice breaks the rule whatever the count (a returned budget, a victim more or
    fewer, is only its by-product). Proven by a re-run: yours, called again on a copy, calls
    preempt first with that request (a list of victims written in another order is not it)."""
    before = _ids(d.before.get("running"))
    if not before or not FIRST_VICTIM.fits(d):
        return None
    mine, theirs = (_victim_ids(side.get("out.preempted")) for side in (d.mine, d.theirs))
    if not mine or not theirs or theirs[0] != before[-1] or mine[0] not in before[:-1]:
        return None
    budget = d.args[1] if len(d.args) == 2 else None
    calls = [c for c in _trace(d, ("preempt",), BudgetStep(), budget) or () if c[0] == "preempt"]
    if not calls or getattr(calls[0][1], "seq_id", None) != mine[0]:
        return None
    return (
        f"yours preempted request {mine[0]} first, with {before[-1]} running after it: the "
        f"victim is the latest running request, the last of running ({before[-1]} here): "
        "running.pop(), retried until the request fits"
    )


def _trace(d: Difference, names: tuple[str, ...], *args: Any) -> list[tuple[str, Any]] | None:
    """Your call run again on a copy with ``args``, recording each call of your ``names``
    methods it makes, in order, with its first argument; None when it cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        calls: list[tuple[str, Any]] = []
        for name in names:
            bound = getattr(obj, name)

            def recorded(*a: Any, _name: str = name, _bound: Any = bound) -> Any:
                calls.append((_name, a[0] if a else None))
                return _bound(*a)

            setattr(obj, name, recorded)
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*args)
    except (Exception, OutOfLines):
        return None
    return calls


def _preempts_without_retry(d: Difference) -> bool:
    """Proof of victims past the one that makes room: yours, run again, calls preempt twice
    with no extend between them (a retry that fails again, since yours asks for more, is not
    it). Without an extend call to see, nothing is proven."""
    budget = d.args[1] if len(d.args) == 2 else None
    calls = _trace(d, ("extend", "preempt"), BudgetStep(), budget)
    names = [name for name, _ in calls or ()]
    pairs = itertools.pairwise(names)
    return "extend" in names and any(a == b == "preempt" for a, b in pairs)


def _not_retried(d: Difference, sid: Any) -> bool:
    """Proof of a failed extend not retried: yours, run again, preempts right after an
    extend for request ``sid`` (another request the victim) and never extends ``sid`` again."""
    budget = d.args[1] if len(d.args) == 2 else None
    calls = _trace(d, ("extend", "preempt"), BudgetStep(), budget)
    ids = [(name, getattr(arg, "seq_id", None)) for name, arg in calls or ()]
    for i, (name, who) in enumerate(ids[1:], start=1):
        if name == "preempt" and ids[i - 1] == ("extend", sid) and who != sid:
            return ("extend", sid) not in ids[i + 1 :]
    return False


def _admitted_first(d: Difference) -> bool:
    """Proof of a step that admits before it schedules the running requests: yours, run
    again, calls admit before schedule_running."""
    calls = _trace(d, ("schedule_running", "admit"))
    names = [name for name, _ in calls or ()]
    return "admit" in names and names.index("admit") < (
        names.index("schedule_running") if "schedule_running" in names else len(names)
    )


def _preempt(d: Difference) -> str | None:
    victim = getattr(d.args[0], "seq_id", None) if d.args else None
    if "out.preempted" in d.differ:
        return victim_in_output(d, "request")
    tables, theirs_tables = d.mine.get("tables"), d.theirs.get("tables") or {}
    kept = isinstance(tables, dict) and victim in tables and "tables" in d.differ
    if isinstance(tables, dict) and kept and victim not in theirs_tables and KEPT_BLOCKS.fits(d):
        return (
            f"yours left request {victim}'s blocks in its table ({tables[victim]}): a "
            "preempted request gives back its blocks (bm.free_seq) before it waits"
        )
    computed = d.mine.get("num_computed_tokens")
    if not isinstance(computed, dict) or not KEPT_COMPUTED.fits(d):
        computed = None
    elif not isinstance(computed.get(victim), int):
        return (
            f"yours dropped request {victim} from num_computed_tokens: a preempted request "
            "waits again, still known, with 0 tokens computed (reset it to 0; its prompt and "
            "generated tokens all run again)"
        )
    if computed and computed.get(victim, 0) != 0:
        return (
            f"yours left request {victim}'s num_computed_tokens at {computed[victim]}: a "
            "preempted request starts over, so reset it to 0 (its blocks are freed; its "
            "prompt and generated tokens all run again)"
        )
    mine, theirs = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    if not QUEUED_BACK.fits(d):
        return None
    if theirs[:1] == [victim] and mine[:1] != [victim] and sorted(mine) == sorted(theirs):
        return (
            f"yours queued request {victim} at {mine}: a preempted request goes to the front "
            "of waiting (appendleft), ahead of every request that came after it"
        )
    return None


def _starved(d: Difference) -> str | None:
    """A step that gives a newcomer's prompt the tokens a running request should have had."""
    running = _ids(d.before.get("running"))
    mine, theirs = d.mine.get("num_computed_tokens"), d.theirs.get("num_computed_tokens")
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    short = [s for s in running if mine.get(s, 0) < theirs.get(s, 0)]
    more = [s for s in mine if s not in running and mine[s] > theirs.get(s, 0)]
    if not short or not more or not _admitted_first(d):
        return None
    return (
        f"yours gave waiting request {more[0]} tokens that running request {short[0]} needed: "
        "schedule the running requests first and admit with the budget they leave, or a long "
        "prefill can starve the decodes"
    )


def _exact_fit_left_waiting(d: Difference) -> str | None:
    """A request whose tokens to run equal the budget left is admitted."""
    waiting = getattr(d.subject, "waiting", None)
    if not waiting or len(d.args) != 2 or d.mine.get("waiting") != d.before.get("waiting"):
        return None
    if d.theirs.get("waiting") == d.before.get("waiting"):
        return None
    head = waiting[0]
    hit = call(d.subject, "cached_tokens", head)
    need = head.num_tokens - (hit if isinstance(hit, int) else 0)
    if need != d.args[1]:
        return None
    # proof of a test that asks for room to spare: one more token of budget admits the head
    # (a cap or a block count that keeps it waiting keeps it waiting then too)
    ran, same = _again(d, need + 1), _again(d, need)
    if ran is None or head.seq_id in _ids(_queue(ran[2])):
        return None
    if same is None or head.seq_id not in _ids(_queue(same[2])):
        return None  # a fresh step admits it at the same budget: the budget is not the cause
    rule = _admission_rule(d, head, need)
    return (
        f"yours left request {head.seq_id} waiting with {need} tokens to run and exactly "
        f"{need} of the budget left: a request that needs exactly the budget left fits{rule}; "
        "does yours ask for room to spare (< where <= belongs)?"
    )


def _admission_rule(d: Difference, head: Any, need: int) -> str:
    """The admission rule of this step, as the reference shows it with one token of budget
    less on a copy: a chunk of what is left (chunked prefill), or the request left waiting
    (prompts admitted whole); nothing where the reference cannot be run or shows neither."""
    if d.reference is None or need < 2:
        return ""
    try:
        obj = copy.deepcopy(d.subject)
        obj.__class__ = d.reference
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            obj.admit(out, need - 1)
    except (Exception, OutOfLines):
        return ""
    ran = [c.num_tokens for c in out.scheduled if c.seq.seq_id == head.seq_id]
    if ran == [need - 1]:
        return " (admit while budget > 0, a chunk of min(tokens to run, budget))"
    whole = need == head.num_tokens  # no prefix hit: its tokens to run are all its tokens
    if whole and not ran and head.seq_id in _ids(_queue(obj)):
        return " (a prompt is admitted whole while its tokens to run <= the budget left)"
    return ""


def _skipped(d: Difference, chunks: list[Any], returned: Any) -> str | None:
    """A running request the reference gives tokens that yours gives none, with budget left.
    After the reference's own victims, that is a request not retried only where yours also
    returns the budget it really left (a budget charged twice ends the loop early too)."""
    victims = d.mine.get("out.preempted")
    if not SKIPPED.fits(d) or victims != d.theirs.get("out.preempted"):
        return None
    theirs = d.theirs.get("out.scheduled")
    mine = {c.seq.seq_id for c in chunks}
    left = d.args[1] - sum(c.num_tokens for c in chunks)
    done = getattr(d.subject, "computed", None)
    if not isinstance(theirs, list) or not isinstance(done, dict) or left <= 0:
        return None
    for seq in getattr(d.subject, "running", ()):
        need = seq.num_tokens - done.get(seq.seq_id, 0)
        if seq.seq_id in theirs and seq.seq_id not in mine and need > 0:
            said = f"yours scheduled nothing for running request {seq.seq_id}"
            if victims and returned == left and _not_retried(d, seq.seq_id):
                shown = [str(v).removeprefix("<sequence ").removesuffix(">") for v in victims]
                return (
                    f"{said} after preempting request(s) {', '.join(shown)}, as the reference "
                    f"does, with {need} token(s) to run and {left} of the budget left: a "
                    "preemption frees the victim's blocks so that the request whose extend "
                    "failed is retried, and every running request takes a chunk of min(tokens "
                    "still to run, budget left)"
                )
            if victims:
                return None
            return (
                f"{said}, with {need} tokens to run and {left} of the budget left: a running "
                "request takes a chunk of min(tokens still to run, budget left), the rest of a "
                "long prompt as well as a decode"
            )
    return None


def token_budget_reading(d: Difference) -> str | None:
    """The rule a token-budget scheduler's first diverging call breaks."""
    if d.hidden:
        return None
    m, differ = d.method, d.differ
    if m == "step":
        return _starved(d)
    if m == "preempt":
        found = removed_twice(d) or victims_replaced(d) or victim_lost(d)
        return found or (None if d.i_raised else _preempt(d))
    if m == "extend":
        return checks_the_pool(d)
    if m == "slots" and not d.same_outcome:
        return slots_call(d)
    if m not in ("admit", "schedule_running"):
        return None
    if m == "admit":
        running, cap = d.mine.get("running"), getattr(d.subject, "max_num_seqs", None)
        if (
            isinstance(running, list)
            and isinstance(cap, int)
            and len(running) > cap
            and CAP.fits(d)
        ):
            return (
                f"yours left {len(running)} requests running with max_num_seqs = {cap}: admit "
                "only while len(running) < max_num_seqs"
            )
    if m == "admit":
        found = chunk_only_allocated(d) or cap_counts_the_step(d)
        if found is not None:
            return found
    if m == "admit" and EXACT_FIT.fits(d):
        exact = _exact_fit_left_waiting(d)
        if exact is not None:
            return exact
    if m == "schedule_running":
        found = kept_partial(d) or victim_visited(d) or self_victim_ran(d) or watched_running(d)
    else:
        found = None
    if found is not None:
        return found
    if m == "schedule_running" and "waiting" in differ:
        found = _reordered(d) or _victim(d) or _first_victim(d)
        if found is None and len(d.args) == 2 and VICTIM.fits(d):
            found = asker_kept(d)
        if found is not None:
            return found
    ran = _again(d)
    if ran is None:
        return None
    chunks, returned, obj = ran
    found = shared_read(obj, chunks) or _computed(d, chunks, obj)
    if found is None and m == "admit" and EXACT_FIT.fits(d):
        found = block_of_budget(d.args[1], ran, d.theirs.get("waiting"), lambda b: _again(d, b))
    # a reading leans on a chunk's numbers only where the chunk agrees with what yours did
    done = [c for c in chunks if as_done(d, c, obj)]
    whole = done if len(done) == len(chunks) else []
    if found is None and m == "admit":
        found = (
            hit_not_fresh(d, chunks, obj)
            or _overspent(d, whole)
            or kept_back(d, whole, lambda b: _again(d, b))
            or _chunk_sizes(d, whole)
            or _admitted_blocks(d, done)
            or slots_read(d, done)
            or _hit_left_out(done)
            or one_per_call(d.subject, d.args[1], d.theirs.get("running"), lambda b: _again(d, b))
        )
    if found is None and m == "schedule_running":
        found = (
            one_token_each(d, chunks)
            or _overspent(d, whole)
            or _budget_returned(d, chunks, returned)
            or _skipped(d, chunks, returned)
        )
    return found or _sampling(done)

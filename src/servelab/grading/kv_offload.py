"""Grader topic ``kv-offload``: the four steps of notebook 06, KV tiers under the GPU.

Steps 1-2 grade one tier class (``Tier(capacity_bytes, policy)``); steps 3-4 the dict
``{"Tier", "DiskTier", "Hierarchy"}`` their grade cells pass, each class localised on its own
and the hierarchy built on the dict's tier classes. Step 3 grades the hierarchy and the disk
tier's ``_write``, which must survive a crash; step 4 the cost model against the simulator of
:mod:`servelab.kv.offload.cost`. Each probe is one realistic mistake (LMCache's issues: a pinned
chunk evicted, a referenced one freed, a torn write, a busy wait without an end); the state
machines of :mod:`servelab.testing.kv_offload` search for the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.grading.about import RESULT, About, Hint
from servelab.grading.kv_offload_answers import STEP_1_ANSWERS, STEP_3_ANSWERS
from servelab.grading.kv_offload_crash import no_torn_write, synced_before_renamed
from servelab.grading.kv_offload_edges import (
    EDGE_HINTS,
    cascade_past_a_large_victim,
    cascade_past_a_refusal,
    disk_victims_carry_kv,
    latency_per_chunk,
    payload_checked,
    payload_copied,
    store_too_large,
    victim_below,
)
from servelab.grading.kv_offload_held_use import STEP_1_HELD_USES
from servelab.grading.kv_offload_hints import HINTS, REMOVE_HOLDS
from servelab.grading.kv_offload_replay import REPLAY
from servelab.grading.kv_offload_script import OffloadScript, chunks_in_memory, misfit
from servelab.grading.kv_offload_script import hierarchy_script as _hierarchy
from servelab.grading.kv_offload_script import put_chunk as _put
from servelab.grading.kv_offload_script import store_chunk as _store
from servelab.grading.kv_offload_script import tier_script as _tier
from servelab.grading.kv_offload_values import Payload, victims
from servelab.grading.topic import MachineCheck, Probe, Step, Topic
from servelab.kv.offload.cost import (
    LLAMA_8B,
    PREFILL_FLOPS,
    Link,
    ModelShape,
    simulate_load,
    simulate_prefill,
)
from servelab.testing.kv_offload import (
    INVARIANTS,
    kv_offload_machine,
    payload_for,
)

__all__ = ["TOPIC"]


# --- step 1: one tier, can_evict --------------------------------------------------------


def _can_evict_pins_and_refs(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 10)
    s.expect(s.call("can_evict", "a"), True, "can_evict('a') of a fresh chunk")
    s.call("pin", "a")
    s.expect(s.call("can_evict", "a"), False, "can_evict('a') while pinned", "pinned")
    s.call("unpin", "a")
    s.call("ref", "a")
    s.expect(s.call("ref_count", "a"), 2, "ref_count('a') during one transfer")
    s.expect(s.call("can_evict", "a"), False, "can_evict('a') while referenced", "referenced")
    s.call("unref", "a")
    s.expect(s.call("can_evict", "a"), True, "can_evict('a') after the transfer")
    s.expect(s.call("can_evict", "zz"), False, "can_evict('zz') of an absent chunk", "absent")


def _counted_pins(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 10)
    s.call("pin", "a")
    s.call("pin", "a")
    s.call("unpin", "a")
    s.expect(s.call("can_evict", "a"), False, "can_evict('a') while a second lookup pins it")
    s.expect(s.call("pin_count", "a"), 1, "pin_count('a')")


def _remove_in_use(impl: Any, hold: str = "ref") -> None:
    s = _tier(impl, 100)
    _put(s, "a", 10)
    s.call(hold, "a")
    why, rule = REMOVE_HOLDS[hold]
    try:
        got = s.call("remove", "a")
    except RuntimeError:
        s.expect(s.keys(), ["a"], "resident keys after the refused remove")
        if hold == "ref":
            _remove_in_use(impl, "pin")
            _absent(impl, "remove")
        return
    except Exception as exc:
        raise s.fail(f"tier.remove('a') raised {type(exc).__name__}, expected ChunkInUse") from exc
    if "a" in s.keys():  # refused, but quietly: no rule about what may be freed broke
        raise s.fail(
            f"tier.remove('a') returned {got!r} and left 'a' resident; the reference raises "
            f"ChunkInUse, as {why} 'a'",
            hint=_REFUSED_RAISES,
        )
    raise s.fail(f"tier.remove('a') freed a chunk {why}", rule)


def _absent(impl: Any, method: str) -> None:
    """A chunk that is not there is not found: it is neither pinned nor read."""
    s = _tier(impl, 100)
    _put(s, "a", 10)
    try:
        got = s.call(method, "zz")
    except LookupError:
        return
    except Exception as exc:
        said = f"raised {type(exc).__name__}"
    else:
        said = f"returned {got!r}"
    raise s.fail(
        f"tier.{method}('zz') {said}; expected ChunkNotFound: 'zz' is not resident", "error-type"
    )


_REFUSED_RAISES = Hint(
    "`remove` refuses a chunk that is pinned or referenced by raising ChunkInUse (not by a "
    "return value the caller may ignore), and changes nothing",
    About(("remove",), (RESULT,)),
)  # the remove probe's hint where yours kept the chunk but did not raise


def _full_is_a_miss(impl: Any) -> None:
    s = _tier(impl, 30)
    _put(s, "a", 20)
    s.call("pin", "a")
    got = victims(_put(s, "b", 20))
    if got is not None:
        used = s("tier.used")
        over = isinstance(used, int | float) and used > 30
        stored = f"; yours stored 'b' beside it: used is {used} of 30" if over else ""
        raise s.fail(
            f"tier.put('b', ...) with 'a' pinned is {got!r}, expected None: in the reference "
            f"the pinned 'a' leaves 10 of the 30 bytes free, too few for 'b' (20), and nothing "
            f"can be evicted, so the put is a miss{stored}"
        )
    s.expect(s.keys(), ["a"], "resident keys")
    s.expect(s("tier.used"), 20, "used")


def _unpin_never_below_zero(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 10)
    s.call("pin", "a")
    s.call("unpin", "a")
    s.expect_raises((ValueError, LookupError, RuntimeError), "unpin", "a")
    s.expect_raises((ValueError, LookupError, RuntimeError), "unref", "a")
    s.expect_raises((LookupError,), "pin", "zz")
    _absent(impl, "unpin")
    _absent(impl, "unref")


def _bytes_once(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 30)
    _put(s, "b", 20)
    _put(s, "a", 30)  # already here: a use, not a second copy
    s.expect(s("tier.used"), 50, "used after storing 'a' twice")
    s.expect(s.call("get", "b"), payload_for("b", 20), "tier.get('b')")
    s.expect(s.call("get", "zz"), None, "tier.get('zz') (a miss)")


def _policy_order(impl: Any) -> None:
    for policy, want in (("LRU", ["b", "a"]), ("FIFO", ["a", "b"])):
        s = _tier(impl, 100, policy)
        _put(s, "a", 10)
        _put(s, "b", 10)
        s.call("get", "a")
        s.expect(s.keys(), want, f"{policy} order (next victim first) after get('a')", "policy")


def _counts_are_not_uses(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 10)
    _put(s, "b", 10)
    s.call("ref", "a")
    s.call("unref", "a")
    s.expect(s.keys(), ["a", "b"], "LRU order (next victim first) after ref('a'), unref('a')")


# --- step 2: allocate, evict, retry ------------------------------------------------------


def _full(impl: Any) -> OffloadScript:
    """A tier of 100 bytes holding 'a', 'b' and 'c', 30 bytes each, in that order."""
    s = _tier(impl, 100)
    for k in "abc":
        _put(s, k, 30)
    return s


def _evict_until_fits(impl: Any) -> None:
    s = _full(impl)
    s.expect(victims(_put(s, "d", 50)), ["a", "b"], "victims of put('d', 50 bytes)", "no-more")
    s.expect(s.keys(), ["c", "d"], "resident keys")
    s = _full(impl)  # 'a' alone frees exactly the 30 bytes 'd' lacks
    s.expect(victims(_put(s, "d", 40)), ["a"], "victims of put('d', 40 bytes)", "no-more")


def _skips_held(impl: Any, hold: str, why: str, rule: str) -> None:
    """'a', the first victim, is held (``hold`` is ``pin`` or ``ref``): the next two go."""
    s = _full(impl)
    s.call(hold, "a")
    s.expect(victims(_put(s, "d", 50)), ["b", "c"], f"victims with 'a' {why}", rule)


def _skips_pinned(impl: Any) -> None:
    _skips_held(impl, "pin", "pinned", "pinned")


def _skips_referenced(impl: Any) -> None:
    _skips_held(impl, "ref", "read by a transfer", "referenced")


def _decide_first(impl: Any) -> None:
    s = _full(impl)
    s.call("pin", "b")
    s.call("pin", "c")
    s.expect(victims(_put(s, "d", 80)), None, "put('d', 80 bytes) with 60 bytes pinned", "miss")
    s.expect(s.keys(), ["a", "b", "c"], "resident keys after the miss", "decide-first")


def _all_pinned(impl: Any, *pause: str) -> OffloadScript:
    """A tier of 60 bytes, full with 'a' and 'b', both pinned, and ``pause`` (lines that set
    ``tier._sleep``) as the pause of its busy wait."""
    s = _tier(impl, 60)
    _put(s, "a", 30)
    _put(s, "b", 30)
    s.call("pin", "a")
    s.call("pin", "b")
    s.run_all(pause)
    return s


#: CPU seconds a wait probe may spin before it is reported hung (its puts take milliseconds).
WAIT_SECONDS = 1.0


def _bounded_wait(impl: Any) -> None:
    # a count, not a list of pauses: a wait without an end pauses until the hang guard fires
    s = _all_pinned(
        impl, "pauses = {'n': 0}", "tier._sleep = lambda: pauses.update(n=pauses['n'] + 1)"
    )
    s.expect(victims(_put(s, "c", 30, wait=3)), None, "put('c', ..., wait=3) with all pinned")
    s.expect(s("pauses['n']"), 3, "pauses before the miss", "bounded-wait")


def _retry_looks_again(impl: Any) -> None:
    # the pause: meanwhile, a retrieve completes and unpins 'a'
    s = _all_pinned(impl, "tier._sleep = lambda: tier.pin_count('a') and tier.unpin('a')")
    got = victims(_put(s, "c", 30, wait=2))
    s.expect(got, ["a"], "victims of put('c', ..., wait=2) once 'a' was unpinned", "retry")


def _failed_write(impl: Any) -> None:
    # the victims' bytes are read and the new copy written before any victim is dropped
    s = _tier(impl, 60)
    _put(s, "a", 30)
    _put(s, "b", 30)
    s("def disk_full(key, payload): raise OSError('no space left on device')")
    s("tier._write = disk_full")
    s.expect_raises((OSError,), "put", "c", Payload("c", 40))


def _too_large(impl: Any) -> None:
    s = _tier(impl, 100)
    _put(s, "a", 30)
    s.expect_raises((ValueError,), "put", "big", Payload("big", 150))


# --- step 3: the hierarchy -----------------------------------------------------------------


def _cascade(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    for k in "abc":
        _store(s, k, 30)
    where = s.call("where", "a")
    s.expect(where, ["disk"], "h.where('a') after the CPU tier evicted it", "cascade")
    s.expect(s.call("where", "c"), ["cpu"], "h.where('c')")


def _longest_prefix(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    _store(s, "a", 30)
    _store(s, "b", 30)
    found = s.call("lookup", ["a", "x", "b"])
    s.expect([k for k, *_ in found], ["a"], "the keys h.lookup(['a', 'x', 'b']) found", "prefix")
    s.expect(s("h.tiers[0].pin_count('a')"), 1, "h.tiers[0].pin_count('a')", "prefix")
    s.expect(s("h.tiers[0].pin_count('b')"), 0, "h.tiers[0].pin_count('b')", "prefix")


def _pinned_survives_store(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    _store(s, "a", 30)
    _store(s, "b", 30)
    s("found = h.lookup(['a'])")
    _store(s, "c", 30)
    s.expect(s.call("where", "a"), ["cpu"], "h.where('a') while a lookup pins it", "pinned")


def _pins_across_retrieve(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    for k in "abc":
        _store(s, k, 30)  # 'a' goes down to disk
    s("found = h.lookup(['b', 'a', 'c'])")
    got = s("h.retrieve(found)")
    want = [payload_for(k, 30) for k in "bac"]
    s.expect(list(got or []), want, "h.retrieve(found)", "promote-pinned")
    s.expect(s.call("where", "c"), ["cpu"], "h.where('c')", "promote-pinned")
    s.expect(s.call("where", "b"), ["cpu"], "h.where('b'), pinned in cpu", "promote-pinned")


def _tiers_at_their_edges(impl: Any) -> None:
    """A chunk of the CPU tier's exact size is promoted; the victim it evicts, which the disk
    tier (full of the pinned chunk being read) cannot take, is dropped."""
    s = _hierarchy(impl, 30, 30)
    _store(s, "a", 30)
    _store(s, "b", 30)  # 'a' goes down to disk
    s("found = h.lookup(['a'])")
    s("h.retrieve(found)")
    s.expect(s.call("where", "a"), ["cpu", "disk"], "h.where('a') after its retrieve", "promote")
    s.expect(s.call("where", "b"), [], "h.where('b'): no tier below could take it", "dropped")
    big = _hierarchy(impl, 30, 120)
    big("h.tiers[1].put('z', payload('z', 40))")  # larger than the CPU tier: it stays below
    big("h.retrieve(h.lookup(['z']))")
    big.expect(big.call("where", "z"), ["disk"], "h.where('z') after its retrieve", "promote")


def _release_each_once(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    for k in "abc":
        _store(s, k, 30)  # 'a' goes down to disk
    s("first = h.lookup(['b', 'c'])")
    s("second = h.lookup(['b'])")
    kept = list(s.ns["first"])
    s("h.release(first)")
    pins = "[h.tiers[0].pin_count('b'), h.tiers[0].pin_count('c')]"
    s.expect(s(pins), [1, 0], f"{pins} after h.release(first)", "release")
    s.expect(list(s("first")), kept, "first after h.release(first)", "release-keeps")
    s("h.release(second)")
    s.expect(s(pins), [0, 0], f"{pins} after h.release(second)", "release")
    s("third = h.lookup(['a'])")
    s("h.release(third)")
    s.expect(s("h.tiers[1].pin_count('a')"), 0, "h.tiers[1].pin_count('a')", "release")
    s.expect(s.call("where", "a"), ["disk"], "h.where('a') after its release", "release")
    # a chunk found on disk, promoted meanwhile, then pinned in the cpu tier by another lookup:
    # the release of the disk find unpins the disk copy, the one it pinned
    s("fourth = h.lookup(['a'])")
    s("h.retrieve(h.lookup(['a']))")
    s("fifth = h.lookup(['a'])")
    s("h.release(fourth)")
    both = "[h.tiers[0].pin_count('a'), h.tiers[1].pin_count('a')]"
    s.expect(s(both), [1, 0], f"{both} after h.release(fourth)", "release")


def _retrieve_keeps_lru_order(impl: Any) -> None:
    """A disk read is a use there; the chunks read are promoted in the lookup's order, after
    every chunk is read: a promoted chunk ends up more recently used than a CPU hit read."""
    s = _hierarchy(impl, 60, 120)
    for k in "abcd":
        _store(s, k, 30)  # 'a' and 'b' go down to disk
    s("h.retrieve(h.lookup(['a']))")
    disk = "h.tiers[1].keys()"
    s.expect(s(disk), ["b", "a", "c"], f"{disk} after h.retrieve(h.lookup(['a']))", "read-is-use")
    s("h.retrieve(h.lookup(['b', 'c']))")
    cpu = "h.tiers[0].keys()"
    s.expect(s(cpu), ["b", "c"], f"{cpu} after h.retrieve(h.lookup(['b', 'c']))")
    s("h.retrieve(h.lookup(['a', 'b']))")  # 'a' from disk, 'b' from the CPU tier
    after = f"{cpu} after h.retrieve(h.lookup(['a', 'b']))"
    s.expect(s(cpu), ["b", "a"], after, "read-then-promote")


def _stored_since_the_lookup(impl: Any) -> None:
    """A chunk the lookup found on disk, stored into the CPU tier before its retrieve or
    release: the retrieve does not promote it again, the release unpins the disk copy."""
    s = _hierarchy(impl, 60, 120)
    for k in "abc":
        _store(s, k, 30)  # 'a' goes down to disk
    s("found = h.lookup(['a'])")
    _store(s, "a", 30)
    _store(s, "c", 30)  # a use: 'a' is the CPU tier's next victim
    s("h.retrieve(found)")
    cpu = "h.tiers[0].keys()"
    s.expect(s(cpu), ["a", "c"], f"{cpu} after h.retrieve(found)", "promote-once")
    s("found = h.lookup(['b'])")
    _store(s, "b", 30)
    s("h.release(found)")
    pins = "[h.tiers[0].pin_count('b'), h.tiers[1].pin_count('b')]"
    s.expect(s(pins), [0, 0], f"{pins} after h.release(found)", "release")


def _held_bytes_once(impl: Any) -> None:
    s = _hierarchy(impl, 60, 120)
    for k in "abc":
        _store(s, k, 30)
    s("found = h.lookup(['a'])")
    s("h.retrieve(found)")  # 'a' promoted, its disk copy kept
    got = s.call("held_bytes")  # too few bytes is no double count: then the rule alone
    rule = "held-bytes" if isinstance(got, int) and got > 90 else "held-bytes-sum"
    s.expect(got, 90, "h.held_bytes() with 'a' in both tiers", rule)


def _one_file_each(impl: Any) -> None:
    """A disk tier keeps one file per resident chunk: no temporary one, none for a chunk gone."""
    w = OffloadScript(impl, "disk = DiskTier(100)")
    got = w("path = disk._write('a', payload('a', 20))") or w.ns.get("path")
    name = repr(Path(got).name) if isinstance(got, str | Path) else repr(got)
    name += "" if isinstance(got, Path) else f" (a {type(got).__name__}, not a Path)"
    said = f"disk._write('a', ...) returned the path {name}; the chunk's file is 'a.chunk'"
    w.check(w("path == disk.path('a')") is True, said, "write-path")
    s = OffloadScript(impl, "disk = DiskTier(100)")
    files = "sorted(p.name for p in disk.root.iterdir())"
    _put(s, "a", 20)
    s.expect(s.call("get", "a"), payload_for("a", 20), "disk.get('a')")
    lines = ((None, "temp-left"), ("disk.put('b', payload('b', 90))", "file-left"))
    for line, rule in (*lines, ("disk.remove('b')", "file-left")):  # 'b' evicts 'a', then goes
        if line:
            s(line)
        got, keys = s(files), s.keys()
        s.check(len(got) == len(keys), f"{files} is {got!r} with {keys!r} resident", rule)


# --- step 4: when offload beats recompute ----------------------------------------------------


def _cost(impl: Any) -> OffloadScript:
    return _hierarchy(impl, 1000, 1000)


def _disk_link(s: OffloadScript, link: Link) -> None:
    s(f"h.links = {{**h.links, 'disk': {link!r}}}")


def _close(s: OffloadScript, code: str, want: float, rule: str) -> None:
    """``code`` (a line) must give ``want`` seconds, to 2%."""
    got = s(code)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        raise s.fail(f"{code} returned {got!r}, not a number of seconds")
    if abs(got - want) > 0.02 * want:
        raise s.fail(f"{code} is {got:.4g} s; the simulator takes {want:.4g} s", rule)


def _recompute_long(impl: Any) -> None:
    s = _cost(impl)
    for n in (256, 32_768):
        want = simulate_prefill(LLAMA_8B, 0, n, PREFILL_FLOPS)
        _close(s, f"h.recompute_seconds({n})", want, "attention")


def _load_bytes(impl: Any) -> None:
    s = _cost(impl)
    want = simulate_load(LLAMA_8B, 4096, s.obj.links["cpu"], 256)
    _close(s, "h.load_seconds(4096, 'cpu')", want, "kv-bytes")


def _own_numbers(impl: Any) -> None:
    s = _cost(impl)
    small = ModelShape(
        params=1.0e9, layers=16, d_model=2048, kv_heads=32, head_dim=64, bytes_per_value=4
    )
    s(f"h.model = {small!r}")
    s("h.flops = 100e12")
    want = simulate_prefill(small, 0, 2048, 100e12)
    _close(s, "h.recompute_seconds(2048)", want, "own-numbers")
    want = simulate_load(small, 2048, s.obj.links["disk"], 256)
    _close(s, "h.load_seconds(2048, 'disk')", want, "own-numbers")


def _worth_loading(impl: Any) -> None:
    s = _cost(impl)
    got = s.call("worth_loading", 8192, "cpu")
    s.expect(got, True, "h.worth_loading(8192, 'cpu')", "worth-loading")
    s.expect(s.call("worth_loading", 0, "cpu"), False, "h.worth_loading(0, 'cpu')", "worth-loading")
    _disk_link(s, Link("disk", 0.2e9, 1e-3))  # a network disk: 200 MB/s (a tie above: 0 s each)
    got = s.call("worth_loading", 8192, "disk")
    s.expect(got, False, "h.worth_loading(8192, 'disk')", "worth-loading")
    _disk_link(s, Link("disk", 2e9, 0.01))  # a remote store: 10 ms a request
    got = s.call("worth_loading", 65536, "disk")
    s.expect(got, False, "h.worth_loading(65536, 'disk')", "worth-loading")
    _disk_link(s, Link("disk", 5e9, 1e-5))  # 257 tokens load in 6.8 ms, 512 would take 13.4
    got = s.call("worth_loading", 257, "disk")  # the recompute takes 10.3 ms
    s.expect(got, True, "h.worth_loading(257, 'disk')", "worth-loading")
    s.expect(s.call("worth_loading", 1, "cpu"), True, "h.worth_loading(1, 'cpu')", "worth-loading")


#: Each level's rules (INVARIANTS); the grade of every step runs 1-3's too (``in_final_grade``)
LEVEL_INVARIANTS = {
    1: ("can-evict", "books", "changed-on-error", "count-returned", "error-type"),
    2: ("victims", "miss", "bounded-wait", "too-large"),
    3: ("store", "lookup", "retrieve", "held-bytes"),
    4: ("recompute", "load", "worth-loading", "store", "lookup", "retrieve", "held-bytes"),
}


def _machine(level: int) -> MachineCheck:
    return MachineCheck(
        name="state machine",
        build=lambda impl: kv_offload_machine(impl, level),
        invariants=[INVARIANTS[i] for i in LEVEL_INVARIANTS[level]],
        hints={
            "miss": HINTS["miss"],
            "bounded-wait": HINTS["bounded-wait"],
            "victims": HINTS["no-more"],
            "too-large": HINTS["too-large"],
            "changed-on-error": HINTS["changed-on-error"],
            "can-evict": HINTS["pinned"],
            "pin-refused": HINTS["pin-refused"],
            "unpin-refused": HINTS["never-below-zero"],
            "ref-refused": HINTS["ref-refused"],
            "unref-refused": HINTS["never-below-zero"],
            "remove-refused": HINTS["referenced"],
            "store": HINTS["cascade"],
            "lookup": HINTS["prefix"],
            "retrieve": HINTS["promote-pinned"],
            "held-bytes": HINTS["held-bytes-sum"],
            "recompute": HINTS["attention"],
            "load": HINTS["kv-bytes"],
            "worth-loading": HINTS["worth-loading"],
            "count-returned": HINTS["count-returned"],
            "error-type": HINTS["error-type"],
        },
        max_examples={1: 120, 2: 120, 3: 80, 4: 60}[level],
        step_count=25,
        in_final_grade=level < 4,
    )


TOPIC = Topic(
    around=chunks_in_memory,
    misfit=misfit,
    replay=REPLAY,
    checkpoint="kv_offload",
    name="kv-offload",
    title="KV offload tiers: can_evict, allocate-evict-retry, the hierarchy, the cost model",
    steps=(
        Step(
            1,
            "one tier: byte budget, policy, can_evict",
            (
                Probe(
                    "can_evict follows pins and references",
                    HINTS["pinned"],
                    _can_evict_pins_and_refs,
                ),
                Probe("two lookups pin one chunk", HINTS["counted"], _counted_pins),
                Probe(
                    "remove refuses a chunk a transfer reads", HINTS["referenced"], _remove_in_use
                ),
                Probe("no room is a miss", HINTS["miss"], _full_is_a_miss),
                Probe(
                    "counts never go below zero", HINTS["never-below-zero"], _unpin_never_below_zero
                ),
                Probe(
                    "a chunk takes its bytes once",
                    Hint(
                        "a `put` of a key already stored is a use, not a second copy",
                        About(("put",), ("keys", "used")),
                    ),
                    _bytes_once,
                ),
                Probe("LRU refreshes, FIFO does not", HINTS["policy"], _policy_order),
                Probe("a count is not a use", HINTS["count-not-use"], _counts_are_not_uses),
                Probe("a chunk is non-empty bytes", EDGE_HINTS["payload"], payload_checked),
                Probe("a put keeps its own copy", EDGE_HINTS["own-copy"], payload_copied),
                *STEP_1_HELD_USES,
                *STEP_1_ANSWERS,
            ),
            _machine(1),
        ),
        Step(
            2,
            "allocate, evict, retry",
            (
                Probe("evict in policy order until it fits", HINTS["no-more"], _evict_until_fits),
                Probe("a pinned chunk is skipped", HINTS["pinned"], _skips_pinned),
                Probe("a referenced chunk is skipped", HINTS["referenced"], _skips_referenced),
                Probe("decide before evicting", HINTS["decide-first"], _decide_first),
                Probe(
                    "the busy wait has an end",
                    HINTS["bounded-wait"],
                    _bounded_wait,
                    WAIT_SECONDS,
                ),
                Probe(
                    "a retry looks for room again",
                    HINTS["retry"],
                    _retry_looks_again,
                    WAIT_SECONDS,
                ),
                Probe("larger than the tier raises", HINTS["too-large"], _too_large),
                Probe("a failed write changes nothing", HINTS["write-first"], _failed_write),
            ),
            _machine(2),
        ),
        Step(
            3,
            "the hierarchy: cascade down, promote up",
            (
                Probe("one file per chunk", HINTS["file-left"], _one_file_each),
                Probe("store cascades down", HINTS["cascade"], _cascade),
                Probe("lookup pins the longest prefix", HINTS["prefix"], _longest_prefix),
                Probe("a pinned chunk survives a store", HINTS["pinned"], _pinned_survives_store),
                Probe(
                    "pins are held across the retrieve",
                    HINTS["promote-pinned"],
                    _pins_across_retrieve,
                ),
                Probe("a release drops its own pins", HINTS["release"], _release_each_once),
                Probe("tiers at their edges", HINTS["cascade"], _tiers_at_their_edges),
                Probe("larger than the cpu tier", EDGE_HINTS["store-too-large"], store_too_large),
                Probe(
                    "a cascade goes on past a refused victim",
                    EDGE_HINTS["cascade-on"],
                    cascade_past_a_refusal,
                ),
                Probe(
                    "a victim larger than the tier below is dropped",
                    EDGE_HINTS["victim-too-large"],
                    cascade_past_a_large_victim,
                ),
                Probe("a crash never leaves a torn chunk", HINTS["torn"], no_torn_write),
                Probe(
                    "a chunk is synced before its rename",
                    HINTS["unsynced"],
                    synced_before_renamed,
                ),
                Probe("victims keep their KV", EDGE_HINTS["victim-kv"], disk_victims_carry_kv),
                Probe("held bytes count each chunk once", HINTS["held-bytes"], _held_bytes_once),
                Probe(
                    "a retrieve keeps each tier's LRU order",
                    HINTS["promote-order"],
                    _retrieve_keeps_lru_order,
                ),
                Probe(
                    "a chunk stored again after its lookup",
                    HINTS["release"],
                    _stored_since_the_lookup,
                ),
                Probe("a victim already below", EDGE_HINTS["promote-cascade"], victim_below),
                *STEP_3_ANSWERS,
            ),
            _machine(3),
        ),
        Step(
            4,
            "when offload beats recompute",
            (
                Probe("recompute includes attention", HINTS["attention"], _recompute_long),
                Probe("a load moves K and V", HINTS["kv-bytes"], _load_bytes),
                Probe("a load where latency dominates", EDGE_HINTS["load"], latency_per_chunk),
                Probe("the hierarchy's own numbers", HINTS["own-numbers"], _own_numbers),
                Probe("worth loading, both ways", HINTS["worth-loading"], _worth_loading),
            ),
            _machine(4),
        ),
    ),
)

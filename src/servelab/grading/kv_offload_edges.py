"""kv-offload probes at the edges of what the notebook asks: a payload that is no chunk, a
chunk larger than the whole CPU tier offered to the hierarchy, a load whose latency dominates.
Each names the rule it checks only where the evidence shows that rule broken."""

from __future__ import annotations

import math
from typing import Any

from servelab.grading.about import RESULT, About, Hint
from servelab.grading.kv_offload_script import (
    OffloadScript,
    hierarchy_script,
    put_chunk,
    store_chunk,
    tier_script,
)
from servelab.grading.kv_offload_values import Payload, Shown, victims
from servelab.kv.offload.cost import LLAMA_8B, Link, simulate_load
from servelab.testing.aliasing import held_at
from servelab.testing.kv_offload import offload_fields, payload_for

__all__ = [
    "EDGE_HINTS",
    "cascade_past_a_large_victim",
    "cascade_past_a_refusal",
    "disk_victims_carry_kv",
    "latency_per_chunk",
    "payload_checked",
    "payload_copied",
    "store_too_large",
    "victim_below",
]

EDGE_HINTS: dict[str, Hint] = {
    "payload": Hint(
        "`put` sizes the payload with `self._payload_size(payload)` before anything else: a "
        "chunk is non-empty bytes, and anything else (b'', a str) raises TypeError and changes "
        "nothing",
        About(("put",), (RESULT, "keys", "used")),
    ),
    "own-copy": Hint(
        "the tier keeps its own copy of a chunk: `put` stores what `self._write(key, payload)` "
        "returns (`bytes(payload)` in memory), never the caller's object, which the caller may "
        "change after the call",
        About(("put", "_write"), (RESULT,)),
    ),
    "store-too-large": Hint(
        "a chunk larger than the whole CPU tier is refused: `store` raises ChunkTooLarge (the "
        "CPU tier's put does) and no tier changes; every chunk enters through the CPU tier",
        About(("store",), (RESULT, "keys", "used", "held_bytes")),
    ),
    "cascade-on": Hint(
        "a victim the tier below has no room for is dropped, and the cascade goes on with the "
        "next victim: each of them is put into the tier below on its own",
        About(("store", "_cascade"), ("keys", "used", "held_bytes")),
    ),
    "victim-too-large": Hint(
        "a victim larger than the whole tier below is dropped, like one it has no room for, "
        "and the cascade goes on with the next victim: the store succeeds, it does not raise",
        About(("store", "_cascade"), (RESULT, "keys", "used", "held_bytes")),
    ),
    "victim-kv": Hint(
        "`put` hands back each victim as (key, payload), its bytes read back with "
        "`self._read(key)` before the copy is discarded: for the disk tier the file's "
        "contents, not its path, so that a tier below could write them",
        About(("put",), (RESULT,)),
    ),
    "promote-cascade": Hint(
        "the CPU tier's victims of a promotion go down the same cascade as a store's "
        "(`self._cascade(1, evicted)`): a victim the tier below already holds is not put "
        "there again, so it keeps its place in that tier's order",
        About(("retrieve", "_cascade"), ("keys",)),
    ),
    "load": Hint(
        "load_seconds(tokens, tier) is ceil(tokens / chunk_tokens) · latency_s + tokens · KV "
        "bytes per token / bandwidth, over self.links[tier]",
        About(("load_seconds",)),
    ),
}


def payload_checked(impl: Any) -> None:
    """An empty payload and a str are no chunk: put raises TypeError and stores nothing."""
    s = tier_script(impl, 100)
    s.call("put", "a", Payload("a", 10))
    for bad in (b"", "abc"):
        before = offload_fields(s.obj)
        code = f"tier.put('e', {bad!r})"
        try:
            got = s(code)
        except (TypeError, ValueError):
            after = offload_fields(s.obj)
            if after != before:
                raise s.fail(f"{code} raised, but the tier changed: {before} -> {after}") from None
            continue
        except Exception as exc:
            raise s.fail(f"{code} raised {type(exc).__name__}, expected TypeError") from exc
        raise s.fail(
            f"{code} returned {got!r}; the reference raises TypeError: a chunk is non-empty "
            "bytes, and _payload_size refuses anything else before the tier changes"
        )


def payload_copied(impl: Any) -> None:
    """A bytearray the caller changes after put: the tier's chunk stays as it was put."""
    s = tier_script(impl, 100)
    s("chunk = bytearray(payload('a', 10))")
    s.call("put", "a", Shown("chunk"))
    s("chunk[0] ^= 0xFF")  # the caller reuses its buffer after the call
    got = s.call("get", "a")
    want = bytes(s("payload('a', 10)"))
    s.lines.pop()
    if got is None or bytes(got) == want:
        return
    held = held_at(s.obj, s.ns["chunk"])
    kept = f": the tier keeps the caller's object itself at `{held}`" if held else ""
    if held:
        s.note(f"tier.{held} is chunk  # True")
    raise s.fail(
        "tier.get('a') returned the bytes as the caller changed them after put('a', chunk), "
        f"not as they were put{kept}; a put keeps a copy of its own, so a caller that "
        "changes its bytearray later changes nothing in the tier"
    )


def store_too_large(impl: Any) -> None:
    """A chunk larger than the CPU tier but not the disk tier: store raises ChunkTooLarge and
    no tier changes (it is not written straight to disk, nor taken for a miss)."""
    s = hierarchy_script(impl, 60, 120)
    for k in "abc":
        store_chunk(s, k, 30)  # 'a' goes down to disk
    before = offload_fields(s.obj)
    code = "h.store('big', payload('big', 90))"
    try:
        got = s(code)
    except ValueError:
        after = offload_fields(s.obj)
        if after != before:
            changed = ", ".join(k for k in after if after[k] != before.get(k))
            raise s.fail(f"{code} raised, but it changed {changed}") from None
        return
    except Exception as exc:
        raise s.fail(f"{code} raised {type(exc).__name__}, expected ChunkTooLarge") from exc
    raise s.fail(
        f"{code} returned {got!r}; a chunk of 90 bytes is larger than the whole 60-byte cpu "
        "tier: the reference raises ChunkTooLarge and changes no tier"
    )


def cascade_past_a_refusal(impl: Any) -> None:
    """The disk tier (40 bytes) holds a pinned 30-byte chunk; a store evicts 'x' (25 bytes),
    which finds no room below, then 'y' (5 bytes), which fits: 'y' is written down."""
    s = hierarchy_script(impl, 60, 40)
    for k in "pqr":
        store_chunk(s, k, 30)  # 'p' goes down to disk
    s("found = h.lookup(['p'])")
    for k, size in (("x", 25), ("y", 5), ("z", 30)):
        store_chunk(s, k, size)  # the CPU tier holds x, y, z in that order
    store_chunk(s, "d", 30)  # evicts x and y
    got = s("h.where('y')")
    if got != ["disk"]:
        raise s.fail(
            f"h.where('y') after storing 'd' is {got!r}, expected ['disk']: 'x', the first "
            "victim, found no room in the disk tier, but 'y' fits there",
            hint=EDGE_HINTS["cascade-on"],
        )


def cascade_past_a_large_victim(impl: Any) -> None:
    """The disk tier (40 bytes) is smaller than the CPU tier's 50-byte chunk 'a'; a store that
    evicts 'a' drops it and succeeds, and the 10-byte victim 'b' behind it is written down."""
    s = hierarchy_script(impl, 60, 40)
    store_chunk(s, "a", 50)
    store_chunk(s, "b", 10)
    code = "h.store('c', payload('c', 60))"
    before = offload_fields(s.obj)
    try:
        got = s(code)
    except ValueError as exc:
        after = offload_fields(s.obj)
        changed = [k for k in after if after[k] != before.get(k)]
        half = f" after changing {', '.join(changed)}" if changed else ""
        raise s.fail(
            f"{code} raised {type(exc).__name__}{half}; the reference drops the victim 'a' "
            "(50 bytes, larger than the whole 40-byte disk tier), stores 'c' and writes 'b' down",
            hint=EDGE_HINTS["victim-too-large"],
        ) from None
    s.expect(got, True, code)
    s.expect(s.call("where", "a"), [], "h.where('a')")
    s.expect(s.call("where", "b"), ["disk"], "h.where('b')")


def disk_victims_carry_kv(impl: Any) -> None:
    """A disk tier's put that evicts hands back each victim with its bytes, as the CPU
    tier's does: (key, payload), the payload read back from the victim's file."""
    s = OffloadScript(impl, "disk = DiskTier(100)")
    put_chunk(s, "a", 40)
    put_chunk(s, "b", 40)
    got = put_chunk(s, "c", 50)
    want = [("a", payload_for("a", 40))]
    if got == want:
        return
    code = "disk.put('c', payload('c', 50))"
    pairs = isinstance(got, list) and all(type(e) is tuple and len(e) == 2 for e in got)
    if pairs and [k for k, _ in got] == ["a"]:
        kind = type(got[0][1]).__name__
        said = "another bytes" if isinstance(got[0][1], bytes) else f"a {kind}, not its bytes"
        raise s.fail(
            f"{code} handed back 'a' with {said}: a victim goes back with the payload it "
            "holds, (key, payload), which the tier below writes",
            hint=EDGE_HINTS["victim-kv"],
        )
    shown = victims(got)
    s.expect(shown, ["a"], f"the victims of {code}")
    raise s.fail(f"{code} handed back {shown!r}, expected [('a', payload('a', 40))]")


def victim_below(impl: Any) -> None:
    """A promotion evicts 'a' from the CPU tier, a chunk the disk tier holds already (a copy
    left there by an earlier promotion): the disk tier's order stays as it was."""
    s = hierarchy_script(impl, 60, 120)
    for k in "abcd":
        store_chunk(s, k, 30)  # 'a' and 'b' go down to disk
    s("h.retrieve(h.lookup(['a']))")  # 'a' promoted, its disk copy kept; 'c' goes down
    s("h.retrieve(h.lookup(['d']))")  # a use: 'a' is the CPU tier's next victim
    s("h.retrieve(h.lookup(['b']))")  # 'b' promoted: it evicts 'a'
    disk = "h.tiers[1].keys()"
    s.expect(s(disk), ["a", "c", "b"], f"{disk} after h.retrieve(h.lookup(['b']))")


def latency_per_chunk(impl: Any) -> None:
    """Over a link whose latency dominates (1 ms a request, 1 TB/s), a load of 1000 tokens
    pays 4 requests and one of 0 tokens none. The latency rule is the hint only where yours
    is off from the simulator by a whole number of latencies; else the load's whole formula."""
    s = hierarchy_script(impl, 1000, 1000)
    slow = Link("disk", 1e12, 1e-3)
    s(f"h.links = {{**h.links, 'disk': {slow!r}}}")
    for tokens in (1000, 0):
        code = f"h.load_seconds({tokens}, 'disk')"
        want = simulate_load(LLAMA_8B, tokens, slow, 256)
        got = s(code)
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise s.fail(f"{code} returned {got!r}, not a number of seconds")
        if abs(got - want) <= 0.02 * want:
            continue
        extra = (got - want) / slow.latency_s
        whole = math.isclose(extra, round(extra), abs_tol=1e-6) and round(extra) != 0
        rule = "latency" if whole else None
        said = f"{code} is {got:.4g} s; the simulator takes {want:.4g} s"
        raise s.fail(said, rule, hint=None if whole else EDGE_HINTS["load"])

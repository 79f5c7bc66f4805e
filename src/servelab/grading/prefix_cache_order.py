"""Prefix-cache probes for slips only a rare program shows: a lookup past a hit that failed
verification, a lookup that keeps an answer from before a register, a decode that names the
block it copied from or (blocks of one token) a block over the wrong parent, a plain free
block put back at or taken from the wrong end. Apart from :mod:`servelab.grading.prefix_cache`
to keep it short."""

from __future__ import annotations

from typing import Any

from servelab.grading._script import Script
from servelab.grading.prefix_cache_hints import HINTS, decode_misnamed
from servelab.grading.prefix_cache_replay import REPLAY
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def unverified_hit_ends_lookup(s: Script) -> None:
    """A hit whose stored tokens differ is a miss: the lookup stops there, as at an absent
    hash, and the blocks after it (chained over the wrong prefix) are unreachable."""
    s("chain = bm._chain([1, 2, 3, 4, 5, 6])")
    for i in range(3):
        s(f"bm._register({i}, *chain[{i}])")
    s("bm.tokens[1] = (0, 0)  # as if another block answered to this hash")
    got = s("bm._lookup([1, 2, 3, 4, 5, 6, 7])")
    s.check(
        list(got) == [0],
        f"bm._lookup([1, 2, 3, 4, 5, 6, 7]) returned {got!r}; expected [0]: block 1's stored "
        "tokens (0, 0) are not [3, 4], so it is a miss and the lookup stops there; block 2 "
        "after it follows another prefix",
    )


def decode_names_the_copy(s: Script) -> None:
    """A decode into a shared partial block writes into its copy; when that write fills the
    block, the copy (the slot's block) is the one named, not the block it was copied from."""
    s("bm = PrefixBlockManager(8, 2)")
    s("bm.allocate(0, [1])")
    s("bm.fork(0, 1)")
    s("bm.append_slot(1, 2)  # copies the shared block, then fills the copy with [1, 2]")
    shared, copy = s("bm.block_table(0)")[0], s("bm.block_table(1)")[0]
    named = [s(f"bm.block_hash({b})") is not None for b in (shared, copy)]
    said = " and ".join(
        f"block {b} {'has a hash' if n else 'none'}"
        for b, n in zip((shared, copy), named, strict=True)
    )
    s.check(
        named == [False, True],
        f"append_slot(1, 2) wrote into block {copy}, the copy of the shared partial block "
        f"{shared}, and filled it: the copy is the block cached as [1, 2]; block {shared} "
        f"still holds sequence 0's [1] and stays unhashed; yours left {said}",
    )


def plain_free_at_the_right_end(s: Script) -> None:
    """A freed block that holds no hash joins the right end of the plain free list (a queue,
    as in the block manager), behind the blocks already free."""
    s("bm = PrefixBlockManager(4, 2)")
    s("bm.allocate(0, [1])  # one partial block: never cached")
    before = list(s("bm.free_list()"))
    s("bm.free_seq(0)")
    after = list(s("bm.free_list()"))
    s.check(
        after[: len(before)] == before,
        f"free_list() went from {before} to {after}: a freed block that holds no hash joins "
        f"the right end of the plain free list, behind the blocks already free ({before})",
    )


def plain_free_from_the_left_end(s: Script) -> None:
    """A new block leaves the plain free list from its left end (a queue, as in the block
    manager): read against the implementation's own free list."""
    s("bm = PrefixBlockManager(4, 2)")
    free = list(s("bm.free_list()"))
    s("bm.allocate(0, [1])  # one partial block, taken from the plain free list")
    table = list(s("bm.block_table(0)"))
    s.check(
        table == free[:1],
        f"bm.block_table(0) is {table}; the free list was {free}: a new block leaves the "
        f"plain free list from its left end (popleft), the block free longest first "
        f"({free[:1]})",
    )


def refused_keeps_nothing(s: Script) -> None:
    """A refused allocate changes nothing: the sequence it refused keeps no tokens either (the
    skeleton's ``seq_tokens`` is the manager's own state, read as a learner reads it)."""
    from servelab.grading.block_manager import expect_error

    s("bm = PrefixBlockManager(2, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    expect_error(s, "bm.allocate(1, [4, 5, 6])", "OutOfBlocks", "exception-safety")
    kept = s("sorted(bm.seq_tokens)")
    if kept != [0]:
        raise s.fail(
            f"`bm.allocate(1, [4, 5, 6])` raised OutOfBlocks, yet seq_tokens keeps tokens for "
            f"sequences {kept}: sequence 1 was refused, so nothing of it is kept",
            hint="a refused allocate changes nothing: test the room before recording the "
            "sequence's tokens, claiming hits or taking blocks",
        )


def lookup_sees_registers(impl: Any) -> None:
    """A lookup reads ``map`` as it is at the call: a block cached since an earlier lookup of
    the same prompt is found by the next one. Where it is not, the same calls are run on a
    fresh object without the earlier lookups: if that one finds it, the earlier lookup is what
    changed the answer."""
    s = Script.graded(REPLAY, impl, HINTS)
    s("bm = PrefixBlockManager(8, 2)")
    s("chain = bm._chain([1, 2, 3, 4, 5])")
    said = [_looked_up(s)]
    s.check(list(said[0]) == [], f"bm._lookup([1, 2, 3, 4, 5]) returned {said[0]!r}; expected []")
    for i in range(2):
        s(f"bm._register({i}, *chain[{i}])")
        got = _looked_up(s)
        if list(got) != list(range(i + 1)):
            raise s.fail(
                f"bm._lookup([1, 2, 3, 4, 5]) returned {got!r}; expected {list(range(i + 1))}: "
                f"bm._register({i}, *chain[{i}]) made block {i} cached (in map, findable by its "
                f"hash), so the lookup after it finds it{_kept_answer(s.ns['bm'], i, got, said)}"
            )
        said.append(got)


def _looked_up(s: Script) -> list[Any] | tuple[Any, ...]:
    """``bm._lookup([1, 2, 3, 4, 5])``, failing plainly where it is no list of block ids."""
    got = s("bm._lookup([1, 2, 3, 4, 5])")
    if not isinstance(got, list | tuple):
        raise s.fail(
            f"bm._lookup([1, 2, 3, 4, 5]) returned {got!r}; expected a list of block ids",
            hint="`_lookup` returns a list: the cached blocks that continue the prompt, [] "
            "when there are none",
        )
    return got


def _kept_answer(bm: Any, i: int, got: Any, said: list[Any]) -> str:
    """Where yours repeats an answer it gave before block ``i`` was cached, and a fresh object
    given the same registers and no lookup finds the block: that, as a sentence; else ""."""
    if all(list(got) != list(old) for old in said):
        return ""
    try:
        with line_budget(LINES_PER_CALL):
            fresh = type(bm)(8, 2)
            chain = fresh._chain([1, 2, 3, 4, 5])
            for b in range(i + 1):
                fresh._register(b, *chain[b])
            found = list(fresh._lookup([1, 2, 3, 4, 5]))
    except (Exception, OutOfLines):
        return ""
    if found != list(range(i + 1)):
        return ""
    return (
        f". Yours answered {list(got)}, as it did for the same prompt before block {i} was "
        f"cached; a fresh object given the same `_register` calls and no earlier lookup "
        f"answers {found}: the earlier lookup changed this one's answer"
    )


def cached_since_asked(impl: Any) -> None:
    """The same rule through the public calls: a prompt asked about before it was cached is
    found once it is."""
    s = Script.graded(REPLAY, impl, HINTS)
    s("bm = PrefixBlockManager(8, 2)")
    s("bm.num_cached_tokens([1, 2, 3])")
    s("bm.allocate(0, [1, 2, 3])")
    got = s("bm.num_cached_tokens([1, 2, 3])")
    s.check(
        got == 2,
        f"bm.num_cached_tokens([1, 2, 3]) returned {got}, expected 2: allocate(0, [1, 2, 3]) "
        "cached its full block [1, 2] since the first call, and a lookup reads the cache as it "
        "is at the call",
    )


def decode_one_token_blocks(impl: Any) -> None:
    """With blocks of one token, a decode's slot opens a new block and fills it at once: the
    block is named over its parent, the block before it in the table (the table as it is once
    the slot is reserved)."""
    s = Script.graded(REPLAY, impl, HINTS)
    s("bm = PrefixBlockManager(8, 1)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.append_slot(0, 4)  # opens a new block and fills it with [4]")
    hint = decode_misnamed(s.ns["bm"], 0, [1, 2, 3, 4])
    got = s("bm.allocate(1, [1, 2, 3, 4, 5])")
    if got != 4:
        raise s.fail(
            f"bm.allocate(1, [1, 2, 3, 4, 5]) returned {got}, expected 4: with blocks of one "
            "token, append_slot(0, 4) opens a block and fills it at once; in the reference it "
            "is cached as [4] over its parent [3], and all four blocks hit",
            hint=hint,
        )

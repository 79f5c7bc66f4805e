"""Slips whose place only one program shows (a lookup that changes the cache at a hit that
fails its check, a decode that registers its block wrongly, a refusal of a prompt that fits
once evictable blocks count, a free list refilled by id), each graded end to end at its own
step; and look-alikes that meet a reading's condition without its cause, which the reading
does not name."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.diagnose import topic_hook
from servelab.grading.localise import localise
from unlisted import unlisted

ROOT = 0


def _report(topic: str, name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report(topic, slip.impl, slip.step)[0].text


def test_a_lookup_that_forgets_a_mismatched_hit_is_caught_at_step_1() -> None:
    report = _report("prefix-cache", "a lookup forgets a mismatched hit")
    assert "✗ step 1 · a hit is checked against the stored tokens" in report
    assert "bm._lookup([1, 2, 3, 4, 5]) changed block 1's entry" in report
    assert "where: the difference starts in your `_lookup`" in report
    assert "a lookup only reads" in report.split("hint:")[1]


def test_a_decode_that_swaps_hash_and_tokens_is_told_so() -> None:
    report = _report("prefix-cache", "a decode registers hash and tokens swapped")
    hint = report.split("hint:")[1]
    assert "passed block 2's hash and tokens to `_register` in the wrong order" in hint
    assert "hash((parent's hash" not in hint


class _DecodeHashedByTokens(checkpoint("prefix-cache", 2)):  # type: ignore[misc]
    """Look-alike: the filled block's hash is its token tuple, passed in the right order (its
    hash equals its tokens, but its stored tokens are right): no argument order is wrong."""

    def append_slot(self, seq, token_id):  # type: ignore[no-untyped-def]
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            block_tokens = tuple(tokens[-self.block_size :])
            self._register(slot.block, block_tokens, block_tokens)
        return slot


def test_a_decode_hashed_by_its_tokens_is_not_told_the_arguments_are_swapped() -> None:
    report = failing_report("prefix-cache", _DecodeHashedByTokens, 2)[0].text
    assert "in the wrong order" not in report
    assert "stored block" not in report


def test_a_decode_that_slices_its_tokens_early_is_told_what_it_stored() -> None:
    report = _report("prefix-cache", "a decode slices its tokens early")
    hint = report.split("hint:")[1]
    assert "yours stored block 2's tokens as (4, 5), but decoding filled it with (5, 6)" in hint
    assert "wrong order" not in hint
    assert "under the right hash" not in hint


class _DecodeStoresAList(checkpoint("prefix-cache", 2)):  # type: ignore[misc]
    """The filled block is hashed right but registered with its tokens as a list."""

    def append_slot(self, seq, token_id):  # type: ignore[no-untyped-def]
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tokens[-self.block_size :]
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            self._register(slot.block, hash((parent, tuple(block_tokens))), block_tokens)
        return slot


def test_a_decode_that_stores_a_list_is_told_what_it_stored_not_a_hash() -> None:
    hint = failing_report("prefix-cache", _DecodeStoresAList, 2)[0].text.split("hint:")[1]
    assert "under the right hash but stored its tokens as [5, 6], not (5, 6)" in hint
    assert "wrong order" not in hint and "hash((parent's hash" not in hint


def test_a_prompt_refused_for_want_of_plain_free_blocks_is_told_it_fits() -> None:
    report = _report("prefix-cache", "room from the plain free list")
    hint = report.split("hint:")[1]
    assert "yours refused sequence 1, which fits: it has no hit and needs 2 new blocks" in hint
    assert "num_free is 2 (its evictable blocks count too)" in hint
    assert "in `free` where" not in hint


def test_blocks_freed_by_descending_id_are_placed_in_free_seq() -> None:
    report = _report("block-manager", "blocks freed by descending id")
    assert "where: the difference starts in your `free_seq`" in report
    assert "no one method" not in report
    assert "in another order" in report.split("hint:")[1]


def test_a_difference_only_an_order_shows_is_found_in_the_call_that_made_it() -> None:
    # the state the rules key on holds a free list as its count: every call agrees there, and
    # only the last line reads the order; the fields as the learner reads them find the call
    slip = next(u for u in unlisted() if u.name == "blocks freed by descending id")
    hook = topic_hook("block-manager")
    assert hook is not None
    program = "\n".join(
        [
            "bm = BlockManager(2, 1)",
            "bm.allocate(0, 1)",
            "bm.free_seq(0)",
            "bm.allocate(0, 2)",
            "bm.free_seq(0)",
            "list(bm.free_list())",
        ]
    )
    reference = checkpoint("block-manager", 1)
    place = localise(hook.skeleton, program, slip.impl, reference)
    assert place.methods == ("free_seq",)
    assert place.divergence is not None and place.divergence.call == "bm.free_seq(0)"
    assert place.divergence.mine[1]["free"] == [1, 0]
    assert place.divergence.theirs[1]["free"] == [0, 1]
    assert localise(hook.skeleton, program, reference, reference).divergence is None

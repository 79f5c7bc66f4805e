"""A lookup that verifies its first hit only, one that takes a hit only while a table holds it,
an allocate that answers the prompt less its new blocks' slots or names them from the hits'
end, and a decode that names a block only after a hashed parent are named, each on its replay,
on the real slip graded end to end; a look-alike whose replay differs gets no such sentence."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab.grading import GradeFailure, grade
from servelab.grading.mistakes.prefix_cache import decode_never_cached, hit_not_verified
from unlisted import prefix, prefix_verify


def _hint(impl: Any, step: int) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("prefix-cache", impl, step)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


def test_a_lookup_that_verifies_its_first_hit_only_is_named() -> None:
    hint = _hint(prefix_verify.LookupVerifiesTheFirstHit, 1)
    assert "yours checks the stored tokens of the first hit and not the second" in hint
    assert "stops at once when that hit is the prompt's first block" in hint


def test_a_lookup_that_verifies_no_hit_is_not_said_to_verify_the_first() -> None:
    hint = _hint(hit_not_verified.Buggy, 1)
    assert "stored tokens of the first hit" not in hint


def test_a_lookup_that_skips_unheld_blocks_is_named() -> None:
    hint = _hint(prefix_verify.LookupSkipsUnheld, 3)
    assert "yours takes a hit only while a table holds it" in hint


def test_a_lookup_that_misses_for_another_reason_is_not_said_to_read_the_refcount() -> None:
    hint = _hint(prefix.LookupComparesSlices, 1)
    assert "while a table holds it" not in hint


def test_an_allocate_answering_the_prompt_less_its_new_slots_is_named() -> None:
    hint = _hint(prefix_verify.CachedTokensLessNewSlots, 2)
    assert "yours returned -2 for a prompt of 10 tokens with 0 cached blocks" in hint
    assert "len(hits) * block_size = 0" in hint


def test_an_allocate_answering_blocks_is_not_said_to_subtract_slots() -> None:
    hint = _hint(prefix.AllocateAnswersBlocks, 2)
    assert "less the" not in hint


def test_new_blocks_named_by_a_chain_of_the_tokens_after_the_hits_are_named() -> None:
    hint = _hint(prefix_verify.ChainOfTheRest, 2)
    assert "by the chain of the tokens after the 1 hit block alone ([1])" in hint
    assert "that hash already names block 1" in hint


def test_new_blocks_paired_with_the_chain_from_its_end_are_not_said_to_restart_it() -> None:
    hint = _hint(prefix.HashesPairedFromTheEnd, 2)
    assert "started again from ROOT" not in hint


def test_a_decode_that_names_a_block_only_after_a_hashed_parent_is_named() -> None:
    hint = _hint(prefix_verify.DecodeNamesAfterHashedParent, 2)
    assert "yours names a filled block only after a hashed parent" in hint


def test_a_decode_that_never_names_a_block_is_not_said_to_need_a_hashed_parent() -> None:
    hint = _hint(decode_never_cached.Buggy, 2)
    assert "only after a hashed parent" not in hint

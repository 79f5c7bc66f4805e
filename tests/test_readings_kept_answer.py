"""A call that answers from a dict of the learner's own, kept from an earlier call, is told so
where taking that one entry out of a copy makes it answer as the reference does, whatever the
topic; a dict that holds the same value but does not give the answer is not blamed."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

KEPT = "since an earlier call: with that entry taken out, on a copy, yours answers"


def _hint(topic: str, impl: Any, step: int) -> str:
    report, _ = failing_report(topic, impl, step)
    return str(report.hint)


class _FitsKeptPerCount(checkpoint("scheduler", 1)):  # type: ignore[misc]
    """Keeps fits' answer per token count and answers from it once the pool has changed."""

    def fits(self, n_tokens: int) -> bool:
        seen = self.__dict__.setdefault("_seen", {})
        if n_tokens not in seen:
            seen[n_tokens] = super().fits(n_tokens)
        return bool(seen[n_tokens])


class _LookupKeptPerPrompt(checkpoint("prefix-cache", 1)):  # type: ignore[misc]
    """Keeps each prompt's hits and answers them again after more blocks were cached."""

    def _lookup(self, tokens: list[int]) -> list[int]:
        kept = self.__dict__.setdefault("_answers", {})
        if tuple(tokens) not in kept:
            kept[tuple(tokens)] = super()._lookup(tokens)
        return list(kept[tuple(tokens)])


class _FitsNotedNotUsed(checkpoint("scheduler", 1)):  # type: ignore[misc]
    """Notes each answer in a dict it never reads, and refuses at one block short: the dict
    holds what it answered, yet taking an entry out changes nothing."""

    def fits(self, n_tokens: int) -> bool:
        said = self.bm.num_free - self.blocks_needed(n_tokens) > self.watermark
        self.__dict__.setdefault("_noted", {})[n_tokens] = said
        return said


def test_a_fits_kept_per_count_is_named() -> None:
    said = _hint("scheduler", _FitsKeptPerCount, 1)
    assert "yours answered True from `_seen`" in said and KEPT in said


def test_a_lookup_kept_per_prompt_is_named() -> None:
    said = _hint("prefix-cache", _LookupKeptPerPrompt, 1)
    assert "from `_answers`" in said and KEPT in said


def test_a_dict_that_only_notes_the_answer_is_not_blamed() -> None:
    assert KEPT not in _hint("scheduler", _FitsNotedNotUsed, 1)

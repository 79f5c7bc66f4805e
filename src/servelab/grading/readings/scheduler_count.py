"""Readings of a scheduler's ``fits`` that counts its blocks or its margin wrong: probed again
from the state of the diverging call, on copies."""

from __future__ import annotations

import copy

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def count_off(d: Difference) -> str | None:
    """A ``fits`` that admits ``n`` tokens and refuses ``n + 1`` needing as many blocks (either
    side of the call's own ``n``): the block count is off, not the comparison with the
    watermark."""
    n = d.args[0] if d.args else None
    size = getattr(getattr(d.subject, "bm", None), "block_size", None)
    said = d.returned("mine")
    if said not in ("False", "True") or not isinstance(n, int) or not isinstance(size, int):
        return None
    # refused: the one below is admitted; admitted: the one above is refused (n, n + 1)
    low, high = (n - 1, n) if said == "False" else (n, n + 1)
    blocks = -(-high // size) if size > 0 else 0
    if low < 1 or size < 1 or blocks != -(-low // size):
        return None
    if d.probe("fits", low) != ("returned", True) or d.probe("fits", high) != ("returned", False):
        return None
    return (
        f"yours admits {low} tokens but refuses {high}, which need the same {blocks} blocks: "
        "a request of n tokens needs ceil(n / block_size) blocks, the blocks of the tokens "
        "fits is asked about and no more"
    )


def one_block_off(d: Difference) -> str | None:
    """Your ``fits``, asked again from the same state, refuses the fewest and the most tokens
    of the call's blocks and admits the most tokens of a block fewer, and does so at another
    watermark too: it counts in blocks and refuses where exactly the watermark is left (what
    > where >= belongs does, and a block too many counted as well: which one, the answers
    cannot tell)."""
    n = d.args[0] if d.args else None
    size = getattr(getattr(d.subject, "bm", None), "block_size", 0)
    if not isinstance(n, int) or not isinstance(size, int) or size < 1:
        return None
    blocks = -(-n // size)
    if blocks < 1:
        return None
    low, high, fewer = (blocks - 1) * size + 1, blocks * size, (blocks - 1) * size
    if d.probe("fits", low) != ("returned", False) or d.probe("fits", high) != ("returned", False):
        return None
    if d.probe("fits", fewer) != ("returned", True) or not _early_at_another_watermark(d, size):
        return None
    said = (
        f"yours refuses every request of {blocks} block(s) here (n_tokens {low} to {high}) and "
        f"admits one of {blocks - 1} block(s) ({fewer} tokens): it refuses "
        "where num_free - needed == watermark, one block early"
    )
    if _admits_with_none_running(d, high):
        said += (
            f", and only while something runs: on a copy with running emptied and the same "
            f"{d.before.get('num_free')} blocks free, yours admits {high} tokens; what runs "
            "takes no part in the test"
        )
    return said


def _admits_with_none_running(d: Difference, n: int) -> bool:
    """Your ``fits(n)``, asked again on a copy whose ``running`` is emptied (no block freed:
    the pool is the same), admits: the block early is kept only while something runs."""
    running = getattr(d.subject, "running", None)
    if not running or not hasattr(running, "clear"):
        return False
    try:
        obj = copy.deepcopy(d.subject)
        obj.running.clear()
        with line_budget(LINES_PER_CALL):
            return obj.fits(n) is True
    except (Exception, OutOfLines):
        return False


def _early_at_another_watermark(d: Difference, size: int) -> bool:
    """Your ``fits`` on a copy whose watermark leaves room for 3 blocks (num_free - 3) admits
    the most tokens of 2 blocks and refuses one token more: the same line a block early, in
    blocks. A count of tokens read as blocks (num_free - n_tokens) meets the first state's
    answers by chance, not these (2 * block_size tokens are more than 2)."""
    free = d.before.get("num_free")
    if not isinstance(free, int) or size < 2:
        return False
    answers = []
    for n in (2 * size, 2 * size + 1):
        try:
            obj = copy.deepcopy(d.subject)
            obj.watermark = free - 3
            with line_budget(LINES_PER_CALL):
                answers.append(obj.fits(n))
        except (Exception, OutOfLines):
            return False
    return answers == [True, False]

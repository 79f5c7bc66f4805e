"""Reuses an evictable block without dropping its hash, and trusts the hash on a hit."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "stale"
LIKE = "reuses an evictable block without dropping its stale hash, and trusts the hash on a hit"


class Buggy(Correct):
    def _forget(self, b: int) -> None:
        pass  # the block keeps its old hash and its map entry

    def _lookup(self, tokens: list[int]) -> list[int]:
        hits = []
        for h, _tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            b = self.map.get(h)
            if b is None:  # no check of the stored tokens
                break
            hits.append(b)
        return hits

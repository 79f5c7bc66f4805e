"""A hit shares the cached block without raising its refcount."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "refcount"
LIKE = "shares a cached block on a hit without raising its refcount"


class Buggy(Correct):
    def allocate(self, seq, token_ids):
        hits = self._lookup(list(token_ids))
        cached = super().allocate(seq, token_ids)
        for b in hits:
            self.ref[b] -= 1
        return cached

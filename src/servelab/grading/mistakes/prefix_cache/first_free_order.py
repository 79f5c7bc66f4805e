"""Freed cached blocks keep the place of the first time they were freed; a hit does not take them
off the list."""

from collections import OrderedDict

from servelab.grading.mistakes.prefix_cache import Correct
from servelab.kv.blocks import OutOfBlocks

HINT = "last time"
LIKE = "orders freed cached blocks by the first time they were freed, not the last time"


class Buggy(Correct):
    def allocate(self, seq, token_ids):
        saved = dict(self.evictable_lru)
        cached = super().allocate(seq, token_ids)
        for b in saved:  # hits stay listed, in their old place
            if b not in self.evictable_lru and self.ref[b] > 0:
                self.evictable_lru[b] = None
        order = [b for b in saved if b in self.evictable_lru]
        order += [b for b in self.evictable_lru if b not in saved]
        self.evictable_lru = OrderedDict((b, None) for b in order)
        return cached

    def _release(self, b):
        self.ref[b] -= 1
        if self.ref[b] == 0:
            if self.hash[b] is not None:
                self.evictable_lru.setdefault(b, None)
            else:
                self.free.append(b)

    def _alloc(self):
        if self.free:
            b = self.free.popleft()
        else:
            b = next((b for b in self.evictable_lru if self.ref[b] == 0), None)
            if b is None:
                raise OutOfBlocks("no free block")
            del self.evictable_lru[b]
            self._forget(b)
        self.ref[b] = 1
        return b

    @property
    def num_free(self):
        return len(self.free) + len(self.evictable())

    def evictable(self):
        return [b for b in self.evictable_lru if self.ref[b] == 0]

    def free_list(self):
        return [*self.free, *self.evictable()]

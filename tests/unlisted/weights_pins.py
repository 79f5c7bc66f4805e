"""Weight-cache slips of step 3's victim rule where no key is a victim: every resident entry
pinned. Step 4's admission check keeps every later put from asking, so only a call of
`_next_victim` itself shows them."""

import servelab

TOPIC = "weight-cache"
Pinning = servelab.checkpoint(TOPIC, 3)


class VictimFallsBackToOldest(Pinning):
    """With every key pinned it returns the least recently used key, pinned or not."""

    def _next_victim(self):
        for key in self._entries:
            if not self._pins.get(key):
                return key
        return next(iter(self._entries), None)


class VictimNextWithoutDefault(Pinning):
    """`next(...)` with no default: with every key pinned it raises StopIteration."""

    def _next_victim(self):
        return next(k for k in self._entries if not self._pins.get(k))


MISTAKES = {
    "no victim falls back to the oldest": (3, VictimFallsBackToOldest, {"_next_victim"}),
    "no victim raises StopIteration": (3, VictimNextWithoutDefault, {"_next_victim"}),
}

"""Weight-cache slips, each on the notebook's own classes."""

from servelab import checkpoint

TOPIC = "weight-cache"
Sized = checkpoint(TOPIC, 1)
Evicting = checkpoint(TOPIC, 2)
Pinning = checkpoint(TOPIC, 3)
Checked = checkpoint(TOPIC, 4)
Final = checkpoint(TOPIC, 5)


class ReplaceKeepsOldSize(Evicting):
    """A replacement updates `used` but keeps the old size: a later eviction frees too little."""

    def put(self, key, value, size):
        if key in self._entries:
            old, _ = self._entries[key]
            self._entries[key] = (old, value)
            self._entries.move_to_end(key)
            self._used += size - old
            return
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size


class VictimSkipsOldest(Pinning):
    """Off by one: the scan for a victim starts at the second entry."""

    def _next_victim(self):
        keys = list(self._entries)
        for key in keys[1:] + keys[:1]:
            if not self._pins.get(key):
                return key
        return None


class PinThenCheck(Checked):
    """Records the pin, then finds the key absent and raises: the pin count stays."""

    def pin(self, key):
        count = PinningCacheLike.pin(self, key)
        if key not in self._entries:
            raise KeyError(key)
        return count


class PinningCacheLike:
    @staticmethod
    def pin(cache, key):
        cache._pins[key] = cache._pins.get(key, 0) + 1
        return cache._pins[key]


class HitOnEveryGet(Final):
    """Counts a hit before looking: a miss is counted as both."""

    def get(self, key):
        self.hits += 1
        if key not in self._entries:
            self.misses += 1
        return Checked.get(self, key)


class EvictedBytesOfNewest(Final):
    """Adds the newest entry's size to `evicted_bytes`, not the victim's."""

    def _evict(self, key):
        self.evictions += 1
        newest = next(reversed(self._entries))
        self.evicted_bytes += self._entries[newest][0]
        Checked._evict(self, key)


class UnpinReturnsOldCount(Pinning):
    """unpin() returns the count it found, not the pins left: the last unpin returns 1."""

    def unpin(self, key):
        count = self._pins[key]
        if count > 1:
            self._pins[key] = count - 1
        else:
            del self._pins[key]
        return count


class ReplaceEvictsWhileOldCounts(Evicting):
    """A replacement runs the eviction loop first and drops the old entry only afterwards, so
    the old bytes still count while it evicts (and the old entry may be evicted itself)."""

    def put(self, key, value, size):
        while self._used + size > self.capacity and self._entries:
            self._evict(self._next_victim())
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        self._entries[key] = (size, value)
        self._used += size


class EvictReadsAfterRemoving(Final):
    """Removes the victim first and only then reads its size for `evicted_bytes`."""

    def _evict(self, key):
        self.evictions += 1
        Checked._evict(self, key)
        self.evicted_bytes += self.size_of(key)


class PinOnlyCandidates(Checked):
    """Looks for the key among the unpinned ones (`eviction_order()`): a second pin of a
    resident key raises KeyError."""

    def pin(self, key):
        if key not in self.eviction_order():
            raise KeyError(f"cannot pin {key!r}: it is not in the cache")
        return super(Checked, self).pin(key)


class ReplaceRestoresOldSize(Final):
    """Replaces through `super().put` (so `used` is right), then writes the entry back with the
    size it had: a later eviction frees the old size."""

    def put(self, key, value, size):
        old = self._entries[key][0] if key in self._entries else None
        super().put(key, value, size)
        if old is not None:
            self._entries[key] = (old, value)


class EmptyValueReadAsMiss(Sized):
    """Tests the stored value, not the key: an entry whose value is empty (b"", 0, None) is
    answered as a miss and is not refreshed."""

    def get(self, key):
        entry = self._entries.get(key)
        if not entry or not entry[1]:
            return None
        self._entries.move_to_end(key)
        return entry[1]


class EvictDropsPinFirst(Final):
    """Forgets the victim's pins first, with a lookup that fails: the victim is never pinned."""

    def _evict(self, key):
        del self._pins[key]
        super()._evict(key)


class EvictSubtractsTwice(Evicting):
    """Subtracts the victim's size from `used` twice."""

    def _evict(self, key):
        size, _ = self._entries.pop(key)
        self._used -= 2 * size


class EvictionCountedTwiceForOldest(Final):
    """Counts the eviction once more when the victim is the oldest entry."""

    def _evict(self, key):
        if key == next(iter(self._entries)):
            self.evictions += 1
        super()._evict(key)


class EvictPopsOldest(Pinning):
    """Pops the oldest entry, not the key it was given: a pinned oldest entry goes."""

    def _evict(self, key):
        size, _ = self._entries.popitem(last=False)[1]
        self._used -= size


class EvictedBytesAssigned(Final):
    """Sets `evicted_bytes` to the victim's size instead of adding it."""

    def _evict(self, key):
        self.evictions += 1
        self.evicted_bytes = self._entries[key][0]
        Checked._evict(self, key)


class ScanStopsAtPinned(Pinning):
    """The victim scan gives up at the first pinned entry and returns None."""

    def _next_victim(self):
        for key in self._entries:
            return None if self._pins.get(key) else key
        return None


class LastUnpinDropsEntry(Pinning):
    """The last unpin deletes the entry from the cache, not only its pins."""

    def unpin(self, key):
        left = super().unpin(key)
        if not left:
            size, _ = self._entries.pop(key)
            self._used -= size
        return left


class EvictKeepsLast(Evicting):
    """The eviction loop stops before the last entry left: a large put overfills the cache."""

    def put(self, key, value, size):
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity and len(self._entries) > 1:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size


class PinsOfItsOwn(Pinning):
    """Pins kept in a dict of the learner's own (``self.pins``) by pin, unpin and the victim
    choice: eviction skips pinned keys, but the skeleton's ``_pins`` (pin_count, the
    eviction order) never sees a pin."""

    def pin(self, key):
        pins = self.__dict__.setdefault("pins", {})
        pins[key] = pins.get(key, 0) + 1
        return pins[key]

    def unpin(self, key):
        pins = self.__dict__.setdefault("pins", {})
        left = pins[key] - 1
        if left:
            pins[key] = left
        else:
            del pins[key]
        return left

    def _next_victim(self):
        pins = self.__dict__.get("pins", {})
        return next((key for key in self._entries if not pins.get(key)), None)


class HeadroomTenth(Evicting):
    """Step 2, put: keeps a tenth of the capacity free: evicts while used + size exceeds 90%
    of it (a margin, not `>=`: a put one byte smaller still evicts)."""

    def put(self, key, value, size):
        if key in self._entries:
            old, _ = self._entries.pop(key)
            self._used -= old
        while self._entries and self._used + size > 0.9 * self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size


class DoubleBufferedLoad(Evicting):
    """Step 2, put: makes room for twice the new entry (a staging copy while it loads): it
    counts bytes, not entries, yet evicts where the entry fits."""

    def put(self, key, value, size):
        if key in self._entries:
            old, _ = self._entries.pop(key)
            self._used -= old
        while self._entries and self._used + 2 * size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size


class EvictedBytesAddsFree(Final):
    """Step 5, _evict: adds the bytes free after the eviction to `evicted_bytes` (the room it
    thinks it made), not the victim's size: one eviction, counted once, by another number."""

    def _evict(self, key):
        self.evictions += 1
        Checked._evict(self, key)
        self.evicted_bytes += self.capacity - self._used


class MissCountedOnlyAfterFirstHit(Final):
    """Step 5, get: counts a miss only once some hit was counted (a cold start is no miss):
    it counts misses, not on the first get."""

    def get(self, key):
        if key in self._entries:
            self.hits += 1
        elif self.hits:
            self.misses += 1
        return Checked.get(self, key)


class EvictionsCountedInPut(Final):
    """Step 5, put: counts evictions and their bytes in put's loop, not in _evict; every put
    agrees with the reference, a direct _evict counts nothing."""

    def _evict(self, key):
        Checked._evict(self, key)

    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            victim = self._next_victim()
            self.evictions += 1
            self.evicted_bytes += self._entries[victim][0]
            self._evict(victim)
        self._entries[key] = (size, value)
        self._used += size


MISTAKES = {
    "evict forgets pins with a failing lookup": (5, EvictDropsPinFirst, {"_evict"}),
    "evict subtracts the size twice": (2, EvictSubtractsTwice, {"_evict"}),
    "eviction of the oldest counted twice": (5, EvictionCountedTwiceForOldest, {"_evict"}),
    "replace keeps the old size": (2, ReplaceKeepsOldSize, {"put"}),
    "victim scan skips the oldest": (3, VictimSkipsOldest, {"_next_victim"}),
    "pin recorded before the check": (4, PinThenCheck, {"pin"}),
    "a hit counted on every get": (5, HitOnEveryGet, {"get"}),
    "evicted bytes of the newest entry": (5, EvictedBytesOfNewest, {"_evict"}),
    "unpin returns the count it found": (3, UnpinReturnsOldCount, {"unpin"}),
    "replacement evicts while the old entry counts": (2, ReplaceEvictsWhileOldCounts, {"put"}),
    "evicted size read after removing": (5, EvictReadsAfterRemoving, {"_evict"}),
    "a second pin of a resident key refused": (4, PinOnlyCandidates, {"pin"}),
    "replacement restores the old size": (5, ReplaceRestoresOldSize, {"put"}),
    "an empty value read as a miss": (1, EmptyValueReadAsMiss, {"get"}),
    "evict pops the oldest, not its key": (3, EvictPopsOldest, {"_evict"}),
    "evicted bytes assigned, not added": (5, EvictedBytesAssigned, {"_evict"}),
    "victim scan stops at a pinned entry": (3, ScanStopsAtPinned, {"_next_victim"}),
    "the last unpin drops the entry": (3, LastUnpinDropsEntry, {"unpin"}),
    "eviction loop keeps the last entry": (2, EvictKeepsLast, {"put"}),
    "pins kept in a dict of its own": (3, PinsOfItsOwn, {"pin", "unpin", "_next_victim"}),
    "a tenth of the capacity kept free": (2, HeadroomTenth, {"put"}),
    "room made for twice the new entry": (2, DoubleBufferedLoad, {"put"}),
    "evicted bytes of the free room after": (5, EvictedBytesAddsFree, {"_evict"}),
    "misses counted once a hit came": (5, MissCountedOnlyAfterFirstHit, {"get"}),
    "evictions counted in put": (5, EvictionsCountedInPut, {"put", "_evict"}),
}

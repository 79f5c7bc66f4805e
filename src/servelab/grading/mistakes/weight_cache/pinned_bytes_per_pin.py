"""The pinned bytes are summed once per pin, so a key two replicas pin counts twice."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import PinnedCapacityExceeded

HINT = "once per pin"
LIKE = (
    "adds a pinned key's size once per pin when it sums the pinned bytes; a key pinned twice "
    "still holds its bytes once"
)


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        super()._check_can_admit(key, size)
        pinned = [k for k in self._entries if self._pins.get(k)]
        held = sum(self._entries[k][0] * self._pins[k] for k in pinned)
        if size > self.capacity - held:
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: pinned {pinned}")

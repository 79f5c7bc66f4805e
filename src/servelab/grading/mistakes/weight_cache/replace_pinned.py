"""put() of a pinned key swaps its bytes under the replicas reading them."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "replace a pinned key"
LIKE = (
    "lets put() replace a pinned key's bytes under the replicas that read them; "
    "replace a pinned key only after unpinning it"
)


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        pins = self._pins.pop(key, 0)
        try:
            super()._check_can_admit(key, size)
        finally:
            if pins:
                self._pins[key] = pins

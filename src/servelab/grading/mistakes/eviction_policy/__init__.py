"""Known mistakes of topic `eviction-policy`, one module per mistake, each built on ``Correct``."""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("eviction-policy")
"""The last step's checkpoint: the notebook's own solution, which every mistake changes."""
LFU = Correct["LFU"]
SIEVE = Correct["SIEVE"]

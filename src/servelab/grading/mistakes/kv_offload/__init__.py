"""Known mistakes of topic `kv-offload`, one module per mistake, each built on ``Correct``."""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("kv-offload")
"""The last step's checkpoint: the notebook's tier, disk tier and hierarchy classes."""

"""Known mistakes of topic `block-manager`, one module per mistake, each built on ``Correct``."""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("block-manager")
"""The last step's checkpoint: the notebook's own solution, which every mistake changes."""

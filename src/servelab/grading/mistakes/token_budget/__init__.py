"""Known mistakes of topic `token-budget`, one module per mistake, each built on ``Correct``."""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("token-budget")
"""The last step's checkpoint: the notebook's own solution, which every mistake changes."""

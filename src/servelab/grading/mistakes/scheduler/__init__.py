"""Known mistakes of topic `scheduler`, one module per mistake, each built on ``Correct``."""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("scheduler")
"""The last step's checkpoint: the notebook's own solution, which every mistake changes."""

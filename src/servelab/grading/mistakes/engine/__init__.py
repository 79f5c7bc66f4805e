"""Known mistakes of topic `engine`, one module per mistake, each built on ``Correct``.

Each corrupts KV only when a real model runs: the block manager's and the scheduler's own
graders see tables, refcounts and queues, never the keys and values in the slots.
"""

from servelab.grading.mistakes import correct_impl

Correct = correct_impl("engine")
"""The checkpoint of notebook 09: its ``execute`` over the checkpoints of notebooks 05 and 04."""

BlockManager = Correct.block_manager_class
Scheduler = Correct.scheduler_class

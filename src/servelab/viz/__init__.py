"""Pictures of the course's structures: pure renderers (state -> SVG) and widgets over them.

A renderer takes a learner's own object (or a plain snapshot dict) and returns SVG text, so
the picture shows in JupyterLab, static exports and on GitHub alike; the widgets only add
stepping and replay on top.
"""

from servelab.viz.blocks import BlockStepper, render_blocks, show_blocks
from servelab.viz.tiers import TierReplay, render_tiers, show_tiers
from servelab.viz.timeline import TimelineReplay, render_timeline
from servelab.viz.weights import (
    CacheReplay,
    CacheSnapshot,
    SnapshotError,
    render_cache,
    show_cache,
    snapshot,
)

__all__ = [
    "BlockStepper",
    "CacheReplay",
    "CacheSnapshot",
    "SnapshotError",
    "TierReplay",
    "TimelineReplay",
    "render_blocks",
    "render_cache",
    "render_tiers",
    "render_timeline",
    "show_blocks",
    "show_cache",
    "show_tiers",
    "snapshot",
]

"""nbval settings for the course notebooks (``pytest --nbval-lax exercises/``, or ``solutions/``).

At the repository root, where pytest finds it for any folder below, so the learner's
``exercises/`` folder holds only notebooks.
"""

from typing import Any


def pytest_collectstart(collector: Any) -> None:
    """Never compare stderr: kernel and library warnings are noise, not part of a lesson."""
    path = getattr(collector, "path", None)
    if path is not None and path.suffix == ".ipynb" and hasattr(collector, "skip_compare"):
        collector.skip_compare += ("stderr",)

"""How the course's notebook files are named: an exercise and its worked solution.

The solution of ``exercises/01_weight_cache.ipynb`` is
``solutions/01_weight_cache_solution.ipynb``. JupyterLab titles a tab by its file name, so a
presenter with both open, or a learner comparing their work with the solution, tells the two
tabs apart.
"""

from __future__ import annotations

__all__ = ["SOLUTION_SUFFIX", "exercise_name", "solution_name"]

SOLUTION_SUFFIX = "_solution"
_NOTEBOOK = ".ipynb"


def solution_name(exercise: str) -> str:
    """``01_weight_cache.ipynb`` -> ``01_weight_cache_solution.ipynb``."""
    if not exercise.endswith(_NOTEBOOK):
        raise ValueError(f"not a notebook file name: {exercise!r}")
    return exercise.removesuffix(_NOTEBOOK) + SOLUTION_SUFFIX + _NOTEBOOK


def exercise_name(solution: str) -> str:
    """``01_weight_cache_solution.ipynb`` -> ``01_weight_cache.ipynb``."""
    if not solution.endswith(SOLUTION_SUFFIX + _NOTEBOOK):
        expected = f"NN_topic{SOLUTION_SUFFIX}{_NOTEBOOK}"
        raise ValueError(f"a solution notebook is named {expected}: {solution!r}")
    return solution.removesuffix(SOLUTION_SUFFIX + _NOTEBOOK) + _NOTEBOOK

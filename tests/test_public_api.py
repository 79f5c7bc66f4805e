"""The package's front door: every error a course-half call can raise is importable from it."""

from __future__ import annotations

import importlib
import inspect

import pytest

import servelab

COURSE_MODULES = [
    "servelab.kv.block_hash",
    "servelab.kv.blocks",
    "servelab.kv.prefix",
    "servelab.kv.scheduler",
    "servelab.weights.cache",
    "servelab.weights.policies",
]


@pytest.mark.parametrize("module_name", COURSE_MODULES)
def test_every_error_of_the_course_half_is_exported(module_name: str) -> None:
    module = importlib.import_module(module_name)
    errors = {
        name
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module_name
    }
    assert errors, f"{module_name} defines no error"
    missing = sorted(e for e in errors if getattr(servelab, e, None) is not vars(module)[e])
    assert not missing, f"not importable from servelab: {missing}"
    assert errors <= set(servelab.__all__)


def test_everything_in_all_is_there() -> None:
    for name in servelab.__all__:
        assert hasattr(servelab, name), name

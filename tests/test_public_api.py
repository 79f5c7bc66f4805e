"""The package's front door: every error a course-half call can raise is importable from it."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import servelab

COURSE_MODULES = [
    "servelab.kv.block_hash",
    "servelab.kv.blocks",
    "servelab.kv.ledger",
    "servelab.kv.prefix",
    "servelab.kv.scheduler_contract",
    "servelab.weights.cache",
    "servelab.weights.policies",
]


def _errors_defined_in(module_name: str) -> dict[str, type[Exception]]:
    """The errors a module defines; for a package, those of every module in it."""
    module = importlib.import_module(module_name)
    names = [module_name]
    if hasattr(module, "__path__"):
        names += [info.name for info in pkgutil.walk_packages(module.__path__, f"{module_name}.")]
    errors: dict[str, type[Exception]] = {}
    for name in names:
        for attr, obj in vars(importlib.import_module(name)).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == name:
                errors[attr] = obj
    return errors


@pytest.mark.parametrize("module_name", COURSE_MODULES)
def test_every_error_of_the_course_half_is_exported(module_name: str) -> None:
    errors = _errors_defined_in(module_name)
    assert errors, f"{module_name} defines no error"
    missing = sorted(e for e, cls in errors.items() if getattr(servelab, e, None) is not cls)
    assert not missing, f"not importable from servelab: {missing}"
    assert set(errors) <= set(servelab.__all__)


def test_everything_in_all_is_there() -> None:
    for name in servelab.__all__:
        assert hasattr(servelab, name), name


def test_the_policies_package_answers_to_the_old_module_paths() -> None:
    """``servelab.weights.policies`` was one module: what was pickled from it still loads."""
    policies = importlib.import_module("servelab.weights.policies")
    for name in [*policies.__all__, "unit_cost", "_ParkingQueue", "_Returned"]:
        assert pickle.loads(f"cservelab.weights.policies\n{name}\n.".encode()) is getattr(
            policies, name
        )


def test_every_offload_error_is_exported_from_servelab_kv() -> None:
    import servelab.kv

    errors = _errors_defined_in("servelab.kv.offload.errors")
    assert errors
    missing = sorted(e for e, cls in errors.items() if getattr(servelab.kv, e, None) is not cls)
    assert not missing, f"not importable from servelab.kv: {missing}"
    assert set(errors) <= set(servelab.kv.__all__)

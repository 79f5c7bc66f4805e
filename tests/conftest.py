"""Test-wide settings: Hypothesis profiles and the GPU marker."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from servelab.testing.core import without_local_constants

# Triton decides when it is first imported whether its own library functions (tl.zeros, tl.sum)
# run in its interpreter. Without a GPU they must, and torch's FlexAttention may import triton
# first: so say it before any test imports anything (notebook 08's setup cell does the same).
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# `dev` is the learner's default: fast feedback. `thorough` is what CI runs (`make test` picks it
# when CI is set). Neither is named `ci`, so Hypothesis's built-in CI profile never interferes.
settings.register_profile(
    "dev",
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _generation_independent_of_import_history() -> Iterator[None]:
    """Derandomized runs give the same examples whatever ran before (see the helper)."""
    with without_local_constants():
        yield


try:  # tiny tensors: one thread is much faster than several fighting over two cores
    import torch

    torch.set_num_threads(1)
except ImportError:
    pass


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker("gpu") for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs CUDA")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)

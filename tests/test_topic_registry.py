"""One registry lists the topics; everything else about a topic is read from its module."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import servelab.grading as grading
from servelab.checkpoints import checkpoint_topics
from servelab.grading import load_topic, topics
from servelab.grading.diagnose import SPECS
from servelab.grading.mistakes import CORRECT
from servelab.grading.registry import TOPICS, checkpoint_module

GRADING = Path(grading.__file__).parent


def _declares_a_topic(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "TOPIC"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in tree.body
    )


def test_every_module_that_declares_a_topic_is_registered() -> None:
    declared = {p.stem.replace("_", "-") for p in GRADING.glob("*.py") if _declares_a_topic(p)}
    assert declared == set(TOPICS), "register each topic module in servelab.grading.registry"
    assert topics() == sorted(TOPICS)


@pytest.mark.parametrize("name", TOPICS)
def test_each_topic_declares_its_name_replay_and_checkpoint(name: str) -> None:
    topic = load_topic(name)
    assert topic.name == name
    assert (name in SPECS) == (topic.replay is not None)
    assert (name in CORRECT) == (topic.replay is not None)
    assert (name in checkpoint_topics()) == (topic.checkpoint is not None)
    assert checkpoint_module(name) == topic.checkpoint
    if topic.replay is not None:
        assert SPECS[name] is topic.replay
        assert topic.replay.fields is not None and topic.replay.subject


def test_checkpoints_follow_the_course_order_of_the_registry() -> None:
    assert checkpoint_topics() == [t for t in TOPICS if load_topic(t).checkpoint is not None]


@pytest.mark.parametrize("bad", ["cli", "core", "weight_cache", "no-such-topic", "../core"])
def test_only_registered_names_load(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown topic"):
        load_topic(bad)


#: The catalogued topics a learner grades in JupyterLite, where neither torch nor Triton loads.
LIGHT = [t for t in CORRECT if t not in ("paged-kernel", "engine")]

_LOADS_NOTHING_HEAVY = """
import os, sys
from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.mistakes import mistakes
topic = sys.argv[1]
checkpoint(topic, 1)
try:
    grade(topic, mistakes(topic)[0].impl, quiet=True)
except GradeFailure:
    pass
else:
    raise SystemExit(f"{mistakes(topic)[0].name} passed")
heavy = sorted(m for m in ("torch", "triton") if m in sys.modules)
assert not heavy, f"loaded {heavy}"
assert "TRITON_INTERPRET" not in os.environ, "set TRITON_INTERPRET"
"""


@pytest.mark.parametrize("name", LIGHT)
def test_a_checkpoint_and_a_failing_grade_load_neither_torch_nor_triton(name: str) -> None:
    """A grade (diagnosis included) loads only its own topic: the capstone's grader imports
    torch and the kernel's sets TRITON_INTERPRET, which JupyterLite cannot afford."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # conftest sets it
    run = subprocess.run(
        [sys.executable, "-c", _LOADS_NOTHING_HEAVY, name],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-2000:] or run.stdout[-2000:]

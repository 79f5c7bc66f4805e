"""One registry lists the topics; everything else about a topic is read from its module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import servelab.grading as grading
from servelab.checkpoints import checkpoint_topics
from servelab.grading import load_topic, topics
from servelab.grading.diagnose import SPECS
from servelab.grading.mistakes import CORRECT
from servelab.grading.registry import TOPICS

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
    if topic.replay is not None:
        assert SPECS[name] is topic.replay
        assert topic.replay.fields is not None and topic.replay.subject


def test_checkpoints_follow_the_course_order_of_the_registry() -> None:
    assert checkpoint_topics() == [t for t in TOPICS if load_topic(t).checkpoint is not None]


@pytest.mark.parametrize("bad", ["cli", "core", "weight_cache", "no-such-topic", "../core"])
def test_only_registered_names_load(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown topic"):
        load_topic(bad)

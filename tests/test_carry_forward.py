"""``servelab.mine``: a later notebook gets the learner's class from the earlier notebook file,
or the checkpoint, announced in one line, when that notebook fails, is unfinished or missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from servelab import carry_forward
from servelab.carry_forward import UnknownTopic, carry, mine, stand_in
from servelab.checkpoints import checkpoint
from servelab.course_files import solution_name

ROOT = Path(__file__).resolve().parent.parent
NB03 = "03_block_manager.ipynb"


@pytest.fixture(autouse=True)
def _forget() -> None:
    carry_forward._REMEMBERED.clear()


def _copy(folder: str, name: str, to: Path) -> Path:
    """The notebook ``name`` of ``folder`` (its solution, for ``solutions``) as ``to / name``."""
    target = to / name
    shutil.copy(ROOT / folder / (solution_name(name) if folder == "solutions" else name), target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` once in the code of the notebook's cells (as a learner's edit would)."""
    notebook = nbformat.read(path, as_version=4)
    hits = [c for c in notebook.cells if c.cell_type == "code" and old in c.source]
    assert len(hits) == 1, f"{old!r} is in {len(hits)} cells"
    hits[0].source = hits[0].source.replace(old, new, 1)
    nbformat.write(notebook, path)


def test_a_passing_notebook_gives_its_own_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _copy("solutions", NB03, tmp_path)
    monkeypatch.chdir(tmp_path)
    BlockManager = mine("block-manager")
    assert (
        capsys.readouterr().out == "using your BlockManager from notebook 03 (all 4 steps pass)\n"
    )
    assert BlockManager is not stand_in("block-manager")
    assert BlockManager.__module__ == "servelab_notebook_03"
    bm = BlockManager(4, 2)
    bm.allocate(0, 3)
    assert bm.block_table(0) == [0, 1]


def test_a_solution_notebook_finds_the_earlier_solution_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``solutions/04_scheduler_solution.ipynb`` builds on ``03_block_manager_solution.ipynb``."""
    shutil.copy(ROOT / "solutions" / solution_name(NB03), tmp_path / solution_name(NB03))
    monkeypatch.chdir(tmp_path)
    BlockManager = mine("block-manager")
    assert (
        capsys.readouterr().out == "using your BlockManager from notebook 03 (all 4 steps pass)\n"
    )
    assert BlockManager.__module__ == "servelab_notebook_03"


def test_a_buggy_notebook_is_replaced_by_the_checkpoint_with_its_failing_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy("solutions", NB03, tmp_path)
    # The step-1 release never returns a block to the free list.
    _edit(path, "            self.free.append(block)\n", "            pass\n")
    monkeypatch.chdir(tmp_path)
    value = mine("block-manager")
    assert value is stand_in("block-manager")
    line = capsys.readouterr().out
    assert line.startswith(
        "using the checkpoint BlockManager: yours in notebook 03, as saved, fails step 1 · "
    ), line
    assert line.count("\n") == 1


def test_an_unwritten_exercise_is_replaced_and_said_to_be_unfinished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _copy("exercises", NB03, tmp_path)
    monkeypatch.chdir(tmp_path)
    assert mine("block-manager") is stand_in("block-manager")
    assert capsys.readouterr().out == (
        "using the checkpoint BlockManager: yours in notebook 03 is not finished "
        "(step 1: `allocate` is not written yet)\n"
    )


def test_a_missing_notebook_is_replaced_and_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert mine("block-manager") is stand_in("block-manager")
    assert capsys.readouterr().out == (
        "using the checkpoint BlockManager: no 03_block_manager.ipynb beside this notebook or "
        'in exercises/ (pass path="…/03_block_manager.ipynb" to use yours)\n'
    )
    assert not carry("block-manager", path=tmp_path / "nowhere.ipynb").yours


def test_the_notebook_is_found_in_exercises_beside_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "exercises").mkdir()
    _copy("solutions", NB03, tmp_path / "exercises")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert carry("block-manager").yours
    monkeypatch.chdir(tmp_path)
    assert carry("block-manager").yours


def test_a_renamed_class_is_followed_through_its_grade_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _copy("solutions", NB03, tmp_path)
    _edit(path, "class BlockManager(ForkingManager):", "class MyManager(ForkingManager):")
    _edit(
        path,
        'grade("block-manager", BlockManager, step=4)',
        'grade("block-manager", MyManager, step=4)',
    )
    monkeypatch.chdir(tmp_path)
    carried = carry("block-manager")
    assert carried.yours and carried.value.__name__ == "MyManager"
    assert carried.line == "using your MyManager from notebook 03 (all 4 steps pass)"


def test_demo_statements_do_not_run_and_a_broken_definition_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _copy("solutions", NB03, tmp_path)
    # A demo line in a class cell would fail if it ran.
    _edit(
        path,
        "class GrowingManager(AllocatingManager):",
        "1 / 0\nclass GrowingManager(AllocatingManager):",
    )
    monkeypatch.chdir(tmp_path)
    assert carry("block-manager").yours
    _edit(path, "class GrowingManager(AllocatingManager):", "class GrowingManager(Missing):")
    carry_forward._REMEMBERED.clear()
    carried = carry("block-manager")
    assert not carried.yours
    assert "raised NameError: name 'Missing' is not defined" in carried.line


def test_the_policies_of_notebook_02_come_as_the_dict_its_last_grade_cell_grades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy("solutions", "02_eviction_policies.ipynb", tmp_path)
    monkeypatch.chdir(tmp_path)
    carried = carry("eviction-policy")
    assert carried.yours, carried.line
    assert sorted(carried.value) == sorted(stand_in("eviction-policy"))


def test_an_unknown_topic_is_a_typed_error() -> None:
    with pytest.raises(UnknownTopic, match="no earlier notebook finishes topic 'kv'"):
        mine("kv")
    with pytest.raises(UnknownTopic):
        stand_in("kv")


def test_the_stand_in_is_the_last_checkpoint() -> None:
    assert stand_in("block-manager") is checkpoint("block-manager", step=4)
    assert stand_in("weight-cache") is checkpoint("weight-cache", step=5)


def test_a_half_written_notebook_file_is_replaced_and_said_to_be_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / NB03).write_text('{"cells": [', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    carried = carry("block-manager")
    assert not carried.yours
    assert carried.line == (
        "using the checkpoint BlockManager: notebook 03 cannot be read (JSONDecodeError)"
    )


def test_the_carried_topics_are_registered_topics_each_with_the_notebook_of_its_checkpoint() -> (
    None
):
    """``CARRIED_TOPICS`` chooses which topics a later notebook builds on; everything else about
    them comes from the registry: the course order, and the notebook their checkpoint is
    generated from."""
    import importlib

    from servelab.course_files import solution_name
    from servelab.grading.registry import TOPICS, checkpoint_module

    carried = carry_forward.CARRIED_TOPICS
    assert list(carried) == [t for t in TOPICS if t in carried]
    for topic, notebook in carried.items():
        module = importlib.import_module(f"servelab.checkpoints.{checkpoint_module(topic)}")
        generated_from = f"Generated from solutions/{solution_name(notebook)} by"
        assert generated_from in (module.__doc__ or ""), topic

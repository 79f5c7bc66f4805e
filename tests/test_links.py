"""tools/links.py: the Binder and Colab links name one repository, set by ``make links``."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("links", ROOT / "tools" / "links.py")
assert _spec is not None and _spec.loader is not None
links = importlib.util.module_from_spec(_spec)
sys.modules["links"] = links
_spec.loader.exec_module(links)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files that name the repository, copied (the checkout itself is never rewritten)."""
    for path in links.files(ROOT):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return tmp_path


def _texts(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in links.files(root)
    }


def test_the_links_name_one_repository() -> None:
    where = links.named(ROOT)
    assert len(where) == 1, where
    paths = next(iter(where.values()))
    assert "docs/WORKSHOP.md" in paths  # the Binder and Colab badges
    for folder in ("solutions", "exercises"):  # each notebook's Colab setup cell
        for notebook in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb")):
            assert f"{folder}/{notebook.name}" in paths, f"{notebook} names no repository"


def test_setting_the_repository_rewrites_only_the_repository(copy: Path) -> None:
    before = _texts(copy)
    old = links.current(copy)
    assert links.main(["--root", str(copy), "https://github.com/course-org/serve.lab.git"]) == 0
    after = _texts(copy)
    assert links.current(copy) == "course-org/serve.lab"
    guide = after["docs/WORKSHOP.md"]
    assert "mybinder.org/v2/gh/course-org/serve.lab/HEAD?" in guide
    assert "colab.research.google.com/github/course-org/serve.lab/blob/" in guide
    notebook = after["exercises/01_weight_cache.ipynb"]
    assert 'servelab @ git+https://github.com/course-org/serve.lab\\"' in notebook
    for name, text in before.items():
        assert after[name] == text.replace(f"/{old}", "/course-org/serve.lab"), name
    # and back: byte for byte what it was
    assert links.main(["--root", str(copy), old]) == 0
    assert _texts(copy) == before


def test_make_links_prints_and_sets_the_repository(copy: Path) -> None:
    shown = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "links.py"), "--root", str(copy)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout.split()[0] == links.current(ROOT)
    set_ = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "links.py"), "--root", str(copy), "acme/course"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "the links name acme/course" in set_.stdout
    assert links.current(copy) == "acme/course"


@pytest.mark.parametrize(
    "repo", ["servelab", "a/b/c", "org/name with space", "-org/name", "org/..", "http://x.org/a/b"]
)
def test_a_repository_that_is_not_org_slash_name_is_refused(copy: Path, repo: str) -> None:
    before = _texts(copy)
    with pytest.raises(links.LinkError, match="org/name"):
        links.set_repo(copy, repo)
    assert _texts(copy) == before


def test_links_that_disagree_are_reported_not_rewritten(copy: Path) -> None:
    guide = copy / "docs" / "WORKSHOP.md"
    guide.write_text(
        guide.read_text(encoding="utf-8").replace(f"gh/{links.current(ROOT)}/", "gh/someone/else/"),
        encoding="utf-8",
    )
    before = _texts(copy)
    with pytest.raises(links.LinkError, match=r"someone/else: docs/WORKSHOP\.md"):
        links.current(copy)
    assert links.main(["--root", str(copy), "acme/course"]) == 1
    assert _texts(copy) == before

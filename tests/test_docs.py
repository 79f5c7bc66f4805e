"""The README and the pages in ``docs/`` point at things that exist.

The README is short and sends readers to ``docs/``; a moved page, a renamed script or a removed
``make`` target would leave a reader with a dead end. This checks every relative link, every
``make <target>`` and every repository script a page names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
MAKE = re.compile(r"`make ([a-z][a-z-]*)")
SCRIPT = re.compile(r"\b((?:benchmarks|tools|tests)/[\w/]+\.(?:py|sh))\b")


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z-]*):", text, flags=re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (page.parent / target).exists():
            broken.append(target)
    assert not broken, f"{page.name} links to missing files: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_make_target_and_script_named_exists(page: Path) -> None:
    text = page.read_text()
    missing_targets = sorted(set(MAKE.findall(text)) - make_targets())
    missing_scripts = sorted({s for s in SCRIPT.findall(text) if not (ROOT / s).exists()})
    assert not missing_targets, f"{page.name} names missing make targets: {missing_targets}"
    assert not missing_scripts, f"{page.name} names missing scripts: {missing_scripts}"


def test_the_readme_stays_a_front_page() -> None:
    """What a newcomer needs, and links to the rest: the manual lives in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for page in ("docs/GRADING.md", "docs/REFERENCE.md", "docs/PERFORMANCE.md", "docs/WORKSHOP.md"):
        assert f"({page})" in readme, f"the README does not link {page}"


GUIDE = ROOT / "notebooks" / "reading_the_real_code.ipynb"
PINS = ("bb823b3e06983d71485a8e1f23715ebd87d98ef8", "v0.34.0")  # nano-vllm commit, vLLM tag
GUIDE_TOPICS = {"03": "block-manager", "04": "scheduler", "05": "prefix-cache"}


def guide_text() -> str:
    import nbformat

    return "\n".join(cell.source for cell in nbformat.read(GUIDE, as_version=4).cells)


def test_the_guide_names_methods_the_learner_wrote() -> None:
    """Each row of the guide starts with a method of the notebook's finished class."""
    from servelab import checkpoint
    from servelab.checkpoints import checkpoint_topics

    rows = re.findall(r"^\| `(\w+)` · (\d\d)", guide_text(), flags=re.M)
    assert len(rows) >= 12
    missing = []
    for method, notebook in rows:
        topic = GUIDE_TOPICS[notebook]
        assert topic in checkpoint_topics()
        module = __import__(f"servelab.checkpoints.{topic.replace('-', '_')}", fromlist=["STEPS"])
        finished = checkpoint(topic, max(module.STEPS))
        if not hasattr(finished, method):
            missing.append(f"{method} ({notebook})")
    assert not missing, f"the guide names methods the notebooks no longer have: {missing}"


def test_the_guide_links_pinned_versions() -> None:
    """Line numbers only stay right on a commit or a tag, never on a moving branch."""
    links = re.findall(r"https://github\.com/[^)\s]+", guide_text())
    assert links
    for link in links:
        assert "/blob/main/" not in link and "/tree/main/" not in link, link
        assert any(f"/blob/{pin}/" in link for pin in PINS), link

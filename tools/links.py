"""Point the course's Binder and Colab links at the GitHub repository it is published under.

The repository is one setting, written in every place that names it: the Binder and Colab
badges of the guides (``mybinder.org/v2/gh/ORG/NAME/...``,
``colab.research.google.com/github/ORG/NAME/...``) and the Colab setup cell of each notebook
(``%pip install "servelab @ git+https://github.com/ORG/NAME"``). Until the course is published
it is the placeholder ``OWNER/servelab``. Set it once::

    make links REPO=org/name             # python3 tools/links.py org/name
    make links                           # prints the repository the links name now

Every link must name the same repository; a file that names another one is an error (fix it by
hand, or set the repository again). Notebooks are rewritten as text, so nothing but the
repository changes in them, and ``exercises/`` stays in step with ``solutions/``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "OWNER/servelab"
# the files that name the repository, relative to the repository root
FILES = (
    "README.md",
    "docs/*.md",
    "binder/*",
    "solutions/*.ipynb",
    "exercises/*.ipynb",
    "notebooks/*.ipynb",
)
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_NAME = r"[A-Za-z0-9._-]+?"
_END = r"(?=\.git\b|[/\"'\\@#?\s)\]]|$)"  # where the repository's name ends in a link
LINKS = (
    re.compile(rf"(mybinder\.org/v2/gh/)({_OWNER}/{_NAME}){_END}"),
    re.compile(rf"(colab\.research\.google\.com/github/)({_OWNER}/{_NAME}){_END}"),
    re.compile(rf"(git\+https://github\.com/)({_OWNER}/{_NAME}){_END}"),
)
_REPO = re.compile(rf"{_OWNER}/[A-Za-z0-9._-]+")


class LinkError(ValueError):
    """The links disagree, or the repository given is not ``org/name``."""


def files(root: Path) -> list[Path]:
    found = {path for pattern in FILES for path in root.glob(pattern) if path.is_file()}
    return sorted(found)


def named(root: Path) -> dict[str, list[str]]:
    """Every repository the links name, with the files (relative paths) that name it."""
    where: dict[str, list[str]] = {}
    for path in files(root):
        text = path.read_text(encoding="utf-8")
        for repo in sorted({m[2] for link in LINKS for m in link.finditer(text)}):
            where.setdefault(repo, []).append(path.relative_to(root).as_posix())
    return where


def current(root: Path) -> str:
    """The one repository the links name; LinkError when they name several, or none."""
    where = named(root)
    if len(where) != 1:
        listing = "; ".join(f"{repo}: {', '.join(paths)}" for repo, paths in where.items())
        raise LinkError(
            f"the links must name one repository, they name {len(where)}: {listing or '-'}"
        )
    return next(iter(where))


def normalize(repo: str) -> str:
    """``org/name`` from ``org/name``, ``https://github.com/org/name(.git)``; else LinkError."""
    slug = re.sub(r"^(https?://)?(www\.)?github\.com/", "", repo.strip()).removesuffix("/")
    slug = slug.removesuffix(".git")
    if not _REPO.fullmatch(slug) or slug.split("/")[1] in (".", ".."):
        raise LinkError(f"REPO must be a GitHub repository as org/name, got {repo!r}")
    return slug


def set_repo(root: Path, repo: str) -> list[Path]:
    """Make every link name ``repo``; returns the files changed."""
    new = normalize(repo)
    current(root)  # the links agree before anything is rewritten
    changed = []
    for path in files(root):
        text = path.read_text(encoding="utf-8")
        rewritten = text
        for link in LINKS:
            rewritten = link.sub(lambda m: m[1] + new, rewritten)
        if rewritten != text:
            path.write_text(rewritten, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", nargs="?", help="org/name on GitHub; omitted: print the current")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.repo is None:
            repo = current(args.root)
            note = " (the placeholder: make links REPO=org/name)" if repo == PLACEHOLDER else ""
            print(f"{repo}{note}")
            return 0
        changed = set_repo(args.root, args.repo)
    except LinkError as error:
        print(f"links: {error}", file=sys.stderr)
        return 1
    _report(args.root, changed, normalize(args.repo))
    return 0


def _report(root: Path, changed: Iterable[Path], repo: str) -> None:
    names = [path.relative_to(root).as_posix() for path in changed]
    print(f"the links name {repo}; rewrote {len(names)} file(s){': ' if names else ''}", end="")
    print(", ".join(names))


if __name__ == "__main__":
    sys.exit(main())

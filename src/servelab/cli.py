"""Command line: ``servelab grade``, ``servelab progress``, ``servelab topics``, ``servelab demo``.

``python -m servelab grade weight-cache --impl my_cache.py:WeightCache --step 3`` grades a class
from a file exactly as a notebook grade cell does, and exits 0 only when every check passes.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["load_impl", "main"]


class ImplNotFound(ValueError):
    """``--impl`` does not name a loadable ``file.py:Name``."""


def load_impl(spec: str) -> Any:
    """Load ``path/to/file.py:Name`` (the file's folder is importable while it loads)."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise ImplNotFound(f"--impl must look like path/to/file.py:ClassName, got {spec!r}")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise ImplNotFound(f"no such file: {path_text}")
    module_spec = importlib.util.spec_from_file_location(f"_servelab_impl_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ImplNotFound(f"cannot import {path_text}")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent))
    try:
        module_spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImplNotFound(f"{path_text} defines no {name!r}") from None


def _grade(args: argparse.Namespace) -> int:
    from servelab.grading import GradeFailure, grade

    try:
        impl = load_impl(args.impl)
        grade(args.topic, impl, step=args.step)
    except GradeFailure:
        return 1
    except NotImplementedError as exc:
        print(f"not implemented yet: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _progress(args: argparse.Namespace) -> int:
    from servelab.progress import main as progress_main

    return progress_main(
        [Path(p) for p in args.paths],
        json_path=Path(args.json) if args.json else None,
        protect=Path(args.protect) if args.protect else None,
        timeout=args.timeout,
    )


def _topics(args: argparse.Namespace) -> int:
    from servelab.grading import load_topic, topics

    for name in topics():
        topic = load_topic(name)
        print(f"{name}: {topic.title}")
        for step in topic.steps:
            print(f"  step {step.number}: {step.title}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from servelab.demo import main as demo_main

    code: int = demo_main(list(args.rest))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade an implementation from a file")
    g.add_argument("topic", help="e.g. weight-cache, block-manager, scheduler")
    g.add_argument("--impl", required=True, help="path/to/file.py:ClassName")
    g.add_argument("--step", type=int, default=None, help="grade steps 1..N (default: all)")
    g.set_defaults(run=_grade)

    p = sub.add_parser(
        "progress", help="run exercise notebooks headless and tabulate every grade cell"
    )
    p.add_argument("paths", nargs="*", default=["exercises"], help="notebooks or folders")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument(
        "--protect",
        metavar="SOLUTIONS",
        nargs="?",
        const="solutions",
        help="first overwrite each grade cell with the solution notebook's (matched by cell id)",
    )
    p.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    p.set_defaults(run=_progress)

    t = sub.add_parser("topics", help="list the graded topics and their steps")
    t.set_defaults(run=_topics)

    d = sub.add_parser("demo", help="serve the tiny model through the paged KV cache")
    d.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the demo")
    d.set_defaults(run=_demo)

    args, extra = parser.parse_known_args(argv)
    if args.command == "demo":
        args.rest = [*args.rest, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    code: int = args.run(args)
    return code

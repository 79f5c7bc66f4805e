"""Command line: ``servelab grade``, ``servelab progress``, ``servelab topics``, ``servelab demo``.

``python -m servelab grade weight-cache --impl my_cache.py:WeightCache --step 3`` grades a class
from a file exactly as a notebook grade cell does, and exits 0 only when every check passes.

It grades in a child process under a hard timeout (``--timeout``): the in-process hang guard
stops loops written in Python, but not one inside a single C call (``sum(range(10**12))``), and
the learner's code could end the process itself (``os._exit(0)``). The parent trusts only the
verdict the child writes after :func:`~servelab.grading.grade` has returned or raised, so
anything else is a failure. Exit codes: 0 passed, 1 failed or not finished, 2 a usage error,
130 interrupted by Ctrl-C (one line, no traceback: the child runs in a session of its own, so
only this process sees a terminal's Ctrl-C, stops the child and says so).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 120.0

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
    if args.in_process:
        return _grade_here(args)
    return _grade_in_child(args)


def _interrupted(args: argparse.Namespace) -> str:
    """What :class:`~servelab.grading.GradeInterrupted` says, without importing the graders."""
    where = f" step {args.step}" if args.step is not None else ""
    return f"{args.topic}{where}: grade interrupted; nothing was graded"


def _grade_here(args: argparse.Namespace) -> int:
    """Grade in this process; write the verdict last, so a child that dies leaves none."""
    from servelab.grading import GradeFailure, grade

    verdict, code = "error", 2
    try:
        impl = load_impl(args.impl)
        grade(args.topic, impl, step=args.step)
        verdict, code = "passed", 0
    except GradeFailure as failure:
        verdict, code = failure.report.verdict, 1
    except KeyboardInterrupt:  # GradeInterrupted, or a Ctrl-C while the learner's file loads
        print(_interrupted(args))
        return 130
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
    sys.stdout.flush()
    if args.verdict:
        Path(args.verdict).write_text(verdict, encoding="utf-8")
    return code


def _grade_in_child(args: argparse.Namespace) -> int:
    where = f"{args.topic}" + (f" · step {args.step}" if args.step is not None else "")
    with tempfile.TemporaryDirectory(prefix="servelab-grade-") as folder:
        verdict_file = Path(folder) / "verdict"
        command = [sys.executable, "-m", "servelab", "grade", args.topic, "--impl", args.impl]
        if args.step is not None:
            command += ["--step", str(args.step)]
        command += ["--in-process", "--verdict", str(verdict_file)]
        child = subprocess.Popen(command, start_new_session=True)
        try:
            returncode = child.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            print(
                f"{where}\n  ✗ grading did not finish within {args.timeout:g} s: a call into "
                "your code never returned.\n    A Python loop is reported within seconds, so "
                "this is a loop inside one built-in call\n    (such as sum(range(10**12))) or a "
                "call that blocks (input(), a lock, a socket).\nFAILED"
            )
            return 1
        except KeyboardInterrupt:
            child.kill()
            child.wait()
            print(_interrupted(args))
            return 130
        verdict = verdict_file.read_text(encoding="utf-8") if verdict_file.exists() else None
    if verdict == "passed" and returncode == 0:
        return 0
    if verdict == "error":
        return 2
    if verdict is None:
        print(
            f"{where}\n  ✗ grading ended early: the process exited with code {returncode} "
            "while your code ran\n    (os._exit(), a crash, or an exit at import time); "
            "your methods must return or raise.\nFAILED"
        )
    return 1


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
    g.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds before a grade that never ends is failed (default {DEFAULT_TIMEOUT_S:g})",
    )
    g.add_argument(
        "--in-process",
        action="store_true",
        help="grade in this process, without the hard timeout (for debugging the grader)",
    )
    g.add_argument("--verdict", default=None, help=argparse.SUPPRESS)
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

"""Command line: ``servelab grade``, ``servelab progress``, ``servelab topics``, ``servelab demo``.

``python -m servelab grade weight-cache --impl my_cache.py:WeightCache --step 3`` grades a class
from a file exactly as a notebook grade cell does, and exits 0 only when every check passes.

It grades in a child process under a hard timeout (``--timeout``): the in-process hang guard
stops loops written in Python, but not one inside a single C call (``sum(range(10**12))``), and
the learner's code could end the process itself (``os._exit(0)``). The child runs isolated and
sends its verdict over a pipe with a per-run nonce (see :mod:`servelab._grade_child`); the
parent reads it after the child has exited and trusts nothing else, so anything else is a
failure. Exit codes: 0 passed, 1 failed or not finished, 2 a usage error, 130 interrupted by
Ctrl-C (one line, no traceback: the child runs in a session of its own, so only this process
sees a terminal's Ctrl-C, stops the child and says so).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
from pathlib import Path

from servelab._grade_child import BOOTSTRAP, VERDICTS, ImplNotFound, grade_file, load_impl

DEFAULT_TIMEOUT_S = 120.0

__all__ = ["ImplNotFound", "load_impl", "main"]


def _grade(args: argparse.Namespace) -> int:
    if args.in_process:
        try:
            verdict = grade_file(args.topic, args.impl, args.step)
        except KeyboardInterrupt:  # GradeInterrupted, or a Ctrl-C while the file loads
            print(_interrupted(args))
            return 130
        return {"passed": 0, "error": 2}.get(verdict, 1)
    return _grade_in_child(args)


def _interrupted(args: argparse.Namespace) -> str:
    """What :class:`~servelab.grading.GradeInterrupted` says, without importing the graders."""
    where = f" step {args.step}" if args.step is not None else ""
    return f"{args.topic}{where}: grade interrupted; nothing was graded"


def _read_available(fd: int, limit: int = 4096) -> bytes:
    """What is in the pipe now, without waiting for writers a learner's process may keep."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) <= limit:
        try:
            chunk = os.read(fd, limit)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _run_child(args: argparse.Namespace, nonce: str) -> tuple[int | None, bytes]:
    """Run the grading child; its exit code (None: timed out) and what came over the channel."""
    import servelab

    nonce_read, nonce_write = os.pipe()
    os.write(nonce_write, nonce.encode())  # a few bytes: the pipe holds them until read
    os.close(nonce_write)
    channel_read, channel_write = os.pipe()
    step = "" if args.step is None else str(args.step)
    command = [sys.executable, "-I", "-c", BOOTSTRAP, servelab.__file__, args.topic, args.impl]
    command += [step, str(nonce_read), str(channel_write)]
    try:
        child = subprocess.Popen(
            command, pass_fds=(nonce_read, channel_write), start_new_session=True
        )
    finally:
        os.close(nonce_read)
        os.close(channel_write)
    try:
        try:
            return child.wait(timeout=args.timeout), _read_available(channel_read)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return None, b""
        except KeyboardInterrupt:
            child.kill()
            child.wait()
            raise
    finally:
        os.close(channel_read)


def _grade_in_child(args: argparse.Namespace) -> int:
    where = f"{args.topic}" + (f" · step {args.step}" if args.step is not None else "")
    nonce = secrets.token_hex(16)
    try:
        returncode, message = _run_child(args, nonce)
    except KeyboardInterrupt:
        print(_interrupted(args))
        return 130
    if returncode is None:
        print(
            f"{where}\n  ✗ grading did not finish within {args.timeout:g} s: a call into "
            "your code never returned.\n    A Python loop is reported within seconds, so "
            "this is a loop inside one built-in call\n    (such as sum(range(10**12))) or a "
            "call that blocks (input(), a lock, a socket).\nFAILED"
        )
        return 1
    verdicts = {f"{nonce} {v}\n".encode(): v for v in VERDICTS}
    verdict = verdicts.get(message)
    if verdict == "passed" and returncode == 0:
        return 0
    if verdict == "error":
        return 2
    if verdict is not None and verdict != "passed":
        return 1
    if not message:
        print(
            f"{where}\n  ✗ grading ended early: the process exited with code {returncode} "
            "while your code ran\n    (os._exit(), a crash, or an exit at import time); "
            "your methods must return or raise.\nFAILED"
        )
    else:
        print(
            f"{where}\n  ✗ the grader's verdict did not arrive intact: something else wrote "
            f"to it, or the process ended with code {returncode}.\nFAILED"
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


def _demo(argv: list[str]) -> int:
    from servelab.demo import main as demo_main

    code: int = demo_main(argv)
    return code


def _version() -> str:
    """The version and which build runs: pure Python or compiled (servelab.native)."""
    from servelab import __version__
    from servelab.native import describe

    return f"servelab {__version__} ({describe()})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=_version())
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
        help="grade in this process, without the hard timeout or isolation (for debugging)",
    )
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

    # Listed for `servelab --help` only: main() hands the demo its arguments untouched.
    sub.add_parser("demo", help="serve the tiny model through the paged KV cache", add_help=False)

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        # The demo parses its own options, in the order given: a subparser's REMAINDER
        # argument would reorder option values and flags (`--requests 2` became `2 --requests`).
        return _demo(argv[1:])
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code

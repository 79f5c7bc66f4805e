"""A real Ctrl-C, told apart from ``raise KeyboardInterrupt`` in the learner's code.

Jupyter's stop button sends SIGINT. While a grade runs, its handler notes that the interrupt
is real before raising it, so the grade ends as interrupted, whereas a KeyboardInterrupt the
learner's code raises fails the grade like any other exception. An interrupt that lands in a
finalizer or a gc callback would be printed as "Exception ignored" and lost, so it is raised
from the next line outside one.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from servelab.testing.core import _in_finalizer

__all__ = ["Interrupts", "learner_escape"]


def _raise_outside_finalizers(frame: Any, event: str, arg: Any) -> Any:
    """A tracer that raises KeyboardInterrupt on the first line run outside a finalizer.

    Not inside :meth:`Interrupts.watch` as it ends (nor in ``contextlib``, which drives it):
    it must restore the SIGINT handler, and the grade is interrupted anyway.
    """
    code = frame.f_code
    if (
        event == "line"
        and code is not _WATCH_CODE
        and not code.co_filename.endswith("contextlib.py")
        and not _in_finalizer(frame)
    ):
        raise KeyboardInterrupt  # Python removes a tracer that raises
    return _raise_outside_finalizers


class Interrupts:
    """Tells a real Ctrl-C (SIGINT) from ``raise KeyboardInterrupt`` in the learner's code."""

    def __init__(self) -> None:
        self.real = False

    @contextmanager
    def watch(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            self.real = True  # cannot tell: treat every interrupt as real
            yield
            return

        def on_sigint(signum: int, frame: Any) -> None:
            self.real = True
            if not _in_finalizer(frame):
                raise KeyboardInterrupt
            # Raised in a finalizer or a gc callback (Hypothesis has one), it would be printed
            # as "Exception ignored" and lost: raise it from the first line after that instead.
            sys.settrace(_raise_outside_finalizers)
            while frame is not None:
                frame.f_trace = _raise_outside_finalizers
                frame = frame.f_back

        try:
            previous = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # pragma: no cover - not the main interpreter
            self.real = True
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            if sys.gettrace() is _raise_outside_finalizers:  # never reached a line to raise on
                sys.settrace(None)


_WATCH_CODE = Interrupts.watch.__wrapped__.__code__  # type: ignore[attr-defined]


def learner_escape(exc: BaseException, interrupts: Interrupts) -> bool:
    """SystemExit or a KeyboardInterrupt that no Ctrl-C caused: the learner's code raised it."""
    if isinstance(exc, KeyboardInterrupt):
        return not interrupts.real
    return isinstance(exc, SystemExit)

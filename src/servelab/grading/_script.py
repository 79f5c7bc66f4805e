"""The one way a probe runs code: each line as written, in the names the learner used.

A probe is a short program. :class:`Script` runs it one line at a time with ``eval``/``exec``
in a namespace that holds the graded class under the learner's own name (``SizedCache``,
not ``WeightCache``), and keeps the lines: the "reproduce:" program of a report is exactly the
code that ran, and pasted into the notebook after the grade cell it does the same again.

Probes are written with the topic's usual class names (``cache = WeightCache(100)``);
:func:`graded_names` finds the learner's names for them and :func:`renamed` rewrites a
program from one set of names to the other. The grader renames a state machine's program the
same way, and diagnosis renames a report's program back before replaying it on the catalogue.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from typing import Any

from servelab.grading.replay import TopicReplay, remember_program
from servelab.grading.topic import ProbeFailed
from servelab.testing.pasteable import Caught

__all__ = ["Script", "graded_names", "own_names", "renamed"]


def _usable(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def graded_names(spec: TopicReplay | None, impl: Any) -> dict[str, str]:
    """Each of the topic's class names (``spec.classes``) -> the name the graded class has.

    A class keeps the usual name when its own cannot be written in a program (a lambda, a
    factory) or would clash with another name the programs use.
    """
    if spec is None or not spec.classes:
        return {}
    try:
        ns = spec.namespace(impl)
    except Exception:
        return {}
    return own_names(ns, spec.classes, spec.subject)


def own_names(ns: Mapping[str, Any], classes: Iterable[str], subject: str) -> dict[str, str]:
    """:func:`graded_names` for a namespace already built: ``classes`` are the usual names
    of the graded classes in ``ns``, ``subject`` the name the programs give the object."""
    taken = {subject, *ns} - set(classes)
    names: dict[str, str] = {}
    for usual in classes:
        others = set(classes) - {usual}  # never another class's usual name: renaming back
        # must give one answer
        obj = ns.get(usual)
        own = getattr(obj, "__name__", None) if isinstance(obj, type) else None
        if isinstance(own, str) and _usable(own) and own not in taken | others:
            names[usual] = own if own not in names.values() else usual
        else:
            names[usual] = usual
    return names


def renamed(program: str, names: Mapping[str, str]) -> str:
    """``program`` with each name of ``names`` (a whole word, not an attribute) replaced."""
    changes = {old: new for old, new in names.items() if old != new}
    if not changes:
        return program
    pattern = re.compile(r"(?<![\w.'\"])(" + "|".join(map(re.escape, changes)) + r")(?![\w'\"])")
    return pattern.sub(lambda m: changes[m.group(1)], program)


class Script:
    """Runs a probe's lines as written and keeps them as the report's "reproduce:" program.

    ``classes`` maps the usual class names the probe writes to the objects they stand for;
    ``names`` maps those names to the ones the learner gave the graded classes. Everything a
    line shows is the code that ran: no line is rebuilt as text after the fact.
    """

    def __init__(
        self,
        classes: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
        hints: Mapping[str, str] | None = None,
    ) -> None:
        self.names = dict(names or {})
        self.ns: dict[str, Any] = {self.names.get(k, k): v for k, v in classes.items()}
        self.lines: list[str] = []
        self.hints = dict(hints or {})
        self.caught = Caught(self.lines)

    @classmethod
    def graded(cls, spec: TopicReplay, impl: Any, hints: Mapping[str, str] | None = None) -> Script:
        """A script over the topic's namespace, the graded classes under the learner's names."""
        return cls(spec.namespace(impl), graded_names(spec, impl), hints)

    def __call__(self, line: str) -> Any:
        """Run one line (an expression's value is returned); a learner's exception keeps the
        program so far, for diagnosis."""
        line = renamed(line, self.names)
        self.caught.went_on()
        self.lines.append(line)
        try:
            try:
                code = compile(line, "<probe>", "eval")
            except SyntaxError:
                exec(compile(line, "<probe>", "exec"), self.ns)
                return None
            return eval(code, self.ns)
        except Exception as exc:
            self.caught.raised(exc)
            remember_program(exc, self.lines)
            raise

    def note(self, line: str) -> None:
        """Write down a line that shows a value (``cache.keys()  # [...]``) without running it."""
        self.caught.went_on()
        self.lines.append(renamed(line, self.names))

    def run_all(self, lines: Iterable[str]) -> None:
        for line in lines:
            self(line)

    def fail(
        self, message: str, rule: str | None = None, *, hint: str | None = None
    ) -> ProbeFailed:
        """The failure to raise: the program so far, and the hint of ``rule`` when the rule
        that broke is not the probe's own (``hint`` gives one directly)."""
        if hint is None and rule is not None:
            hint = self.hints.get(rule)
        self.caught.failed_with(None)
        return ProbeFailed(message, self.lines, hint)

    def check(self, ok: bool, message: str, rule: str | None = None) -> None:
        if not ok:
            raise self.fail(message, rule)

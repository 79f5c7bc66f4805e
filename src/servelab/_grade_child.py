"""The grading child of ``servelab grade``: grade a learner's file, then send the verdict.

The parent (:mod:`servelab.cli`) starts this process in isolated mode (``python -I``: neither
the working directory nor the user's site-packages is on ``sys.path``, and ``PYTHON*``
variables are ignored) and loads this very package by its path, so a ``servelab/`` folder or an
``argparse.py`` beside the learner's file is never imported in its place.

Order matters. The grader is imported and bound first, and every servelab module (its
namespace, the code and defaults of its functions, its classes' methods), the builtins and
the graded topic's steps, probes and machines are recorded; only then is the learner's file
loaded, by its path, with its folder at the *end* of ``sys.path`` so it can import its own
helpers but never shadow the standard library or an installed package. If loading or grading
changed any recorded object, the grade fails.

The verdict goes over a pipe the parent opened, as one line ``<nonce> <verdict>``; the nonce
arrived on a second pipe, read and closed before the learner's code ran, and never appears on
the command line or in the environment. This stops a file from writing a verdict by accident
or by a guess. It does not stop code written to cheat: the learner's code runs in this process
and can read its memory (the nonce included), change objects this check does not record, or
make a change that undoes itself before grading ends (the records are compared only after
loading and after grading).
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any

__all__ = ["grade_file", "main"]

VERDICTS = ("passed", "failed", "not written", "error")


class _Seal:
    """What the grader is made of, recorded before the learner's code runs."""

    def __init__(self, topic: Any = None) -> None:
        self.package = Path(__file__).resolve().parent
        # The graded topic's definition: its steps, probes and machines, and their fields.
        self.fields: list[tuple[str, Any, dict[str, Any], dict[str, tuple[Any, ...]]]] = []
        if topic is not None:
            self._fields(f"topic {topic.name!r}", topic)
            for step in topic.steps:
                where = f"topic {topic.name!r} step {step.number}"
                self._fields(where, step)
                for probe in step.probes:
                    self._fields(f"{where} probe {probe.name!r}", probe)
                if step.machine is not None:
                    self._fields(f"{where} machine", step.machine)
        self.modules = {n: m for n, m in sys.modules.items() if self._ours(n)}
        self.namespaces = {n: dict(vars(m)) for n, m in self.modules.items()}
        self.builtins = dict(vars(builtins))
        self.functions: dict[str, tuple[Any, Any, Any, Any]] = {}
        self.classes: dict[str, tuple[type, dict[str, Any]]] = {}
        for name, module in self.modules.items():
            for key, value in vars(module).items():
                if getattr(value, "__module__", None) != name:
                    continue  # imported from elsewhere: recorded where it is defined
                where = f"{name}.{key}"
                if isinstance(value, type):
                    self.classes[where] = (value, dict(vars(value)))
                    for attr, member in vars(value).items():
                        self._function(f"{where}.{attr}", getattr(member, "__func__", member))
                else:
                    self._function(where, value)

    @staticmethod
    def _ours(name: str) -> bool:
        return name == "servelab" or name.startswith("servelab.")

    def _fields(self, where: str, obj: Any) -> None:
        fields = dict(vars(obj))
        contents = {k: _contents(v) for k, v in fields.items() if isinstance(v, (list, dict))}
        self.fields.append((where, obj, fields, contents))

    def _function(self, where: str, value: Any) -> None:
        if isinstance(value, types.FunctionType):
            kwdefaults = value.__kwdefaults__
            self.functions[where] = (
                value,
                value.__code__,
                value.__defaults__,
                None if kwdefaults is None else dict(kwdefaults),
            )

    def changes(self) -> list[str]:
        """Names of recorded objects that are no longer what they were (empty: untouched)."""
        changed: list[str] = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                changed.append(f"sys.modules[{name!r}]")
            before, now = self.namespaces[name], vars(module)
            for key in before.keys() | now.keys():
                if key == "__warningregistry__":  # the warnings module keeps its notes here
                    continue
                if key not in before:  # a submodule imported since is the only addition
                    if now[key] is sys.modules.get(f"{name}.{key}"):
                        continue
                elif key in now and now[key] is before[key]:
                    continue
                changed.append(f"{name}.{key}")
        for key, value in self.builtins.items():
            if vars(builtins).get(key, _MISSING) is not value:
                changed.append(f"builtins.{key}")
        for where, (function, code, defaults, kwdefaults) in self.functions.items():
            kw_now = function.__kwdefaults__
            if (
                function.__code__ is not code
                or function.__defaults__ is not defaults
                or (kwdefaults is None) != (kw_now is None)
                or (kw_now is not None and _changed(kwdefaults, kw_now))
            ):
                changed.append(f"{where} (its code or defaults)")
        for where, (cls, before) in self.classes.items():
            # Methods only: the grader keeps counters and the last machine on its classes, and
            # Python caches dunders there (__slotnames__ when an instance is copied).
            now = dict(vars(cls))
            for key in before.keys() | now.keys():
                old, new = before.get(key, _MISSING), now.get(key, _MISSING)
                if old is new or not (_behaviour(old) or _behaviour(new)):
                    continue
                if old is _MISSING and key.startswith("__"):
                    continue
                changed.append(f"{where}.{key}")
        for where, obj, fields, contents in self.fields:
            now = vars(obj)
            same = now.keys() == fields.keys() and all(now[k] is v for k, v in fields.items())
            if not same or not all(_same(c, _contents(now[k])) for k, c in contents.items()):
                changed.append(where)
        for name, module in sys.modules.items():  # modules imported since: from this package?
            if self._ours(name) and name not in self.modules and not self._genuine(module):
                changed.append(f"sys.modules[{name!r}]")
        return sorted(set(changed))

    def _genuine(self, module: Any) -> bool:
        file = getattr(module, "__file__", None)
        return isinstance(file, str) and Path(file).resolve().is_relative_to(self.package)


_MISSING = object()


def _behaviour(value: Any) -> bool:
    """A class attribute that is code (a method, a property), not data."""
    return value is not _MISSING and (
        callable(value) or isinstance(value, (staticmethod, classmethod, property))
    )


def _contents(value: Any) -> tuple[Any, ...]:
    """A list's items, or a dict's keys then values: the objects themselves."""
    return (*value.keys(), *value.values()) if isinstance(value, dict) else tuple(value)


def _same(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def _changed(before: dict[str, Any] | None, now: dict[str, Any]) -> bool:
    before = before or {}
    return before.keys() != now.keys() or any(now[k] is not before[k] for k in now)


class ImplNotFound(ValueError):
    """``--impl`` does not name a loadable ``file.py:Name``."""


def load_impl(spec: str) -> Any:
    """Load ``path/to/file.py:Name`` by its path.

    The file's folder is on ``sys.path`` only while the file loads, and last, so the file can
    import a helper module beside it but cannot shadow the standard library or servelab.
    """
    import importlib.util

    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise ImplNotFound(f"--impl must look like path/to/file.py:ClassName, got {spec!r}")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise ImplNotFound(f"no such file: {path_text}")
    module_name = f"_servelab_impl_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImplNotFound(f"cannot import {path_text}")
    module = importlib.util.module_from_spec(module_spec)
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    sys.modules[module_name] = module  # as an import does: dataclasses look the module up
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImplNotFound(f"{path_text} defines no {name!r}") from None


def _print_from_learner(exc: BaseException) -> None:
    """The traceback from the learner's file on, without the loader's frames."""
    package = Path(__file__).resolve().parent
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if not file.startswith("<frozen") and not Path(file).resolve().is_relative_to(package):
            break
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _changed_report(where: str, changed: list[str], when: str) -> str:
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return (
        f"{where}\n  ✗ your code changed the grader {when}: {shown}\n"
        "    hint: grading needs servelab as installed; do not assign to its modules, "
        "functions or classes\nFAILED"
    )


def grade_file(topic: str, impl_spec: str, step: int | None) -> str:
    """Grade ``impl_spec`` (``file.py:Name``) on ``topic``; print the report, return the verdict.

    The grader is bound, and servelab recorded, before the file is loaded.
    """
    import servelab.grading.diagnose  # noqa: F401  (imported lazily by grade(): import it now)
    from servelab.grading import GradeFailure, grade, load_topic

    where = topic + (f" · step {step}" if step is not None else "")
    try:
        the_topic = load_topic(topic)
        if step is not None:
            the_topic.step(step)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return "error"
    # bound now: replacing _Seal.changes later changes nothing here
    changes = _Seal(the_topic).changes
    try:
        impl = load_impl(impl_spec)
    except ImplNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return "error"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the file raised, or exited, while it loaded
        _print_from_learner(exc)
        print(f"{where}\n  ✗ loading your file raised {type(exc).__name__}\nFAILED")
        return "failed"
    changed = changes()
    if changed:
        print(_changed_report(where, changed, "when your file was loaded"))
        return "failed"
    report = io.StringIO()
    try:
        grade(the_topic, impl, step=step, out=report)
        verdict = "passed"
    except GradeFailure as failure:
        verdict = failure.report.verdict
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # anything else the learner's code let escape
        print(f"{where}\n  ✗ grading stopped: your code raised {type(exc).__name__}\nFAILED")
        return "failed"
    changed = changes()
    if changed:
        print(_changed_report(where, changed, "while it ran"))
        return "failed"
    sys.stdout.write(report.getvalue())
    return verdict if verdict in VERDICTS else "failed"


def main(argv: list[str]) -> int:
    """``TOPIC FILE:NAME STEP NONCE_FD CHANNEL_FD`` (STEP may be empty); returns the exit code."""
    topic, impl_spec, step_text, nonce_fd, channel_fd = argv
    write = os.write  # bound before the learner's code runs, which could replace os.write
    with os.fdopen(int(nonce_fd), "rb") as pipe:
        nonce = pipe.read()
    channel = int(channel_fd)
    os.set_inheritable(channel, False)  # not passed on to processes the learner's code starts
    verdict = grade_file(topic, impl_spec, int(step_text) if step_text else None)
    sys.stdout.flush()
    sys.stderr.flush()
    write(channel, nonce + f" {verdict}\n".encode())
    return {"passed": 0, "error": 2}.get(verdict, 1)


# Run by the parent as `python -I -c BOOTSTRAP PACKAGE_INIT ARGS...`: load servelab from the
# parent's own files (not from sys.path), then end without running atexit handlers or waiting
# for threads the learner's code may have left. A compiled build's modules import mypyc's shared
# runtime, ``servelab__mypyc`` (the build's group name, see hatch_build.py), a top-level
# extension installed beside the package folder; ``-I`` drops PYTHONPATH, so a build used from
# there (``make compiled``: build/compiled) would not find it. It is loaded by its path too.
BOOTSTRAP = """\
import importlib.machinery, importlib.util, os, sys
init = sys.argv[1]
top = os.path.dirname(os.path.dirname(init))
for suffix in importlib.machinery.EXTENSION_SUFFIXES:
    runtime = os.path.join(top, "servelab__mypyc" + suffix)
    if os.path.isfile(runtime):
        spec = importlib.util.spec_from_file_location("servelab__mypyc", runtime)
        sys.modules["servelab__mypyc"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["servelab__mypyc"])
        break
spec = importlib.util.spec_from_file_location(
    "servelab", init, submodule_search_locations=[os.path.dirname(init)]
)
package = importlib.util.module_from_spec(spec)
sys.modules["servelab"] = package
spec.loader.exec_module(package)
from servelab._grade_child import main
code = main(sys.argv[2:])
os._exit(code)
"""

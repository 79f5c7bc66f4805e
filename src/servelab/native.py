"""Which build runs: the pure-Python modules, or the same modules compiled to C with mypyc.

The hot modules below can be compiled by mypyc from the very files a learner reads: an opt-in
build (``SERVELAB_COMPILE=1 pip wheel .``, or ``make compiled`` for the tests and benchmarks)
turns each into a C extension that Python imports instead of the ``.py`` beside it. Nothing else
changes: same classes, same errors, same tests. ``make lab``, Colab and JupyterLite always run
the pure-Python modules (Pyodide cannot load C extensions).

:func:`compiled` says which build this process runs; ``servelab --version`` prints it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:
    try:  # installed with mypy; a pure-Python install may lack it, and needs it for nothing
        from mypy_extensions import mypyc_attr
    except ImportError:

        def mypyc_attr(*_: Any, **__: Any) -> Any:
            """mypyc's class options: read by the compiler, nothing at run time."""
            return lambda cls: cls


__all__ = ["COMPILED_MODULES", "StaleBuild", "compiled", "describe", "mypyc_attr", "stale_sources"]

COMPILED_MODULES: tuple[str, ...] = (
    "servelab.kv.blocks",
    "servelab.kv.prefix",
    "servelab.kv.scheduler",
    "servelab.weights.cache",
    "servelab.weights.policies.interface",
    "servelab.weights.policies.orders",
    "servelab.weights.policies.queues",
    "servelab.weights.policies.ranked",
    "servelab.weights.policies.s3fifo",
    "servelab.weights.policies.sieve",
    "servelab.weights.sim",
)
"""The modules the compiled build compiles (the build reads this list)."""


def _is_extension(module: str) -> bool:
    path = getattr(importlib.import_module(module), "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled() -> bool:
    """True when the hot modules run compiled (mypyc), False when they run as Python.

    A build where only some of them are compiled is broken, not a third mode: it raises
    ImportError naming the modules that are not compiled.
    """
    native = [m for m in COMPILED_MODULES if _is_extension(m)]
    if not native:
        return False
    if len(native) != len(COMPILED_MODULES):
        missing = sorted(set(COMPILED_MODULES) - set(native))
        raise ImportError(f"a partly compiled servelab: {', '.join(missing)} run as Python")
    return True


def describe() -> str:
    """The build in words, as ``servelab --version`` prints it."""
    return "compiled (mypyc)" if compiled() else "pure Python"


class StaleBuild(ImportError):
    """A compiled build whose source tree has changed since it was built: it would run the old
    code instead of the edited one, so it refuses to import."""


def stale_sources(package: Path | None = None) -> list[str]:
    """The sources that changed since this compiled build was made from them (paths relative
    to ``src``); empty for a pure-Python install, or when the build's source tree is gone.

    A compiled wheel records where it was built and a SHA-256 of every source it was built
    from (``_compiled_from.json``, written by ``hatch_build.py``).
    """
    package = package or Path(__file__).resolve().parent
    manifest = package / "_compiled_from.json"
    if not manifest.is_file():
        return []
    recorded = json.loads(manifest.read_text())
    root = Path(recorded["source_root"])
    if not (root / "servelab" / "native.py").is_file():
        return []  # installed away from its sources: nothing to compare with
    changed = []
    for name, digest in recorded["sha256"].items():
        source = root / name
        if not source.is_file() or hashlib.sha256(source.read_bytes()).hexdigest() != digest:
            changed.append(name)
    now = {str(p.relative_to(root)) for p in (root / "servelab").rglob("*.py")}
    changed += sorted(now - set(recorded["sha256"]))  # a module added since
    return changed


def _refuse_if_stale() -> None:
    changed = stale_sources()
    if changed:
        here = Path(__file__).resolve().parent.parent
        raise StaleBuild(
            f"the compiled servelab in {here} was built from sources that have changed since "
            f"({', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}); it would run the "
            "old code. Rebuild it with `make compiled`, or run without it."
        )


_refuse_if_stale()

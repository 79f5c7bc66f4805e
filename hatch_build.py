"""The opt-in compiled build: ``SERVELAB_COMPILE=1`` makes the wheel compile the hot modules.

Without the variable this hook does nothing and the wheel is pure Python (``py3-none-any``),
which is what ``make lab``, Colab and JupyterLite install. With ``SERVELAB_COMPILE=1``, the
wheel's build runs mypyc over the modules that ``servelab.native.COMPILED_MODULES`` lists and
adds the C extensions beside their ``.py`` files (Python imports an extension before a source
file of the same name), so the wheel is tagged for this platform and interpreter.

Why a build hook and not a make target alone: the choice lives where the package is built, so
``pip wheel``, ``pip install`` and any build front end honour it, and the compiled files only
ever exist inside a wheel or a directory it is installed into, never beside the sources of an
editable install (where they would shadow the ``.py`` a learner edits). An editable install
ignores the variable, with a warning.

The wheel also carries ``servelab/_compiled_from.json``: where it was built and a SHA-256 of
every source of the package, so that a build run beside its (since edited) source tree refuses to
import instead of silently running the old code (see ``servelab.native``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SWITCH = "SERVELAB_COMPILE"
MANIFEST = "servelab/_compiled_from.json"


def wanted() -> bool:
    """Whether the environment asks for the compiled build."""
    return os.environ.get(SWITCH, "").strip().lower() in ("1", "true", "yes")


def compiled_modules(root: Path) -> list[str]:
    """``COMPILED_MODULES`` as ``servelab/native.py`` lists it (read, not imported: the build
    environment need not have servelab's dependencies)."""
    tree = ast.parse((root / "src/servelab/native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "COMPILED_MODULES":
            value = ast.literal_eval(node.value) if node.value is not None else ()
            return list(value)
    raise RuntimeError("src/servelab/native.py has no COMPILED_MODULES")


def source_path(module: str) -> str:
    return "src/" + module.replace(".", "/") + ".py"


def compile_modules(root: Path, paths: list[str], work: Path) -> Path:
    """mypyc's C for ``paths`` (relative to ``root``), built by setuptools in ``work``; returns
    the folder that holds the extensions, laid out as in the wheel."""
    from mypyc.build import mypycify
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext

    cwd = Path.cwd()
    os.chdir(root)  # mypyc reads [tool.mypy] from pyproject.toml, and the paths, from here
    try:
        extensions = mypycify(
            paths, opt_level="3", group_name="servelab", target_dir=str(work / "c")
        )
        command = build_ext(Distribution({"name": "servelab", "ext_modules": extensions}))
        command.build_lib = str(work / "lib")
        command.build_temp = str(work / "tmp")
        command.parallel = os.cpu_count() or 1
        command.ensure_finalized()
        command.run()
    finally:
        os.chdir(cwd)
    return work / "lib"


class CompiledCoreHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        return ["mypy>=1.10", "setuptools>=68"] if wanted() else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or not wanted():
            return
        if version == "editable":
            self.app.display_warning(
                f"{SWITCH}=1 is ignored for an editable install: compiled modules there would "
                "shadow the sources you edit. Build a wheel instead (make compiled)."
            )
            return
        root = Path(self.root)
        modules = compiled_modules(root)
        work = root / "build" / "mypyc"
        shutil.rmtree(work, ignore_errors=True)
        lib = compile_modules(root, [source_path(m) for m in modules], work)
        for built in sorted(lib.rglob("*")):
            if built.is_file():
                build_data["force_include"][str(built)] = str(built.relative_to(lib))
        manifest = work / "_compiled_from.json"
        manifest.write_text(
            json.dumps(
                {
                    "source_root": str(root / "src"),
                    "sha256": {
                        str(path.relative_to(root / "src")): hashlib.sha256(
                            path.read_bytes()
                        ).hexdigest()
                        for path in sorted((root / "src" / "servelab").rglob("*.py"))
                    },
                },
                indent=1,
                sort_keys=True,
            )
        )
        build_data["force_include"][str(manifest)] = MANIFEST
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

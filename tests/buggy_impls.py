"""Loads the known-buggy implementations kept under ``tests/buggy/<topic>/``.

Each topic folder holds ``correct.py`` (a correct learner-style implementation) and one file per
known mistake. A mistake file subclasses or copies the correct one (``from correct import ...``),
defines the class ``Buggy`` and ``HINT``: a word or phrase the grader's hint must contain.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

BUGGY_ROOT = Path(__file__).parent / "buggy"


@dataclass(frozen=True)
class Mistake:
    topic: str
    name: str
    impl: Any
    hint: str
    doc: str


def _load(path: Path, name: str, correct: ModuleType | None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("correct")
    if correct is not None:
        sys.modules["correct"] = correct
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is not None:
            sys.modules["correct"] = saved
        else:
            sys.modules.pop("correct", None)
    return module


def topic_dir(topic: str) -> Path:
    return BUGGY_ROOT / topic.replace("-", "_")


def correct_module(topic: str) -> ModuleType:
    return _load(topic_dir(topic) / "correct.py", f"buggy_{topic_dir(topic).name}_correct", None)


def mistakes(topic: str) -> list[Mistake]:
    folder = topic_dir(topic)
    correct = correct_module(topic)
    found = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "correct.py" or path.name.startswith("_"):
            continue
        module = _load(path, f"buggy_{folder.name}_{path.stem}", correct)
        found.append(
            Mistake(topic, path.stem, module.Buggy, module.HINT, (module.__doc__ or "").strip())
        )
    return found

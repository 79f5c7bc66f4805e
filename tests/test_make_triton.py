"""Notebook 08's and the README's instruction, run as written: ``make triton``."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_make_triton_leaves_a_venv_that_imports_triton_and_torch() -> None:
    result = subprocess.run(
        ["make", "triton"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    check = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "python"),
            "-c",
            "import torch, triton; print(triton.__version__)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip()

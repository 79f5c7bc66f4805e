"""Run every CPU benchmark in this folder, one process each, and print their tables.

``python benchmarks/run_all.py [--quick]`` (``make bench``). The GPU script, ``gpu.py``, runs
separately (``make bench-gpu``) because it needs CUDA for figures that mean anything.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller traces, fewer repeats")
    args = parser.parse_args()
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        cmd = [sys.executable, str(script), *(["--quick"] if args.quick else [])]
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env bash
# Build a JupyterLite site of the exercises: the course in the browser, nothing installed.
#
#   tools/build_lite.sh PYTHON OUT      (make lite: .venv/bin/python build/lite)
#
# The Pyodide kernel loads Pyodide from a CDN by default; this site serves it itself, from the
# npm package `pyodide` (the version the kernel was built for), so it also works where the CDN
# cannot be reached. The packages Pyodide would serve beside its core (micropip, ipython and their
# dependencies) are not in that package: the same versions come from PyPI, and the local
# pyodide-lock.json is given their hashes. The course's pure-Python
# wheels (servelab, hypothesis, attrs, sortedcontainers) are served by piplite; `--platform any`
# picks pure-Python wheels (hypothesis after 6.155 also ships compiled ones Pyodide cannot use).
set -euo pipefail
py=${1:-.venv/bin/python}
out=${2:-build/lite}
pyodide_version=${PYODIDE_VERSION:-314.0.6}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$py" -m pip install -q "jupyterlite-core>=0.8" "jupyterlite-pyodide-kernel>=0.8"

# wheels for piplite: the course package and the pure-Python packages the grader needs
mkdir -p "$work/pypi"  # wheels in the lite dir's pypi/ go to piplite
"$py" -m pip wheel -q --no-deps -w "$work/pypi" "$root"
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.14 --platform any \
  -d "$work/pypi" hypothesis attrs sortedcontainers
# the kernel's comm, which neither Pyodide nor the kernel ships
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.14 --platform any \
  -d "$work/pypi" comm

# the Pyodide core files, from npm
(cd "$work" && npm pack --silent "pyodide@$pyodide_version" >/dev/null && tar xzf "pyodide-$pyodide_version.tgz")

# the site: the exercises as its contents, Pyodide served from static/pyodide/
mkdir -p "$work/contents"
cp "$root"/exercises/*.ipynb "$work/contents/"
cat > "$work/jupyter-lite.json" <<JSON
{
  "jupyter-lite-schema-version": 0,
  "jupyter-config-data": {
    "litePluginSettings": {
      "@jupyterlite/pyodide-kernel-extension:kernel": {
        "pyodideUrl": "./static/pyodide/pyodide.mjs"
      }
    }
  }
}
JSON
rm -rf "$out"
(cd "$work" && "$py" -m jupyter lite build --contents contents --lite-dir "$work" --output-dir "$root/$out") >/dev/null
mkdir -p "$root/$out/static/pyodide"
cp -r "$work"/package/* "$root/$out/static/pyodide/"
"$py" - "$root/$out/static/pyodide" "$py" <<'PY'
"""Serve the Pyodide packages the kernel and the grader load, and what they depend on.

The npm package holds Pyodide's core only; its pyodide-lock.json names the rest with hashes
of Pyodide's own builds. The same versions of these pure-Python packages come from PyPI, and
the lock is given their hashes.
"""
import hashlib, json, subprocess, sys, tempfile
from pathlib import Path

folder, py = Path(sys.argv[1]), sys.argv[2]
lock_path = folder / "pyodide-lock.json"
lock = json.loads(lock_path.read_text())
packages = lock["packages"]
key = {k.lower().replace("_", "-"): k for k in packages}
todo, needed = ["micropip", "ipython", "jedi", "sortedcontainers", "attrs"], set()
while todo:
    name = key[todo.pop().lower().replace("_", "-")]
    if name not in needed:
        needed.add(name)
        todo.extend(packages[name].get("depends", []))
with tempfile.TemporaryDirectory() as tmp:
    pins = [f"{packages[n]['name']}=={packages[n]['version']}" for n in sorted(needed)]
    subprocess.run(
        [py, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.14", "--platform", "any", "-d", tmp, *pins],
        check=True,
    )
    wheels = {w.name.split("-")[0].lower().replace("_", "-"): w for w in Path(tmp).glob("*.whl")}
    for name in sorted(needed):
        entry = packages[name]
        wheel = wheels[entry["name"].lower().replace("_", "-")]
        data = wheel.read_bytes()
        (folder / entry["file_name"]).write_bytes(data)
        entry["sha256"] = hashlib.sha256(data).hexdigest()
lock_path.write_text(json.dumps(lock))
print(f"served {len(needed)} Pyodide packages: {', '.join(sorted(needed))}")
PY
echo "JupyterLite site in $out (serve it: python -m http.server -d $out)"

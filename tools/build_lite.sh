#!/usr/bin/env bash
# Build a JupyterLite site of the exercises: the course in the browser, nothing installed.
#
#   tools/build_lite.sh PYTHON OUT      (make lite: .venv/bin/python build/lite)
#
# PYTHON and OUT are paths relative to the current directory, or absolute; OUT is replaced.
#
# The site publishes the committed course, never the working copy: the notebooks and the
# servelab wheel come from `git archive HEAD`, so an instructor who tried the exercises in this
# checkout does not publish their answers and outputs (commit first to publish a change).
#
# The Pyodide kernel loads Pyodide from a CDN by default; this site serves it itself, from the
# npm package `pyodide` (the version the installed kernel was built for), so it also works where
# the CDN cannot be reached. The packages Pyodide would serve beside its core (micropip, ipython
# and their dependencies) are not in that package: the same versions come from PyPI, and the
# local pyodide-lock.json is given their hashes. The course's pure-Python wheels (servelab,
# hypothesis, attrs, sortedcontainers, and ipywidgets with jupyterlab_widgets for the widgets)
# are served by piplite; `--platform any` picks pure-Python wheels (hypothesis after 6.155 also
# ships compiled ones Pyodide cannot use). The widgets' front end is the jupyterlab_widgets
# federated extension, which `jupyter lite build` copies from the build environment.
#
# Exit status 75 means a download failed (no npm registry or PyPI): nothing is wrong with the
# course, the site just cannot be built here. Downloads give up after about a minute.
set -euo pipefail
py=${1:-.venv/bin/python}
# exercises that need torch, left out of the site (tests/test_browser.py reads this line)
NEEDS_TORCH="09_serving_your_model.ipynb"
out=${2:-build/lite}
case $out in /*) ;; *) out=$PWD/$out ;; esac
# absolute, so that it still runs after a `cd` (the link itself, not its target: a venv's
# python is a link to the system's, and only the link's path finds the venv's packages)
case $py in /*) ;; */*) py=$PWD/$py ;; *) py=$(command -v "$py") ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the committed tree: the wheel and the notebooks are built from it
if ! git -C "$root" rev-parse --verify -q HEAD >/dev/null; then
  echo "build_lite: $root is not a git checkout with a commit; the site publishes HEAD" >&2
  exit 1
fi
mkdir -p "$work/head"
git -C "$root" archive HEAD | tar -x -C "$work/head"
pip_net=(--timeout 20 --retries 1)  # the same in the Pyodide packages' download below

fetch() {  # fetch WHAT COMMAND...: a download step; its failure means no registry, exit 75
  local what=$1
  shift
  if ! "$@"; then
    echo "build_lite: could not download $what (the site needs the npm registry and PyPI)" >&2
    exit 75
  fi
}

fetch "jupyterlite from PyPI" "$py" -m pip install -q "${pip_net[@]}" "jupyterlite-core>=0.8,<0.9" \
  "jupyterlite-pyodide-kernel>=0.8,<0.9" "jupyterlab_widgets>=3,<4"

# the Pyodide version the kernel was built for (its default CDN URL names it)
read -r pyodide_version widgets_version labwidgets_version < <("$py" - <<'PY'
import json, re, sys
from importlib.metadata import version
from pathlib import Path
schema = (Path(sys.prefix) / "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension"
          / "static/schema/kernel.v0.schema.json")
default = json.loads(schema.read_text())["properties"]["pyodideUrl"]["default"]
found = re.search(r"/pyodide/v([^/]+)/", default)
# the kernel's ipywidgets matches the front end's jupyterlab_widgets, as pip installed them
print(found.group(1) if found else "", version("ipywidgets"), version("jupyterlab_widgets"))
PY
)
pyodide_version=${PYODIDE_VERSION:-$pyodide_version}
if [ -z "$pyodide_version" ]; then
  echo "build_lite: cannot tell the kernel's Pyodide version (set PYODIDE_VERSION)" >&2
  exit 1
fi

# the Pyodide core files, from npm
fetch "pyodide@$pyodide_version from npm" bash -c "cd '$work' && npm pack --silent \
  --fetch-timeout=30000 --fetch-retries=1 --fetch-retry-mintimeout=2000 \
  'pyodide@$pyodide_version' >/dev/null"
tar xzf "$work/pyodide-$pyodide_version.tgz" -C "$work"
pyversion=$("$py" -c "import json,sys; v=json.load(open(sys.argv[1]))['info']['python']; \
print('.'.join(v.split('.')[:2]))" "$work/package/pyodide-lock.json")

# wheels for piplite: the course package and the pure-Python packages the grader and the widgets
# need (the kernel ships a stand-in widgetsnbextension; comm is in neither Pyodide nor the kernel)
mkdir -p "$work/pypi"  # wheels in the lite dir's pypi/ go to piplite
fetch "servelab's build backend from PyPI" \
  "$py" -m pip wheel -q "${pip_net[@]}" --no-deps -w "$work/pypi" "$work/head"
fetch "the piplite wheels from PyPI" "$py" -m pip download -q "${pip_net[@]}" --no-deps \
  --only-binary=:all: --python-version "$pyversion" --platform any -d "$work/pypi" \
  hypothesis attrs sortedcontainers comm \
  "ipywidgets==$widgets_version" "jupyterlab_widgets==$labwidgets_version"

# the site: the committed exercises as its contents (no outputs, as generated), Pyodide
# served from static/pyodide/
mkdir -p "$work/contents"
# A notebook that needs Triton (08, whose setup sets TRITON_INTERPRET) cannot run in Pyodide:
# the site leaves it out.
for notebook in "$work"/head/exercises/*.ipynb; do
  grep -q TRITON_INTERPRET "$notebook" || cp "$notebook" "$work/contents/"
done
# ... and the notebooks that run the model: Pyodide has no torch (their first cell says so)
for name in $NEEDS_TORCH; do rm -f "$work/contents/$name"; done
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
(cd "$work" && "$py" -m jupyter lite build --contents contents --lite-dir "$work" --output-dir "$out") >/dev/null
mkdir -p "$out/static/pyodide"
cp -r "$work"/package/* "$out/static/pyodide/"
"$py" - "$out/static/pyodide" "$py" "$pyversion" <<'PY'
"""Serve the Pyodide packages the kernel and the grader load, and what they depend on.

The npm package holds Pyodide's core only; its pyodide-lock.json names the rest with hashes
of Pyodide's own builds. The same versions of these pure-Python packages come from PyPI, and
the lock is given their hashes.
"""
import hashlib, json, subprocess, sys, tempfile
from pathlib import Path

folder, py, pyversion = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
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
    fetched = subprocess.run(
        [py, "-m", "pip", "download", "-q", "--timeout", "20", "--retries", "1", "--no-deps",
         "--only-binary=:all:", "--python-version", pyversion, "--platform", "any", "-d", tmp,
         *pins],
    )
    if fetched.returncode:
        print("build_lite: could not download Pyodide's packages from PyPI", file=sys.stderr)
        sys.exit(75)

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
for required in index.html lab/index.html static/pyodide/pyodide.mjs jupyter-lite.json; do
  [ -e "$out/$required" ] || { echo "build_lite: $out/$required is missing" >&2; exit 1; }
done
echo "JupyterLite site in $out (serve it: python -m http.server -d $out)"

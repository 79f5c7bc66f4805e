"""Which build runs (pure Python or compiled by mypyc), and the guards around the compiled one.

``make test`` runs this file twice: with the editable install (pure Python) and against the
compiled build in ``build/compiled`` (``make test-compiled`` sets SERVELAB_EXPECT_BUILD).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import servelab
from servelab import native
from servelab.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = os.environ.get("SERVELAB_EXPECT_BUILD", "pure")


def test_the_build_that_runs_is_the_one_asked_for() -> None:
    assert servelab.compiled() is (EXPECTED == "compiled")
    for name in native.COMPILED_MODULES:
        path = Path(importlib.import_module(name).__file__ or "")
        if EXPECTED == "compiled":
            assert path.is_relative_to(ROOT / "build" / "compiled"), path
            assert path.suffix == ".so", path
        else:  # nothing compiled shadows the sources a learner edits
            assert path == ROOT / "src" / (name.replace(".", "/") + ".py"), path


def test_version_says_which_build_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    build = "compiled (mypyc)" if EXPECTED == "compiled" else "pure Python"
    assert capsys.readouterr().out.strip() == f"servelab {servelab.__version__} ({build})"


def _fake_build(tmp_path: Path, sources: dict[str, bytes]) -> tuple[Path, Path]:
    """A source tree and a package folder whose manifest records those sources."""
    src = tmp_path / "src"
    for name, text in sources.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(text)
    package = tmp_path / "build" / "servelab"
    package.mkdir(parents=True)
    digests = {name: hashlib.sha256(text).hexdigest() for name, text in sources.items()}
    (package / "_compiled_from.json").write_text(
        json.dumps({"source_root": str(src), "sha256": digests})
    )
    return src, package


def test_a_compiled_build_knows_when_its_sources_changed(tmp_path: Path) -> None:
    sources = {"servelab/native.py": b"# native\n", "servelab/kv/blocks.py": b"# blocks\n"}
    src, package = _fake_build(tmp_path, sources)
    assert native.stale_sources(package) == []
    (src / "servelab/kv/blocks.py").write_text("# blocks, edited\n")
    (src / "servelab/kv/new.py").write_text("# a module added since\n")
    assert native.stale_sources(package) == ["servelab/kv/blocks.py", "servelab/kv/new.py"]


def test_a_build_installed_away_from_its_sources_is_not_checked(tmp_path: Path) -> None:
    src, package = _fake_build(tmp_path, {"servelab/native.py": b"# native\n"})
    (src / "servelab/native.py").unlink()
    assert native.stale_sources(package) == []
    assert native.stale_sources(tmp_path) == []  # no manifest: a pure-Python install


def test_a_stale_build_refuses_to_import(tmp_path: Path) -> None:
    """The real compiled build, copied, beside sources that changed: importing it fails."""
    if EXPECTED != "compiled":
        pytest.skip("needs the compiled build (make test-compiled)")
    build = Path(servelab.__file__).resolve().parent.parent
    manifest = json.loads((build / "servelab" / "_compiled_from.json").read_text())
    copy = tmp_path / "build"
    subprocess.run(["cp", "-r", str(build), str(copy)], check=True)
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", manifest["source_root"], str(src)], check=True)
    manifest["source_root"] = str(src)
    (copy / "servelab" / "_compiled_from.json").write_text(json.dumps(manifest))
    probe = [sys.executable, "-c", "import servelab.kv.blocks"]
    env = {**os.environ, "PYTHONPATH": str(copy)}
    assert subprocess.run(probe, env=env, capture_output=True).returncode == 0
    with (src / "servelab" / "kv" / "blocks.py").open("a") as edit:
        edit.write("\n# edited\n")
    run = subprocess.run(probe, env=env, capture_output=True, text=True)
    assert run.returncode != 0
    assert "StaleBuild" in run.stderr and "servelab/kv/blocks.py" in run.stderr


def test_without_the_option_the_wheel_is_pure_python(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_COMPILE"}
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "-w", str(tmp_path), str(ROOT)],
        env=env,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("servelab-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "servelab/kv/blocks.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd", "_compiled_from.json"))]


def test_with_the_option_the_wheel_is_compiled() -> None:
    """The wheel ``make compiled`` built with SERVELAB_COMPILE=1 (``pip wheel``)."""
    if EXPECTED != "compiled":
        pytest.skip("needs the compiled build (make test-compiled)")
    (wheel,) = (ROOT / "build" / "wheels" / "compiled").glob("servelab-*.whl")
    assert not wheel.name.endswith("-none-any.whl")  # tagged for this interpreter and platform
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in native.COMPILED_MODULES:
        stem = module.replace(".", "/")
        assert f"{stem}.py" in names  # the source a learner reads ships beside it
        assert any(n.startswith(f"{stem}.") and n.endswith(".so") for n in names), module
    assert "servelab/_compiled_from.json" in names

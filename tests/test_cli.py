"""The ``servelab`` command as a user types it: each demo option, and ``servelab grade`` against
files that try to pass without implementing anything."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import servelab
from servelab import checkpoints
from servelab.grading import load_topic
from servelab.grading.mistakes import catalogued, correct_impl, topic_dir

SERVELAB = Path(sys.executable).parent / "servelab"  # the console script of this environment

# One small demo per option, each with what the summary must then say; the command is the
# literal line a user types. The first is the line as a user first types it; the others add
# `--device cpu` so they stay small on a machine with CUDA too (no kernel compilation).
DEMO_OPTIONS = [
    ("--requests 2", "2 requests"),
    ("--device cpu --requests 1", "on cpu,"),
    ("--device cpu --requests 1 --num-blocks 20", "pool of 20 blocks x 16 tokens"),
    ("--device cpu --requests 1 --block-size 8", "pool of 48 blocks x 8 tokens"),
    ("--device cpu --requests 1 --preemption swap", "(swap)"),
    ("--device cpu --requests 2 --no-prefix-cache", "prefix hits  0 of"),
    ("--device cpu --requests 1 --seed 3", "1 requests"),
    ("--device cpu --requests 1 --no-check", "KV waste"),
    ("--device cpu --requests 1 --quiet", "1/1 greedy outputs equal dense generation"),
]


def _shell(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        f"{SERVELAB} {line}", shell=True, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(("options", "says"), DEMO_OPTIONS, ids=[o for o, _ in DEMO_OPTIONS])
def test_each_demo_option_works_from_the_shell(options: str, says: str) -> None:
    done = _shell(f"demo {options}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert says in done.stdout
    assert ("check " in done.stdout) != ("--no-check" in options)
    assert ("tok/s" in done.stderr or "tok]" in done.stderr) != ("--quiet" in options)


def test_demo_still_accepts_the_separator_and_shows_its_own_help() -> None:
    done = _shell("demo -- --device cpu --requests 1 --quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    helped = _shell("demo --help")
    assert helped.returncode == 0 and "--num-blocks" in helped.stdout
    wrong = _shell("demo --requests two")
    assert wrong.returncode == 2 and "--requests" in wrong.stderr


# --- `servelab grade`: a file that implements nothing must not pass ------------------------

CORRECT = Path(checkpoints.__file__).parent / "weight_cache.py"  # the last step's checkpoint


def _grade(folder: Path, impl: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`servelab grade weight-cache --impl learner.py:Cache --step 1`, typed in ``folder``."""
    line = f"{SERVELAB} grade weight-cache --impl {impl} --step 1 {' '.join(extra)}"
    return subprocess.run(line, shell=True, cwd=folder, capture_output=True, text=True, timeout=300)


def _nothing(preamble: str) -> str:
    return textwrap.dedent(preamble) + "\nclass Cache:\n    pass\n"


PATCHES = {
    "rebinds _run_checks": """
        import servelab.grading.core as core
        core._run_checks = lambda *args, **kwargs: None
    """,
    "swaps the code of _run_checks": """
        import servelab.grading.core as core
        core._run_checks.__code__ = (lambda *args, **kwargs: None).__code__
    """,
    "rebinds grade": """
        import servelab.grading as grading
        import servelab.grading.core as core
        def grade(*args, **kwargs):
            print("PASSED")
        grading.grade = core.grade = grade
    """,
    "turns off the check, then patches": """
        import servelab._grade_child as child
        import servelab.grading.core as core
        child._Seal.changes = lambda self: []
        core._run_checks = lambda *args, **kwargs: None
    """,
    "empties the topic's checks": """
        from servelab.grading import load_topic
        for step in load_topic("weight-cache").steps:
            object.__setattr__(step, "probes", ())
            object.__setattr__(step, "machine", None)
    """,
    "shadows a builtin in the grader": """
        import servelab.grading.core as core
        core.isinstance = lambda *args: True
    """,
}


@pytest.mark.parametrize("patch", PATCHES.values(), ids=PATCHES.keys())
def test_grade_fails_a_file_that_patches_the_grader_when_imported(
    tmp_path: Path, patch: str
) -> None:
    (tmp_path / "learner.py").write_text(_nothing(patch), encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "changed the grader" in done.stdout
    assert done.stdout.rstrip().endswith("FAILED")


def test_grade_fails_a_file_that_patches_the_grader_while_it_runs(tmp_path: Path) -> None:
    """A patch made from a method, during grading, is found when grading ends."""
    source = """
        class Cache:
            def __init__(self, capacity):
                import servelab.grading.core as core
                core._run_checks = lambda *args, **kwargs: None
                raise NotImplementedError
    """
    (tmp_path / "learner.py").write_text(textwrap.dedent(source), encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "changed the grader" in done.stdout


def test_grade_fails_a_file_that_writes_a_verdict_itself(tmp_path: Path) -> None:
    """The verdict travels over a pipe with a per-run nonce: a file named on the command line,
    or "passed" written to every open descriptor, is no verdict."""
    forge = """
        import os, sys
        if "--verdict" in sys.argv:
            with open(sys.argv[sys.argv.index("--verdict") + 1], "w") as verdict:
                verdict.write("passed")
        for fd in range(3, 256):
            try:
                os.write(fd, b"passed\\n")
            except OSError:
                pass
        os._exit(0)
    """
    (tmp_path / "learner.py").write_text(_nothing(forge), encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("FAILED")


def test_a_servelab_package_in_the_learners_folder_is_not_imported(tmp_path: Path) -> None:
    """The grading child runs isolated: the working directory is not on its path."""
    fake = tmp_path / "servelab"
    fake.mkdir()
    (fake / "__init__.py").write_text("", encoding="utf-8")
    for name in ("__main__.py", "_grade_child.py", "cli.py"):
        (fake / name).write_text(
            "import os, sys\n"
            "print('the fake servelab ran')\n"
            "if '--verdict' in sys.argv:\n"
            "    open(sys.argv[sys.argv.index('--verdict') + 1], 'w').write('passed')\n"
            "os._exit(0)\n",
            encoding="utf-8",
        )
    (tmp_path / "learner.py").write_text(_nothing(""), encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the fake servelab ran" not in done.stdout
    assert done.stdout.rstrip().endswith("FAILED")


def test_a_module_named_like_the_standard_library_beside_the_file_is_not_imported(
    tmp_path: Path,
) -> None:
    """An innocent ``argparse.py`` beside a correct file: the file passes, argparse.py never
    runs; a helper module of the learner's own still imports."""
    (tmp_path / "argparse.py").write_text("print('argparse.py ran')\n", encoding="utf-8")
    (tmp_path / "json.py").write_text("print('json.py ran')\n", encoding="utf-8")
    (tmp_path / "helper.py").write_text(CORRECT.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "learner.py").write_text(
        "import json\nfrom helper import WeightCache as Cache\n", encoding="utf-8"
    )
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "argparse.py ran" not in done.stdout and "json.py ran" not in done.stdout
    assert done.stdout.rstrip().endswith("PASSED")


def test_what_the_cli_cannot_prevent(tmp_path: Path) -> None:
    """The limit, stated as a test: code that runs in the grading process can read that
    process's memory, so a file written to cheat on purpose can find the nonce and forge the
    verdict. The README says so; this test changes when that stops being true."""
    forge = """
        import os, sys
        frame = sys._getframe()
        while frame is not None and "nonce" not in frame.f_locals:
            frame = frame.f_back
        os.write(frame.f_locals["channel"], frame.f_locals["nonce"] + b" passed\\n")
        os._exit(0)
    """
    (tmp_path / "learner.py").write_text(_nothing(forge), encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_file_that_raises_while_it_loads_fails_with_its_own_traceback(tmp_path: Path) -> None:
    (tmp_path / "learner.py").write_text("x = 1\nraise RuntimeError('oops')\n", encoding="utf-8")
    done = _grade(tmp_path, "learner.py:Cache")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✗ loading your file raised RuntimeError" in done.stdout
    assert 'learner.py", line 2' in done.stderr and "_grade_child" not in done.stderr


def _correct_file(topic: str) -> str:
    """The topic's correct implementation, its last checkpoint, as ``--impl`` names it: the
    checkpoint's class, or for a dict of classes the catalogue's ``Correct``."""
    impl = correct_impl(topic)
    if isinstance(impl, dict):
        return f"grading/mistakes/{topic_dir(topic).name}/__init__.py:Correct"
    return f"checkpoints/{load_topic(topic).checkpoint}.py:{impl.__name__}"


CORRECT_FILES = {topic: _correct_file(topic) for topic in catalogued()}


@pytest.mark.parametrize("topic", [*CORRECT_FILES, "invariant-checker"])
def test_a_correct_file_passes_every_step_through_the_isolated_child(
    tmp_path: Path, topic: str
) -> None:
    """Grading itself changes nothing the child records: a correct file passes all steps."""
    if topic == "invariant-checker":
        source = (
            "from servelab.testing.block_manager import "
            "check_block_manager_invariants as check_invariants\n"
        )
        (tmp_path / "checker.py").write_text(source, encoding="utf-8")
        impl = "checker.py:check_invariants"
    else:
        impl = str(Path(servelab.__file__).parent / CORRECT_FILES[topic])
    line = f"{SERVELAB} grade {topic} --impl {impl}"
    done = subprocess.run(
        line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("PASSED")

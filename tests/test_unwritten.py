"""A method not written yet ends a notebook cell with one line, so Run All reaches the grade cell.

Cells run in a real IPython shell with :func:`servelab.unwritten.install`, as in a notebook.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from servelab import unwritten

SKELETON = """
class Cache:
    def put(self, key):
        raise NotImplementedError()

    def get(self, key):
        return {}[key]
"""


@pytest.fixture
def shell() -> Iterator[Any]:
    ip = InteractiveShell()
    assert unwritten.install(ip)
    ip.run_cell(SKELETON)
    yield ip
    ip.ast_transformers.clear()


def test_an_unwritten_method_ends_the_cell_with_one_line(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shell.run_cell("ran = []\nCache().put(1)\nran.append('after')\n'shown'")
    assert result.success and result.result is None
    assert shell.user_ns["ran"] == []  # the cell stopped at the unwritten call
    assert capsys.readouterr().out == (
        "`Cache.put` is not written yet: fill it in above, then run this cell again\n"
    )


def test_an_unwritten_method_in_the_last_expression_is_one_line_too(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shell.run_cell("Cache().put(1)")
    assert result.success and "`Cache.put` is not written yet" in capsys.readouterr().out


def test_a_cell_that_runs_shows_its_last_expression(shell: Any) -> None:
    result = shell.run_cell("x = 20\nx + 22")
    assert result.success and result.result == 42
    assert shell.run_cell("x + 1;").result == 21  # a trailing semicolon still hides it


def test_other_errors_keep_their_traceback_without_servelab_frames(shell: Any) -> None:
    result = shell.run_cell("Cache().get('missing')")
    assert isinstance(result.error_in_exec, KeyError)
    files = [f.filename for f in traceback.extract_tb(result.error_in_exec.__traceback__)]
    assert not [f for f in files if "unwritten" in f], files
    top = shell.run_cell("raise NotImplementedError('a cell of its own')")
    assert isinstance(top.error_in_exec, NotImplementedError)  # not a method: a real error


def test_a_library_not_implemented_error_is_not_blamed_on_the_learner(shell: Any) -> None:
    result = shell.run_cell("import numbers\nnumbers.Complex.real.fget(None)")  # the stdlib's
    assert isinstance(result.error_in_exec, NotImplementedError)
    assert unwritten.not_written_yet(NotImplementedError()) is None  # never raised: no frame


def test_a_grade_cell_still_raises_step_not_written(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(
        "from servelab import grade\n"
        "class SizedCache:\n"
        "    def __init__(self, capacity):\n"
        "        pass\n"
        "    def get(self, key):\n"
        "        raise NotImplementedError()\n"
        "    def put(self, key, value, size):\n"
        "        raise NotImplementedError()"
    )
    result = shell.run_cell('grade("weight-cache", SizedCache, step=1)')
    assert type(result.error_in_exec).__name__ == "StepNotWritten"
    assert "`put` is not written yet" in capsys.readouterr().out


def test_installing_twice_keeps_one_transformer_and_future_imports_work(shell: Any) -> None:
    assert unwritten.install(shell)
    assert len(shell.ast_transformers) == 1
    result = shell.run_cell("from __future__ import annotations\ny = 3\ny")
    assert result.success and result.result == 3


def test_outside_ipython_install_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test of IPython earlier in this process may have left a global shell behind.
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert unwritten.install() is False

"""A method not written yet ends a notebook cell with one line, not a traceback.

Jupyter's Run All stops at the first cell that raises. In a fresh exercise that would be the
first demo cell ("try your cache"), with a traceback ending in the skeleton's
``raise NotImplementedError()``, and the grade cell after it, which says what to write next,
would never run. :func:`install` (each course notebook's setup cell calls it) has IPython run
every later cell so that such an error prints one line instead::

    `SizedCache.put` is not written yet: fill it in above, then run this cell again

and ends the cell there without failing it, so Run All goes on to the grade cell.

Only a ``NotImplementedError`` raised by a function of the learner's own (the innermost frame
is neither servelab's nor a library's) is shortened: a grade cell still raises
``StepNotWritten`` with its report, and every other error keeps its traceback. The cell's last
expression is still displayed, and no frame of this module appears in any traceback.
"""

from __future__ import annotations

import ast
from types import CodeType, TracebackType
from typing import Any

from servelab.testing.core import is_library_code

__all__ = ["describe", "install", "not_written_yet"]

_HELPER = "__servelab_unwritten__"
_VALUE = "__servelab_value__"
_ERROR = "__servelab_error__"


def not_written_yet(error: BaseException) -> str | None:
    """The learner's function that raised ``error`` as not written yet, or None.

    None unless ``error`` is a ``NotImplementedError`` raised directly by a function (not a
    cell's top level) outside servelab and the installed libraries, and not a grade's report.
    """
    from servelab.grading.failures import GradeFailure

    # Triton's interpreter wraps what a kernel raises in InterpreterError (``raise ... from``)
    while type(error).__name__ == "InterpreterError" and error.__cause__ is not None:
        error = error.__cause__
    if not isinstance(error, NotImplementedError) or isinstance(error, GradeFailure):
        return None
    tb: TracebackType | None = error.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if code.co_name.startswith("<") or is_library_code(code.co_filename):
        return None
    if "site-packages" in code.co_filename or "dist-packages" in code.co_filename:
        return None
    name: str = getattr(code, "co_qualname", "") or _qualname(code, tb.tb_frame.f_locals)
    return name.rsplit("<locals>.", 1)[-1]  # a class defined inside a function: its own name


def _qualname(code: CodeType, local: dict[str, Any]) -> str:
    """``Class.method`` for a method's code object on Pythons without ``co_qualname``."""
    owner = local.get("self")
    for cls in type(owner).__mro__ if owner is not None else ():
        function = vars(cls).get(code.co_name)
        if getattr(function, "__code__", None) is code:
            return f"{cls.__name__}.{code.co_name}"
    return code.co_name


def describe(name: str) -> str:
    """The line a cell prints in place of the traceback."""
    return f"`{name}` is not written yet: fill it in above, then run this cell again"


class _CellRun:
    """Called by a transformed cell when its body raised NotImplementedError."""

    def stop(self, error: BaseException) -> bool:
        """Print the one line and return True, or return False: the cell re-raises."""
        name = not_written_yet(error)
        if name is None:
            return False
        print(describe(name))
        return True


class _Transformer(ast.NodeTransformer):
    """Wrap a cell's statements in ``try: ... except NotImplementedError: <one line>``
    (any other exception is re-raised as it was).

    The last expression is evaluated inside the ``try`` into a variable that the cell then
    shows as its last expression, so the cell's output is the same as before.
    """

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = node.body
        if not body or _must_stay_top_level(node):
            return node
        last: ast.expr | None = None
        if isinstance(body[-1], ast.Expr):
            last = body[-1].value
            assign = ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=last)
            body = [*body[:-1], ast.copy_location(assign, body[-1])]
        handler_body: list[ast.stmt] = [
            ast.If(
                test=ast.UnaryOp(
                    ast.Not(),
                    ast.Call(
                        ast.Attribute(ast.Name(_HELPER, ast.Load()), "stop", ast.Load()),
                        [ast.Name(_ERROR, ast.Load())],
                        [],
                    ),
                ),
                body=[ast.Raise()],
                orelse=[],
            )
        ]
        if last is not None:
            handler_body.append(
                ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=ast.Constant(None))
            )
        wrapped: list[ast.stmt] = [
            ast.Assign(
                targets=[ast.Name(_HELPER, ast.Store())],
                value=ast.Call(
                    ast.Attribute(
                        ast.Call(
                            ast.Name("__import__", ast.Load()),
                            [ast.Constant("servelab.unwritten")],
                            [ast.keyword("fromlist", ast.List([ast.Constant("_")], ast.Load()))],
                        ),
                        "_CellRun",
                        ast.Load(),
                    ),
                    [],
                    [],
                ),
            ),
            ast.Try(
                body=body,
                handlers=[
                    ast.ExceptHandler(
                        # Exception: Triton's interpreter wraps a kernel's NotImplementedError
                        type=ast.Name("Exception", ast.Load()),
                        name=_ERROR,
                        body=handler_body,
                    )
                ],
                orelse=[],
                finalbody=[],
            ),
        ]
        if last is not None:
            wrapped.append(ast.Expr(ast.Name(_VALUE, ast.Load())))
        for statement in wrapped[:1] + wrapped[2:]:
            ast.copy_location(statement, node.body[-1])
        ast.copy_location(wrapped[1], node.body[0])
        node.body = wrapped
        return ast.fix_missing_locations(node)


def _must_stay_top_level(node: ast.Module) -> bool:
    """A ``from __future__`` import must open the cell; leave such a cell as it is."""
    return any(
        isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        for statement in node.body
    )


def install(shell: Any = None) -> bool:
    """Have IPython print one line for a method not written yet; False outside IPython.

    Running it again (a setup cell run twice) changes nothing.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    transformers = shell.ast_transformers
    transformers[:] = [t for t in transformers if type(t).__name__ != _Transformer.__name__]
    transformers.append(_Transformer())
    return True

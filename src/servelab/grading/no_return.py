"""A method of the learner's with no ``return`` of a value, found as the first difference
(it returned None where the reference returns a value), before a Python error about a None:
what is certain of it, read from its own source and from the error as it was raised."""

from __future__ import annotations

import ast
import inspect
import textwrap
import traceback
import types
from typing import Any

from servelab.grading.localise import Divergence
from servelab.testing.core import is_library_code


def returns_no_value(method: Any) -> bool | None:
    """Whether ``method``'s own source holds no ``return`` with a value (nested functions
    and lambdas aside): it returns None on every call. None where the source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    stack: list[ast.AST] = list(tree.body[0].body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom) and node.value is not None:
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def learners_method(cls: type, name: str) -> Any:
    """The first ``name`` in ``cls``'s classes written in the learner's code (a grader's
    wrapper around it, or the notebook's class under it, is not theirs)."""
    for klass in cls.__mro__:
        found = vars(klass).get(name)
        if isinstance(found, types.FunctionType) and not is_library_code(
            found.__code__.co_filename
        ):
            return found
    return None


def none_returned(d: Divergence | None, exc: BaseException | None) -> str | None:
    """The sentence for a learner's method that returned None at the first difference where
    the reference returns a value, whose source has no ``return`` of a value, when the error
    the program ended with is a TypeError about a None: the method, what the reference
    returns, and the line that raised (whoever's it is). Nothing is said of other causes."""
    if d is None or not isinstance(exc, TypeError) or "NoneType" not in str(exc):
        return None
    if d.mine[0] != "returned None" or not d.theirs[0].startswith("returned "):
        return None
    theirs = d.theirs[0][len("returned ") :]
    if theirs == "None" or d.subject is None:
        return None
    if returns_no_value(learners_method(type(d.subject), d.method)) is not True:
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    at = f"`{last.line.strip()}` in `{last.name}`" if last is not None and last.line else "a line"
    return (
        f"start at your `{d.method}`: it has no `return` with a value, so every call returns "
        f"None; on the call under where: the reference returns {theirs}. Later, {at} raised "
        f"TypeError: {exc} (a None used as a value): return what the caller needs"
    )

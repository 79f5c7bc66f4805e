"""A reproduce listing runs when pasted: a refusal the check caught is written under
``suppress``, and the line a report is about stays bare."""

from __future__ import annotations

import pytest

from servelab.grading._script import Script
from servelab.testing.pasteable import SUPPRESS_IMPORT, Caught, builtin_kind


class Refused(ValueError):
    """A notebook's own error: a ValueError underneath."""


class Cache:
    def put(self, key: str, size: int) -> None:
        if size <= 0:
            raise Refused(f"size must be positive, got {size}")

    def get(self, key: str) -> None:
        raise KeyError(key)


def test_the_name_written_is_the_nearest_builtin_class() -> None:
    assert builtin_kind(Refused("x")) == "ValueError"
    assert builtin_kind(KeyError("x")) == "KeyError"


def test_a_caught_refusal_is_written_under_suppress_once_the_program_goes_on() -> None:
    s = Script({"Cache": Cache})
    s("cache = Cache()")
    for size in (0, -1):
        with pytest.raises(Refused):
            s(f"cache.put('a', {size})")
    s("cache.put('a', 1)")
    assert s.lines == [
        "cache = Cache()",
        SUPPRESS_IMPORT,
        "with suppress(ValueError): cache.put('a', 0)",
        "with suppress(ValueError): cache.put('a', -1)",
        "cache.put('a', 1)",
    ]
    ns: dict[str, object] = {"Cache": Cache}
    exec("\n".join(s.lines), ns)  # pasted, it runs to the end


def test_the_failing_line_stays_bare() -> None:
    s = Script({"Cache": Cache})
    s("cache = Cache()")
    with pytest.raises(KeyError):
        s("cache.get('a')")
    failure = None
    try:
        s("cache.get('a')")
    except KeyError:
        failure = s.fail("get raised KeyError for a missing key; it answers None")
    assert failure is not None
    assert failure.code.splitlines()[-1] == "cache.get('a')"  # the error the report is about
    assert failure.code.splitlines()[-2] == "with suppress(KeyError): cache.get('a')"


def test_a_check_that_fails_after_the_refusal_was_caught_settles_it() -> None:
    s = Script({"Cache": Cache})
    s("cache = Cache()")
    with pytest.raises(Refused):
        s("cache.put('a', 0)")
    failure = s.fail("the refusal changed the cache")
    assert failure.code.splitlines()[-1] == "with suppress(ValueError): cache.put('a', 0)"


def test_a_machine_keeps_the_line_whose_error_is_the_failure_bare() -> None:
    lines = ["cache = Cache()", "cache.get('a')"]
    caught = Caught(lines)
    error = KeyError("a")
    caught.raised(error)
    caught.failed_with(error)
    assert lines[-1] == "cache.get('a')"
    caught.failed_with(AssertionError("the state differs"))
    assert lines[-1] == "with suppress(KeyError): cache.get('a')"


def test_a_wrong_error_noted_inside_its_handler_stays_bare() -> None:
    s = Script({"Cache": Cache})
    s("cache = Cache()")
    try:
        s("cache.get('a')")
    except KeyError:
        s.note("cache  # a note written while the error is handled")
        failure = s.fail("get raised KeyError, expected None")
    assert failure.code.splitlines()[1] == "cache.get('a')"


def test_a_note_after_the_refused_call_leaves_the_call_the_one_written_under_suppress() -> None:
    s = Script({"Cache": Cache})
    s("cache = Cache()")
    try:
        s("cache.put('a', 0)")
    except Refused:
        s.note("cache  # noted while the refusal is handled")
    s("cache.put('a', 1)")
    assert s.lines[1:4] == [
        SUPPRESS_IMPORT,
        "with suppress(ValueError): cache.put('a', 0)",
        "cache  # noted while the refusal is handled",
    ]

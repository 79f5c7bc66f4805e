"""In a notebook the failing call is also drawn: the learner's structure beside the reference's,
exactly the differing entries marked; a terminal gets the report's words alone.

These are the generic table's tests (the picture where no renderer draws the topic's
structure); ``test_structure_picture.py`` tests the renderers' pictures."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from servelab.grading import GradeFailure, core, grade
from servelab.grading import structure_picture as sp
from servelab.grading.difference_picture import differing_entries, render_difference
from servelab.grading.mistakes import mistakes

_ENTRY = re.compile(
    r'<span class="sl-entry( sl-differs)?" data-field="([^"]*)" data-entry="([^"]*)"'
)


def _columns(html: str) -> list[dict[str, set[str]]]:
    """Per column (yours, the reference): every field drawn, with the entries marked in it."""
    columns: list[dict[str, set[str]]] = [{}, {}]
    for row in html.split("<tr>")[2:]:
        for column, cell in zip(columns, row.split("<td>")[1:], strict=True):
            for marked, name, entry in _ENTRY.findall(cell):
                column.setdefault(name, set())
                if marked:
                    column[name].add(entry)
    return columns


def _drawn(topic: str, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    shown: list[str] = []
    monkeypatch.setattr(core, "_in_notebook", lambda: True)
    monkeypatch.setattr(sp, "structure_picture", lambda topic, d: None)  # the table alone
    monkeypatch.setattr(core, "_display_html", shown.append)
    impl = next(m.impl for m in mistakes(topic) if m.name == name)
    printed = io.StringIO()
    monkeypatch.setattr("sys.stdout", printed)
    with pytest.raises(GradeFailure) as failure:
        grade(topic, impl)
    assert len(shown) == 1, "the picture is shown once, under the report"
    assert failure.value.report.picture == shown[0]
    return shown[0], printed.getvalue()


# (topic, mistake, the field whose entries differ -> (marked in yours, marked in the reference))
CASES: list[tuple[str, str, dict[str, tuple[set[str], set[str]]]]] = [
    ("weight-cache", "evict_newest", {"outcome": ({""}, {""})}),
    (
        "eviction-policy",
        "lfu_ignores_pins",
        {"len": ({""}, {""}), "eviction order": ({"0"}, set()), "pinned": (set(), {"0"})},
    ),
    (
        "block-manager",
        "allocate_zero_takes_block",
        {
            "tables": ({"2"}, {"2"}),
            "refcounts": ({"3"}, set()),
            "free": (set(), {"0"}),
            "num_free": ({""}, {""}),
        },
    ),
    ("scheduler", "admit_past_watermark", {"outcome": ({""}, {""})}),
]


@pytest.mark.parametrize("topic, name, marks", CASES, ids=[f"{t}/{n}" for t, n, _ in CASES])
def test_the_failing_call_is_drawn_with_exactly_the_differing_entries_marked(
    topic: str, name: str, marks: dict[str, tuple[set[str], set[str]]], monkeypatch: Any
) -> None:
    html, printed = _drawn(topic, name, monkeypatch)
    report_where = re.search(r"called as (\S+?\(.*?\)), on:", printed)
    assert report_where is not None and report_where.group(1) in html.replace("&#x27;", "'")
    assert "yours" in html and "the reference" in html
    yours, reference = _columns(html)
    assert set(yours) == set(reference), "both structures are drawn, field for field"
    assert len(yours) > 2, "every observable field, not a subset"
    for field in yours:
        expected = marks.get(field, (set(), set()))
        assert (yours[field], reference[field]) == expected, field
    assert "sl-differs" not in printed, "the words stay plain text"


def test_a_terminal_gets_no_picture(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []
    monkeypatch.setattr(core, "_display_html", shown.append)
    assert not core._in_notebook(), "no Jupyter kernel runs the tests"
    impl = next(m.impl for m in mistakes("weight-cache") if m.name == "evict_newest")
    with pytest.raises(GradeFailure) as failure:
        grade("weight-cache", impl, out=io.StringIO())
    assert failure.value.report.picture is not None and not shown


def test_entries_are_aligned_before_they_are_marked() -> None:
    # a free list that lost its head differs in that block, not in every position after it
    assert differing_entries([4, 5, 6], [3, 4, 5, 6]) == (set(), {"0"})
    assert differing_entries({0: [1], 1: [2]}, {0: [1], 1: [3]}) == ({"1"}, {"1"})
    assert differing_entries(3, 3) == (set(), set())
    assert differing_entries(3, [3]) == ({""}, {""})


def test_the_picture_is_the_same_text_on_every_run() -> None:
    args = ("c.put('a', 1)", ("returned None", {"used": 1}), ("returned None", {"used": 2}), "put")
    assert render_difference(*args) == render_difference(*args)
    assert "<script" not in render_difference(*args)

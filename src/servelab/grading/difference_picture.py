"""The failing call drawn: the learner's structure beside the reference's, differences marked.

A report's ``where:`` lines say in words how the first diverging call changed the state; in a
notebook the same call is also drawn, as two columns of the topic's observable fields (every
field, as in the words), each value split into its entries (a list's positions, a dict's keys)
so that exactly the entries that differ between the two are marked. The picture is HTML that
depends only on the two states, so the same failure draws the same picture on every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from difflib import SequenceMatcher
from html import escape
from typing import Any

__all__ = ["STYLE", "difference_table", "differing_entries", "heading", "render_difference"]

STYLE = (
    "<style>"
    ".sl-diff{border-collapse:collapse;font-family:monospace;font-size:12px;margin:4px 0}"
    ".sl-diff th,.sl-diff td{border:1px solid #ccc;padding:2px 6px;text-align:left;"
    "vertical-align:top}"
    ".sl-diff .sl-entry{display:inline-block;border:1px solid #bbb;border-radius:3px;"
    "margin:1px;padding:0 4px}"
    ".sl-diff .sl-differs{background:#fdd;border-color:#c00;font-weight:bold}"
    "</style>"
)


def _entries(value: Any) -> list[tuple[str, Any]] | None:
    """A value's entries as (label, entry): a list's positions, a dict's keys; None for a
    value that is one entry (a number, a string, an error)."""
    if isinstance(value, Mapping):
        return [(repr(k), v) for k, v in value.items()]
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    return None


def differing_entries(mine: Any, theirs: Any) -> tuple[set[str], set[str]]:
    """The labels of the entries of ``mine`` and of ``theirs`` that differ from the other's
    (``""`` stands for a whole value that differs, one that has no entries). Two lists are
    aligned first (a free list that lost its head differs in that one block, not in all)."""
    if mine == theirs:
        return set(), set()
    left, right = _entries(mine), _entries(theirs)
    if left is None or right is None or isinstance(mine, Mapping) != isinstance(theirs, Mapping):
        return {""}, {""}
    if isinstance(mine, list):
        matcher = SequenceMatcher(None, list(map(repr, mine)), list(map(repr, theirs)), False)
        same = [m for m in matcher.get_matching_blocks() if m.size]
        kept_left = {i for m in same for i in range(m.a, m.a + m.size)}
        kept_right = {j for m in same for j in range(m.b, m.b + m.size)}
        return (
            {str(i) for i in range(len(mine)) if i not in kept_left},
            {str(j) for j in range(len(theirs)) if j not in kept_right},
        )
    lmap, rmap = dict(left), dict(right)
    missing = object()
    return (
        {k for k, v in left if rmap.get(k, missing) != v},
        {k for k, v in right if lmap.get(k, missing) != v},
    )


# The mark again as an inline style: a saved notebook opened untrusted drops the <style> above
# but keeps these, so the differing entries stay marked there too.
_MARKED = ' style="background:#fdd;border:1px solid #c00;font-weight:bold"'


def _mark(differs: bool) -> tuple[str, str]:
    """The class suffix and the inline style of an entry that differs (or neither)."""
    return (" sl-differs", _MARKED) if differs else ("", "")


def _cell(value: Any, marked: set[str], field: str) -> str:
    entries = _entries(value)
    if entries is None:
        mark, style = _mark("" in marked)
        return (
            f'<span class="sl-entry{mark}" data-field="{escape(field)}" data-entry=""{style}>'
            f"{escape(repr(value))}</span>"
        )
    if not entries:  # drawn as an entry too, so the field is there on both sides
        return (
            f'<span class="sl-entry" data-field="{escape(field)}" data-entry=""><i>empty</i></span>'
        )
    parts = []
    for label, entry in entries:
        mark, style = _mark(label in marked)
        shown = f"{label}: {entry!r}" if isinstance(value, Mapping) else repr(entry)
        parts.append(
            f'<span class="sl-entry{mark}" data-field="{escape(field)}" '
            f'data-entry="{escape(label)}"{style}>{escape(shown)}</span>'
        )
    return "".join(parts)


def render_difference(
    call: str,
    mine: tuple[str, Mapping[str, Any]],
    theirs: tuple[str, Mapping[str, Any]],
    method: str,
) -> str:
    """HTML: the call, then a row per field (and one for the outcome) with the learner's value
    beside the reference's, the differing entries marked."""
    names = list(mine[1]) + [n for n in theirs[1] if n not in mine[1]]
    return (
        f'{STYLE}<div class="sl-difference">{heading(call, method)}'
        + difference_table(mine, theirs, names)
        + "</div>"
    )


def heading(call: str, method: str) -> str:
    """The picture's first line: the method and the call it draws."""
    return (
        f"<div>the difference starts in your <code>{escape(method)}</code>: after "
        f"<code>{escape(call)}</code></div>"
    )


def difference_table(
    mine: tuple[str, Mapping[str, Any]], theirs: tuple[str, Mapping[str, Any]], names: list[str]
) -> str:
    """The outcome and the ``names`` fields, the learner's beside the reference's, marked."""
    outcome_marks = {""} if mine[0] != theirs[0] else set()
    rows = [
        "<tr><th>outcome</th>"
        f"<td>{_cell_text(mine[0], outcome_marks)}</td>"
        f"<td>{_cell_text(theirs[0], outcome_marks)}</td></tr>"
    ]
    for name in names:
        left, right = mine[1].get(name), theirs[1].get(name)
        lmarks, rmarks = differing_entries(left, right)
        rows.append(
            f"<tr><th>{escape(name)}</th><td>{_cell(left, lmarks, name)}</td>"
            f"<td>{_cell(right, rmarks, name)}</td></tr>"
        )
    return (
        '<table class="sl-diff"><tr><th></th><th>yours</th><th>the reference</th></tr>'
        + "".join(rows)
        + "</table>"
    )


def _cell_text(text: str, marked: set[str]) -> str:
    mark, style = _mark(bool(marked))
    return (
        f'<span class="sl-entry{mark}" data-field="outcome" data-entry=""{style}>'
        f"{escape(text)}</span>"
    )

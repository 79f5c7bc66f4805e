"""How a picture reaches the page: SVG ids that cannot collide, and outputs that render untrusted.

Two problems of SVG in notebooks are solved here once for every renderer:

* **Ids.** SVG ``id`` attributes share one namespace per HTML page. With several pictures in
  one notebook, ``url(#pinned-hatch)`` in the second picture resolves to the first picture's
  pattern, and when that picture is redrawn or hidden the hatching disappears. :func:`scoped_ids`
  suffixes every id with a digest of the picture itself: unique per drawing, yet the same text
  on every run, so re-running a notebook does not change its stored outputs.
* **Trust.** JupyterLab shows ``image/svg+xml`` only in trusted notebooks; a notebook opened
  from a fresh clone is untrusted and shows ``<IPython.core.display.SVG object>``. A
  :class:`Picture` also carries an ``<img>`` with the SVG as a data URL, which JupyterLab's
  sanitizer keeps, so the picture shows whether or not the notebook is trusted.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from html import escape
from typing import Any

__all__ = ["MARK", "Picture", "img_tag", "mark_outline", "scoped_ids", "with_static_picture"]

#: The colour of the outline around an entry that differs from the other side's (a grade's
#: picture of the failing call draws the learner's state beside the reference's).
MARK = "#c00"

_ID = re.compile(r'\bid="([A-Za-z][\w-]*)"')


def scoped_ids(svg: str) -> str:
    """Rename every ``id`` (and each ``url(#id)`` / ``href="#id"`` to it) to a unique name.

    The suffix is a digest of the SVG text, so the same picture always gets the same ids
    and two different pictures never share one.
    """
    names = sorted(set(_ID.findall(svg)), key=len, reverse=True)
    if not names:
        return svg
    digest = hashlib.sha1(svg.encode("utf-8")).hexdigest()[:10]
    for name in names:
        scoped = f"{name}-{digest}"
        svg = (
            svg.replace(f'id="{name}"', f'id="{scoped}"')
            .replace(f"url(#{name})", f"url(#{scoped})")
            .replace(f'href="#{name}"', f'href="#{scoped}"')
        )
    return svg


def mark_outline(x: float, y: float, width: float, height: float) -> str:
    """A dashed red outline around an entry marked as differing: visible without any CSS,
    so the mark survives a sanitizer that drops the page's styles."""
    return (
        f'<rect class="mark" x="{x:g}" y="{y:g}" width="{width:g}" height="{height:g}" rx="4" '
        f'fill="none" stroke="{MARK}" stroke-width="2" stroke-dasharray="5 3"/>'
    )


def img_tag(svg: str, *, alt: str = "") -> str:
    """An ``<img>`` showing ``svg`` from a data URL: kept by sanitizers, isolated ids."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{escape(alt)}"/>'


class Picture:
    """An SVG drawing as a notebook output that renders in trusted and untrusted notebooks.

    The bundle holds the SVG itself (GitHub, nbconvert and trusted notebooks), an ``<img>``
    fallback (untrusted notebooks) and a one-line text description (terminals, nbval).
    """

    def __init__(self, svg: str, *, alt: str = "picture") -> None:
        self.data = svg
        self.alt = alt

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {
            "image/svg+xml": self.data,
            "text/html": img_tag(self.data, alt=self.alt),
            "text/plain": f"<{self.alt}>",
        }

    def __repr__(self) -> str:
        return f"Picture({self.alt!r})"


def with_static_picture(box: Any, svg: Callable[[], str], *, alt: str = "picture") -> Any:
    """Give an ipywidgets box a static fallback: the picture it shows when it is displayed.

    A saved notebook keeps a widget's output, but the widget itself needs a live kernel (or
    saved widget state, which changes on every run). The fallback ``<img>`` is what a notebook
    opened without a kernel shows; a live JupyterLab prefers the widget and ignores it.
    """
    widget_bundle = box._repr_mimebundle_

    def bundle(**kwargs: Any) -> Any:
        data = widget_bundle(**kwargs)
        if isinstance(data, dict):
            data = {**data, "text/html": img_tag(svg(), alt=alt)}
        return data

    box._repr_mimebundle_ = bundle
    return box

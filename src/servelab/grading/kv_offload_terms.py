"""Which term of a load differs: yours and the reference's load_seconds called again on your
hierarchy with the tier's link cut to its latency alone (a bandwidth no load feels) and to its
bandwidth alone (no latency). A hint about one term is true of yours only where that term
differs; a load that is not the sum of its two terms (a link read elsewhere, a cost that does
not add up) proves neither, and neither hint is shown."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import TYPE_CHECKING, Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

if TYPE_CHECKING:
    from servelab.grading.localise import Divergence

__all__ = [
    "bytes_term_differs",
    "latency_term_differs",
    "load_again",
    "load_terms",
    "own_numbers_missed",
]

_UNFELT = 1e30  # bytes per second: the bytes part of any load vanishes beside a latency


def load_again(
    cls: Any, subject: Any, tokens: Any, tier: Any, link: Any = None, model: Any = None
) -> float | None:
    """``cls.load_seconds`` on a shallow copy of ``subject`` whose link to ``tier`` is
    ``link`` and whose model is ``model`` (None: the subject's own); None when it raises,
    runs past its lines or returns no finite number."""
    try:
        h = copy.copy(subject)
        if link is not None:
            h.links = {**subject.links, tier: link}
        if model is not None:
            h.model = model
        with line_budget(LINES_PER_CALL):
            value = cls.load_seconds(h, tokens, tier)
    except Exception:
        return None
    except OutOfLines:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-15)


def load_terms(divergence: Divergence | None) -> tuple[bool, bool] | None:
    """(the latency term differs, the bytes term differs) at the first diverging call of
    load_seconds, each side's load being the sum of its two terms; None where that is not so,
    or the call is not a load."""
    d = divergence
    if d is None or d.method.rpartition(".")[2] != "load_seconds" or d.reference_class is None:
        return None
    args = list(d.args)
    for name in ("tokens", "tier")[len(args) :]:
        if name not in d.kwargs:
            return None
        args.append(d.kwargs[name])
    if len(args) != 2 or d.subject is None:
        return None
    tokens, tier = args
    try:
        link = d.subject.links[tier]
        latency_only = dataclasses.replace(link, bandwidth=_UNFELT)
        bytes_only = dataclasses.replace(link, latency_s=0.0)
    except Exception:
        return None
    parts = []
    for cls in (type(d.subject), d.reference_class):
        whole = load_again(cls, d.subject, tokens, tier, None)
        latency = load_again(cls, d.subject, tokens, tier, latency_only)
        moved = load_again(cls, d.subject, tokens, tier, bytes_only)
        if whole is None or latency is None or moved is None:
            return None
        if not _close(whole, latency + moved):
            return None
        parts.append((latency, moved))
    (mine_latency, mine_bytes), (their_latency, their_bytes) = parts
    return not _close(mine_latency, their_latency), not _close(mine_bytes, their_bytes)


def latency_term_differs(divergence: Divergence | None) -> bool:
    """Whether yours pays another latency than the reference at the call (proved as above)."""
    terms = load_terms(divergence)
    return terms is not None and terms[0]


def bytes_term_differs(divergence: Divergence | None) -> bool:
    """Whether yours moves its bytes in another time than the reference at the call."""
    terms = load_terms(divergence)
    return terms is not None and terms[1]


_OWN = ("model", "flops", "links", "chunk_tokens")  # what a grader (or a deployment) sets


def own_numbers_missed(divergence: Divergence | None) -> bool:
    """Whether yours agrees with the reference on the class's own numbers and parts from it
    only once the hierarchy's model, flops, links or chunk size are set to others: a number
    yours fixed where it should read the hierarchy's. Called again on a copy of yours with
    those set back to the class's."""
    d = divergence
    if d is None or d.subject is None or d.reference_class is None:
        return False
    method = d.method.rpartition(".")[2]
    if method not in ("load_seconds", "recompute_seconds"):
        return False
    h = copy.copy(d.subject)
    own = vars(h)
    if not any(name in own for name in _OWN):
        return False  # nothing set: the numbers are the class's already
    for name in _OWN:
        own.pop(name, None)
    values = []
    for cls in (type(d.subject), d.reference_class):
        try:
            with line_budget(LINES_PER_CALL):
                values.append(getattr(cls, method)(h, *d.args, **d.kwargs))
        except Exception:
            return False
        except OutOfLines:
            return False
    mine, theirs = values
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return numbers and _close(float(mine), float(theirs))

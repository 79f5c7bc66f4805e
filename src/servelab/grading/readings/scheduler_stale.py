"""An admission decided on what was true before: each reading proven by a re-run on a copy.

``admit`` asks each request against the pool as it is then, and nothing else. Two ways it
can decide on an older picture, each named only where a re-run of your ``admit`` records it:

- the free count read before the first allocation and never again while later requests are
  allocated (every read of ``bm.num_free`` outside the block manager's own calls is traced);
- something your scheduler holds from before the call that a new scheduler of your class
  lacks (an attribute), which stops an admission the reference makes: on a copy with that
  attribute as a new scheduler has it, your ``admit`` takes the request.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import StepOutput

# the reference scheduler's own state: what a step may change, not a kept picture
_OWN = frozenset(
    ("bm", "watermark", "preemption", "host", "waiting", "running", "_live", "_swapped", "_undo")
)


def _traced(subject: Any) -> list[tuple[str, Any]] | None:
    """Your ``admit`` run again on a copy: each read of ``bm.num_free`` made outside the block
    manager's own calls (with its value) and each ``bm.allocate`` (with its request), in order;
    None when it cannot run."""
    events: list[tuple[str, Any]] = []
    inside = [0]
    try:
        obj = copy.deepcopy(subject)
        bm = obj.bm
        base = type(bm)
        real = base.num_free
        if not isinstance(real, property) or real.fget is None:
            return None
        getter = real.fget

        def num_free(self: Any) -> Any:
            value = getter(self)
            if not inside[0]:
                events.append(("read", value))
            return value

        def wrap(name: str) -> None:
            method = getattr(bm, name)

            def call(*a: Any, **k: Any) -> Any:
                if name == "allocate" and not inside[0] and a:
                    events.append(("allocate", a[0]))
                inside[0] += 1
                try:
                    return method(*a, **k)
                finally:
                    inside[0] -= 1

            setattr(bm, name, call)

        bm.__class__ = type(base.__name__, (base,), {"num_free": property(num_free)})
        for name in ("allocate", "free_seq", "append_slot"):
            wrap(name)
        with line_budget(LINES_PER_CALL):
            obj.admit(StepOutput())
    except (Exception, OutOfLines):
        return None
    return events


def free_read_once(d: Any, extra: list[Any]) -> str | None:
    """Yours admitted ``extra`` (requests the reference leaves waiting), and a re-run shows
    every read of ``bm.num_free`` made before the first allocation, with requests allocated
    after it, the first of ``extra`` among them: nothing it read saw their blocks taken."""
    events = _traced(d.subject)
    if not events or not extra:
        return None
    kinds = [kind for kind, _ in events]
    if "read" not in kinds or "allocate" not in kinds:
        return None
    first_allocation = kinds.index("allocate")
    if "read" in kinds[first_allocation:]:
        return None
    allocated = [what for kind, what in events if kind == "allocate"]
    if extra[0] not in allocated[1:]:
        return None
    before = allocated[: allocated.index(extra[0])]
    reads = kinds.count("read")
    value = events[kinds.index("read")][1]
    times = "once" if reads == 1 else f"{reads} times"
    return (
        f"re-run on a copy, your admit read bm.num_free {times}, before its first allocation "
        f"({value} free), and allocated {len(allocated)} requests without reading it again: "
        f"request {extra[0]} was admitted after {before} took their blocks, and nothing your "
        "admit read counts them. Ask each request against the pool as it is then: "
        "fits(seq.num_tokens) reads bm.num_free anew"
    )


def _admits(obj: Any, sid: Any) -> bool | None:
    """Whether your ``admit``, run on ``obj``, puts request ``sid`` in running."""
    try:
        with line_budget(LINES_PER_CALL):
            obj.admit(StepOutput())
        return any(getattr(s, "seq_id", None) == sid for s in obj.running)
    except (Exception, OutOfLines):
        return None


def kept_from_before(d: Any, refused: list[Any]) -> str | None:
    """Yours left ``refused`` waiting where the reference admits them, and an attribute your
    scheduler holds that a new scheduler of your class lacks (or holds otherwise) is what
    stops it: on a copy with that attribute as the new one has it, your admit takes the
    request, and on a plain copy it does not."""
    subject = d.subject
    if not refused:
        return None
    try:
        fresh = type(subject)(copy.deepcopy(subject.bm), watermark=subject.watermark)
        held, new = dict(vars(subject)), dict(vars(fresh))
    except Exception:
        return None
    if _admits(copy.deepcopy(subject), refused[0]) is not False:
        return None
    for name, value in held.items():
        if name in _OWN:
            continue
        try:
            if name in new and bool(new[name] == value):
                continue
        except Exception:
            continue
        obj = copy.deepcopy(subject)
        try:
            if name in new:
                setattr(obj, name, copy.deepcopy(new[name]))
            else:
                delattr(obj, name)
        except Exception:
            continue
        if _admits(obj, refused[0]) is not True:
            continue
        shown = repr(value)
        shown = shown if len(shown) <= 40 else f"{shown[:37]}..."
        lacks = f"holds {new[name]!r}" if name in new else "has none"
        reset = f"with self.{name} as the new one has it" if name in new else f"without self.{name}"
        return (
            f"your scheduler holds self.{name} = {shown} from before this call, where a new "
            f"scheduler of your class {lacks}; on a copy {reset}, your admit takes request "
            f"{refused[0]}, as the reference does, and on a plain copy it does not: "
            f"self.{name}, still set at this call, stops admission here. Admit on what "
            "waiting and the pool show now"
        )
    return None

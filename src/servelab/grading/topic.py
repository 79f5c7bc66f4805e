"""What a graded topic declares: its steps, probes, state machines, replay and checkpoint.

Each ``servelab.grading.<topic>`` module builds one :class:`Topic` from these parts, and
:mod:`servelab.grading.registry` lists the topics; the grader (:mod:`servelab.grading.core`)
and diagnosis (:mod:`servelab.grading.diagnose`) read everything about a topic from its
``Topic``. Nothing here imports a topic or the grader, so a topic module imports only this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

from servelab.grading.about import About, Hint
from servelab.grading.replay import TopicReplay
from servelab.testing.core import RecordingMachine

__all__ = [
    "SHRINK_PROGRAMS",
    "Diagnose",
    "MachineCheck",
    "Probe",
    "ProbeFailed",
    "Step",
    "Topic",
    "TopicReplay",
]

#: Programs Hypothesis may run while shrinking one failure. A count, not seconds, so the
#: report is the same on a quiet laptop and on a loaded CI runner.
SHRINK_PROGRAMS = 400

#: ``diagnose(program_lines, impl) -> str | None``; see :attr:`Topic.diagnose`.
Diagnose = Callable[[Sequence[str], Any], "str | None"]


class ProbeFailed(AssertionError):
    """A probe saw the wrong behaviour. ``code`` is the scenario as paste-able lines.

    ``hint`` overrides the probe's own hint when the probe can tell that a different mistake
    than the one it targets produced the failure (an eviction count off inside a recency probe).
    """

    def __init__(
        self, message: str, code: Sequence[str] | str = (), hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if isinstance(code, str) else "\n".join(code)
        self.hint = hint


@dataclass(frozen=True)
class Probe:
    """A targeted scenario that catches one known mistake; ``hint`` names that mistake."""

    name: str
    hint: str
    run: Callable[[Any], None]
    seconds: float | None = None
    """CPU seconds the probe may run before it is reported hung; None: the grader's default.
    A topic whose probes compile code (Triton on a GPU) needs longer than a loop ever should."""
    hang_hint: Callable[[str], str] | None = None
    """The hint where a call of this probe never returns, from the program that hung, when
    that program tells why (every key pinned); "" or None: the grader's general hint."""


@dataclass(frozen=True)
class MachineCheck:
    """A Hypothesis state machine over the implementation, compared with a model.

    ``shrink_programs`` bounds how many programs shrinking one failure may run: a machine
    whose programs are costly can lower it to keep a failing grade within its CPU budget.
    """

    name: str
    build: Callable[[Any], type[RecordingMachine]]
    invariants: Sequence[str]
    hints: Mapping[str, str] = field(default_factory=dict)
    max_examples: int = 150
    step_count: int = 30
    shrink_programs: int = SHRINK_PROGRAMS
    in_final_grade: bool = False
    """The grade of every step runs this earlier step's machine too, once the last step's passed:
    set where the last step's machine does not check this one's rules or drive its calls as
    often, so that a mistake this step's grade catches never passes the grade of every step."""
    generic_hint: str = Hint(
        "compare the calls above with the rules of this step; the model's expectation is "
        "in the message",
        About(),
    )


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    probes: Sequence[Probe] = ()
    machine: MachineCheck | None = None


@dataclass(frozen=True)
class Topic:
    """A graded topic: its steps, and optionally a ``diagnose`` hook that names mistakes.

    ``diagnose(program_lines, impl) -> str | None`` is called once when a probe or a state
    machine fails (a wrong result, an invariant broken, or an exception from the learner's
    code; not for a hang, an unwritten step or a stale class). ``program_lines`` is the failing
    program exactly as the report shows it under "reproduce:" (paste-able lines, the first one
    constructing the object, comment-only annotations such as ``cache.keys()  # [...]``
    included); ``impl`` is what was graded. A string it returns replaces the check's hint in
    the report; None keeps the check's hint. It runs within the budget of
    :func:`~servelab.grading.steady.diagnosis_budget` (5 s of CPU); if it raises or hangs,
    the check's hint is kept. It must not print, and must return the same answer for the
    same inputs.
    """

    name: str
    title: str
    steps: Sequence[Step]
    diagnose: Diagnose | None = None
    replay: TopicReplay | None = None
    """How diagnosis replays this topic's programs, and the programs that separate its known
    mistakes (:mod:`servelab.grading.diagnose`); None: no catalogue."""
    checkpoint: str | None = None
    """The module of :mod:`servelab.checkpoints` holding this topic's notebook solution, step
    by step; its last step is the topic's one correct implementation."""
    catalogue: Literal["run-only", "kernels"] | None = None
    """A catalogue of known mistakes (:mod:`servelab.grading.mistakes`) that diagnosis does not
    replay: ``"run-only"`` when its mistakes show only when the model runs (its checks name the
    wrong KV slot themselves), ``"kernels"`` when the graded objects are Triton kernels
    (compared on cases, not replayed). None for a topic without a catalogue, and for one with a
    :attr:`replay`, whose catalogue is replayed."""
    misfit: Callable[[Any, int], tuple[str, str] | None] | None = None
    """``misfit(impl, step)``: where what a grade cell passed is not what the step grades (a
    class where the step takes a dict of classes), ``(what was passed and what is expected,
    hint)``, reported before any check runs; else None."""
    around: Callable[[], AbstractContextManager[object]] = nullcontext
    """What the topic's checks run inside, undone when the grade ends (the engine's runs the
    model on one torch thread and gives the learner's kernel its own count back)."""

    def step(self, number: int) -> Step:
        for s in self.steps:
            if s.number == number:
                return s
        valid = ", ".join(str(s.number) for s in self.steps)
        raise ValueError(f"topic {self.name!r} has no step {number}; its steps are {valid}")

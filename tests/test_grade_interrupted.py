"""The stop button during a grade, for the topics of notebooks 06-09: one line, no report.

Jupyter's stop button sends SIGINT. Here the learner's method sends it to its own process and
then loops, so the interrupt lands inside the grade every time; the grade must end with
:class:`GradeInterrupted` ("nothing was graded") and print nothing. Weight-cache's own case is
in ``test_grading_core.py``; paged-kernel grades a Triton kernel, which cannot send a signal
from its body, so the browser and notebook runs cover it.
"""

from __future__ import annotations

import io
import os
import signal
from typing import Any

import pytest

from servelab.checkpoints import checkpoint
from servelab.grading import GradeInterrupted, grade

#: topic -> the methods of its step-1 class that the grade calls first
FIRST_CALLS = {
    "kv-offload": ["put"],
    "token-budget": ["admit", "schedule_running"],
    "engine": ["execute"],
}


def _interrupted_in(base: type, methods: list[str]) -> type:
    def stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        while True:
            pass

    return type(f"Stopped{base.__name__}", (base,), dict.fromkeys(methods, stop))


@pytest.mark.parametrize("topic", list(FIRST_CALLS))
def test_a_real_ctrl_c_ends_the_grade_in_one_line(topic: str) -> None:
    if topic == "engine":
        pytest.importorskip("torch", reason="the engine's grade serves the model with torch")
    learner = _interrupted_in(checkpoint(topic, step=1), FIRST_CALLS[topic])
    out = io.StringIO()
    with pytest.raises(GradeInterrupted) as interrupted:
        grade(topic, learner, step=1, out=out)
    assert str(interrupted.value) == f"{topic} step 1: grade interrupted; nothing was graded"
    assert out.getvalue() == ""

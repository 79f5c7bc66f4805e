"""Graders: ``grade(topic, impl, step)`` checks any implementation against a topic's rules."""

from servelab.grading.core import (
    GradeFailure,
    GradeInterrupted,
    MachineCheck,
    Probe,
    ProbeFailed,
    Report,
    Step,
    StepNotWritten,
    Topic,
    grade,
    load_topic,
    topics,
)

__all__ = [
    "GradeFailure",
    "GradeInterrupted",
    "MachineCheck",
    "Probe",
    "ProbeFailed",
    "Report",
    "Step",
    "StepNotWritten",
    "Topic",
    "grade",
    "load_topic",
    "topics",
]

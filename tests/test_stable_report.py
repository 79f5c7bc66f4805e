"""A report is the same on every run: certainty only where separating programs earned it,
and no temporary folder's random name in the text."""

from __future__ import annotations

import os
import tempfile

import pytest

import servelab
from buggy_impls import failing_report
from servelab.grading import GradeFailure, load_topic
from servelab.grading.core import stable_text
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes


def test_a_temporary_folder_is_named_the_same_way_on_every_run() -> None:
    made = tempfile.mkdtemp(prefix="servelab-kv-")
    try:
        said = stable_text(f"No such file or directory: '{made}/a.chunk' -> '{made}/b'")
    finally:
        os.rmdir(made)
    assert said == (
        "No such file or directory: '<temporary folder>/a.chunk' -> '<temporary folder>/b'"
    )
    assert stable_text("/tmpx/a, /tmp and /tmp/") == "/tmpx/a, /tmp and /tmp/"


def _swapped_disk_tier() -> dict[str, object]:
    classes = servelab.checkpoint("kv-offload", 3)

    class SwappedReplace(classes["DiskTier"]):  # type: ignore[misc, valid-type]
        """Renames the final file onto the temporary one: the error quotes both paths."""

        def _write(self, key, payload):  # type: ignore[no-untyped-def]
            final = self.path(key)
            temporary = final.with_name(final.name + ".tmp")
            with open(temporary, "wb") as f:
                f.write(payload)
            os.replace(final, temporary)
            return final

    return {**classes, "DiskTier": SwappedReplace}


def test_an_error_quoting_a_disk_tiers_file_reads_the_same_on_every_run() -> None:
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failed:
            servelab.grade("kv-offload", _swapped_disk_tier(), 3, quiet=True)
        texts.append(str(failed.value))
    assert texts[0] == texts[1]
    assert "'<temporary folder>/a.chunk' -> '<temporary folder>/a.chunk.tmp'" in texts[0]
    assert tempfile.gettempdir() + os.sep not in texts[0]


# Each of these shows its slip on none of its topic's separating programs: agreeing with a
# learner there (where both behave correctly) is no evidence, so a match is asked, not claimed.
UNSEPARATED = [
    ("weight-cache", "pinned_bytes_per_pin"),
    ("eviction-policy", "sieve_unpin_forgets_visit"),
    ("prefix-cache", "claimed_hits_not_counted"),
]


@pytest.mark.parametrize(("topic", "name"), UNSEPARATED, ids=[n for _, n in UNSEPARATED])
def test_a_match_no_separating_program_shows_is_asked_not_claimed(topic: str, name: str) -> None:
    m = next(x for x in mistakes(topic) if x.name == name)
    assert not HOOKS[topic]._shows_apart(m.impl, m.impl)
    _, program = failing_report(load_topic(topic), m.impl)
    finding = HOOKS[topic].explain(program, m.impl)
    assert not finding.certain
    assert f"that {m.like}: does yours do that?" in (finding.hint or "")


def test_a_match_a_separating_program_shows_is_still_claimed() -> None:
    m = next(x for x in mistakes("weight-cache") if x.name == "evict_newest")
    _, program = failing_report(load_topic("weight-cache"), m.impl)
    finding = HOOKS["weight-cache"].explain(program, m.impl)
    assert finding.certain and f"exactly like one that {m.like}" in (finding.hint or "")

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


def test_a_method_found_by_its_graft_alone_gets_a_check_hint_only_about_it() -> None:
    from servelab.grading.about import About, Hint
    from servelab.grading.diagnose import GRAFTED_ONLY, Finding, with_place

    grafted = Finding(methods=("WeightCache._evict",))
    elsewhere = Hint("unpin returns the pins left", About(("unpin",)))
    here = Hint("evicting counts the bytes it frees", About(("_evict",)))
    code = "cache = WeightCache(10)\ncache.put('a', 1, 5)\ncache.evicted_bytes"
    assert with_place(grafted, elsewhere, True, code) == GRAFTED_ONLY.format(method="_evict")
    assert with_place(grafted, here, True, code) == here
    # a topic that localises nothing keeps its check's hint
    assert with_place(grafted, elsewhere, True, code, searched=False) == elsewhere


def test_an_error_raised_under_the_learners_lines_is_told_without_a_guessed_cause() -> None:
    from servelab.grading.diagnose import later_raise, raised_outside

    try:
        {}["b"]
    except KeyError as exc:
        raised = raised_outside(exc)
    assert raised is not None
    said = later_raise(raised)
    assert said.startswith("Later, the last line under reproduce: raised KeyError: 'b' (")
    assert "your" not in said
    assert raised_outside(ValueError("x")) is not None
    assert raised_outside(None) is None


class _PutAnswersAGenerator(servelab.checkpoint("kv-offload", 2)):  # type: ignore[misc]
    """Answers put's victims as a generator, shown by its default repr with an address."""

    def put(self, key, payload, wait=0):  # type: ignore[no-untyped-def]
        evicted = super().put(key, payload, wait)
        return None if evicted is None else (pair for pair in evicted)


def test_an_object_shown_by_its_default_repr_has_no_address_and_a_generator_is_told() -> None:
    assert stable_text("is <generator object f at 0x7fd807d7ba60>, expected []") == (
        "is <generator object f>, expected []"
    )
    first = failing_report("kv-offload", _PutAnswersAGenerator, 2)[0].text
    again = failing_report("kv-offload", _PutAnswersAGenerator, 2)[0].text
    assert "is a generator object, expected the list []" in first and " at 0x" not in first
    assert "yours returned a generator object where a list belongs" in first
    assert first == again


class _PutAnswersAnIterator(servelab.checkpoint("kv-offload", 2)):  # type: ignore[misc]
    """Answers put's victims as an iterator over the list it built: nothing runs late."""

    def put(self, key, payload, wait=0):  # type: ignore[no-untyped-def]
        evicted = super().put(key, payload, wait)
        return None if evicted is None else iter(evicted)


def test_an_iterator_over_a_built_list_is_not_said_to_run_late() -> None:
    report = failing_report("kv-offload", _PutAnswersAnIterator, 2)[0]
    assert "is a list_iterator object, expected the list []" in report.text
    assert "yours returned a list_iterator object where a list belongs" in report.text
    assert "runs only when it is iterated" not in report.text
    generator = failing_report("kv-offload", _PutAnswersAGenerator, 2)[0].text
    assert "a generator runs only when it is iterated" in generator

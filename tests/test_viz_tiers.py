"""The tiers picture: every chunk drawn in its tier with its state, and a replay that steps."""

from __future__ import annotations

import re

from servelab import checkpoint
from servelab.testing.kv_offload import payload_for
from servelab.viz import TierReplay, render_tiers, show_tiers

Hierarchy = checkpoint("kv-offload", step=3)["Hierarchy"]


def _state_of(svg: str, key: str) -> str:
    match = re.search(rf"<title>{re.escape(key)}: ([a-z ]+)</title>", svg)
    assert match, f"{key} is not drawn"
    return match.group(1)


def test_each_chunk_shows_its_state_in_its_tier() -> None:
    h = Hierarchy(60, 120)
    for k in "abc":
        h.store(k, payload_for(k, 30))
    found = h.lookup(["b"])
    h.tiers[0].ref("c")
    svg = render_tiers(h, in_flight=["a"])
    assert _state_of(svg, "b") == "pinned"
    assert _state_of(svg, "c") == "referenced"
    assert _state_of(svg, "a") == "in flight"  # written into the disk tier by this step
    assert "cpu: 60 of 60 B" in svg and "disk: 30 of 120 B" in svg
    h.tiers[0].unref("c")
    h.release(found)
    svg = render_tiers(h)
    assert {_state_of(svg, k) for k in "abc"} == {"resident"}


def test_the_replay_steps_back_and_forth_and_names_the_gpu_copies() -> None:
    trace = [("store", "a", 30), ("store", "b", 30), ("store", "c", 30)]
    trace += [("lookup", ["b", "a"]), ("retrieve",)]
    replay = TierReplay(lambda: Hierarchy(60, 120), trace, payload_for, title="t")
    replay.seek(4)
    assert replay.log[-1] == "lookup ['b', 'a']: pinned ['b', 'a']"
    assert _state_of(replay.svg(), "a") == "pinned"
    replay.seek(5)
    assert replay.gpu == ["b", "a"]
    assert "copied to the GPU" in replay.svg()
    replay.seek(1)
    assert replay.obj.where("a") == ["cpu"] and len(replay.log) == 1


def test_a_picture_carries_an_img_fallback_and_the_widget_its_final_state() -> None:
    bundle = show_tiers(Hierarchy(60, 120), title="empty")._repr_mimebundle_()
    assert bundle["text/html"].startswith('<img src="data:image/svg+xml;base64,')
    trace = [("store", "a", 30), ("lookup", ["a"]), ("release",)]
    widget = TierReplay(lambda: Hierarchy(60, 120), trace, payload_for).widget()
    assert "<img" in widget._repr_mimebundle_()["text/html"]


def test_a_method_not_written_yet_is_said_so_not_raised() -> None:
    class Unfinished(Hierarchy):  # type: ignore[misc, valid-type]
        def store(self, key: str, payload: bytes) -> bool:
            raise NotImplementedError

    replay = TierReplay(lambda: Unfinished(60, 120), [("store", "a", 30)], payload_for)
    replay.seek(1)
    assert replay.log == ["store: `Unfinished.store` is not written yet; not your finished class"]
    assert "`Unfinished.store` is not written yet" in replay.svg()  # on the picture, its caption

"""Block-manager slips against a rule the notebook states outright: a token count that is not
a non-negative int raises `InvalidLength`."""

from servelab import checkpoint
from servelab.kv.blocks import InvalidLength

TOPIC = "block-manager"
Final = checkpoint(TOPIC, 4)
Forking = checkpoint(TOPIC, 3)


class LengthSignOnly(Final):
    """Checks the sign of the token count but not its type: 2.5 tokens are allocated."""

    def allocate(self, seq, n_tokens):
        self._new(seq)
        if n_tokens < 0:
            raise InvalidLength(f"a token count cannot be negative, got {n_tokens!r}")
        Forking.allocate(self, seq, n_tokens)


class ForkOntoLiveValueError(Final):
    """Guards the child id with a plain ValueError of its own, not the notebook's
    SequenceExists: a caller that catches SequenceExists misses it."""

    def _new(self, seq):
        if seq in self.tables:
            raise ValueError(f"sequence {seq} already has a table")


MISTAKES = {
    "a token count checked for its sign only": (4, LengthSignOnly, {"allocate"}),
    "a live id refused with a plain ValueError": (
        4,
        ForkOntoLiveValueError,
        {"_new", "allocate", "fork"},
    ),
}

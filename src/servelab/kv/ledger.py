"""Whose KV is in each slot: a ledger that names the first slot read with the wrong contents.

The keys and values at position ``p`` of a sequence are a function of its tokens ``0..p`` and
nothing else (causal attention, rotary positions), so a slot's contents can be named exactly by
those tokens: its *label*. The ledger follows every KV write and copy the engine makes (a
prefill writes positions ``start..n-1``, a decode its newest position, a copy-on-write copies a
whole block) and checks every read against the label the reader needs. Two sequences that
share a prefix need equal labels, so sharing a block is fine exactly when it is right.

What it finds, each a :class:`KVDivergence` naming the step, the sequence, the position, the
slot and the block tables that point at that block:

* ``read-unwritten``: a read of a slot nothing was written to (a prefix hit on a block whose
  KV is computed later, a copy that skipped a slot);
* ``read-foreign``: a read of a slot that holds other tokens' KV (a shared block that should
  have been copied, a copy from the wrong block, a cached block reused under a stale name);
* ``slot-mapping``: ``append_slot`` returned a slot that is not where the block table puts the
  token (the kernel writes where the table says; the two must agree);
* ``double-write``: two sequences write one slot in the same step;
* ``length``: a computed sequence without a slot for every token (raised by the engine);
* ``kv-overwritten``: after a step a sequence's slot no longer holds what it needs (a copy
  that ran after the decode wrote into the copy).

Pure Python: it needs no tensors, so a test or a widget can use it without torch. Labels are
tuples of token ids; with sequences of tens of tokens that costs nothing worth measuring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from servelab.kv.blocks import KVCacheError

__all__ = ["KVDivergence", "SlotLedger", "Write"]

Label = tuple[int, ...]


@dataclass(frozen=True)
class Write:
    """Who put the KV in a slot: the writer's sequence and position, the step, and how."""

    step: int
    seq: int
    position: int
    how: str  # "prefill" or "decode"
    label: Label
    via: str = ""  # "copied from block 3 in step 5" for a copy-on-write copy

    def describe(self) -> str:
        text = (
            f"the KV of sequence {self.seq}'s position {self.position}, written by its "
            f"{self.how} in step {self.step}"
        )
        return f"{text} ({self.via})" if self.via else text


class KVDivergence(KVCacheError):
    """A sequence read (or holds) a KV slot whose contents are not its own tokens' KV.

    ``kind`` is one of the ids in the module docstring; ``slot`` is ``(block, offset)``;
    ``found`` is the write the slot holds (None: nothing was written there); ``holders``
    maps each sequence whose table holds the block to the entries where it does.
    """

    def __init__(
        self,
        kind: str,
        *,
        step: int,
        seq: int,
        position: int,
        slot: tuple[int, int],
        what: str,
        found: Write | None = None,
        holders: Mapping[int, list[int]] | None = None,
        detail: str = "",
    ) -> None:
        self.kind, self.step, self.seq, self.position = kind, step, seq, position
        self.slot, self.found, self.what = slot, found, what
        self.holders = dict(holders or {})
        self.detail = detail
        self.notes: list[str] = []
        super().__init__(self.describe())

    def note(self, text: str) -> None:
        """Add a line of context (what the engine did in this step) to the description."""
        self.notes.append(text)
        self.args = (self.describe(),)

    def describe(self) -> str:
        block, offset = self.slot
        where = f"slot (block {block}, offset {offset})"
        head = f"step {self.step}: sequence {self.seq}'s {self.what}"
        if self.kind == "read-unwritten":
            text = f"{head} read position {self.position} from {where}, where no KV was written"
        elif self.kind == "read-foreign":
            text = f"{head} read position {self.position} from {where}"
            if self.found is not None:
                text += f", which holds {self.found.describe()}"
        elif self.kind == "kv-overwritten":
            text = f"after {head}, its position {self.position} in {where} no longer holds its KV"
            if self.found is not None:
                text += f": it holds {self.found.describe()}"
            else:
                text += ": nothing was written there"
        else:  # slot-mapping, double-write, length: the caller's detail says it all
            text = f"{head}: {self.detail}"
        lines = [text]
        if self.kind in ("read-unwritten", "read-foreign", "kv-overwritten") and self.detail:
            lines.append(self.detail)
        if self.kind != "length":  # a length's detail shows the sequence's own table
            lines.append(_tables_line(block, self.holders))
        return "\n".join([*lines, *self.notes])


def _tables_line(block: int, holders: Mapping[int, list[int]]) -> str:
    """Whose block table points at ``block``, and at which entries."""
    if not holders:
        return f"no block table points at block {block} now"
    parts = []
    for seq in sorted(holders):
        entries = holders[seq]
        at = ", ".join(str(i) for i in entries)
        parts.append(f"sequence {seq} (entry {at})")
    return f"block tables pointing at block {block}: " + "; ".join(parts)


def holders_of(block: int, tables: Mapping[int, Sequence[int]]) -> dict[int, list[int]]:
    """Each sequence whose table holds ``block``, with the entries that do."""
    found: dict[int, list[int]] = {}
    for seq, table in tables.items():
        entries = [i for i, b in enumerate(table) if b == block]
        if entries:
            found[seq] = entries
    return found


class SlotLedger:
    """The label of every written slot, and the checks that compare reads with them.

    The engine calls :meth:`copy`, :meth:`prefill` and :meth:`decode` as it moves KV, in the
    order it moves it, and :meth:`check_held` after each step. ``tables`` (a function
    returning every live sequence's block table) is only read when a check fails, to say
    which tables point at the slot.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.step = 0
        self.slots: dict[tuple[int, int], Write] = {}

    def _slot(self, table: Sequence[int], position: int) -> tuple[int, int]:
        return table[position // self.block_size], position % self.block_size

    def _check_read(
        self,
        kind_of_read: str,
        seq: int,
        tokens: Sequence[int],
        table: Sequence[int],
        positions: Iterable[int],
        tables: Mapping[int, Sequence[int]],
        *,
        after: bool = False,
    ) -> None:
        for p in positions:
            slot = self._slot(table, p)
            found = self.slots.get(slot)
            if found is not None and found.label == tuple(tokens[: p + 1]):
                continue
            if after:
                kind = "kv-overwritten"
            else:
                kind = "read-unwritten" if found is None else "read-foreign"
            raise KVDivergence(
                kind,
                step=self.step,
                seq=seq,
                position=p,
                slot=slot,
                what=kind_of_read,
                found=found,
                holders=holders_of(slot[0], tables),
            )

    def copy(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy-on-write copies ``(src, dst)``, all sources read before any destination is
        written, as one batched copy on the device does."""
        size = self.block_size
        taken = {(src, o): self.slots.get((src, o)) for src, _ in pairs for o in range(size)}
        for src, dst in pairs:
            for o in range(size):
                write = taken[(src, o)]
                if write is None:
                    self.slots.pop((dst, o), None)
                else:
                    via = f"copied from block {src} in step {self.step}"
                    self.slots[(dst, o)] = Write(
                        write.step, write.seq, write.position, write.how, write.label, via
                    )

    def prefill(
        self,
        seq: int,
        tokens: Sequence[int],
        table: Sequence[int],
        start: int,
        tables: Mapping[int, Sequence[int]],
    ) -> None:
        """A prefill of ``tokens`` from ``start``: it reads ``0..start-1``, then writes the rest."""
        self._check_read("prefill", seq, tokens, table, range(start), tables)
        for p in range(start, len(tokens)):
            self.slots[self._slot(table, p)] = Write(
                self.step, seq, p, "prefill", tuple(tokens[: p + 1])
            )

    def decode(
        self,
        batch: Sequence[tuple[int, Sequence[int], Sequence[int], tuple[int, int] | None]],
        tables: Mapping[int, Sequence[int]],
    ) -> None:
        """One batched decode: ``(seq, tokens, table, slot its append_slot returned)`` per row.

        Every row writes its newest position before any row reads (the kernel writes, then
        attends, layer by layer), so the writes are applied first, then every read checked.
        """
        written: dict[tuple[int, int], int] = {}
        for seq, tokens, table, returned in batch:
            p = len(tokens) - 1
            slot = self._slot(table, p)
            if returned is not None and tuple(returned) != slot:
                raise KVDivergence(
                    "slot-mapping",
                    step=self.step,
                    seq=seq,
                    position=p,
                    slot=slot,
                    what="decode",
                    holders=holders_of(slot[0], tables),
                    detail=(
                        f"append_slot returned slot (block {returned[0]}, offset {returned[1]}) "
                        f"for position {p}, but its block table puts position {p} at slot "
                        f"(block {slot[0]}, offset {slot[1]}): the kernel writes where the "
                        "table says"
                    ),
                )
            if slot in written:
                raise KVDivergence(
                    "double-write",
                    step=self.step,
                    seq=seq,
                    position=p,
                    slot=slot,
                    what="decode",
                    holders=holders_of(slot[0], tables),
                    detail=(
                        f"sequences {written[slot]} and {seq} both write slot (block {slot[0]}, "
                        f"offset {slot[1]}) in this step"
                    ),
                )
            written[slot] = seq
        for seq, tokens, table, _ in batch:
            p = len(tokens) - 1
            self.slots[self._slot(table, p)] = Write(self.step, seq, p, "decode", tuple(tokens))
        for seq, tokens, table, _ in batch:
            self._check_read("decode", seq, tokens, table, range(len(tokens)), tables)

    def check_held(
        self,
        held: Iterable[tuple[int, Sequence[int], Sequence[int]]],
        tables: Mapping[int, Sequence[int]],
    ) -> None:
        """After a step: each ``(seq, tokens with a slot, table)`` still holds its own KV."""
        for seq, tokens, table in held:
            self._check_read("step", seq, tokens, table, range(len(tokens)), tables, after=True)

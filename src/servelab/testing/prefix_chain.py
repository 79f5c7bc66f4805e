"""The rules of a prefix cache's three inner methods, as code: a state machine over them.

Notebook 05 builds prefix caching from the skeleton's ``_chain``, ``_register`` and
``_lookup`` before the manager's own calls use them; :func:`chain_machine` checks those three
alone, through the skeleton's ``map``, ``hash`` and ``tokens``, against the model of
:mod:`servelab.testing.prefix_cache`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.prefix_cache import STEMS, PrefixCacheModel

__all__ = ["INVARIANTS", "chain_machine"]

#: The rules of the cache's three inner methods (``_chain``, ``_register``, ``_lookup``), read
#: through the notebook skeleton's ``map``, ``hash`` and ``tokens``: :func:`chain_machine`.
INVARIANTS: dict[str, str] = {
    "chain-shape": "_chain names each full block: (hash, its tokens as a tuple)",
    "chain": "equal whole prefixes get equal hashes, different ones different hashes",
    "register": "_register caches a block under its hash, unless that hash is cached already",
    "hit-count": "_lookup returns the cached blocks of the prefix, in order",
    "first-miss": "_lookup stops at the first miss",
    "hit-cap": "_lookup leaves the last token to compute",
    "kept-prompt": "_chain and _lookup leave the prompt they are given as it was",
}


def chain_machine(
    factory: Callable[[int, int], Any], *, name: str = "PrefixBlockManager", num_blocks: int = 24
) -> type[RecordingMachine]:
    """A state machine over the notebook skeleton's cache internals, compared with a model.

    ``factory(num_blocks, block_size)`` must build an object with ``_chain(tokens)``,
    ``_register(block, h, block_tokens)``, ``_lookup(tokens)`` and the skeleton's ``map``
    (hash -> block), ``hash`` and ``tokens`` (per block). Random prompts from a tiny alphabet
    are chained, one of their full blocks registered at a fresh block id (in any order, so a
    later block can be cached behind a miss), and random prompts looked up. The model names
    each cached block by the whole prefix it completes, like :class:`PrefixCacheModel`; the
    learner's hashes are checked only for being a function of the whole prefix (equal
    prefixes, equal hashes; different prefixes, different hashes).
    """

    class ChainMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.bm: Any = None
            self.size = 1
            self.model = PrefixCacheModel(num_blocks, 1)
            self.names: dict[tuple[int, ...], Any] = {}  # whole prefix -> the learner's hash
            self.prefixes: dict[Any, tuple[int, ...]] = {}  # the learner's hash -> prefix
            self.next_block = 0

        def _chain(self, prompt: list[int]) -> list[Any]:
            code = f"chain = bm._chain({prompt})"
            given = list(prompt)
            chain = self.do(code, lambda: self.bm._chain(given))
            self._kept(code, prompt, given)
            size, full = self.size, len(prompt) // self.size
            try:
                entries = [(h, t) for h, t in chain]
            except (TypeError, ValueError) as exc:
                raise InvariantViolation(
                    "chain-shape",
                    f"`{code}` returned {chain!r}; expected a list of (hash, block_tokens) pairs",
                ) from exc
            if len(entries) != full:
                raise InvariantViolation(
                    "chain-shape",
                    f"`{code}` returned {len(entries)} entries; {prompt} has {full} full "
                    f"block(s) of {size} (a partial block is not named)",
                )
            for i, (h, block_tokens) in enumerate(entries):
                want = tuple(prompt[i * size : (i + 1) * size])
                if block_tokens != want or not isinstance(block_tokens, tuple):
                    raise InvariantViolation(
                        "chain-shape",
                        f"`{code}`: entry {i} holds the tokens {block_tokens!r}; expected the "
                        f"tuple {want}",
                    )
                prefix = self.model.prefix(prompt, i)
                if prefix in self.names and self.names[prefix] != h:
                    raise InvariantViolation(
                        "chain",
                        f"`{code}`: the prefix {list(prefix)} was named {self.names[prefix]!r} "
                        f"before and {h!r} now: a hash must depend on the tokens only",
                    )
                other = self.prefixes.get(h)
                if other is not None and other != prefix:
                    raise InvariantViolation(
                        "chain",
                        f"`{code}`: block {i} completes the prefix {list(prefix)}, yet its hash "
                        f"{h!r} is also the hash of the prefix {list(other)}",
                    )
                self.names[prefix] = h
                self.prefixes[h] = prefix
            return entries

        def _kept(self, code: str, prompt: list[int], given: list[int]) -> None:
            """The learner gets its own copy of ``prompt`` (the model reads the prompt as the
            caller wrote it): a call that changed its copy changed the caller's list."""
            if given != prompt:
                raise InvariantViolation(
                    "kept-prompt",
                    f"`{code}` changed the list it was given: {prompt} -> {given}; the "
                    f"caller's prompt must stay as it was (the caller goes on to read it)",
                )

        def _compare(self, code: str) -> None:
            m, bm = self.model, self.bm
            want_map = {self.names[prefix]: b for prefix, b in m.cached.items()}
            if dict(bm.map) != want_map:
                raise InvariantViolation(
                    "register",
                    f"after `{code}` map is {dict(bm.map)!r}; expected {want_map!r}",
                )
            for b in range(self.next_block):
                prefix = m.key.get(b)
                h = None if prefix is None else self.names[prefix]
                block_tokens = None if prefix is None else prefix[-self.size :]
                if bm.hash[b] != h or bm.tokens[b] != block_tokens:
                    raise InvariantViolation(
                        "register",
                        f"after `{code}` block {b} has hash {bm.hash[b]!r} and tokens "
                        f"{bm.tokens[b]!r}; expected {h!r} and {block_tokens!r}",
                    )

        @initialize(block_size=st.integers(min_value=1, max_value=3))
        def create(self, block_size: int) -> None:
            self.size = block_size
            self.model = PrefixCacheModel(num_blocks, block_size)
            self.bm = self.do(
                f"bm = {name}({num_blocks}, {block_size})",
                lambda: factory(num_blocks, block_size),
            )

        @precondition(lambda self: self.next_block < num_blocks)
        @rule(
            data=st.data(),
            stem=st.sampled_from(STEMS),
            cut=st.integers(0, 8),
            tail=st.lists(st.integers(0, 2), max_size=3),
        )
        def register(self, data: st.DataObject, stem: list[int], cut: int, tail: list[int]) -> None:
            prompt = stem[:cut] + tail
            chain = self._chain(prompt)
            if not chain:
                return
            i = data.draw(st.integers(0, len(chain) - 1), label="entry")
            block, self.next_block = self.next_block, self.next_block + 1
            code = f"bm._register({block}, *chain[{i}])"
            self.do(code, lambda: self.bm._register(block, *chain[i]))
            self.model._register(block, self.model.prefix(prompt, i))
            self._compare(code)

        @rule(
            stem=st.sampled_from(STEMS),
            cut=st.integers(0, 8),
            tail=st.lists(st.integers(0, 2), max_size=3),
        )
        def lookup(self, stem: list[int], cut: int, tail: list[int]) -> None:
            prompt = (stem[:cut] + tail) or [0]
            code = f"bm._lookup({prompt})"
            given = list(prompt)
            got = self.do(code, lambda: self.bm._lookup(given))
            self._kept(code, prompt, given)
            m = self.model
            want = m.lookup(prompt)
            if list(got) == want:
                return
            uncapped = m.lookup(prompt, cap=False)
            past_miss = [
                b
                for i in range((len(prompt) - 1) // self.size)
                if (b := m.cached.get(m.prefix(prompt, i))) is not None
            ]
            if list(got) == uncapped:
                kind, why = "hit-cap", "the last token is always computed"
            elif list(got) == past_miss:
                kind, why = "first-miss", "a block after a miss follows a prefix not cached"
            else:
                kind, why = "hit-count", "the cached blocks of the prefix, up to the first miss"
            raise InvariantViolation(
                kind,
                f"`{code}` returned {got!r}; expected {want} ({why})",
            )

    ChainMachine.__name__ = f"{name}ChainMachine"
    ChainMachine.__qualname__ = ChainMachine.__name__
    return ChainMachine

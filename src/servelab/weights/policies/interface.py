"""The interface every eviction policy implements, its error, and the policies' shared clock.

The cache reports every event to its policy (put, hit, a removal the policy did not choose,
first pin, last unpin) and asks it for victims. An eviction the cache abandons is taken back
through the policy's undo log (:meth:`EvictionPolicy.undo_log`,
:meth:`EvictionPolicy.restore_victims`), so the order is exactly what it was before.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from servelab.native import mypyc_attr

K = TypeVar("K", bound=Hashable)


class NoVictim(LookupError):
    """Every resident entry is pinned: there is nothing the policy may evict."""


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class EvictionPolicy(ABC, Generic[K]):
    """Orders the *evictable* (unpinned) resident keys; the cache reports every event to it."""

    name: ClassVar[str] = "policy"

    @abstractmethod
    def update_on_put(self, key: K, size: int) -> None:
        """A new resident key, unpinned."""

    @abstractmethod
    def update_on_hit(self, key: K) -> None:
        """A ``get`` found ``key`` (pinned or not)."""

    @abstractmethod
    def update_on_remove(self, key: K) -> None:
        """``key`` left the cache without the policy choosing it (replaced or deleted)."""

    @abstractmethod
    def update_on_pin(self, key: K) -> None:
        """First pin: ``key`` stops being a candidate."""

    @abstractmethod
    def update_on_unpin(self, key: K) -> None:
        """Last unpin: ``key`` is a candidate again, where its history places it."""

    @abstractmethod
    def pop_victim(self) -> K:
        """Choose the next victim among the candidates and forget it; :class:`NoVictim` if none."""

    @abstractmethod
    def eviction_order(self) -> list[K]:
        """The candidates, next victim first. For inspection: changes no state."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of candidates (evictable keys)."""

    def hit_hook(self) -> Callable[[K], object] | None:
        """What the cache calls on each hit; bound once, when the cache is built.

        ``update_on_hit`` by default, and ``None`` for a policy whose order hits never change.
        A policy may return something cheaper, such as a C method of its own structure, on one
        condition: it raises ``KeyError`` for any key that needs the full ``update_on_hit``,
        which the cache then calls. Hits are most of a cache's traffic; this is where a Python
        frame per hit is saved.
        """
        return self.update_on_hit

    def put_hook(self) -> Callable[[K, int], object]:
        """What the cache calls to admit a key: ``update_on_put``, or a cheaper callable with
        exactly its effect (bound once, like :meth:`hit_hook`)."""
        return self.update_on_put

    def pop_victims(self, over: int, sizes: Mapping[K, int], victims: list[K]) -> int:
        """Call :meth:`pop_victim` until the victims' ``sizes`` add up to ``over`` bytes, appending
        each to ``victims`` (passed empty); returns the bytes they free.

        What the cache calls to make room: one call per eviction, so a policy may choose several
        victims in one Python frame. A victim missing from ``sizes`` ends the loop early (the
        cache then names the policy inconsistent). An override must pop exactly what
        :meth:`pop_victim` would, in the same order, and log each pop in :meth:`undo_log`.
        """
        pop_victim = self.pop_victim
        freed = 0
        while freed < over:
            victim = pop_victim()
            victims.append(victim)
            size = sizes.get(victim, 0)  # sizes are positive: 0 means absent
            if not size:
                break
            freed += size
        return freed

    def undo_log(self) -> list[Any] | None:
        """A list where :meth:`pop_victim` records how to undo each pop, or None (the default).

        The cache empties it before each eviction, so it only ever holds the current one's pops.
        """
        return None

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        """Take back the victims (``(key, size)``, pop order) of an eviction the cache abandoned.

        The cache calls this when a later ``pop_victim`` or the admission of the new key raised:
        those keys stay resident, so the policy must hold them again. The default re-admits them
        with ``update_on_put``, at the newest end; the built-in policies replay their undo log
        instead, so the order is exactly what it was before the eviction began.
        """
        for key, size in victims:
            self.update_on_put(key, size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@mypyc_attr(allow_interpreted_subclasses=True)
class _Ticking(EvictionPolicy[K]):
    """Shared clock: every event gets a unique, increasing tick (the policies' notion of time).

    Events about keys break the contract loudly and before any change: ``update_on_put`` of a
    key the policy already holds raises ``ValueError``, a hit on a key it does not hold raises
    ``KeyError``.
    """

    def __init__(self) -> None:
        self._clock = 0

    def _now(self) -> int:
        self._clock += 1
        return self._clock

    @staticmethod
    def _duplicate(key: object) -> ValueError:
        return ValueError(f"update_on_put({key!r}): the key is already resident; remove it first")

    @staticmethod
    def _unknown(key: object, event: str) -> KeyError:
        return KeyError(f"{event}({key!r}): the policy holds no such key")

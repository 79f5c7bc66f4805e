"""TokenLock: mutual exclusion under contention, and its misuse errors."""

from __future__ import annotations

import threading
import time

import pytest

from servelab.weights.lock import TokenLock


def test_one_holder_at_a_time_under_contention() -> None:
    lock = TokenLock()
    inside = 0
    overlaps = 0
    total = 0
    barrier = threading.Barrier(6)

    def worker() -> None:
        nonlocal inside, overlaps, total
        barrier.wait()
        for i in range(400):
            with lock:
                inside += 1
                if inside != 1:
                    overlaps += 1
                value = total
                if i % 50 == 0:
                    time.sleep(0.0005)  # hold it while others spin
                total = value + 1
                inside -= 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert overlaps == 0
    assert total == 6 * 400  # no lost update: each read-modify-write ran alone
    assert not lock.locked()


def test_inlined_fast_path_and_wait_share_one_token() -> None:
    lock = TokenLock()
    lock.token.pop()  # taken inline, as WeightCache.get does
    assert lock.locked()
    got = threading.Event()

    def waiter() -> None:
        lock.acquire()  # must wait for the inline holder
        got.set()
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    assert not got.wait(0.05)
    lock.token.append(None)  # released inline
    assert got.wait(5)
    t.join()
    assert not lock.locked() and lock.token == [None]


def test_release_of_an_unlocked_lock_raises_and_changes_nothing() -> None:
    lock = TokenLock()
    with pytest.raises(RuntimeError, match="unlocked"):
        lock.release()
    assert lock.token == [None]
    with lock:
        assert lock.locked() and "locked" in repr(lock)
    assert not lock.locked()


def test_an_exception_inside_releases() -> None:
    lock = TokenLock()
    with pytest.raises(ZeroDivisionError), lock:
        1 / 0  # noqa: B018
    assert not lock.locked()

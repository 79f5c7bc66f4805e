"""The fixed programs that tell alike mistakes apart, one tuple per topic.

A program Hypothesis shrinks often cannot separate two mistakes with one symptom (the newest
entry and the largest are the same entry in it). These hand-written programs can: the
diagnosis (:mod:`servelab.grading.diagnose`) keeps a known mistake as a candidate only if,
wherever it shows in them, the learner's class shows it the same way.
"""

from __future__ import annotations


def _program(*lines: str) -> str:
    return "\n".join(lines)


def _puts(var: str, *keys: str) -> list[str]:
    return [f"{var}.update_on_put({k!r}, 1)" for k in keys]


def _steps(n: int) -> list[str]:
    return ["out = sched.step()", "emit_tokens(out)"] * n


WEIGHT_CACHE_SEPARATING = (
    _program(  # LRU evicts the small old entry first, then the large one; not the newest
        "cache = WeightCache(100)",
        "cache.put('a', '<a weights>', 10)",
        "cache.put('b', '<b weights>', 60)",
        "cache.put('c', '<c weights>', 20)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
    _program(  # a hit and an unpin, then one eviction
        "cache = WeightCache(80)",
        "cache.put('a', '<a weights>', 40)",
        "cache.put('b', '<b weights>', 40)",
        "cache.pin('a')",
        "cache.pin('a')",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('c', '<c weights>', 40)",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('d', '<d weights>', 40)",
        "cache.keys()",
    ),
    _program(  # every rule once: hits, misses, pins, the errors, an entry as large as the budget
        "cache = WeightCache(100)",
        *[f"cache.put({k!r}, '<{k} weights>', 10)" for k in "abcde"],
        "cache.get('a')",
        "cache.get('zz')",
        "cache.put('f', '<f weights>', 60)",
        "cache.pin('llama')",
        "cache.put('llama', '<llama weights>', 10)",
        "cache.pin('llama')",
        "cache.put('big', '<big weights>', 95)",
        "cache.put('huge', '<huge weights>', 150)",
        "cache.put('llama', '<llama weights>', 20)",
        "cache.unpin('llama')",
        "cache.unpin('llama')",
        "cache.put('whole', '<whole weights>', 100)",
        "cache.keys()",
    ),
    _program(  # equal sizes: only the recency order decides
        "cache = WeightCache(90)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('b', '<b weights>', 30)",
        "cache.put('c', '<c weights>', 30)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
)

POLICY_SEPARATING = (
    _program(
        "p = LFU()",
        *_puts("p", "a", "b", "c", "d"),
        *["p.update_on_hit('a')"] * 5,
        *["p.update_on_hit('b')"] * 4,
        "p.update_on_pin('c')",
        "p.update_on_hit('c')",
        "p.update_on_unpin('c')",
        "p.eviction_order()",
    ),
    _program(
        "p = LFU()",
        *_puts("p", "a", "c"),
        "p.update_on_hit('a')",
        "p.update_on_hit('c')",
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.eviction_order()",
    ),
    _program(
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.update_on_hit('c')",
        "p.update_on_hit('b')",
        "p.eviction_order()",
        "p.pop_victim()",
    ),
    _program(  # a key removed and put again while its old heap entry remains
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    _program(  # a key's heap entry popped while it is pinned; then it is unpinned
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.pop_victim()",
        "p.update_on_unpin('a')",
        "p.pop_victim()",
    ),
    _program(  # a key put while the hand rests mid-queue
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        "p.update_on_put('e', 1)",
        "p.eviction_order()",
    ),
    _program(  # a full lap: every key visited, the hand past the oldest
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        *[f"p.update_on_hit({k!r})" for k in "acd"],
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    _program(  # a pinned key removed, then put again
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.eviction_order()",
    ),
    _program(
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('b')",
        "p.pop_victim()",
        "p.update_on_put('e', 1)",
        "p.update_on_hit('c')",
        "p.update_on_pin('d')",
        "p.pop_victim()",
        "p.update_on_unpin('d')",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    _program(
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        "p.update_on_remove('c')",
        "p.update_on_pin('a')",
        "p.update_on_hit('a')",
        "p.update_on_unpin('a')",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
)

BLOCKS_SEPARATING = (
    _program(
        "bm = BlockManager(8, 4)",
        "bm.allocate(0, 6)",
        "bm.fork(0, 1)",
        "bm.append_slot(0)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(1)",
    ),
    _program(
        "bm = BlockManager(4, 4)",
        "bm.allocate(0, 8)",
        "bm.fork(0, 1)",
        "bm.append_slot(1)",
        "bm.allocate(2, 12)",
        "bm.allocate(2, 3)",
        "bm.fork(2, 3)",
        "bm.append_slot(2)",
        "bm.allocate(4, 0)",
        "bm.append_slot(4)",
    ),
)

PREFIX_SEPARATING = (
    _program(
        "bm = PrefixBlockManager(8, 2)",
        "bm.allocate(0, [1, 1, 5])",
        "bm.allocate(1, [1, 1, 1, 1, 5])",
        "bm.allocate(2, [1, 1, 1, 1])",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(2)",
        "bm.allocate(3, [1, 1, 1, 1, 5])",
        "bm.free_seq(3)",
        "bm.allocate(4, [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 1, 1, 1, 5])",
        "bm.num_cached_tokens([1, 1, 2, 2, 5])",
    ),
    _program(  # a private copy of a cached block, then the cached one evicted
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.allocate(1, [1, 2])",
        "bm.append_slot(1, 3)",
        "bm.append_slot(1, 4)",
        "bm.free_seq(0)",
        "bm.allocate(2, [7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
    ),
    _program(  # reclaim order: least recently freed first, and a hit refreshes it
        "bm = PrefixBlockManager(4, 1)",
        "bm.allocate(0, [1, 2])",
        "bm.free_seq(0)",
        "bm.allocate(1, [5, 6])",
        "bm.free_seq(1)",
        "bm.allocate(2, [1, 9])",
        "bm.free_seq(2)",
        "bm.allocate(3, [7, 7, 7])",
        "bm.num_cached_tokens([1, 1])",
        "bm.evictable()",
    ),
    _program(
        "bm = PrefixBlockManager(4, 2)",
        "bm.allocate(0, [1, 2, 3, 4, 5])",
        "bm.free_seq(0)",
        "bm.allocate(1, [1, 2, 9])",
        "bm.allocate(2, [6, 6, 6])",
        "bm.append_slot(2, 6)",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
        "bm.allocate(3, [3, 4, 3])",
    ),
    _program(  # a hash that collides, then the same block evicted: trusting vs keeping a hash
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.free_seq(0)",
        "bm.tokens[0] = (0, 0)",
        "bm.num_cached_tokens([1, 2, 3])",
        "bm.allocate(1, [7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3])",
    ),
)

SCHEDULER_SEPARATING = (
    _program(
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=3))",
        "sched.add(Sequence.dummy(2, prompt_len=3, max_new_tokens=1))",
        "sched.add(Sequence.dummy(3, prompt_len=4, max_new_tokens=2))",
        "sched.add(Sequence.dummy(4, prompt_len=6, max_new_tokens=1))",
        *_steps(8),
    ),
    _program(
        "bm = BlockManager(num_blocks=3, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(2, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(3, prompt_len=5, max_new_tokens=1))",
        *_steps(6),
    ),
    _program(  # too large with its tokens to come, small by its prompt alone
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=10))",
        "sched.add(Sequence.dummy(1, prompt_len=2, max_new_tokens=6))",
        *_steps(1),
    ),
    _program(  # ids falling with arrival; a step with two victims
        "bm = BlockManager(num_blocks=4, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        *[f"sched.add(Sequence.dummy({i}, prompt_len=1, max_new_tokens=3))" for i in (3, 2, 1, 0)],
        *_steps(5),
    ),
    _program(
        "bm = BlockManager(num_blocks=8, block_size=4)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=20, max_new_tokens=1))",
        "sched.add(Sequence.dummy(1, prompt_len=16, max_new_tokens=1))",
        "sched.add(Sequence.dummy(2, prompt_len=4, max_new_tokens=1))",
        *_steps(3),
    ),
)


KV_OFFLOAD_SEPARATING = (
    _program(  # every rule of one tier: FIFO order, counted pins, references, decide first
        "tier = Tier(100, 'FIFO')",
        "tier.put('a', payload('a', 30))",
        "tier.put('b', payload('b', 30))",
        "tier.put('c', payload('c', 30))",
        "tier.get('a')",
        "tier.pin('b')",
        "tier.pin('b')",
        "tier.unpin('b')",
        "tier.ref('c')",
        "tier.can_evict('a')",
        "tier.can_evict('b')",
        "tier.can_evict('c')",
        "tier.put('d', payload('d', 50))",
        "tier.put('e', payload('e', 20))",
        "tier.pin('e')",
        "tier.put('f', payload('f', 40), wait=2)",
    ),
    _program(  # the cascade, a lookup past a gap, a retrieve that must keep its pins
        "h = Hierarchy(60, 120)",
        "h.store('a', payload('a', 30))",
        "h.store('b', payload('b', 30))",
        "h.store('c', payload('c', 30))",
        "h.where('a')",
        "found = h.lookup(['b', 'x', 'a'])",
        "h.release(found)",
        "found = h.lookup(['b', 'a', 'c'])",
        "h.retrieve(found)",
        "found = h.lookup(['a'])",
        "h.retrieve(found)",
        "h.held_bytes()",
    ),
    _program(  # the cost model, each term once
        "h = Hierarchy(1000, 1000)",
        "h.recompute_seconds(32768)",
        "h.load_seconds(4096, 'cpu')",
        "h.load_seconds(1000, 'disk')",
        "h.worth_loading(8192, 'disk')",
    ),
    _program(  # a crash in mid-write
        "disk = DiskTier(100)",
        "disk.put('a', payload('a', 20))",
        "with crashing_writes(): disk.put('b', payload('b', 40))",
        "disk.keys()",
    ),
)


TOKEN_BUDGET_SEPARATING = (
    _program(  # chunks, a decode beside a long prompt, a prefix hit, the cap
        "bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=6, max_num_seqs=3)",
        "sched.add(Sequence.from_prompt(0, [1, 2, 3, 4, 5], 3))",
        "sched.add(Sequence.from_prompt(1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 2))",
        "sched.add(Sequence.from_prompt(2, [1, 2, 3, 4, 9], 2))",
        "sched.add(Sequence.from_prompt(3, [7], 2))",
        *_steps(8),
    ),
    _program(  # memory pressure: who is preempted, where it waits, where it restarts
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=8, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 3))",
        "sched.add(Sequence.from_prompt(1, [11, 12], 3))",
        "sched.add(Sequence.from_prompt(2, [21, 22], 3))",
        "sched.add(Sequence.from_prompt(3, [31], 1))",
        *_steps(3),
        "sched.num_computed_tokens(2)",
        *_steps(4),
    ),
    _program(  # a prefix hit beside another admission in the same step
        "bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=12, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [0, 1, 2, 3, 4, 5, 6, 7, 8], 1))",
        *_steps(2),
        "sched.add(Sequence.from_prompt(1, [0, 1, 2, 3, 4, 5, 6, 7, 50, 51], 1))",
        "sched.add(Sequence.from_prompt(2, [60, 61, 62], 1))",
        *_steps(1),
    ),
    _program(  # a victim and a newcomer in the queue: who comes back first
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=8, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 3))",
        "sched.add(Sequence.from_prompt(1, [11, 12], 3))",
        "sched.add(Sequence.from_prompt(2, [21, 22], 3))",
        *_steps(1),
        "sched.add(Sequence.from_prompt(3, [31], 1))",
        *_steps(4),
    ),
)

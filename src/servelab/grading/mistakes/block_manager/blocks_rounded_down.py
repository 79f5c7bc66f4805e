"""allocate takes n // block_size blocks, rounding the count down."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import InvalidLength, OutOfBlocks

HINT = "ceil"
LIKE = "takes n // block_size blocks, rounding down where a table needs ceil(n / block_size)"


class Buggy(Correct):
    def allocate(self, seq, n_tokens):
        self._new(seq)
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"bad length {n_tokens!r}")
        need = n_tokens // self.block_size
        if need > len(self.free):
            raise OutOfBlocks(f"need {need}, have {len(self.free)}")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens

"""Engine slips: the notebook's execute with one line changed."""

from servelab import checkpoint

Engine = checkpoint("engine", 1)


def _cow(out):
    return [(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None]


class CopiesReversed(Engine):
    """Passes each copy as (block, cow_src): destination first."""

    def execute(self, out):
        self.copy([(dst, src) for src, dst in _cow(out)])
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows


class CopiesOntoItself(Engine):
    """Copies each shared block onto itself: (cow_src, cow_src)."""

    def execute(self, out):
        self.copy([(src, src) for src, _ in _cow(out)])
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows


class FirstPrefillOnly(Engine):
    """Runs only the first prefill of a step."""

    def execute(self, out):
        self.copy(_cow(out))
        rows = self.decode(out.decodes)
        if out.prefills:
            rows += self.prefill(out.prefills[0])
        return rows


class RowsReplaced(Engine):
    """Each prefill's rows replace the rows so far instead of adding to them."""

    def execute(self, out):
        self.copy(_cow(out))
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows = self.prefill(p)
        return rows

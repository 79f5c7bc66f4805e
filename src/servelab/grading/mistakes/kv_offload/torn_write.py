"""The disk tier writes the chunk file in place: a crash mid-write leaves it torn."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "torn"
LIKE = "writes the chunk file in place, so a crash in mid-write leaves it torn"


class BuggyDisk(Correct["DiskTier"]):
    def _write(self, key, payload):
        final = self.path(key)
        with open(final, "wb") as f:
            f.write(payload)
        return final


Buggy = {**Correct, "DiskTier": BuggyDisk}

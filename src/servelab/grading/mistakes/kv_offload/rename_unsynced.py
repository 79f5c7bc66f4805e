"""The disk tier renames its temporary file over the chunk's name without an fsync: the write
survives a kill but not a power cut, which may keep the rename and lose the bytes."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "power cut"
LIKE = (
    "renames the temporary file over the chunk's name before an fsync put its bytes on disk, "
    "so a power cut can keep the rename and lose the bytes"
)


class BuggyDisk(Correct["DiskTier"]):
    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
        temporary.replace(final)
        return final


Buggy = {**Correct, "DiskTier": BuggyDisk}

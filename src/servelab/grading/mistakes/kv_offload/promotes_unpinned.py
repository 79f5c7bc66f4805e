"""retrieve unpins the lookup's chunks first and then reads and promotes them one by one: a
promotion can evict a chunk that has not been read yet."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "unpins before promoting"
LIKE = "unpins before promoting, so a promotion evicts a chunk the retrieve has not read yet"


class BuggyHierarchy(Correct["Hierarchy"]):
    def retrieve(self, found):
        self.release(found)
        payloads = []
        top = self.tiers[0]
        for key, i in found:
            payload = self.tiers[i].get(key)
            payloads.append(payload)
            if i > 0 and payload is not None and key not in top:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        return payloads


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}

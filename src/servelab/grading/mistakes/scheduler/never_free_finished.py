"""Drops finished sequences from running but never frees their blocks."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "free_seq"
LIKE = "drops finished sequences from running without calling free_seq on their blocks"


class Buggy(Correct):
    def retire(self, out):
        still_running = []
        for seq in self.running:
            if seq.is_finished:
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running

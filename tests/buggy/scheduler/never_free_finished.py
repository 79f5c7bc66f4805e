"""Drops finished sequences from running but never frees their blocks."""

from correct import LearnerScheduler

HINT = "free_seq"


class Buggy(LearnerScheduler):
    def retire(self, out):
        still_running = []
        for seq in self.running:
            if seq.is_finished:
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running
